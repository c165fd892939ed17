/* Per-user shares of ljmpd's slots: any local user may connect, none may
 * crowd the others out. */
#ifndef LJMPD_QUOTA_H
#define LJMPD_QUOTA_H

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

#endif
