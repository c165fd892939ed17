/* Feed threads: sessions' stream bytes decoded and applied off the event
 * loop, in order per session, sessions in turn. */
#ifndef LJMPD_FEED_H
#define LJMPD_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "lm_decoder.h"

struct server;
struct session;

/*
 * Stream bytes handed to a feed thread (feed.c), in one of a session's
 * read buffers: a thread applies one while the loop reads into the next
 * ones, and the loop takes the results back in order in session_fed().
 * Eight buffers of --read-budget (256 KiB) are 2 MiB of reading ahead:
 * a VM's bursts (a collector's sweep) wait there, not in a socket that
 * Debian's defaults cap at 416 KiB, where they would stall the VM.
 * A session has as many buffers as it has had jobs out at once, and
 * their pages are touched only as far as reads fill them.
 */
#define SESSION_BUFS 8
struct feed_job {
    struct feed_job *next; /* in the feed's done list */
    struct session *s;
    uint8_t *buf; /* read_budget bytes, or NULL: see next_buffer() */
    const uint8_t *p;
    size_t n;
    uint64_t at;           /* stream offset of p */
    uint64_t direct_bytes; /* the state's direct-path budget for it */
    int ran;               /* 0: not fed, as an earlier job ended the stream */
    enum lm_status st;
    size_t used;
    uint64_t events; /* decoded from these bytes */
};

/* feed.c: cfg.feed_threads threads decode and apply sessions' bytes; a
 * session's jobs run in order, one at a time, sessions take turns. */
int feed_start(struct server *srv);
/* Feeds p[0..n), in s's next free read buffer, with the state's budget
 * for its direct path: on a thread (the job is out until session_fed),
 * or at once without threads. */
void feed_post(struct session *s, const uint8_t *p, size_t n,
               uint64_t direct_bytes);
/* Waits for every job out and takes each back (session_fed). */
void feed_settle(struct server *srv);
/* Takes back the jobs done (session_fed), as the loop is woken only when
 * it waits for one: on every tick, so none waits long. */
void feed_collect(struct server *srv);
/* The loop waits for one of s's jobs out to come back (it stopped
 * reading s): wakes it when one does. */
void feed_wait_for(struct session *s);
/* Ends the threads; jobs not taken back are dropped with their sessions. */
void feed_stop(struct server *srv);

#endif
