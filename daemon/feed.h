/* The feed: streams' bytes decoded and applied on threads off the event
 * loop, each stream's jobs in order and one at a time, streams in turn. */
#ifndef LJMPD_FEED_H
#define LJMPD_FEED_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "lm_decoder.h"

/*
 * The most jobs a stream may have out: each holds one of its owner's read
 * buffers, which a thread applies while the loop reads into the next
 * ones.  Eight buffers of --read-budget (256 KiB) are 2 MiB of reading
 * ahead: a VM's bursts (a collector's sweep) wait there, not in a socket
 * that Debian's defaults cap at 416 KiB, where they would stall the VM.
 */
#define FEED_JOBS 8

struct feed;
struct feed_queue;

/* Stream bytes handed to the feed, and what running them gave. */
struct feed_job {
    struct feed_job *next; /* in the feed's done list */
    struct feed_queue *q;
    uint8_t *buf; /* the owner's read buffer for this slot, or NULL */
    const uint8_t *p;
    size_t n;
    uint64_t at;           /* stream offset of p */
    uint64_t direct_bytes; /* the owner's word to its run (a budget) */
    int ran;               /* 0: not run, as an earlier job ended the stream */
    /* Set by run: LM_DONE or LM_ERROR end the stream, and the queue's
     * later jobs come back without running. */
    enum lm_status st;
    size_t used;     /* bytes of p the stream took */
    uint64_t events; /* decoded from them */
};

/* What the feed asks of a queue's owner. */
struct feed_ops {
    /* Decodes and applies j's bytes, on a feed thread (or the loop's, for
     * small reads or without threads); sets st, used and events. */
    void (*run)(struct feed_job *j, void *owner);
    /* On the loop: j is back (ran or not), and no longer out. */
    void (*done)(struct feed_job *j, void *owner);
};

/* One stream's jobs: a ring of FEED_JOBS slots.  The loop posts at
 * head + out and takes back from head; the rest is the feed's. */
struct feed_queue {
    struct feed *f;
    const struct feed_ops *ops;
    void *owner;
    struct feed_job jobs[FEED_JOBS];
    /* The loop's. */
    unsigned head, out;   /* jobs out from head on, oldest first */
    uint64_t post_offset; /* stream offset after the bytes posted */
    /* The feed's, under its lock. */
    struct feed_queue *next_in_line;
    unsigned run;    /* the job a thread takes next */
    unsigned queued; /* jobs posted and not taken */
    int listed;      /* in the line, or being run */
    int ended;       /* a job ended the stream: no more are run */
    int waited;      /* the loop waits for a job back */
};

/* A feed of nthreads threads (0: every job runs on the loop), whose bell
 * rings at priority prio of base.  Reads under inline_bytes run on the
 * loop when no job of theirs is out: they cost less to run than to hand
 * over.  NULL, with the reason logged, when it cannot start. */
struct feed *feed_new(struct event_base *base, int prio, unsigned nthreads,
                      size_t inline_bytes);
/* Ends the threads; jobs not taken back are dropped. */
void feed_free(struct feed *f);

void feed_queue_init(struct feed_queue *q, struct feed *f,
                     const struct feed_ops *ops, void *owner);
/* The slot the next post goes to (its buf is the owner's to fill). */
struct feed_job *feed_next_job(struct feed_queue *q);
/* Posts p[0..n) (in the next slot's buffer, usually) with the owner's
 * word for its run: run on a thread (the job is out until done), or at
 * once on the loop.  The caller keeps q->out below FEED_JOBS. */
void feed_post(struct feed_queue *q, const uint8_t *p, size_t n,
               uint64_t direct_bytes);
/* Waits for every job out and takes each back (done). */
void feed_settle(struct feed *f);
/* Takes back the jobs done: the loop is woken only when it waits for one
 * (feed_wait_for) or a stream ended, so it calls this now and then. */
void feed_collect(struct feed *f);
/* The loop waits for one of q's jobs out: wakes it when one is back. */
void feed_wait_for(struct feed_queue *q);

#endif
