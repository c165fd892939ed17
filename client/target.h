/* The sessions a view command is about: all, a PID's, a session's, or a
 * whole server's (--tree PID, --unit NAME) as one merged view. */
#ifndef LJMPCTL_TARGET_H
#define LJMPCTL_TARGET_H

#include <stdint.h>

#include "args.h"
#include "ljmp_wire.h"

struct view_target {
    uint32_t pid;     /* 0: any (or the tree's root with tree) */
    uint64_t session; /* 0: any */
    int tree;
    const char *unit; /* NULL: none */
    int by_process;   /* a merged view's rows broken down by process */
    int by_trace;     /* rows by trace (--by-trace) */
};

/* The target of a command line: [PID], --session ID, --tree PID,
 * --unit NAME, --by-process, --by-trace.  0, or EXIT_USAGE after saying what is
 * wrong. */
int view_target_of(const char *cmd, const struct ctl_args *a,
                   struct view_target *t);

/* Whether the target is a whole server, shown merged. */
int view_target_merged(const struct view_target *t);

/* The target as a request's selector (a report's). */
void view_target_select(const struct view_target *t, Ljmp__Selector *sel);

/* The target as a snapshot's selector and options (sel is o's). */
void view_target_fill(const struct view_target *t, Ljmp__SnapshotOptions *o,
                      Ljmp__Selector *sel);

/* What a merged view is of, e.g. "the tree of pid 1234", into out. */
void view_target_name(const struct view_target *t, char *out, size_t len);

#endif
