/* Control peers: framed requests in (with a descriptor now and then),
 * framed responses out; a bad peer is told why and closes only itself. */
#ifndef LJMPD_PEER_H
#define LJMPD_PEER_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "ljmp_wire.h"
#include "server.h"

struct subscription;

/* A control connection: framed requests in, framed responses out. */
struct peer {
    TAILQ_ENTRY(peer) link;
    struct server *srv;
    uint64_t id;
    int fd;
    pid_t pid;
    uid_t uid;
    struct event *rev, *wev;
    struct evbuffer *in, *out;
    int passed_fd;       /* a descriptor sent with the last request, or -1 */
    int fds_over;        /* more than one came with a request */
    int closing;         /* flush what is queued, then close */
    int throttled;       /* not reading: too much output queued */
    int eof;             /* the client sent all it will: close when idle */
    int gone;            /* ... and closed for good: close once served */
    unsigned waits;      /* answers features owe it (peer_wait_begin) */
    uint64_t active_ms;  /* when it last sent a request */
    uint64_t closing_ms; /* when it started closing */
    struct subscription *sub;
};

/* What the peer layer hands up to the features that serve peers. */
struct peer_handler {
    /* A decoded request of p (which may close p). */
    void (*request)(struct peer *p, const Ljmp__Request *req);
    /* p closes once its output is flushed: it is sent nothing more
     * unasked. */
    void (*closing)(struct peer *p);
    /* p is going: nothing may refer to it after. */
    void (*gone)(struct peer *p);
    /* p's client read its output down to --queue or less: an answer sent
     * in parts may go on. */
    void (*drained)(struct peer *p);
};

void peer_accept(struct server *srv, int fd);
void peer_free(struct peer *p);
/* A response of this protocol version to request id (0: to none). */
void peer_response_init(Ljmp__Response *resp, uint64_t id);
/* Queues a response; -1 (and the peer is closing) when it cannot. */
int peer_send(struct peer *p, const Ljmp__Response *resp);
/* The same, for a response whose packed size n is known (a snapshot's is
 * measured against the frame limit first; measuring walks the whole
 * message, as packing does, and is not done twice). */
int peer_send_sized(struct peer *p, const Ljmp__Response *resp, size_t n);
/* Queues a part of an answer sent in parts (a long report): the memory
 * budget is checked for it whatever its size, as the whole answer is
 * bigger than its part.  -1 (and the peer told why) when it cannot. */
int peer_send_part(struct peer *p, const Ljmp__Response *resp);
/* Whether p's output queue is within --queue: it may take more. */
int peer_may_take(const struct peer *p);
/* bulk: p's output carries an answer sent in parts (a long report), which
 * it writes at ingest's priority, so that its client reading as fast as
 * it can does not keep new clients and VMs waiting; else at control's. */
void peer_set_bulk(struct peer *p, int bulk);
void peer_flush_now(struct peer *p);
/* Closes clients idle longer than --client-idle that wait for nothing. */
void peer_close_idle(struct server *srv, uint64_t now);
/* A peer that finished sending goes once nothing it asked for is left. */
void peer_idle_check(struct peer *p);
/* A feature owes p an answer later (an attach waiting for its VM, a
 * record request or a recording, a subscription): p is not closed as idle
 * until every such wait ended.  The feature calls peer_idle_check when it
 * has answered. */
void peer_wait_begin(struct peer *p);
void peer_wait_end(struct peer *p);
void peer_send_error(struct peer *p, uint64_t id, Ljmp__ErrorCode code,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
