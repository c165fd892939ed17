/* Attach and detach by pid: checks, the signal to the VM's agent, the
 * bounded wait for its stream to begin or end, and the processes armed
 * that have not run Lua since. */
#ifndef LJMPD_ATTACH_H
#define LJMPD_ATTACH_H

#include <stdint.h>
#include <sys/types.h>

#include "ljmp_ingest.h"
#include "lm_format.h"
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
/* What an attach asks of the VM: to stream without its census of the
 * heap, and the call stacks (depth, 0: none; sampling mean in bytes). */
struct attach_want {
    int no_census;
    uint32_t stacks;
    uint64_t stack_sample;
};

/* An attach request's want; 0, or -1 with the reason in why. */
int attach_want_of(const Ljmp__AttachRequest *r, struct attach_want *w,
                   char *why, size_t len);

/* Signals pid's agent to attach for a caller (no answer to wait for) and
 * keeps it armed until its session starts: ATTACH_ARMED; ATTACH_STREAMING
 * if it streams already; or -code, the reason in why. */
int attach_arm(struct server *srv, pid_t pid, uid_t caller, uint64_t follow_id,
               const struct attach_want *w, char *why, size_t len);
/* The attach signal's value (ljmp_ingest.h). */
static inline uint64_t attach_request_value(const struct attach_want *w)
{
    return ljmp_request_value(w->no_census ? LJMP_REQ_ATTACH_NO_CENSUS
                                           : LJMP_REQ_ATTACH,
                              w->stacks, w->stack_sample);
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
