/* Reports of sessions: built on a thread of their own from sessions held
 * still, and sent to their clients a part at a time, as they read. */
#ifndef LJMPD_REPORT_H
#define LJMPD_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "lm_report.h"

struct peer;
struct server;
struct session;
struct session_observer;

/* Text per ReportText frame: a longer report comes in several. */
#define REPORT_PART (1u << 20)
/* Parts a build may have made that its slowest client was not sent yet:
 * past them, the thread waits for that client to read. */
#define REPORT_AHEAD 4
/* Reports of fewer locations in all are built on the loop, at once: they
 * take less time than handing them over. */
#define REPORT_ON_LOOP_LOCS 4096

/* The reports' thread and bell: 0, or -1 with the reason logged. */
int report_start(struct server *srv);
/* Ends the builds under way and the thread; before the sessions go. */
void report_stop(struct server *srv);

/*
 * Answers request id of p with the report of sessions m[0..n) (merged:
 * one report of them all, their info as members) with options o.  A
 * request the same as one queued, whose text no client was sent yet,
 * shares its build.
 */
void report_request(struct peer *p, uint64_t id, struct session **m, size_t n,
                    int merged, const struct lm_report_opts *o);

/* p reads its output: its reports go on. */
void report_peer_drained(struct peer *p);
/* p goes (or closes): its reports are dropped, their builds too when no
 * one else waits for them. */
void report_peer_gone(struct peer *p);

/* Starts a build once its sessions stand still, their C symbols in. */
extern const struct session_observer report_observer;

#endif
