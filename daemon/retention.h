/* Finished sessions kept for queries: for --retain seconds, at most
 * --retain-count of them, the user who keeps the most losing theirs first. */
#ifndef LJMPD_RETENTION_H
#define LJMPD_RETENTION_H

#include <stdint.h>

struct server;

/* Forgets the finished sessions past the retention time or count. */
void retention_evict(struct server *srv, uint64_t now);

#endif
