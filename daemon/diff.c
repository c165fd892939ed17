/* Diffs of a session's sites between two of its marks, its start, its
 * history's peak and now, by name, answered on the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "diff.h"
#include "history.h"
#include "ljmp_diff.h"
#include "lm_groups.h"
#include "marks.h"
#include "peer.h"
#include "session.h"
#include "snapshot.h"

/* -- Sums ----------------------------------------------------------------- */

/* Whether loc is one of the peak's sites (sorted by location). */
static int at_peak(const struct history *h, uint32_t loc)
{
    uint32_t lo = 0, hi = h->peak.n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (h->peak.sites[mid].loc < loc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < h->peak.n && h->peak.sites[lo].loc == loc;
}

/* Adds location loc's counters to its group's sums (or counts it unnamed). */
static void add_at(const struct lm_groups *g, uint32_t loc,
                   const struct lm_diff_counts *c, struct lm_diff_counts *sums,
                   uint32_t *unnamed)
{
    if (loc >= g->nlocs) {
        (*unnamed)++;
        return;
    }
    lm_diff_counts_add(&sums[g->group_of[loc]], c);
}

/* The state now, every location or only the peak's. */
static void sum_now(const struct lm_groups *g, const struct lm_state *st,
                    const struct history *only, struct lm_diff_counts *sums,
                    uint32_t *unnamed)
{
    struct lm_diff_counts c;
    uint32_t n = only != NULL ? only->peak.n : st->nlocs;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t loc = only != NULL ? only->peak.sites[i].loc : i;
        if (loc >= st->nlocs)
            continue;
        lm_diff_counts_at(st, loc, &c);
        if (!lm_diff_counts_zero(&c))
            add_at(g, loc, &c, sums, unnamed);
    }
}

static void sum_mark(const struct lm_groups *g, const struct mark *m,
                     const struct history *only, struct lm_diff_counts *sums,
                     uint32_t *unnamed)
{
    struct mark_reader r;
    struct lm_diff_counts c;
    uint32_t loc;

    mark_read_begin(m, &r);
    while (mark_read_next(&r, &loc, &c))
        if (only == NULL || at_peak(only, loc))
            add_at(g, loc, &c, sums, unnamed);
}

static void sum_peak(const struct lm_groups *g, const struct history *h,
                     struct lm_diff_counts *sums, uint32_t *unnamed)
{
    for (uint32_t i = 0; i < h->peak.n; i++)
        add_at(g, h->peak.sites[i].loc, &h->peak_counts[i], sums, unnamed);
}

/* Sums end e into sums by group; only: the peak whose sites alone count. */
static void sum_end(const struct lm_groups *g, const struct diff_end *e,
                    const struct history *only, struct lm_diff_counts *sums,
                    uint32_t *unnamed)
{
    switch (e->kind) {
    case DIFF_END_START:
        break;
    case DIFF_END_NOW:
        sum_now(g, e->st, only, sums, unnamed);
        break;
    case DIFF_END_PEAK:
        sum_peak(g, e->h, sums, unnamed);
        break;
    case DIFF_END_MARK:
        sum_mark(g, e->mark, only, sums, unnamed);
        break;
    }
}

int diff_sum_ends(const struct lm_groups *g, const struct diff_end *from,
                  const struct diff_end *to, struct diff_sums *d)
{
    const struct history *only = from->kind == DIFF_END_PEAK ? from->h
                                 : to->kind == DIFF_END_PEAK ? to->h
                                                             : NULL;
    uint32_t unnamed_from = 0, unnamed_to = 0;

    d->ngroups = g->n;
    d->from = calloc((size_t)g->n + 1, sizeof(*d->from));
    d->to = calloc((size_t)g->n + 1, sizeof(*d->to));
    if (d->from == NULL || d->to == NULL) {
        diff_sums_free(d);
        return -1;
    }
    sum_end(g, from, only, d->from, &unnamed_from);
    sum_end(g, to, only, d->to, &unnamed_to);
    d->unnamed = unnamed_from > unnamed_to ? unnamed_from : unnamed_to;
    return 0;
}

void diff_sums_free(struct diff_sums *d)
{
    free(d->from);
    free(d->to);
    d->from = d->to = NULL;
}

uint32_t diff_top(const struct lm_groups *g, const struct diff_sums *d,
                  struct lm_diff_top *top, struct lm_diff_row *total)
{
    uint32_t changed = 0;

    memset(total, 0, sizeof(*total));
    for (uint32_t i = 0; i < d->ngroups; i++) {
        struct lm_diff_row r = {g->v[i].name, g->v[i].nlocs, d->from[i],
                                d->to[i]};
        if (lm_diff_counts_zero(&r.from) && lm_diff_counts_zero(&r.to))
            continue;
        lm_diff_counts_add(&total->from, &r.from);
        lm_diff_counts_add(&total->to, &r.to);
        total->sites += r.sites;
        if (lm_diff_changed(&r)) {
            lm_diff_top_offer(top, &r);
            changed++;
        }
    }
    return changed;
}

/* -- Requests ------------------------------------------------------------- */

#define DIFF_MAX_LIMIT 1000
/* Longer site names are cut: a thousand sites stay within a frame. */
#define DIFF_NAME_MAX (16u << 10)

/* The marks' names of s, for a message: "a, b" or "none". */
static void mark_names(const struct marks *ms, char *out, size_t len)
{
    size_t at = 0;

    snprintf(out, len, "none");
    for (unsigned i = 0; ms != NULL && i < ms->n && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i ? ", " : "",
                               ms->v[i]->name);
}

/* The end a diff request calls name; -1 with why if there is none. */
static int end_of(struct session *s, const char *name, struct diff_end *e,
                  char *why, size_t len)
{
    memset(e, 0, sizeof(*e));
    if (name == NULL || name[0] == '\0') {
        snprintf(why, len,
                 "a diff needs its first end: a mark's name, start, "
                 "peak or now");
        return -1;
    }
    if (strcmp(name, "start") == 0) {
        e->kind = DIFF_END_START;
    } else if (strcmp(name, "now") == 0) {
        e->kind = DIFF_END_NOW;
        e->st = &s->prof.state;
    } else if (strcmp(name, "peak") == 0) {
        e->kind = DIFF_END_PEAK;
        e->h = history_of(s);
        if (e->h == NULL || e->h->peak.t_ms == 0) {
            snprintf(why, len,
                     "session %llu has no peak yet (its history takes one "
                     "at its first tick)",
                     (unsigned long long)s->id);
            return -1;
        }
    } else {
        char names[MARKS_MAX * (MARK_NAME_MAX + 2) + 8];
        e->kind = DIFF_END_MARK;
        if ((e->mark = marks_find(marks_of(s), name)) == NULL) {
            mark_names(marks_of(s), names, sizeof(names));
            snprintf(why, len,
                     "session %llu has no mark '%.*s' (its marks: %s; or "
                     "start, peak, now)",
                     (unsigned long long)s->id, MARK_NAME_MAX, name, names);
            return -1;
        }
    }
    return 0;
}

static Ljmp__DiffEnd *end_msg(struct arena *a, const struct session *s,
                              const struct diff_end *e, const char *name,
                              uint64_t now)
{
    Ljmp__DiffEnd *m = arena_alloc(a, sizeof(*m));

    if (m == NULL)
        return NULL;
    ljmp__diff_end__init(m);
    m->name = arena_strdup(a, name);
    m->has_time_ms = 1;
    m->time_ms = clock_wall_ms(e->kind == DIFF_END_START  ? s->start_ms
                               : e->kind == DIFF_END_NOW  ? now
                               : e->kind == DIFF_END_PEAK ? e->h->peak.t_ms
                                                          : e->mark->t_ms);
    return m->name != NULL ? m : NULL;
}

/* A site's name as the answer carries it: cut past DIFF_NAME_MAX. */
static char *name_copy(struct arena *a, const char *name)
{
    size_t n = strlen(name);

    if (n < DIFF_NAME_MAX)
        return (char *)name; /* packed before the groups change */
    char *cut = arena_alloc(a, DIFF_NAME_MAX);
    if (cut != NULL)
        memcpy(cut, name, DIFF_NAME_MAX - 1);
    return cut;
}

static Ljmp__DiffSite *site_msg(struct arena *a, const struct lm_diff_row *r)
{
    Ljmp__DiffSite *m = arena_alloc(a, sizeof(*m));

    if (m == NULL)
        return NULL;
    ljmp__diff_site__init(m);
    if (r->name != NULL && (m->name = name_copy(a, r->name)) == NULL)
        return NULL;
    ljmp_diff_site_fill(m, r);
    return m;
}

/* The ranked rows of a diff, as its answer. */
struct diff_answer {
    struct lm_diff_row rows[DIFF_MAX_LIMIT], total;
    size_t shown;
    uint32_t changed, unnamed;
};

static int fill_diff(struct arena *a, const struct diff_answer *d,
                     Ljmp__Diff *out)
{
    out->sites = arena_alloc(a, (d->shown + 1) * sizeof(*out->sites));
    if (out->sites == NULL || (out->total = site_msg(a, &d->total)) == NULL)
        return -1;
    for (size_t i = 0; i < d->shown; i++)
        if ((out->sites[out->n_sites++] = site_msg(a, &d->rows[i])) == NULL)
            return -1;
    out->has_changed = 1;
    out->changed = d->changed;
    out->has_unnamed = d->unnamed > 0;
    out->unnamed = d->unnamed;
    return 0;
}

/* Sums the ends under s's lock (now's state, the names) and ranks the
 * groups that changed; -1 out of memory. */
static int compute_diff(struct session *s, const struct diff_end *from,
                        const struct diff_end *to, const Ljmp__DiffRequest *r,
                        struct diff_answer *d)
{
    struct diff_sums sums = {0};
    const struct lm_groups *g;
    int rc = -1;

    session_lock(s); /* a feed thread may be adding locations */
    if ((g = snapshot_names(s)) != NULL)
        rc = diff_sum_ends(g, from, to, &sums);
    session_unlock(s);
    if (rc != 0)
        return -1;
    /* g changes only on the loop: its names hold until this returns. */
    struct lm_diff_top top = {d->rows, 0, r->limit, (enum lm_diff_key)r->sort};
    d->changed = diff_top(g, &sums, &top, &d->total);
    d->shown = lm_diff_top_finish(&top);
    d->unnamed = sums.unnamed;
    diff_sums_free(&sums);
    return 0;
}

/* A diff request's limit and sort key: 0, or -1 after telling p. */
static int check_diff(struct peer *p, uint64_t id, const Ljmp__DiffRequest *r)
{
    if (r->limit < 1 || r->limit > DIFF_MAX_LIMIT ||
        protobuf_c_enum_descriptor_get_value(&ljmp__diff_key__descriptor,
                                             (int)r->sort) == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a diff shows 1 to %u sites, sorted by a known key",
                        DIFF_MAX_LIMIT);
        return -1;
    }
    return 0;
}

/* Computes the diff of s between from and to and sends it to p. */
static void send_diff(struct peer *p, uint64_t id, struct session *s,
                      const Ljmp__DiffRequest *r, const struct diff_end *from,
                      const struct diff_end *to, const char *to_name)
{
    struct arena a = {0};
    struct diff_answer *d = arena_alloc(&a, sizeof(*d));
    Ljmp__Diff out = LJMP__DIFF__INIT;
    Ljmp__Response resp;
    uint64_t now = clock_now_ms();

    if (d == NULL || compute_diff(s, from, to, r, d) != 0 ||
        (out.session = snapshot_info(&a, s)) == NULL ||
        (out.from = end_msg(&a, s, from, r->from, now)) == NULL ||
        (out.to = end_msg(&a, s, to, to_name, now)) == NULL ||
        fill_diff(&a, d, &out) != 0) {
        arena_free(&a);
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory computing a diff");
        return;
    }
    out.has_sort = out.has_tracked_only = 1;
    out.sort = r->sort;
    out.tracked_only = from->kind == DIFF_END_PEAK || to->kind == DIFF_END_PEAK;
    peer_response_init(&resp, id);
    resp.body_case = LJMP__RESPONSE__BODY_DIFF;
    resp.diff = &out;
    peer_send(p, &resp);
    arena_free(&a);
}

void diff_request(struct peer *p, uint64_t id, struct session *s,
                  const Ljmp__DiffRequest *r)
{
    const char *to_name = r->to != NULL ? r->to : "now";
    struct diff_end from, to;
    char why[MARKS_MAX * (MARK_NAME_MAX + 2) + 256];

    if (check_diff(p, id, r) != 0)
        return;
    if (end_of(s, r->from, &from, why, sizeof(why)) != 0 ||
        end_of(s, to_name, &to, why, sizeof(why)) != 0) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s", why);
        return;
    }
    send_diff(p, id, s, r, &from, &to, to_name);
}
