/* Finished sessions kept for queries: for --retain seconds, at most
 * --retain-count of them, the user who keeps the most losing theirs first. */
#include "clock.h"
#include "log.h"
#include "retention.h"
#include "session.h"

/* A finished session that may be freed now: no feed thread holds it
 * (jobs out come back in one batch with the end), and no report reads it. */
static int evictable(const struct session *s)
{
    return s->phase == SESSION_ENDED && s->feed.out == 0 && s->readers == 0;
}

static void forget_session(struct server *srv, struct session *s)
{
    log_debug("session %llu: forgotten", (unsigned long long)s->id);
    TAILQ_REMOVE(&srv->sessions, s, link);
    srv->nended--;
    srv->counters.sessions_evicted++;
    session_free(s);
}

/* The user who keeps the most finished sessions (ties: the first seen),
 * counted in one pass over the sessions and the users seen so far. */
static uid_t top_keeper(const struct server *srv)
{
    struct {
        uid_t uid;
        unsigned n;
    } seen[64];
    unsigned nseen = 0, best = 0;
    const struct session *s;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (s->phase != SESSION_ENDED)
            continue;
        unsigned i = 0;
        while (i < nseen && seen[i].uid != s->uid)
            i++;
        if (i == nseen) {
            if (nseen == sizeof(seen) / sizeof(seen[0]))
                continue; /* more users than that: the first ones decide */
            seen[nseen].uid = s->uid;
            seen[nseen++].n = 0;
        }
        if (++seen[i].n > seen[best].n)
            best = i;
    }
    return nseen > 0 ? seen[best].uid : 0;
}

/* The oldest evictable session (but except) of the user who keeps the
 * most finished ones, else the oldest evictable one, or NULL. */
static struct session *next_to_forget(const struct server *srv,
                                      const struct session *except)
{
    struct session *s, *any = NULL;
    uid_t top = top_keeper(srv);

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!evictable(s) || s == except)
            continue;
        if (s->uid == top)
            return s;
        if (any == NULL)
            any = s;
    }
    return any;
}

/*
 * Forgets finished sessions past the retention time; then, while more are
 * kept than the count allows, the oldest of the user who keeps the most,
 * so that one user's many short sessions push out their own, not other
 * users' (any local user may connect and hang up at will).
 */
void retention_evict(struct server *srv, uint64_t now)
{
    struct session *s, *next;

    for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (evictable(s) && clock_elapsed_ms(now, s->end_ms) >=
                                (uint64_t)srv->cfg.retain_s * 1000)
            forget_session(srv, s);
    }
    while (srv->nended > srv->cfg.retain_count &&
           (s = next_to_forget(srv, NULL)) != NULL)
        forget_session(srv, s);
}

int retention_forget_oldest(struct server *srv, uid_t uid, int any_user,
                            const struct session *except)
{
    struct session *s = NULL;

    if (any_user) {
        s = next_to_forget(srv, except);
    } else {
        TAILQ_FOREACH(s, &srv->sessions, link)
        if (evictable(s) && s->uid == uid && s != except)
            break;
    }
    if (s == NULL)
        return 0;
    log_info("session %llu: forgotten to make room in the memory budget for "
             "%s sessions streaming",
             (unsigned long long)s->id, any_user ? "the" : "its user's");
    forget_session(srv, s);
    return 1;
}
