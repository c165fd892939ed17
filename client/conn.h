/* ljmpctl's connection to ljmpd's control socket: framed requests and
 * responses, with a descriptor passed when a request needs one. */
#ifndef LJMPCTL_CONN_H
#define LJMPCTL_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "ljmp_wire.h"

struct conn {
    int fd;
    char path[108];
    uint8_t *buf;
    size_t len, cap;
    uint64_t next_id;
    int quiet;     /* keep errors in err instead of printing them */
    char err[256]; /* the last error */
};

/* The control socket's path: -s, else $LJMP_CONTROL, else the default. */
const char *conn_socket_path(void);
void conn_set_socket_path(const char *path);

/* 0, or -1 after saying on stderr that ljmpd is not reachable and what to
 * do about it. */
int conn_open(struct conn *c);
void conn_close(struct conn *c);

/* Sends req (version and id filled in), with fd passed if >= 0; returns
 * the request id, or 0 after an error on stderr. */
uint64_t conn_send(struct conn *c, Ljmp__Request *req, int fd);

/* The next response, or NULL (said on stderr) when the daemon hung up, the
 * frame is malformed, or timeout_ms (-1: none) passed. */
Ljmp__Response *conn_recv(struct conn *c, int timeout_ms);

/* Whether a whole response is buffered already (conn_recv will not wait). */
int conn_has_frame(const struct conn *c);

/* Sends req and waits for its response; NULL as for conn_recv. */
Ljmp__Response *conn_call(struct conn *c, Ljmp__Request *req, int fd);

/*
 * A command's one question: opens c, sends req (with fd passed if >= 0)
 * and waits up to timeout_ms for its answer.  The response if it carries
 * the body expect (a LJMP__RESPONSE__BODY_* value, or any body for 0);
 * else NULL with *rc the
 * exit status and the reason said on stderr (ljmpd not reachable, its
 * error, an answer of another kind).  The caller closes c either way.
 */
Ljmp__Response *conn_ask(struct conn *c, const char *cmd, Ljmp__Request *req,
                         int fd, int timeout_ms, uint32_t expect, int *rc);

/* The daemon's error in a response, said on stderr: 0 if there is none,
 * else the exit status for it. */
int conn_error(const char *cmd, const Ljmp__Response *resp);

#endif
