/* Control requests: list, snapshot, subscribe, report, record; and the
 * subscriptions' timers with their bounded, coalescing queues. */
#ifndef LJMPD_CONTROL_H
#define LJMPD_CONTROL_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event.h>

#include "ljmp_wire.h"

struct peer;
struct peer_handler;
struct recording;
struct server;
struct session;
struct session_observer;
struct subscription;

/* A record request for a process that has not streamed yet. */
struct pending_record {
    TAILQ_ENTRY(pending_record) link;
    pid_t pid;
    uid_t uid; /* who asked: checked again when the session comes */
    uint64_t deadline_ms;
    struct recording *rec;
};

/* Serves control peers' requests (peer.h). */
extern const struct peer_handler control_handler;
/* Starts the record requests that wait for a session's process. */
extern const struct session_observer control_observer;
/* srv->snapshots_due's callback: builds the snapshots that are due. */
void control_snapshots_due(evutil_socket_t fd, short what, void *arg);
/* Ends the record requests whose process did not stream in time. */
void control_expire_records(struct server *srv, uint64_t now);

#endif
