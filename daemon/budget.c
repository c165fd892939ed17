/* Memory budgets: what ljmpd holds for each session, each user and in all;
 * a session that grows past one ends, failed, saying what grew. */
#include <stdio.h>

#include "budget.h"
#include "log.h"
#include "quota.h"
#include "retention.h"
#include "session.h"

void budget_free(struct server *srv)
{
    quota_bytes_free(&srv->held);
}

uint64_t budget_user_bytes(const struct server *srv, uid_t uid)
{
    return quota_bytes_of(&srv->held, uid);
}

uint64_t budget_of_session(const struct server *srv, uid_t uid)
{
    uint64_t most = srv->cfg.session_memory;

    if (quota_applies(uid) && srv->cfg.user_memory < most)
        most = srv->cfg.user_memory;
    return srv->cfg.total_memory < most ? srv->cfg.total_memory : most;
}

/* What used leaves of most. */
static uint64_t left(uint64_t most, uint64_t used)
{
    return used < most ? most - used : 0;
}

uint64_t budget_room(const struct session *s)
{
    const struct server *srv = s->srv;
    uint64_t room = left(s->mem_budget, session_memory(s));
    uint64_t total = left(srv->cfg.total_memory, srv->held.total);

    if (quota_applies(s->uid)) {
        uint64_t user =
            left(srv->cfg.user_memory, budget_user_bytes(srv, s->uid));
        room = user < room ? user : room;
    }
    return total < room ? total : room;
}

/* Moves s's user's charge from what s held to held. */
static void charge_to(struct session *s, uint64_t held)
{
    quota_bytes_move(&s->srv->held, s->uid, s->mem_charged, held);
    s->mem_charged = held;
}

void budget_charge(struct session *s)
{
    charge_to(s, session_memory(s));
}

/*
 * Tells s's jobs how far its state may grow before the loop looks again:
 * to its own budget, checked on the feed thread after each job.  Its
 * user's and the total are checked on the loop as each job comes back,
 * where finished sessions can make room first: a feed thread's stop
 * cannot be taken back.
 */
static void set_limit(struct session *s)
{
    uint64_t most = s->mem_budget;
    uint64_t room = s->mem_charged < most ? most - s->mem_charged : 0;
    uint64_t fed = __atomic_load_n(&s->mem_fed, __ATOMIC_RELAXED);

    __atomic_store_n(&s->mem_limit, fed + room, __ATOMIC_RELAXED);
}

/* Ends s, which holds more than a budget allows, naming what grew. */
static void fail(struct session *s, enum budget_kind kind, uint64_t budget)
{
    static const char *const whose[] = {"its", "its user's", "ljmpd's"};
    struct session_memory m;
    uint64_t biggest;
    char why[256];

    session_lock(s); /* a job may be out */
    session_memory_parts(s, &m);
    session_unlock(s);
    const char *what = session_memory_biggest(&m, &biggest);
    snprintf(why, sizeof(why),
             "over %s memory budget of %llu bytes: %llu bytes held, %llu of "
             "them %s",
             whose[kind], (unsigned long long)budget,
             (unsigned long long)s->mem_charged, (unsigned long long)biggest,
             what);
    session_over_budget(s, why);
}

/* Forgets finished sessions other than s, of s's user (of anyone, if
 * any_user), oldest first, while the user's (or the total) is over
 * budget: a live profile goes before a kept one.  1 if still over. */
static int over_after_forgetting(struct session *s, int any_user,
                                 uint64_t budget)
{
    struct server *srv = s->srv;

    for (;;) {
        uint64_t used =
            any_user ? srv->held.total : budget_user_bytes(srv, s->uid);
        if (used <= budget)
            return 0;
        if (!retention_forget_oldest(srv, s->uid, any_user, s))
            return 1;
    }
}

/* s's state grew: charged, checked against its budgets (finished
 * sessions forgotten to make room), and its next limit set. */
static void budget_fed(struct session *s, uint64_t at, const uint8_t *p,
                       size_t n, void *arg)
{
    struct server *srv = s->srv;
    const struct config *cfg = &srv->cfg;

    (void)at;
    (void)p;
    (void)n;
    (void)arg;
    budget_charge(s);
    if (s->hangup[0] != '\0')
        return; /* stopping already */
    /* Kept sessions make room whether s fits or not: what s holds stays
     * (within a job's growth of its budget), the budgets hold. */
    int over_user =
        quota_applies(s->uid) && over_after_forgetting(s, 0, cfg->user_memory);
    int over_total = over_after_forgetting(s, 1, cfg->total_memory);
    if (s->mem_charged > s->mem_budget)
        fail(s, BUDGET_SESSION, s->mem_budget);
    else if (over_user)
        fail(s, BUDGET_USER, cfg->user_memory);
    else if (over_total)
        fail(s, BUDGET_TOTAL, cfg->total_memory);
    else
        set_limit(s);
}

static void budget_started(struct session *s, void *arg)
{
    (void)arg;
    s->mem_budget = budget_of_session(s->srv, s->uid);
    budget_charge(s);
    set_limit(s);
}

static void budget_ended(struct session *s, void *arg)
{
    (void)arg;
    budget_charge(s); /* its decoder and read buffers went */
}

static void budget_freed(struct session *s, void *arg)
{
    (void)arg;
    charge_to(s, 0);
}

const struct session_observer budget_observer = {
    .started = budget_started,
    .fed = budget_fed,
    .ended = budget_ended,
    .freed = budget_freed,
};
