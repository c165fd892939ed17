/* A site's callers from ljmpd (CallersRequest), asked and printed as a tree. */
#ifndef CALLERS_H
#define CALLERS_H

#include <stdint.h>
#include <stdio.h>

#include "conn.h"
#include "lm_calltree.h"

/* Whether a view sorted by sort ranks callers by live bytes (else by
 * allocated bytes: the views sorted by what was allocated). */
int callers_by_live(Ljmp__SortKey sort);

/* Asks ljmpd for the stacks that reached site in a session; the request's
 * id (0 if it could not be sent).  The answer comes as a Callers
 * response. */
uint64_t callers_send(struct conn *c, uint64_t session_id, const char *site,
                      Ljmp__SortKey sort, uint32_t limit);

/* The answer's stacks as a tree of callers from the site outwards
 * (estimates when sampled); 0, or -1 when out of memory. */
int callers_tree(const Ljmp__Callers *cl, struct lm_calltree *t);

/* Prints the tree: live and allocated bytes and allocations per caller
 * path, indented by depth, children biggest first by live bytes (by_live)
 * or allocated bytes; at most max_lines lines (0: all). */
void callers_print(FILE *out, const Ljmp__Callers *cl, int by_live,
                   unsigned max_lines);

#endif
