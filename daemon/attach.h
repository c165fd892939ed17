/* Attach and detach by pid: checks, the signal to the VM's agent, and the
 * bounded wait for its stream to begin or end. */
#ifndef LJMPD_ATTACH_H
#define LJMPD_ATTACH_H

#include "ljmp_wire.h"

struct peer;
struct server;
struct session;
struct session_observer;

/* attach.c */
void attach_request(struct peer *p, const Ljmp__Request *req);
void attach_detach_request(struct peer *p, const Ljmp__Request *req);
/* Answers attach and detach requests as sessions start and end. */
extern const struct session_observer attach_observer;
void attach_peer_gone(struct peer *p);

/* The attach module's state in srv: 0, or -1 out of memory. */
int attach_start(struct server *srv);
/* After the peers, whose waits go with them. */
void attach_free(struct server *srv);

#endif
