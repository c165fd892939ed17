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

/* Serves control peers' requests (peer.h). */
extern const struct peer_handler control_handler;
/* Starts the record requests that wait for a session's process. */
extern const struct session_observer control_observer;
/* The control module's state in srv (subscriptions, record requests
 * waiting for their process): 0, or -1 out of memory. */
int control_start(struct server *srv);
/* After the peers. */
void control_free(struct server *srv);
/* Ends the record requests whose process did not stream in time. */
void control_expire_records(struct server *srv, uint64_t now);

#endif
