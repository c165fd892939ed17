/* Per-user shares of ljmpd's slots: any local user may connect, none may
 * crowd the others out. */
#include <stdlib.h>
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

/* uid's entry, made if new; NULL when out of memory. */
static struct quota_user *user_of(struct quota_bytes *b, uid_t uid)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->users[i].uid == uid)
            return &b->users[i];
    if (b->n == b->cap) {
        unsigned cap = b->cap ? 2 * b->cap : 16;
        struct quota_user *v = realloc(b->users, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        b->users = v;
        b->cap = cap;
    }
    b->users[b->n] = (struct quota_user){uid, 0};
    return &b->users[b->n++];
}

void quota_bytes_move(struct quota_bytes *b, uid_t uid, uint64_t from,
                      uint64_t to)
{
    struct quota_user *u = user_of(b, uid);

    /* Out of memory for a user's entry (a few bytes): the total still
     * counts, and the next move tries again. */
    if (u != NULL)
        u->bytes = u->bytes + to - from;
    b->total = b->total + to - from;
    if (u != NULL && u->bytes == 0)
        *u = b->users[--b->n];
}

uint64_t quota_bytes_of(const struct quota_bytes *b, uid_t uid)
{
    for (unsigned i = 0; i < b->n; i++)
        if (b->users[i].uid == uid)
            return b->users[i].bytes;
    return 0;
}

void quota_bytes_free(struct quota_bytes *b)
{
    free(b->users);
    b->users = NULL;
    b->n = b->cap = 0;
    b->total = 0;
}
