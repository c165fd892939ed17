/* Per-user shares of ljmpd's slots: any local user may connect, none may
 * crowd the others out. */
#ifndef LJMPD_QUOTA_H
#define LJMPD_QUOTA_H

#include <sys/types.h>

/* Whether uid is held to a share of ljmpd's slots and budgets: every
 * local user but root and ljmpd's own. */
int quota_applies(uid_t uid);

/* Whether uid, holding `held` of ljmpd's `slots` (client connections or
 * streaming sessions), may take one more: a user with a quota gets half
 * of them, so that one user's connections cannot lock the others out. */
int quota_may_take_slot(uid_t uid, unsigned held, unsigned slots);

#endif
