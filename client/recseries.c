/* A recording's live heap by site: its records applied in runs cut where
 * the bytes allocated reach the next step (to sample every site there) or
 * where the heap is about to be at its highest (to catch the peak). */
#include "recseries.h"

#include <stdlib.h>
#include <string.h>

static int sink(void *ctx, const struct lm_record *recs, size_t n,
                size_t *failed_at, char *errbuf, size_t errlen);

int recseries_init(struct recseries *r, const struct lm_limits *limits)
{
    memset(r, 0, sizeof(*r));
    if (lm_profile_init(&r->p, limits, NULL) != 0)
        return -1;
    if (lm_groups_init(&r->groups) != 0) {
        lm_profile_free(&r->p);
        return -1;
    }
    r->p.dec.sink = sink;
    r->p.dec.sink_ctx = r;
    r->step = r->next = RECSERIES_FIRST_STEP;
    r->samples = calloc(RECSERIES_MAX_POINTS + 1, sizeof(*r->samples));
    if (r->samples == NULL) {
        recseries_free(r);
        return -1;
    }
    return 0;
}

void recseries_free(struct recseries *r)
{
    lm_groups_free(&r->groups);
    lm_profile_free(&r->p);
    free(r->samples);
    free(r->entries);
    free(r->sums);
    memset(r, 0, sizeof(*r));
}

/* -- Sampling ------------------------------------------------------------ */

/* Every other sample goes (those of odd steps) and the step doubles: the
 * ones left lie on whole steps of the new size. */
static void thin(struct recseries *r)
{
    uint32_t to = 0;
    size_t entry_to = 0;

    for (uint32_t i = 0; i < r->nsamples; i++) {
        struct recseries_sample s = r->samples[i];
        if (s.k % 2 != 0)
            continue;
        if (s.n > 0)
            memmove(&r->entries[entry_to], &r->entries[s.first],
                    s.n * sizeof(*r->entries));
        s.first = entry_to;
        s.k /= 2;
        entry_to += s.n;
        r->samples[to++] = s;
    }
    r->nsamples = to;
    r->nentries = entry_to;
    r->step *= 2;
}

/* Room for n more entries; -1 out of memory. */
static int entries_room(struct recseries *r, size_t n)
{
    if (r->nentries + n <= r->entries_cap)
        return 0;
    size_t cap = r->entries_cap ? 2 * r->entries_cap : 4096;
    while (cap < r->nentries + n)
        cap *= 2;
    struct recseries_entry *e = realloc(r->entries, cap * sizeof(*e));
    if (e == NULL)
        return -1;
    r->entries = e;
    r->entries_cap = cap;
    return 0;
}

/* Each group's live bytes now, into r->sums (the state's new locations
 * named first); -1 out of memory. */
static int sum_groups(struct recseries *r)
{
    const struct lm_state *st = &r->p.state;

    if (lm_groups_update(&r->groups, st) < 0)
        return -1;
    if (r->groups.n > r->sums_cap) {
        uint64_t *s = realloc(r->sums, (r->groups.n + 1) * sizeof(*s));
        if (s == NULL)
            return -1;
        r->sums = s;
        r->sums_cap = r->groups.n;
    }
    if (r->groups.n > 0) /* else sums may be unallocated yet */
        memset(r->sums, 0, r->groups.n * sizeof(*r->sums));
    for (uint32_t id = 0; id < r->groups.nlocs && id < st->nlocs; id++)
        r->sums[r->groups.group_of[id]] += st->sides[id].live_bytes;
    return 0;
}

/* Samples the heap now: the total, and the sites holding at least
 * 1/RECSERIES_SHARE of it.  Only the stream's end is sampled in a step
 * that has its sample (the one thinning kept). */
static void take_sample(struct recseries *r, int at_end)
{
    const struct lm_totals *t = &r->p.state.totals;

    if (r->nsamples == RECSERIES_MAX_POINTS)
        thin(r);
    uint64_t k = t->alloc_bytes / r->step;
    r->next = (k + 1) * r->step;
    if (!at_end && r->nsamples > 0 && r->samples[r->nsamples - 1].k == k)
        return;
    if (sum_groups(r) != 0) {
        r->oom = 1;
        return;
    }
    /* The sites are the state's, which sum to its total: at most SHARE
     * of them hold a SHAREth of it each. */
    uint32_t room =
        r->groups.n < RECSERIES_SHARE ? r->groups.n : RECSERIES_SHARE;
    if (entries_room(r, room) != 0) {
        r->oom = 1;
        return;
    }
    struct recseries_sample *s = &r->samples[r->nsamples++];
    *s = (struct recseries_sample){t->alloc_bytes, t->live_bytes, k,
                                   r->nentries, 0};
    for (uint32_t g = 0; g < r->groups.n && s->n < room; g++) {
        uint64_t b = r->sums[g];
        if (b > 0 && b * RECSERIES_SHARE >= t->live_bytes) {
            r->entries[r->nentries++] = (struct recseries_entry){g, b};
            s->n++;
        }
    }
}

/* After a run of records: the peak if the heap is higher than ever, and a
 * sample if a step was reached. */
static void observe(struct recseries *r)
{
    const struct lm_totals *t = &r->p.state.totals;

    if (t->live_bytes > r->peak_bytes) {
        r->peak_bytes = t->live_bytes;
        r->peak_x = t->alloc_bytes;
    }
    if (t->alloc_bytes >= r->next)
        take_sample(r, 0);
}

/* a + b - c, kept within int64_t: a hostile file's sizes reach 2^64. */
static int64_t heap_course(int64_t a, uint64_t b, uint64_t c)
{
    int64_t r;

    if (b > INT64_MAX || __builtin_add_overflow(a, (int64_t)b, &r))
        r = INT64_MAX;
    if (c > INT64_MAX || __builtin_sub_overflow(r, (int64_t)c, &r))
        r = INT64_MIN;
    return r;
}

/*
 * How many of the n records to apply before looking at the state again:
 * up to the one that brings the bytes allocated to the next step; or
 * fewer, up to where the heap will be highest within them, if that is
 * higher than its peak so far.  The heap's course is foretold from the
 * records' sizes (the state has the last word: a free of a block it
 * never saw changes nothing).
 */
static size_t cut(const struct recseries *r, const struct lm_record *recs,
                  size_t n)
{
    const struct lm_totals *t = &r->p.state.totals;
    uint64_t alloc = t->alloc_bytes;
    int64_t live = heap_course(0, t->live_bytes, 0), best = live;
    size_t best_at = 0, end = n;

    for (size_t i = 0; i < n; i++) {
        const struct lm_record *x = &recs[i];
        if (x->kind == LM_REC_ALLOC) {
            alloc += x->nsize;
            live = heap_course(live, x->nsize, 0);
        } else if (x->kind == LM_REC_REALLOC) {
            alloc += x->nsize;
            live = heap_course(live, x->nsize, x->osize);
        } else if (x->kind == LM_REC_FREE) {
            live = heap_course(live, 0, x->osize);
        } else {
            continue;
        }
        if (live > best) {
            best = live;
            best_at = i + 1;
        }
        if (alloc >= r->next) {
            end = i + 1;
            break;
        }
    }
    if (best > (int64_t)r->peak_bytes && best_at > 0 && best_at < end)
        return best_at;
    return end;
}

/* The decoder's sink: the state's, in runs, the state observed after each. */
static int sink(void *ctx, const struct lm_record *recs, size_t n,
                size_t *failed_at, char *errbuf, size_t errlen)
{
    struct recseries *r = ctx;

    for (size_t done = 0; done < n;) {
        size_t k = cut(r, recs + done, n - done);
        int rc = lm_state_apply(&r->p.state, recs + done, k, failed_at, errbuf,
                                errlen);
        if (rc != 0) {
            *failed_at += done;
            return rc;
        }
        done += k;
        observe(r);
    }
    return 0;
}

enum lm_status recseries_feed(struct recseries *r, const void *buf, size_t len,
                              size_t *consumed)
{
    return lm_profile_feed(&r->p, buf, len, consumed);
}

enum lm_status recseries_finish(struct recseries *r)
{
    enum lm_status st = lm_decoder_finish(&r->p.dec);
    const struct lm_totals *t = &r->p.state.totals;

    observe(r);
    if (r->nsamples == 0 || r->samples[r->nsamples - 1].x != t->alloc_bytes)
        take_sample(r, 1);
    return st;
}

/* -- The chart's data ---------------------------------------------------- */

struct ranked {
    uint64_t most;
    uint32_t group;
};

static int by_most(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;

    if (x->most != y->most)
        return x->most > y->most ? -1 : 1;
    return x->group < y->group ? -1 : x->group > y->group;
}

/* The groups ranked by the most each held at a sample: series_of[g] is
 * g's series (below *n), or UINT32_MAX.  -1 out of memory. */
static int choose(const struct recseries *r, uint32_t most, uint32_t *series_of,
                  uint32_t *n)
{
    uint32_t ngroups = r->groups.n, nranked = 0;
    struct ranked *v = calloc(ngroups + 1, sizeof(*v));

    if (v == NULL)
        return -1;
    for (uint32_t g = 0; g < ngroups; g++) {
        v[g].group = g;
        series_of[g] = UINT32_MAX;
    }
    for (size_t e = 0; e < r->nentries; e++)
        if (r->entries[e].bytes > v[r->entries[e].group].most)
            v[r->entries[e].group].most = r->entries[e].bytes;
    for (uint32_t g = 0; g < ngroups; g++)
        if (v[g].most > 0)
            v[nranked++] = v[g];
    qsort(v, nranked, sizeof(*v), by_most);
    *n = nranked < most ? nranked : most;
    for (uint32_t i = 0; i < *n; i++)
        series_of[v[i].group] = i;
    free(v);
    return 0;
}

/* The samples' points into d, after a first point at 0 bytes allocated
 * (nothing live yet) when the samples do not begin there. */
static void fill(const struct recseries *r, const uint32_t *series_of,
                 struct chart_data *d)
{
    uint32_t j = d->npoints - r->nsamples; /* 1 with the point at 0 */

    for (uint32_t i = 0; i < r->nsamples; i++, j++) {
        const struct recseries_sample *s = &r->samples[i];
        d->x[j] = s->x;
        d->total[j] = s->total;
        for (uint32_t e = 0; e < s->n; e++) {
            const struct recseries_entry *x = &r->entries[s->first + e];
            uint32_t k = series_of[x->group];
            if (k != UINT32_MAX)
                d->values[(size_t)k * d->npoints + j] = x->bytes;
        }
    }
}

int recseries_chart(const struct recseries *r, uint32_t most,
                    struct chart_data *out)
{
    uint32_t *series_of = malloc((r->groups.n + 1) * sizeof(*series_of));
    uint32_t n = 0;
    int zero_first = r->nsamples == 0 || r->samples[0].x > 0;

    memset(out, 0, sizeof(*out));
    if (r->oom || series_of == NULL || choose(r, most, series_of, &n) != 0 ||
        chart_data_alloc(out, r->nsamples + (uint32_t)zero_first, n) != 0) {
        free(series_of);
        return -1;
    }
    for (uint32_t g = 0; g < r->groups.n; g++)
        if (series_of[g] != UINT32_MAX &&
            (out->names[series_of[g]] = strdup(r->groups.v[g].name)) == NULL) {
            free(series_of);
            chart_data_free(out);
            return -1;
        }
    fill(r, series_of, out);
    free(series_of);
    return 0;
}
