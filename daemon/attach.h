/* Attach and detach by pid: checks, the signal to the VM's agent, the
 * bounded wait for its stream to begin or end, and the processes armed
 * that have not run Lua since. */
#ifndef LJMPD_ATTACH_H
#define LJMPD_ATTACH_H

#include <stdint.h>
#include <sys/types.h>

#include "ljmp_ingest.h"
#include "ljmp_wire.h"

struct arena;
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

/* What attach_arm and attach_end found or did; a negative
 * Ljmp__ErrorCode when they could not. */
enum { ATTACH_STREAMING = 1, ATTACH_ARMED = 2 };
/* Signals pid's agent to attach for a caller (no answer to wait for) and
 * keeps it armed until its session starts: ATTACH_ARMED; ATTACH_STREAMING
 * if it streams already; or -code, the reason in why.  no_census: the VM
 * streams without its census of the heap. */
int attach_arm(struct server *srv, pid_t pid, uid_t caller, uint64_t follow_id,
               int no_census, char *why, size_t len);
/* The attach signal's value: with or without the census. */
static inline int attach_request_value(int no_census)
{
    return no_census ? LJMP_REQ_ATTACH_NO_CENSUS : LJMP_REQ_ATTACH;
}
/* Signals pid to detach if it streams (ATTACH_STREAMING), disarms it if
 * it is armed (ATTACH_ARMED); -1 if neither, or it cannot be signalled. */
int attach_end(struct server *srv, pid_t pid, uid_t caller);
int attach_is_armed(struct server *srv, pid_t pid);
/* The newest session of pid that is streaming (not ending), or NULL. */
struct session *attach_streaming_session(struct server *srv, pid_t pid);
/* The processes armed that a caller may see, into list->armed: 0, or -1
 * out of memory. */
int attach_list_armed(struct server *srv, struct arena *ar, uid_t caller,
                      Ljmp__SessionList *list);

/* The attach module's state in srv: 0, or -1 out of memory. */
int attach_start(struct server *srv);
/* After the peers, whose waits go with them. */
void attach_free(struct server *srv);

#endif
