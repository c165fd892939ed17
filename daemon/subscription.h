/* Subscriptions: snapshots on a timer, built together when due together,
 * coalesced (and counted as dropped) while a subscriber's queue is full. */
#ifndef LJMPD_SUBSCRIPTION_H
#define LJMPD_SUBSCRIPTION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "snapshot.h"

struct subscription;

/* What the subscriptions ask of the one who serves them (control.c). */
struct subscription_ops {
    /* Output bytes waiting for sub's subscriber now. */
    size_t (*backlog)(const struct subscription *sub);
    /* Builds and sends sub's snapshot: its number sub->seq, interval_s
     * seconds after the last one sent, sub->dropped coalesced so far.  It
     * may free sub (its subscriber closed). */
    void (*send)(struct subscription *sub, double interval_s);
    /* Around the snapshots that come due together (they share views). */
    void (*batch_begin)(void *arg);
    void (*batch_end)(void *arg);
};

TAILQ_HEAD(subscription_list, subscription);

/* Every subscription of a daemon. */
struct subscription_set {
    struct event_base *base;
    int prio;
    size_t bound; /* a subscriber's backlog past which snapshots coalesce */
    const struct subscription_ops *ops;
    void *arg;                    /* for batch_begin and batch_end */
    struct subscription_list due; /* in the order their timers fired */
    struct event *due_ev;
    unsigned n;
    uint64_t *dropped; /* counts the snapshots coalesced, of them all */
};

struct subscription {
    struct subscription_set *set;
    void *owner; /* the subscriber (a peer) */
    uint64_t request_id;
    struct snapshot_opts opts;
    unsigned interval_ms;
    uint64_t seq;     /* of the last snapshot sent */
    uint64_t dropped; /* snapshots coalesced into later ones */
    uint64_t last_ms; /* when the last one was sent */
    struct snapshot_bases bases;
    struct event *timer;
    TAILQ_ENTRY(subscription) due_link;
    int due;
};

/* 0, or -1 out of memory.  Timers and the due callback run at prio;
 * *dropped counts the snapshots coalesced. */
int subscription_set_init(struct subscription_set *set, struct event_base *base,
                          int prio, size_t bound, uint64_t *dropped,
                          const struct subscription_ops *ops, void *arg);
void subscription_set_free(struct subscription_set *set);

/* A subscription of owner's, every interval_ms from now (its first
 * snapshot is the caller's to send, as number 1); NULL out of memory. */
struct subscription *subscription_new(struct subscription_set *set, void *owner,
                                      uint64_t request_id,
                                      const struct snapshot_opts *opts,
                                      unsigned interval_ms, uint64_t now_ms);
void subscription_free(struct subscription *sub);

#endif
