/* Per-user shares of ljmpd's slots: any local user may connect, none may
 * crowd the others out. */
#ifndef LJMPD_QUOTA_H
#define LJMPD_QUOTA_H

#include <stdint.h>
#include <sys/types.h>

/* Whether uid is held to a share of ljmpd's slots and budgets: every
 * local user but root and ljmpd's own. */
int quota_applies(uid_t uid);

/* Whether uid, holding `held` of ljmpd's `slots` (client connections or
 * streaming sessions) while the users with a quota hold held_by_users of
 * them, may take one more: an eighth is kept for root and ljmpd's user,
 * and a user may hold no more of the rest than stay free, so that no set
 * of users can lock root, ljmpd or the next user out. */
int quota_may_take_slot(uid_t uid, unsigned held, unsigned held_by_users,
                        unsigned slots);

/* Bytes held for each user and in all (memory budgets): users holding
 * anything, in no order, as few as the users streaming or kept, so a
 * walk costs less than a hash. */
struct quota_bytes {
    uint64_t total;
    struct quota_user {
        uid_t uid;
        uint64_t bytes;
    } * users;
    unsigned n, cap;
};

/* Moves uid's bytes (and the total) from `from` to `to`. */
void quota_bytes_move(struct quota_bytes *b, uid_t uid, uint64_t from,
                      uint64_t to);
/* What uid holds. */
uint64_t quota_bytes_of(const struct quota_bytes *b, uid_t uid);
void quota_bytes_free(struct quota_bytes *b);

#endif
