/* The call stacks that reached one site of a session (CallersRequest). */
#ifndef CALLERS_H
#define CALLERS_H

#include <stdint.h>

#include "ljmp_wire.h"

struct peer;
struct session;

/* Answers r for session s (one p may read): the site's stacks, ranked,
 * or an error when the session has no such site. */
void callers_request(struct peer *p, uint64_t id, struct session *s,
                     const Ljmp__CallersRequest *r);

#endif
