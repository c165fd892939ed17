/* Finished sessions kept for queries: for --retain seconds, at most
 * --retain-count of them, the user who keeps the most losing theirs first. */
#ifndef LJMPD_RETENTION_H
#define LJMPD_RETENTION_H

#include <stdint.h>
#include <sys/types.h>

struct server;
struct session;

/* Forgets the finished sessions past the retention time or count. */
void retention_evict(struct server *srv, uint64_t now);

/* Forgets the oldest finished session of uid (any_user: of the user who
 * keeps the most, as the count does), other than except, to make room in
 * a memory budget: 1 if it forgot one. */
int retention_forget_oldest(struct server *srv, uid_t uid, int any_user,
                            const struct session *except);

#endif
