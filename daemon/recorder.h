/* Recordings: stream bytes copied into clients' files by writer threads. */
#ifndef LJMPD_RECORDER_H
#define LJMPD_RECORDER_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "ljmp_wire.h"

struct peer;
struct server;
struct session;
struct session_observer;

/* Raw stream bytes of a session, copied into a client's file by a
 * writer thread (recorder.c). */
struct recording {
    TAILQ_ENTRY(recording) link; /* in the server's, until its end is told */
    struct server *srv;
    struct rec_writer *w;
    struct session *s;    /* the session recorded; NULL before and after */
    uint64_t from_offset; /* the stream offset it copies from */
    int from_start;
    struct peer *waiter; /* told when it ends; NULL once gone */
    int spliced;         /* from_start: the C symbols are in the file */
    int holding;         /* s is not read until the file takes more */
    int r3;              /* pure R3 asked for (RecordRequest.r3) */
    /* r3: the bytes' way to the file while it takes them (recorder.c) */
    struct rec_strip *strip;
    int stacks_stripped; /* r3: the stream had stacks, left out */
    uint64_t request_id;
    uint64_t session_id; /* the session recorded, once known */
    int has_state;       /* its state when the recording ended */
    Ljmp__SessionState state;
    char error[320];
    int io_error; /* error is the file's: a write or close failed, or it
                     stopped taking bytes */
};

/* Copies each session's stream bytes into its recording, if any, and
 * finishes the recording when the session ends or goes. */
extern const struct session_observer recorder_observer;

/* Starts recording s into rec (opened): from the stream's first byte if
 * none was decoded yet, else from now.  0, or -1 with rec->error set. */
int recorder_attach(struct session *s, struct recording *rec);
/* The recording of s, or NULL. */
struct recording *recorder_of(const struct session *s);

int recorder_start(struct server *srv);
/* Waits a little for record files to take what is queued, and tells
 * every recording's client how it ended (all were finished). */
void recorder_stop(struct server *srv);
void recorder_free(struct server *srv);
/* Starts a thread that writes rec's file, fd (uid's): 0, or -1 with the
 * reason in why.  From then on the recording answers to rec->waiter. */
int recorder_open(struct server *srv, struct recording *rec, int fd, uid_t uid,
                  char *why, size_t len);
/* Queues n stream bytes for the file, stripped of their stacks with r3:
 * 0, or -1 with rec->error set (the file failed, ljmpd is out of memory,
 * or the stream cannot be stripped). */
int recorder_write(struct recording *rec, const uint8_t *p, size_t n);
/* Whether so much waits for the file that the session must not be read
 * (it is read again once the file took most of it). */
int recorder_full(struct recording *rec);
/* Ends the recording (s: the session it recorded, if any, whose id and
 * state the client is told): its file takes what is queued and is
 * closed, then the client is told. */
void recorder_finish(struct recording *rec, const struct session *s);
/* Ends a recording whose client was told it failed: it is not told
 * again. */
void recorder_drop(struct recording *rec);
/* Tells the recording's client it has begun, in session_id (0 while the
 * process has not streamed yet). */
void recorder_begun(const struct recording *rec, uint64_t session_id);
/* Gives up on record files that took no bytes for --record-stall. */
void recorder_check_stalls(struct server *srv, uint64_t now);
/* The peer is gone: its recordings go on, telling nobody. */
void recorder_forget_peer(struct server *srv, const struct peer *p);
#endif
