/* A chart's series from a session's history: the sites that held the most
 * live bytes over a window's frames, and their live bytes at each frame. */
#include <stdlib.h>
#include <string.h>

#include "series.h"

static int by_loc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

int series_union(const struct history *h, uint32_t from,
                 struct history_frame *u)
{
    size_t all = 0, n = 0;

    memset(u, 0, sizeof(*u));
    for (uint32_t i = from; i < h->nframes; i++)
        all += h->frames[i].n;
    uint32_t *locs = malloc((all + 1) * sizeof(*locs));
    if (locs == NULL)
        return -1;
    for (uint32_t i = from; i < h->nframes; i++)
        for (uint32_t j = 0; j < h->frames[i].n; j++)
            locs[n++] = h->frames[i].sites[j].loc;
    qsort(locs, n, sizeof(*locs), by_loc);
    u->sites = calloc(n + 1, sizeof(*u->sites));
    if (u->sites == NULL) {
        free(locs);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (u->n == 0 || u->sites[u->n - 1].loc != locs[i])
            u->sites[u->n++].loc = locs[i];
    if (from < h->nframes)
        u->t_ms = h->frames[h->nframes - 1].t_ms;
    free(locs);
    return 0;
}

/* The index of loc among u's sites (it is one of them). */
static uint32_t index_in(const struct history_frame *u, uint32_t loc)
{
    return (uint32_t)(history_find_site(u, loc) - u->sites);
}

/* What series_build needs besides its output, freed together. */
struct build_scratch {
    uint64_t *peak;      /* per group: its most live bytes at a frame */
    uint64_t *sum;       /* per group: its bytes at the frame at hand */
    uint32_t *series_of; /* per group: its series, or UINT32_MAX */
    struct ranked {
        uint64_t peak;
        uint32_t group;
    } * order; /* groups by peak */
};

static void scratch_free(struct build_scratch *s)
{
    free(s->peak);
    free(s->sum);
    free(s->series_of);
    free(s->order);
}

static int scratch_alloc(struct build_scratch *s, uint32_t ngroups)
{
    s->peak = calloc(ngroups + 1, sizeof(*s->peak));
    s->sum = calloc(ngroups + 1, sizeof(*s->sum));
    s->series_of = malloc((ngroups + 1) * sizeof(*s->series_of));
    s->order = malloc((ngroups + 1) * sizeof(*s->order));
    if (s->peak && s->sum && s->series_of && s->order)
        return 0;
    scratch_free(s);
    return -1;
}

/* Each group's most live bytes at one frame, into s->peak: a frame's
 * locations of a group summed first, then compared. */
static void find_peaks(const struct history *h, uint32_t from,
                       const struct history_frame *u, const uint32_t *group,
                       struct build_scratch *s)
{
    for (uint32_t i = from; i < h->nframes; i++) {
        const struct history_frame *f = &h->frames[i];
        for (uint32_t j = 0; j < f->n; j++)
            s->sum[group[index_in(u, f->sites[j].loc)]] +=
                f->sites[j].live_bytes;
        for (uint32_t j = 0; j < f->n; j++) {
            uint32_t g = group[index_in(u, f->sites[j].loc)];
            if (s->sum[g] > s->peak[g])
                s->peak[g] = s->sum[g];
            s->sum[g] = 0;
        }
    }
}

static int by_peak(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;

    if (x->peak != y->peak)
        return x->peak > y->peak ? -1 : 1;
    return x->group < y->group ? -1 : x->group > y->group;
}

/* The most groups of highest peak (above 0) become series 0, 1, ...:
 * s->series_of says whose; returns how many. */
static uint32_t choose(struct build_scratch *s, uint32_t ngroups, uint32_t most)
{
    uint32_t n = 0;

    for (uint32_t g = 0; g < ngroups; g++) {
        s->series_of[g] = UINT32_MAX;
        if (s->peak[g] > 0)
            s->order[n++] = (struct ranked){s->peak[g], g};
    }
    qsort(s->order, n, sizeof(*s->order), by_peak);
    if (n > most)
        n = most;
    for (uint32_t i = 0; i < n; i++)
        s->series_of[s->order[i].group] = i;
    return n;
}

/* The chosen series' bytes at each frame, their members and sizes. */
static void fill(const struct history *h, uint32_t from,
                 const struct history_frame *u, const uint32_t *group,
                 const struct build_scratch *s, struct series_set *out)
{
    for (uint32_t i = from; i < h->nframes; i++) {
        const struct history_frame *f = &h->frames[i];
        for (uint32_t j = 0; j < f->n; j++) {
            uint32_t k = s->series_of[group[index_in(u, f->sites[j].loc)]];
            if (k != UINT32_MAX)
                out->bytes[(size_t)k * out->nframes + (i - from)] +=
                    f->sites[j].live_bytes;
        }
    }
    for (uint32_t i = u->n; i-- > 0;) {
        uint32_t k = s->series_of[group[i]];
        if (k == UINT32_MAX)
            continue;
        out->member[k] = i; /* the first of its locations, at the end */
        out->sites[k]++;
    }
}

int series_build(const struct history *h, uint32_t from,
                 const struct history_frame *u, const uint32_t *group,
                 uint32_t ngroups, uint32_t most, struct series_set *out)
{
    struct build_scratch s;

    memset(out, 0, sizeof(*out));
    out->nframes = from < h->nframes ? h->nframes - from : 0;
    if (scratch_alloc(&s, ngroups) != 0)
        return -1;
    find_peaks(h, from, u, group, &s);
    out->n = choose(&s, ngroups, most);
    out->member = calloc(out->n + 1, sizeof(*out->member));
    out->sites = calloc(out->n + 1, sizeof(*out->sites));
    out->bytes = calloc((size_t)out->n * out->nframes + 1, sizeof(*out->bytes));
    if (out->member == NULL || out->sites == NULL || out->bytes == NULL) {
        scratch_free(&s);
        series_set_free(out);
        return -1;
    }
    fill(h, from, u, group, &s, out);
    scratch_free(&s);
    return 0;
}

void series_set_free(struct series_set *s)
{
    free(s->member);
    free(s->sites);
    free(s->bytes);
    memset(s, 0, sizeof(*s));
}
