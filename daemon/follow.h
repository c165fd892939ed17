/* attach --tree and --unit: a whole server as one target, its processes
 * found again on a timer and each new one attached as it appears. */
#ifndef LJMPD_FOLLOW_H
#define LJMPD_FOLLOW_H

#include <stddef.h>
#include <sys/types.h>

#include "ljmp_wire.h"

struct arena;
struct peer;
struct server;

/* An attach or detach request whose target is a tree or a unit. */
void follow_request(struct peer *p, const Ljmp__Request *req);
void follow_detach_request(struct peer *p, const Ljmp__Request *req);

/* A unit's name as systemd spells it, into out: NAME, or NAME.service
 * for a name without a type.  0, or -1 (told to p, answering request id)
 * if in cannot name a unit. */
int follow_unit_name(struct peer *p, uint64_t id, const char *in, char *out,
                     size_t len);

/* The follows a caller may see, into list->follows: 0, or -1 out of
 * memory. */
int follow_list(struct server *srv, struct arena *ar, uid_t caller,
                Ljmp__SessionList *list);

/* The follow module's state in srv: 0, or -1 out of memory. */
int follow_start(struct server *srv);
void follow_free(struct server *srv);

#endif
