/* Diffs of per-site counters: a site's change, ranking, sums, matching. */
#include "lm_diff.h"

#include <stdlib.h>
#include <string.h>

void lm_diff_counts_of(const struct lm_counters *c, struct lm_diff_counts *out)
{
    out->live_bytes = c->live_bytes;
    out->live_blocks = c->live_blocks;
    /* A realloc makes a new block at its site, as an alloc does: the
     * live views count both (Location.alloc_bytes and the totals). */
    out->allocs = c->alloc_events + c->realloc_events;
    out->alloc_bytes = c->alloc_bytes + c->realloc_new_bytes;
    out->frees = c->free_events;
}

void lm_diff_counts_at(const struct lm_state *s, uint32_t loc,
                       struct lm_diff_counts *out)
{
    struct lm_counters c;

    lm_state_counters(s, loc, &c);
    lm_diff_counts_of(&c, out);
}

int64_t lm_diff_delta(uint64_t from, uint64_t to)
{
    if (to >= from)
        return to - from > (uint64_t)INT64_MAX ? INT64_MAX
                                               : (int64_t)(to - from);
    return from - to > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)(from - to);
}

int lm_diff_changed(const struct lm_diff_row *r)
{
    return memcmp(&r->from, &r->to, sizeof(r->from)) != 0;
}

static int cmp_signed(int64_t x, int64_t y)
{
    return (x > y) - (x < y);
}

static uint64_t magnitude(int64_t d)
{
    return d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
}

/* Compares the rows' keys: above 0 if a's is bigger. */
static int cmp_key(const struct lm_diff_row *a, const struct lm_diff_row *b,
                   enum lm_diff_key key)
{
#define DELTA(r, f) lm_diff_delta((r)->from.f, (r)->to.f)
    switch (key) {
    case LM_DIFF_CHANGE: {
        uint64_t x = magnitude(DELTA(a, live_bytes));
        uint64_t y = magnitude(DELTA(b, live_bytes));
        return (x > y) - (x < y);
    }
    case LM_DIFF_BLOCKS:
        return cmp_signed(DELTA(a, live_blocks), DELTA(b, live_blocks));
    case LM_DIFF_ALLOCS:
        return cmp_signed(DELTA(a, allocs), DELTA(b, allocs));
    case LM_DIFF_ALLOC_BYTES:
        return cmp_signed(DELTA(a, alloc_bytes), DELTA(b, alloc_bytes));
    case LM_DIFF_GROWTH:
    default:
        return cmp_signed(DELTA(a, live_bytes), DELTA(b, live_bytes));
    }
#undef DELTA
}

/* Whether a ranks before b: a bigger key, or the same and a smaller name
 * (so that a diff prints the same way each time). */
static int ranks_before(const struct lm_diff_row *a,
                        const struct lm_diff_row *b, enum lm_diff_key key)
{
    int c = cmp_key(a, b, key);

    if (c != 0)
        return c > 0;
    return strcmp(a->name ? a->name : "", b->name ? b->name : "") < 0;
}

static void swap_rows(struct lm_diff_row *a, struct lm_diff_row *b)
{
    struct lm_diff_row t = *a;

    *a = *b;
    *b = t;
}

/* Sifts rows[i] down a heap of n whose root ranks last. */
static void sift_down(struct lm_diff_row *rows, size_t n, size_t i,
                      enum lm_diff_key key)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && ranks_before(&rows[c], &rows[c + 1], key))
            c++;
        if (!ranks_before(&rows[i], &rows[c], key))
            return;
        swap_rows(&rows[i], &rows[c]);
        i = c;
    }
}

/* Heap sort of a heap of n whose root ranks last: biggest first. */
static void sort_heap(struct lm_diff_row *rows, size_t n, enum lm_diff_key key)
{
    for (size_t end = n; end > 1; end--) {
        swap_rows(&rows[0], &rows[end - 1]);
        sift_down(rows, end - 1, 0, key);
    }
}

void lm_diff_top_offer(struct lm_diff_top *t, const struct lm_diff_row *r)
{
    if (t->n < t->most) {
        size_t i = t->n++;
        /* Up while it ranks after its parent: the root ranks last. */
        while (i > 0 && ranks_before(&t->v[(i - 1) / 2], r, t->key)) {
            t->v[i] = t->v[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        t->v[i] = *r;
    } else if (t->most > 0 && ranks_before(r, &t->v[0], t->key)) {
        t->v[0] = *r;
        sift_down(t->v, t->n, 0, t->key);
    }
}

size_t lm_diff_top_finish(struct lm_diff_top *t)
{
    sort_heap(t->v, t->n, t->key);
    return t->n;
}

size_t lm_diff_rank(struct lm_diff_row *rows, size_t n, enum lm_diff_key key,
                    size_t most)
{
    if (most > n)
        most = n;
    if (most == 0)
        return 0;
    /* The front holds the best so far, the one that ranks last on top. */
    for (size_t i = most / 2; i-- > 0;)
        sift_down(rows, most, i, key);
    for (size_t i = most; i < n; i++) {
        if (!ranks_before(&rows[i], &rows[0], key))
            continue;
        swap_rows(&rows[i], &rows[0]);
        sift_down(rows, most, 0, key);
    }
    sort_heap(rows, most, key);
    return most;
}

void lm_diff_total(const struct lm_diff_row *rows, size_t n,
                   struct lm_diff_row *total)
{
    memset(total, 0, sizeof(*total));
    for (size_t i = 0; i < n; i++) {
        lm_diff_counts_add(&total->from, &rows[i].from);
        lm_diff_counts_add(&total->to, &rows[i].to);
        total->sites += rows[i].sites;
    }
}

static int by_name(const void *a, const void *b)
{
    const struct lm_diff_site *x = a, *y = b;

    return strcmp(x->name, y->name);
}

size_t lm_diff_match(struct lm_diff_site *a, size_t na, struct lm_diff_site *b,
                     size_t nb, struct lm_diff_row *out)
{
    size_t i = 0, j = 0, n = 0;

    qsort(a, na, sizeof(*a), by_name);
    qsort(b, nb, sizeof(*b), by_name);
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(a[i].name, b[j].name);
        struct lm_diff_row *r = &out[n++];
        memset(r, 0, sizeof(*r));
        if (c <= 0) {
            r->name = a[i].name;
            r->sites = a[i].sites;
            r->from = a[i++].c;
        }
        if (c >= 0) {
            r->name = b[j].name;
            r->sites = r->sites > b[j].sites ? r->sites : b[j].sites;
            r->to = b[j++].c;
        }
    }
    return n;
}
