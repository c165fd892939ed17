/* The daemon as a whole: its options, counters, listeners, event loop and
 * the lists of what it serves; each module keeps its own state beside. */
#ifndef LJMPD_SERVER_H
#define LJMPD_SERVER_H

#include <stdint.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "bell.h"
#include "options.h"
#include "quota.h"

/* The daemon's counters (X-macro: the struct and the wire from one list). */
#define SERVER_COUNTERS(_)                                                     \
    _(sessions_accepted)                                                       \
    _(sessions_rejected)                                                       \
    _(sessions_malformed)                                                      \
    _(sessions_truncated)                                                      \
    _(sessions_complete)                                                       \
    _(sessions_evicted)                                                        \
    _(ingest_bytes)                                                            \
    _(ingest_events)                                                           \
    _(control_accepted)                                                        \
    _(control_rejected)                                                        \
    _(snapshots_sent)                                                          \
    _(snapshots_dropped)                                                       \
    _(accept_backoffs)

struct server_counters {
#define SERVER_COUNTER_FIELD(name) uint64_t name;
    SERVER_COUNTERS(SERVER_COUNTER_FIELD)
#undef SERVER_COUNTER_FIELD
};

struct attach;
struct control;
struct feed;
struct follows;
struct peer_handler;
struct recorder;
struct reports;
struct session_observer;
struct snapshots;
struct symload;
TAILQ_HEAD(session_list, session);
TAILQ_HEAD(peer_list, peer);

struct server {
    struct event_base *base;
    struct config cfg;
    struct evconnlistener *ingest, *control;
    int own_ingest_path, own_control_path; /* unlink at exit */
    struct event *tick, *backoff, *sigterm, *sigint, *watchdog;
    struct session_list sessions; /* oldest first */
    struct peer_list peers;
    unsigned nlive, nended, npeers, nsubscribers;
    uint64_t next_session_id, next_peer_id;
    uint64_t start_ms;
    struct server_counters counters;
    /* Each module's own state, made by its start function. */
    struct feed *feed;           /* the decoding threads (feed.c) */
    struct symload *symload;     /* the C symbol readers (symload.c) */
    struct recorder *recorder;   /* recordings (recorder.c) */
    struct attach *attach;       /* attach and detach waits (attach.c) */
    struct follows *follows;     /* attach --tree, --unit (follow.c) */
    struct control *ctl;         /* subscriptions, record requests */
    struct snapshots *snapshots; /* the snapshots' turns (snapshot.c) */
    struct reports *reports;     /* reports being built (report.c) */
    /* Memory held for sessions, per user and in all (budget.c). */
    struct quota_bytes held;
    /* Who serves control peers' requests (peer.h). */
    const struct peer_handler *peer_handler;
    /* Who watches sessions (session.h), in the order they registered. */
#define SESSION_OBSERVERS 16
    const struct session_observer *observers[SESSION_OBSERVERS];
    unsigned nobservers;
    int stopping;
};

/*
 * Event priorities: clients (requests, snapshots, timers) before ingest,
 * and the loop looks up from ingest every few callbacks, so that a busy
 * stream never delays a snapshot by more than that (see server_start).
 */
enum {
    PRIO_CONTROL = 0,
    PRIO_DEFAULT = 1, /* listeners, signals */
    PRIO_INGEST = 2,
    PRIO_LEVELS = 3,
};

#endif
