/* Subscriptions: snapshots on a timer, built together when due together,
 * coalesced (and counted as dropped) while a subscriber's queue is full. */
#include <stdlib.h>

#include "clock.h"
#include "subscription.h"

/*
 * A snapshot that is due while its subscriber's backlog is over the bound
 * is not built: the next one sent runs from the previous one sent, so the
 * skipped ones are coalesced into it (snapshots are cumulative) and only
 * the drop is counted.  Ingest never waits for a subscriber.
 */
static void send_due(struct subscription *sub)
{
    struct subscription_set *set = sub->set;
    uint64_t now = clock_now_ms();

    if (set->ops->backlog(sub) > set->bound) {
        sub->dropped++;
        (*set->dropped)++;
        return;
    }
    double interval_s = (double)(now - sub->last_ms) / 1000.0;
    sub->seq++;
    sub->last_ms = now;
    set->ops->send(sub, interval_s); /* may free sub: a peer that fails */
}

/* The snapshots that came due in this turn of the loop, in one batch. */
static void on_due(evutil_socket_t fd, short what, void *arg)
{
    struct subscription_set *set = arg;
    struct subscription *sub;

    (void)fd;
    (void)what;
    set->ops->batch_begin(set->arg);
    while ((sub = TAILQ_FIRST(&set->due)) != NULL) {
        TAILQ_REMOVE(&set->due, sub, due_link);
        sub->due = 0;
        send_due(sub);
    }
    set->ops->batch_end(set->arg);
}

/*
 * A subscription's timer: its snapshot waits for on_due, with the others
 * whose timers fire in this turn of the loop.  Subscribers who subscribed
 * together tick together, and built in one batch their snapshots share
 * the sessions' views (see snapshot.h).
 */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct subscription *sub = arg;
    struct subscription_set *set = sub->set;

    (void)fd;
    (void)what;
    if (sub->due)
        return;
    sub->due = 1;
    TAILQ_INSERT_TAIL(&set->due, sub, due_link);
    /* At the same priority, after the timers already active. */
    event_active(set->due_ev, 0, 0);
}

int subscription_set_init(struct subscription_set *set, struct event_base *base,
                          int prio, size_t bound, uint64_t *dropped,
                          const struct subscription_ops *ops, void *arg)
{
    *set = (struct subscription_set){.base = base,
                                     .prio = prio,
                                     .bound = bound,
                                     .dropped = dropped,
                                     .ops = ops,
                                     .arg = arg};
    TAILQ_INIT(&set->due);
    set->due_ev = event_new(base, -1, 0, on_due, set);
    if (set->due_ev == NULL || event_priority_set(set->due_ev, prio) != 0)
        return -1;
    return 0;
}

void subscription_set_free(struct subscription_set *set)
{
    if (set->due_ev != NULL)
        event_free(set->due_ev);
    set->due_ev = NULL;
}

struct subscription *subscription_new(struct subscription_set *set, void *owner,
                                      uint64_t request_id,
                                      const struct snapshot_opts *opts,
                                      unsigned interval_ms, uint64_t now_ms)
{
    struct subscription *sub = calloc(1, sizeof(*sub));
    struct timeval tv = {(time_t)(interval_ms / 1000),
                         (suseconds_t)(interval_ms % 1000) * 1000};

    if (sub == NULL)
        return NULL;
    sub->timer = event_new(set->base, -1, EV_PERSIST, on_tick, sub);
    if (sub->timer == NULL || event_priority_set(sub->timer, set->prio) != 0 ||
        event_add(sub->timer, &tv) != 0) {
        if (sub->timer != NULL)
            event_free(sub->timer);
        free(sub);
        return NULL;
    }
    sub->set = set;
    sub->owner = owner;
    sub->request_id = request_id;
    sub->opts = *opts;
    sub->interval_ms = interval_ms;
    sub->last_ms = now_ms;
    sub->seq = 1;
    set->n++;
    return sub;
}

void subscription_free(struct subscription *sub)
{
    struct subscription_set *set = sub->set;

    if (sub->due)
        TAILQ_REMOVE(&set->due, sub, due_link);
    event_free(sub->timer);
    snapshot_bases_free(&sub->bases);
    set->n--;
    free(sub);
}
