/* The call stacks that reached one site of a session (CallersRequest). */
#include "callers.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "lm_groups.h"
#include "log.h"
#include "peer.h"
#include "session.h"
#include "snapshot.h"

#define CALLERS_DEFAULT 64
#define CALLERS_MAX     4096
#define FRAME_NAME_MAX  512

/* A stacked location of the site, with its figures. */
struct caller {
    uint32_t loc;
    struct lm_counters c;
    double key;
};

static int cmp_caller_desc(const void *x, const void *y)
{
    const struct caller *a = x, *b = y;

    return a->key < b->key   ? 1
           : a->key > b->key ? -1
                             : (a->loc > b->loc) - (a->loc < b->loc);
}

/* The group named site in the session's names, or UINT32_MAX. */
static uint32_t group_named(const struct lm_groups *g, const char *site)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (g->v[i].name != NULL && strcmp(g->v[i].name, site) == 0)
            return i;
    return UINT32_MAX;
}

/* What a stack's rank is by: its estimate under sampling, as the views
 * show it. */
static double rank_of(const struct lm_state *st, const struct caller *k,
                      Ljmp__SortKey sort)
{
    double alloc = (double)(k->c.alloc_bytes + k->c.realloc_new_bytes);
    double live = (double)k->c.live_bytes;

    if (st->stacks.sample_bytes != 0 &&
        k->loc < st->stacks.est_room / sizeof(*st->stacks.est) && alloc > 0) {
        double scale = st->stacks.est[k->loc].bytes / alloc;
        alloc *= scale;
        live *= scale;
    }
    return sort == LJMP__SORT_KEY__SORT_ALLOC_BYTES ? alloc : live;
}

/* The frames of location loc's stack as names, in the arena. */
static char **frame_names(struct arena *a, const struct lm_state *st,
                          uint32_t loc, size_t *n)
{
    uint32_t nf;
    const struct lm_sframe *f =
        lm_stacks_frames(&st->stacks, st->locs[loc].stack, &nf);
    char **names = arena_alloc(a, (nf ? nf : 1) * sizeof(*names));
    char buf[FRAME_NAME_MAX];

    if (names == NULL)
        return NULL;
    for (uint32_t i = 0; i < nf; i++) {
        lm_state_frame_name(st, &f[i], buf, sizeof(buf));
        if ((names[i] = arena_strdup(a, buf)) == NULL)
            return NULL;
    }
    *n = nf;
    return names;
}

static Ljmp__CallerStack *make_stack(struct arena *a, const struct lm_state *st,
                                     const struct caller *k)
{
    Ljmp__CallerStack *m = arena_alloc(a, sizeof(*m));
    uint64_t alloc = k->c.alloc_bytes + k->c.realloc_new_bytes;

    if (m == NULL)
        return NULL;
    ljmp__caller_stack__init(m);
    if ((m->frames = frame_names(a, st, k->loc, &m->n_frames)) == NULL)
        return NULL;
    m->has_live_bytes = m->has_live_blocks = 1;
    m->has_alloc_events = m->has_alloc_bytes = 1;
    m->live_bytes = k->c.live_bytes;
    m->live_blocks = k->c.live_blocks;
    m->alloc_events = k->c.alloc_events + k->c.realloc_events;
    m->alloc_bytes = alloc;
    if (st->stacks.sample_bytes != 0 &&
        k->loc < st->stacks.est_room / sizeof(*st->stacks.est)) {
        const struct lm_stack_est *e = &st->stacks.est[k->loc];
        double scale = alloc > 0 ? e->bytes / (double)alloc : 1;
        m->has_est_alloc_events = m->has_est_alloc_bytes = 1;
        m->has_est_live_bytes = m->has_est_live_blocks = 1;
        m->est_alloc_events = e->events;
        m->est_alloc_bytes = e->bytes;
        m->est_live_bytes = (double)k->c.live_bytes * scale;
        m->est_live_blocks = (double)k->c.live_blocks * scale;
    }
    return m;
}

/*
 * The site's stacked locations in st (named by groups), ranked, into out:
 * under the session's lock, as a feed thread may change the state.  -1
 * when out of memory.
 */
static int collect(struct arena *a, const struct lm_state *st,
                   const struct lm_groups *g, uint32_t group,
                   const Ljmp__CallersRequest *r, Ljmp__Callers *out)
{
    uint32_t limit = r->has_limit ? r->limit : CALLERS_DEFAULT;
    struct caller *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t unstacked = 0;

    for (uint32_t i = 0; i < g->nlocs && i < st->nlocs; i++) {
        if (g->group_of[i] != group)
            continue;
        if (st->locs[i].stack == 0) {
            unstacked +=
                st->locs[i].ev.alloc_events + st->locs[i].ev.realloc_events;
            continue;
        }
        if (n == cap) {
            size_t c2 = cap ? cap * 2 : 64;
            struct caller *w = realloc(v, c2 * sizeof(*v));
            if (w == NULL) {
                free(v);
                return -1;
            }
            v = w;
            cap = c2;
        }
        v[n].loc = i;
        lm_state_counters(st, i, &v[n].c);
        v[n].key = rank_of(st, &v[n], r->sort);
        n++;
    }
    if (n > 1) /* v is NULL for a site with no stacked location */
        qsort(v, n, sizeof(*v), cmp_caller_desc);
    size_t keep = n < limit ? n : limit;
    out->stacks = arena_alloc(a, (keep ? keep : 1) * sizeof(*out->stacks));
    int rc = out->stacks != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < keep; i++)
        if ((out->stacks[i] = make_stack(a, st, &v[i])) == NULL)
            rc = -1;
    out->n_stacks = rc == 0 ? keep : 0;
    out->has_more = out->has_unstacked_events = 1;
    out->more = (uint32_t)(n - keep);
    out->unstacked_events = unstacked;
    free(v);
    return rc;
}

void callers_request(struct peer *p, uint64_t id, struct session *s,
                     const Ljmp__CallersRequest *r)
{
    Ljmp__Callers out = LJMP__CALLERS__INIT;
    Ljmp__Response resp;
    struct arena a = {0};
    const struct lm_groups *g;
    int rc = -1;

    if (r->site == NULL ||
        (r->has_limit && (r->limit == 0 || r->limit > CALLERS_MAX))) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        r->site == NULL ? "callers of which site? (site)"
                                        : "a limit of 1 to %d stacks",
                        CALLERS_MAX);
        return;
    }
    session_lock(s); /* a feed thread may be changing the state */
    const struct lm_state *st = &s->prof.state;
    if ((g = snapshot_names(s)) != NULL) {
        uint32_t group = group_named(g, r->site);
        rc = group == UINT32_MAX ? 1 : collect(&a, st, g, group, r, &out);
    }
    out.has_depth = out.has_sample_bytes = out.has_folded = 1;
    out.depth = st->stacks.depth;
    out.sample_bytes = st->stacks.sample_bytes;
    out.folded = st->stacks.folded;
    session_unlock(s);
    if (rc == 1) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "session %llu has no site '%s'",
                        (unsigned long long)s->id, r->site);
    } else if (rc != 0 || (out.session = snapshot_info(&a, s)) == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory listing callers");
    } else {
        out.site = (char *)r->site;
        peer_response_init(&resp, id);
        resp.body_case = LJMP__RESPONSE__BODY_CALLERS;
        resp.callers = &out;
        peer_send(p, &resp);
    }
    arena_free(&a);
}
