/* Each session's history: totals every tick, tracked sites at a coarser
 * step, the peak; thinned within a span and a memory bound; the leak rule. */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "clock.h"
#include "history.h"
#include "session.h"

/* -- Bounded series ------------------------------------------------------ */

/* Sites kept per frame at most, and the halves of the choice. */
static uint32_t bytes_half(const struct history *h)
{
    return h->lim.max_sites - h->lim.max_sites / 2;
}

static uint32_t kept_half(const struct history *h)
{
    return h->lim.max_sites / 2;
}

/* Frames the array holds at most: the bytes bound counts them too. */
#define HISTORY_FRAMES_CAP 512

/* What a history holds at its most but for the frames' sites: itself, its
 * peak, its tracked sites, the choice's candidates, its arrays. */
static uint64_t fixed_bytes(const struct history_limits *lim,
                            uint32_t totals_cap)
{
    return sizeof(struct history) +
           (uint64_t)totals_cap * sizeof(struct history_totals) +
           (uint64_t)HISTORY_FRAMES_CAP * sizeof(struct history_frame) +
           (uint64_t)lim->max_sites *
               (sizeof(struct history_site) + sizeof(uint32_t) +
                sizeof(struct history_cand) + sizeof(struct lm_diff_counts));
}

struct history *history_new(const struct history_limits *lim)
{
    struct history *h = calloc(1, sizeof(*h));
    uint32_t k = lim->max_sites ? lim->max_sites : 1;

    if (h == NULL)
        return NULL;
    h->lim = *lim;
    h->lim.max_sites = k;
    /* A quarter of the bound for the totals, the rest for the frames. */
    h->totals_cap = (uint32_t)(lim->max_bytes / 4 / sizeof(*h->totals));
    if (h->totals_cap < 64)
        h->totals_cap = 64;
    uint64_t fixed = fixed_bytes(&h->lim, h->totals_cap);
    uint64_t one_frame = (uint64_t)k * sizeof(struct history_site);
    h->frames_bytes_max =
        lim->max_bytes > fixed + one_frame ? lim->max_bytes - fixed : one_frame;
    h->step_ms = HISTORY_FIRST_STEP_MS;
    h->peak.sites = calloc(k, sizeof(*h->peak.sites));
    h->peak_counts = calloc(k, sizeof(*h->peak_counts));
    h->tracked = calloc(k, sizeof(*h->tracked));
    h->by_bytes = calloc(bytes_half(h), sizeof(*h->by_bytes));
    h->by_kept = calloc(kept_half(h) + 1, sizeof(*h->by_kept));
    if (h->peak.sites == NULL || h->peak_counts == NULL || h->tracked == NULL ||
        h->by_bytes == NULL || h->by_kept == NULL) {
        history_free(h);
        return NULL;
    }
    return h;
}

void history_free(struct history *h)
{
    if (h == NULL)
        return;
    for (uint32_t i = 0; i < h->nframes; i++)
        free(h->frames[i].sites);
    free(h->frames);
    free(h->totals);
    free(h->peak.sites);
    free(h->peak_counts);
    free(h->tracked);
    free(h->by_bytes);
    free(h->by_kept);
    free(h);
}

/* What the arrays hold as allocated: the totals grow to their cap, the
 * frames' sites as they come. */
uint64_t history_memory(const struct history *h)
{
    return sizeof(*h) + (uint64_t)h->totals_alloc * sizeof(*h->totals) +
           (h->frames != NULL
                ? (uint64_t)HISTORY_FRAMES_CAP * sizeof(struct history_frame)
                : 0) +
           h->frame_bytes +
           (uint64_t)h->lim.max_sites *
               (sizeof(struct history_site) + sizeof(uint32_t) +
                sizeof(struct history_cand) + sizeof(struct lm_diff_counts));
}

/*
 * Thins the older half of n elements of size bytes: every other one of
 * them goes, so that old points lose resolution instead of the whole
 * past going at once.  Below four elements the oldest goes.  Returns the
 * new count.
 */
static uint32_t thin_older_half(void *base, uint32_t n, size_t size)
{
    char *p = base;
    uint32_t half = n / 2, to = 0;

    if (n < 4) {
        memmove(p, p + size, (size_t)(n - 1) * size);
        return n - 1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (i >= half || i % 2 == 0)
            memmove(p + (size_t)to++ * size, p + (size_t)i * size, size);
    return to;
}

/* Points before the span's start go (the oldest come first). */
static uint64_t span_start(const struct history *h, uint64_t now)
{
    return now > h->lim.span_ms ? now - h->lim.span_ms : 0;
}

/* Room for more totals: doubled, up to the cap.  -1 out of memory. */
static int grow_totals(struct history *h)
{
    uint32_t n = h->totals_alloc ? 2 * h->totals_alloc : 64;

    if (n > h->totals_cap)
        n = h->totals_cap;
    struct history_totals *t = realloc(h->totals, n * sizeof(*t));
    if (t == NULL)
        return -1;
    h->totals = t;
    h->totals_alloc = n;
    return 0;
}

void history_add_totals(struct history *h, const struct history_totals *t)
{
    uint64_t start = span_start(h, t->t_ms);
    uint32_t old = 0;

    while (old < h->ntotals && h->totals[old].t_ms < start)
        old++;
    if (old > 0) {
        h->ntotals -= old;
        memmove(h->totals, h->totals + old,
                (size_t)h->ntotals * sizeof(*h->totals));
    }
    if (h->ntotals == h->totals_cap) {
        h->ntotals = thin_older_half(h->totals, h->ntotals, sizeof(*h->totals));
        h->thinnings++;
    }
    if (h->ntotals == h->totals_alloc && grow_totals(h) != 0)
        return; /* no point this time */
    h->totals[h->ntotals++] = *t;
}

static uint64_t frame_size(uint32_t n)
{
    return (uint64_t)n * sizeof(struct history_site);
}

/* Drops frames [0, n). */
static void drop_frames(struct history *h, uint32_t n)
{
    if (n == 0)
        return;
    for (uint32_t i = 0; i < n; i++) {
        h->frame_bytes -= frame_size(h->frames[i].n);
        free(h->frames[i].sites);
    }
    h->nframes -= n;
    memmove(h->frames, h->frames + n, (size_t)h->nframes * sizeof(*h->frames));
}

/* The older half of the frames thinned (their sites freed), and the step
 * coarsened: the history is full at this resolution. */
static void thin_frames(struct history *h)
{
    uint32_t half = h->nframes / 2, to = 0;

    if (h->nframes < 4) {
        drop_frames(h, 1);
    } else {
        for (uint32_t i = 0; i < h->nframes; i++) {
            if (i >= half || i % 2 == 0) {
                h->frames[to++] = h->frames[i];
                continue;
            }
            h->frame_bytes -= frame_size(h->frames[i].n);
            free(h->frames[i].sites);
        }
        h->nframes = to;
    }
    h->thinnings++;
    if (h->step_ms < HISTORY_COARSE_STEP_MS)
        h->step_ms = h->step_ms * 2 < HISTORY_COARSE_STEP_MS
                         ? h->step_ms * 2
                         : HISTORY_COARSE_STEP_MS;
}

int history_add_frame(struct history *h, uint64_t t_ms,
                      const struct history_site *sites, uint32_t n)
{
    uint64_t start = span_start(h, t_ms), bytes = frame_size(n);
    uint32_t old = 0;

    while (old < h->nframes && h->frames[old].t_ms < start)
        old++;
    drop_frames(h, old);
    while (h->nframes > 0 && (h->nframes == HISTORY_FRAMES_CAP ||
                              h->frame_bytes + bytes > h->frames_bytes_max))
        thin_frames(h);
    if (h->frames == NULL &&
        (h->frames = malloc(HISTORY_FRAMES_CAP * sizeof(*h->frames))) == NULL)
        return -1;
    struct history_frame *f = &h->frames[h->nframes];
    f->sites = NULL;
    if (n > 0 && (f->sites = malloc(bytes)) == NULL)
        return -1;
    if (n > 0)
        memcpy(f->sites, sites, bytes);
    f->t_ms = t_ms;
    f->n = n;
    f->live_bytes = 0; /* the sampler sets it */
    h->frame_bytes += bytes;
    h->nframes++;
    /* A tick may come a little early: a quarter step early is on time. */
    h->next_frame_ms = t_ms + h->step_ms - h->step_ms / 4;
    return 0;
}

/* -- The leak rule ------------------------------------------------------- */

void history_fit(const double *t_s, const double *bytes, uint32_t n,
                 struct history_fit *f)
{
    double mt = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
    uint32_t up = 0;

    memset(f, 0, sizeof(*f));
    f->points = n;
    if (n < 2)
        return;
    for (uint32_t i = 0; i < n; i++) {
        mt += t_s[i] - t_s[0];
        my += bytes[i];
    }
    mt /= n;
    my /= n;
    for (uint32_t i = 0; i < n; i++) {
        double dt = t_s[i] - t_s[0] - mt, dy = bytes[i] - my;
        sxx += dt * dt;
        sxy += dt * dy;
        syy += dy * dy;
        if (i > 0 && bytes[i] >= bytes[i - 1])
            up++;
    }
    f->slope_per_s = sxx > 0 ? sxy / sxx : 0;
    f->r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : 0;
    f->rising = (double)up / (n - 1);
}

int history_is_suspect(const struct history_fit *f, double first_bytes,
                       double last_bytes, double kept)
{
    return f->points >= HISTORY_MIN_POINTS && f->slope_per_s > 0 &&
           f->r2 >= HISTORY_MIN_R2 && f->rising >= HISTORY_MIN_RISING &&
           last_bytes > first_bytes && kept >= HISTORY_MIN_KEPT;
}

uint32_t history_first_frame(const struct history *h, uint64_t start_ms)
{
    uint32_t lo = 0, hi = h->nframes;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (h->frames[mid].t_ms < start_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The first frame at or after now_ms - window_ms. */
static uint32_t window_start(const struct history *h, uint64_t now_ms,
                             uint64_t window_ms)
{
    return history_first_frame(h, now_ms > window_ms ? now_ms - window_ms : 0);
}

const struct history_site *history_find_site(const struct history_frame *f,
                                             uint32_t loc)
{
    uint32_t lo = 0, hi = f->n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (f->sites[mid].loc < loc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->n && f->sites[lo].loc == loc ? &f->sites[lo] : NULL;
}

/*
 * The members' first samples in frames [from, nframes) into known[i] (zero
 * for one that is in none).  The tracked sites change as the session goes
 * on: a member tracked only from some frame on (a line's compiled code,
 * once the JIT made it) must not add its bytes as a step there, which
 * would read as growth.  So a frame that lacks a member counts it at its
 * nearest sample, the first one before it appears, its last one after.
 */
static void first_samples(const struct history *h, uint32_t from,
                          const uint32_t *locs, uint32_t n,
                          struct history_site *known)
{
    for (uint32_t i = 0; i < n; i++) {
        const struct history_site *x = NULL;
        for (uint32_t k = from; k < h->nframes && x == NULL; k++)
            x = history_find_site(&h->frames[k], locs[i]);
        known[i] = x != NULL ? *x : (struct history_site){0};
    }
}

/* The sum of the members' counters in frame f into *sum, each missing one
 * at its nearest sample in known[] (which those found update); 0 if none
 * of them is in f. */
static int sum_members(const struct history_frame *f, const uint32_t *locs,
                       uint32_t n, struct history_site *known,
                       struct history_site *sum)
{
    int found = 0;

    memset(sum, 0, sizeof(*sum));
    for (uint32_t i = 0; i < n; i++) {
        const struct history_site *x = history_find_site(f, locs[i]);
        if (x != NULL) {
            known[i] = *x;
            found = 1;
        }
        sum->live_bytes += known[i].live_bytes;
        sum->live_blocks += known[i].live_blocks;
        sum->alloc_events += known[i].alloc_events;
        sum->freed_blocks += known[i].freed_blocks;
    }
    return found;
}

/* Live blocks gained per allocation from first to last: all of them for
 * a cache, a few for a site whose garbage is swept (growing with the
 * heap), 1 for a site that allocated nothing (it grows by reallocs). */
static double kept_of(const struct history_site *first,
                      const struct history_site *last)
{
    uint64_t allocs = last->alloc_events - first->alloc_events;
    int64_t gained = (int64_t)(last->live_blocks - first->live_blocks);

    return allocs == 0 ? 1 : gained <= 0 ? 0 : (double)gained / (double)allocs;
}

/* The fit of the members' live bytes (one site: the locations of one
 * name) over frames [from, nframes) into *s; 1 if it is a suspect.  t
 * and y: room for the frames; known: for the members. */
static int judge_site(const struct history *h, uint32_t from,
                      const uint32_t *locs, uint32_t nlocs,
                      struct history_site *known, double *t, double *y,
                      struct history_suspect *s)
{
    struct history_site first = {0}, x;
    uint32_t n = 0;

    first_samples(h, from, locs, nlocs, known);
    for (uint32_t i = from; i < h->nframes; i++) {
        if (!sum_members(&h->frames[i], locs, nlocs, known, &x))
            continue;
        if (n == 0) {
            s->first_ms = h->frames[i].t_ms;
            first = x;
        }
        s->last_ms = h->frames[i].t_ms;
        s->now = x;
        t[n] = (double)h->frames[i].t_ms / 1000.0;
        y[n++] = (double)x.live_bytes;
    }
    if (n == 0)
        return 0;
    history_fit(t, y, n, &s->fit);
    s->loc = s->now.loc = locs[0];
    s->sites = nlocs;
    s->window_allocs = s->now.alloc_events - first.alloc_events;
    s->window_frees = s->now.freed_blocks > first.freed_blocks
                          ? s->now.freed_blocks - first.freed_blocks
                          : 0;
    s->kept = kept_of(&first, &s->now);
    return history_is_suspect(&s->fit, y[0], y[n - 1], s->kept);
}

static int by_growth(const void *a, const void *b)
{
    const struct history_suspect *x = a, *y = b;

    if (x->fit.slope_per_s != y->fit.slope_per_s)
        return x->fit.slope_per_s > y->fit.slope_per_s ? -1 : 1;
    return x->loc < y->loc ? -1 : x->loc > y->loc;
}

/* For sorting the newest frame's sites by their group. */
struct grouped {
    uint32_t group, loc;
};

static int by_group(const void *a, const void *b)
{
    const struct grouped *x = a, *y = b;

    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->loc < y->loc ? -1 : x->loc > y->loc;
}

/* The newest frame's sites as runs of one group each (locs in *locs). */
static struct grouped *group_sites(const struct history_frame *f,
                                   const uint32_t *group)
{
    struct grouped *g = malloc((f->n + 1) * sizeof(*g));

    if (g == NULL)
        return NULL;
    for (uint32_t i = 0; i < f->n; i++)
        g[i] = (struct grouped){group != NULL ? group[i] : i, f->sites[i].loc};
    qsort(g, f->n, sizeof(*g), by_group);
    return g;
}

long history_leaks(const struct history *h, uint64_t now_ms, uint64_t window_ms,
                   const uint32_t *group, struct history_suspect *out,
                   size_t max, uint32_t *points)
{
    uint32_t from = window_start(h, now_ms, window_ms);

    *points = h->nframes - from;
    if (*points == 0)
        return 0;
    const struct history_frame *newest = &h->frames[h->nframes - 1];
    double *t = malloc(*points * sizeof(*t)), *y = malloc(*points * sizeof(*y));
    struct history_suspect *all = malloc((newest->n + 1) * sizeof(*all));
    struct grouped *g = group_sites(newest, group);
    uint32_t *locs = malloc((newest->n + 1) * sizeof(*locs));
    struct history_site *known = malloc((newest->n + 1) * sizeof(*known));
    long n = 0;
    if (t == NULL || y == NULL || all == NULL || g == NULL || locs == NULL ||
        known == NULL) {
        n = -1;
        goto out;
    }
    for (uint32_t i = 0, run; i < newest->n; i += run) {
        for (run = 0; i + run < newest->n && g[i + run].group == g[i].group;
             run++)
            locs[run] = g[i + run].loc;
        n += judge_site(h, from, locs, run, known, t, y, &all[n]);
    }
    qsort(all, (size_t)n, sizeof(*all), by_growth);
    if ((size_t)n > max)
        n = (long)max;
    memcpy(out, all, (size_t)n * sizeof(*all));
out:
    free(t);
    free(y);
    free(all);
    free(g);
    free(locs);
    free(known);
    return n;
}

/* -- Trends of rows ------------------------------------------------------ */

static int by_trend_group(const void *a, const void *b)
{
    const struct history_trend *x = a, *y = b;

    return x->group < y->group ? -1 : x->group > y->group;
}

/* A group's live bytes over the frames of a window: their times and
 * bytes for the fit, and the bytes as counted, for the sparkline. */
struct live_series {
    double *t, *y;
    uint64_t *bytes;
    uint32_t n;
    double kept; /* as kept_of, from the first point to the last */
};

/* The members' live bytes over frames [from, nframes) into *v (room for
 * the frames), as judge_site sums them (known: for the members). */
static void live_series(const struct history *h, uint32_t from,
                        const uint32_t *locs, uint32_t nlocs,
                        struct history_site *known, struct live_series *v)
{
    struct history_site x, first = {0};

    v->n = 0;
    first_samples(h, from, locs, nlocs, known);
    for (uint32_t i = from; i < h->nframes; i++) {
        if (!sum_members(&h->frames[i], locs, nlocs, known, &x))
            continue;
        if (v->n == 0)
            first = x;
        v->t[v->n] = (double)h->frames[i].t_ms / 1000.0;
        v->y[v->n] = (double)x.live_bytes;
        v->bytes[v->n++] = x.live_bytes;
    }
    v->kept = v->n > 0 ? kept_of(&first, &x) : 0;
}

/* One group's trend from its series: the fit and up to nspark of its
 * points, spread evenly over them (frames are sparser further back), the
 * newest last. */
static void make_trend(struct history_trend *tr, const struct live_series *v,
                       uint32_t nspark)
{
    uint32_t n = v->n;

    history_fit(v->t, v->y, n, &tr->fit);
    tr->kept = v->kept;
    tr->nspark = n < nspark ? n : nspark;
    for (uint32_t k = 0; k < tr->nspark; k++) {
        uint32_t at =
            tr->nspark == 1
                ? n - 1
                : (uint32_t)((uint64_t)k * (n - 1) / (tr->nspark - 1));
        tr->spark[k] = v->bytes[at];
    }
}

long history_trends(const struct history *h, uint64_t now_ms,
                    uint64_t window_ms, const uint32_t *group_of,
                    uint32_t nlocs, uint32_t nspark, struct history_trend **out)
{
    const struct history_frame *newest = history_newest(h);
    uint32_t from = window_start(h, now_ms, window_ms);

    *out = NULL;
    if (newest == NULL || from == h->nframes)
        return 0;
    uint32_t points = h->nframes - from;
    if (nspark > HISTORY_SPARK_MAX)
        nspark = HISTORY_SPARK_MAX;
    /* The newest frame's sites that the caller's groups name. */
    uint32_t *group = malloc((newest->n + 1) * sizeof(*group));
    struct live_series v = {malloc(points * sizeof(double)),
                            malloc(points * sizeof(double)),
                            malloc(points * sizeof(uint64_t)), 0, 0};
    uint32_t *locs = malloc((newest->n + 1) * sizeof(*locs));
    struct history_site *known = malloc((newest->n + 1) * sizeof(*known));
    struct history_trend *all = malloc((newest->n + 1) * sizeof(*all));
    struct grouped *g = NULL;
    long n = -1;
    if (group == NULL || v.t == NULL || v.y == NULL || v.bytes == NULL ||
        locs == NULL || known == NULL || all == NULL)
        goto out;
    for (uint32_t i = 0; i < newest->n; i++)
        group[i] = newest->sites[i].loc < nlocs ? group_of[newest->sites[i].loc]
                                                : UINT32_MAX;
    if ((g = group_sites(newest, group)) == NULL)
        goto out;
    n = 0;
    for (uint32_t i = 0, run; i < newest->n; i += run) {
        for (run = 0; i + run < newest->n && g[i + run].group == g[i].group;
             run++)
            locs[run] = g[i + run].loc;
        if (g[i].group == UINT32_MAX)
            continue;
        live_series(h, from, locs, run, known, &v);
        if (v.n < 2)
            continue;
        all[n].group = g[i].group;
        make_trend(&all[n++], &v, nspark);
    }
    qsort(all, (size_t)n, sizeof(*all), by_trend_group);
    *out = all;
    all = NULL;
out:
    free(group);
    free(v.t);
    free(v.y);
    free(v.bytes);
    free(locs);
    free(known);
    free(all);
    free(g);
    return n;
}

const struct history_trend *history_trend_of(const struct history_trend *v,
                                             long n, uint32_t group)
{
    long lo = 0, hi = n;

    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (v[mid].group < group)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].group == group ? &v[lo] : NULL;
}

/* -- Choosing the tracked sites ----------------------------------------- */

/* Offers (score, loc) to a min-heap of at most cap: kept if among the top. */
static void offer(struct history_cand *heap, uint32_t *n, uint32_t cap,
                  uint64_t score, uint32_t loc)
{
    uint32_t i;

    if (cap == 0)
        return;
    if (*n < cap) {
        i = (*n)++;
        while (i > 0 && heap[(i - 1) / 2].score > score) {
            heap[i] = heap[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        heap[i] = (struct history_cand){score, loc};
        return;
    }
    if (score <= heap[0].score)
        return;
    i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap[c + 1].score < heap[c].score)
            c++;
        if (heap[c].score >= score)
            break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = (struct history_cand){score, loc};
}

static int by_loc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* A pass over every location is done: its candidates become the tracked
 * sites (sorted, each once), and the next pass begins. */
static void finish_pass(struct history *h)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < h->nby_bytes; i++)
        h->tracked[n++] = h->by_bytes[i].loc;
    for (uint32_t i = 0; i < h->nby_kept; i++)
        h->tracked[n++] = h->by_kept[i].loc;
    qsort(h->tracked, n, sizeof(*h->tracked), by_loc);
    h->ntracked = 0;
    for (uint32_t i = 0; i < n; i++)
        if (h->ntracked == 0 || h->tracked[h->ntracked - 1] != h->tracked[i])
            h->tracked[h->ntracked++] = h->tracked[i];
    h->nby_bytes = h->nby_kept = 0;
    h->scan_at = 0;
}

/* A site keeps most of what it allocates: at least 8 allocations and half
 * of them still live (a cache, a leak, or a young site not yet swept). */
static int keeps_blocks(uint64_t live_blocks, uint64_t allocs)
{
    return allocs >= 8 && live_blocks * 2 >= allocs;
}

/* Scores the next slice of locations: live bytes, and live bytes of those
 * that keep what they allocate (so that a small leak beside big transient
 * sites is tracked). */
static void scan_slice(struct history *h, const struct lm_state *st)
{
    uint32_t end = st->nlocs - h->scan_at > HISTORY_SCAN_PER_TICK
                       ? h->scan_at + HISTORY_SCAN_PER_TICK
                       : st->nlocs;

    for (uint32_t i = h->scan_at; i < end; i++) {
        const struct lm_heap_side *side = &st->sides[i];
        if (side->live_bytes == 0)
            continue;
        offer(h->by_bytes, &h->nby_bytes, bytes_half(h), side->live_bytes, i);
        if (keeps_blocks(side->live_blocks, st->locs[i].ev.alloc_events))
            offer(h->by_kept, &h->nby_kept, kept_half(h), side->live_bytes, i);
    }
    h->scan_at = end;
    if (end >= st->nlocs)
        finish_pass(h);
}

/* The tracked sites' counters now, into out (room for them all). */
static void read_sites(const struct history *h, const struct lm_state *st,
                       struct history_site *out)
{
    for (uint32_t i = 0; i < h->ntracked; i++) {
        uint32_t loc = h->tracked[i];
        const struct lm_heap_side *side = &st->sides[loc];
        const struct lm_event_counters *ev = &st->locs[loc].ev;
        uint64_t made = ev->alloc_events + ev->realloc_events;
        out[i] = (struct history_site){
            loc, side->live_bytes, side->live_blocks, ev->alloc_events,
            made > side->live_blocks ? made - side->live_blocks : 0};
    }
}

static void take_frame(struct history *h, const struct lm_state *st,
                       uint64_t now)
{
    struct history_site *sites = malloc((h->ntracked + 1) * sizeof(*sites));

    if (sites == NULL)
        return;
    read_sites(h, st, sites);
    if (history_add_frame(h, now, sites, h->ntracked) == 0)
        h->frames[h->nframes - 1].live_bytes = st->totals.live_bytes;
    free(sites);
}

void history_sample(struct history *h, const struct lm_state *st, uint64_t now)
{
    const struct lm_totals *c = &st->totals;
    struct history_totals t = {
        now,
        c->live_bytes,
        c->live_blocks,
        c->alloc_bytes,
        c->alloc_events + c->realloc_events,
        c->freed_bytes,
        c->free_events,
    };

    history_add_totals(h, &t);
    scan_slice(h, st);
    if (h->ntracked > 0 && now >= h->next_frame_ms)
        take_frame(h, st, now);
    if (t.live_bytes > h->peak_totals.live_bytes) {
        h->peak_totals = t;
        h->peak.t_ms = now;
        read_sites(h, st, h->peak.sites);
        for (uint32_t i = 0; i < h->ntracked; i++)
            lm_diff_counts_at(st, h->tracked[i], &h->peak_counts[i]);
        h->peak.n = h->ntracked;
    }
}

/* -- Sessions ------------------------------------------------------------ */

struct history *history_of(const struct session *s)
{
    return *session_slot(s, &history_observer);
}

/* s's history's bytes in its memory, charged to its user. */
static void charge(struct session *s, const struct history *h)
{
    s->mem_history = h != NULL ? history_memory(h) : 0;
    budget_charge(s);
}

/* The bound of s's history: --history-memory, but no more than an eighth
 * of what s may hold in all (a small --session-memory is for its state). */
static struct history_limits limits_of(const struct session *s)
{
    const struct config *cfg = &s->srv->cfg;
    struct history_limits lim = {(uint64_t)cfg->history_span_s * 1000,
                                 cfg->history_memory, cfg->history_sites};
    uint64_t eighth = s->mem_budget / 8;

    if (s->mem_budget > 0 && eighth < lim.max_bytes)
        lim.max_bytes = eighth;
    return lim;
}

static void history_started(struct session *s, void *arg)
{
    void **slot = session_slot(s, &history_observer);
    struct history_limits lim = limits_of(s);

    (void)arg;
    *slot = history_new(&lim);
    charge(s, *slot);
}

static void history_freed(struct session *s, void *arg)
{
    void **slot = session_slot(s, &history_observer);

    (void)arg;
    history_free(*slot);
    *slot = NULL;
    s->mem_history = 0;
}

const struct session_observer history_observer = {
    .started = history_started,
    .freed = history_freed,
};

/* Samples s under its lock and charges what its history grew by. */
static void sample_locked(struct session *s, struct history *h, uint64_t now)
{
    history_sample(h, &s->prof.state, now);
    session_unlock(s);
    charge(s, h);
}

/* Tries to sample each session a feed thread held at the tick, 20 ms
 * later, a few times: its job (a few milliseconds) is usually done by
 * then.  The loop never waits for a job; a session still held after the
 * last try has no point this tick.  1 if some are to be tried again. */
static int retry_held(struct server *srv, uint64_t now)
{
    struct session *s;
    int again = 0;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        struct history *h = history_of(s);
        if (h == NULL || h->retry == 0)
            continue;
        if (s->phase == SESSION_ENDED) {
            h->retry = 0; /* the tick takes its last sample */
        } else if (session_trylock(s) == 0) {
            h->retry = 0;
            sample_locked(s, h, now);
        } else if (++h->retry > HISTORY_TRIES) {
            h->retry = 0;
            h->skipped++;
        } else {
            again = 1;
        }
    }
    return again;
}

static void schedule_retry(struct server *srv);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    (void)fd;
    (void)what;
    if (retry_held(srv, clock_now_ms()))
        schedule_retry(srv);
}

/* The next try in 20 ms; none if out of memory (the next tick samples). */
static void schedule_retry(struct server *srv)
{
    static const struct timeval soon = {0, 20000};

    if (srv->base != NULL)
        (void)event_base_once(srv->base, -1, EV_TIMEOUT, on_retry, srv, &soon);
}

/* Samples s unless a feed thread holds it now (then retry_held does); an
 * ended session once more, when its state stands still, and then no
 * longer.  1 if s is to be tried again. */
static int tick_session(struct session *s, struct history *h, uint64_t now)
{
    if (s->phase == SESSION_HELLO || h->final_taken)
        return 0;
    if (s->phase == SESSION_ENDED) {
        if (!session_still(s))
            return 0;
        history_sample(h, &s->prof.state, now);
        h->final_taken = 1;
        charge(s, h);
        return 0;
    }
    if (session_trylock(s) != 0) {
        h->retry = 1;
        return 1;
    }
    sample_locked(s, h, now);
    return 0;
}

void history_tick(struct server *srv, uint64_t now)
{
    struct session *s;
    int held = 0;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        struct history *h = history_of(s);
        if (h != NULL)
            held |= tick_session(s, h, now);
    }
    if (held)
        schedule_retry(srv);
}
