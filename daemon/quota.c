/* Per-user shares of ljmpd's slots: any local user may connect, none may
 * crowd the others out. */
#include <unistd.h>

#include "quota.h"

int quota_applies(uid_t uid)
{
    return uid != 0 && uid != geteuid();
}

/*
 * An eighth of the slots is kept for root and ljmpd's own user.  Of the
 * rest, a user may take one more while it holds fewer than stay free: one
 * user alone gets half, a second a quarter, a third an eighth, and so on,
 * so that whoever comes next still finds one.
 */
int quota_may_take_slot(uid_t uid, unsigned held, unsigned held_by_users,
                        unsigned slots)
{
    unsigned pool = slots - slots / 8;

    if (!quota_applies(uid))
        return 1;
    return held_by_users < pool && held < pool - held_by_users;
}
