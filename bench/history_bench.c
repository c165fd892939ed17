/* What the time dimension costs ljmpd's loop at a million locations: a
 * history's tick, leaks, a snapshot's row trends, a mark and a diff. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diff.h"
#include "history.h"
#include "lm_groups.h"
#include "lm_state.h"
#include "marks.h"

#define SECOND 1000ull

/* The thread's CPU time: what the loop spends, whoever else runs. */
static double seconds_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A state of n locations made by hand, each holding some transient bytes
 * (what history_sample reads); 0, or -1 out of memory. */
static int state_of(struct lm_state *st, uint32_t n)
{
    memset(st, 0, sizeof(*st));
    st->nlocs = n;
    st->locs = aligned_alloc(128, (size_t)n * sizeof(*st->locs));
    st->sides = aligned_alloc(64, (size_t)n * sizeof(*st->sides));
    if (st->locs == NULL || st->sides == NULL)
        return -1;
    memset(st->locs, 0, (size_t)n * sizeof(*st->locs));
    memset(st->sides, 0, (size_t)n * sizeof(*st->sides));
    for (uint32_t i = 0; i < n; i++) {
        uint64_t live = 1000 + i % 977;
        st->sides[i].live_bytes = live;
        st->sides[i].live_blocks = live / 100;
        st->locs[i].ev.alloc_events = live;
    }
    return 0;
}

/* The sites' live bytes move a little each second, some up, some down. */
static void age(struct lm_state *st, uint64_t sec)
{
    for (uint32_t i = 0; i < st->nlocs; i += 7) {
        st->sides[i].live_bytes += i % 3 == 0 ? 64 : (sec % 2) * 32;
        st->locs[i].ev.alloc_events += 2;
    }
}

/* The median of v (n of them, sorted in place). */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* A mark of st and a diff from it to st a little later, as ljmpd makes
 * them for `ljmpctl mark` and `diff MARK now`: 100 k names over st's
 * locations, the top 20 by growth.  Returns -1 out of memory. */
static int mark_and_diff(struct lm_state *st)
{
    enum { NAMES = 100000 };
    struct lm_groups g = {0};
    char(*names)[16] = malloc((size_t)NAMES * sizeof(*names));
    struct mark *m = calloc(1, sizeof(*m));
    int rc = -1;

    g.v = calloc(NAMES, sizeof(*g.v));
    g.group_of = malloc((size_t)st->nlocs * sizeof(*g.group_of));
    if (names == NULL || m == NULL || g.v == NULL || g.group_of == NULL)
        goto out;
    for (uint32_t i = 0; i < NAMES; i++) {
        snprintf(names[i], sizeof(names[i]), "@app.lua:%u", i);
        g.v[i].name = names[i];
    }
    g.n = NAMES;
    g.nlocs = st->nlocs;
    for (uint32_t i = 0; i < st->nlocs; i++)
        g.group_of[i] = (uint32_t)(((uint64_t)i * 2654435761u) % NAMES);
    double t0 = seconds_now();
    if (marks_pack(st, UINT64_MAX / 2, m) != 0)
        goto out;
    double pack = seconds_now() - t0;
    for (uint32_t i = 0; i < st->nlocs; i += 3)
        st->sides[i].live_blocks++;
    struct diff_end from = {DIFF_END_MARK, m, NULL, NULL};
    struct diff_end now = {DIFF_END_NOW, NULL, NULL, st};
    struct diff_sums d = {0};
    struct lm_diff_row rows[20], total;
    struct lm_diff_top top = {rows, 0, 20, LM_DIFF_GROWTH};
    t0 = seconds_now();
    if (diff_sum_ends(&g, &from, &now, &d) != 0)
        goto out;
    (void)diff_top(&g, &d, &top, &total);
    (void)lm_diff_top_finish(&top);
    double diff = seconds_now() - t0;
    diff_sums_free(&d);
    printf("a mark %.1f ms, %zu B (%.1f B a location); a diff from it to now "
           "over %u names %.1f ms\n",
           pack * 1e3, m->len, (double)m->len / (m->nsites ? m->nsites : 1),
           NAMES, diff * 1e3);
    rc = 0;
out:
    mark_free(m);
    free(g.v);
    free(g.group_of);
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1u << 20;
    uint32_t seconds = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 600;
    struct history_limits lim = {3600 * SECOND, 1u << 20, 256};
    struct history *h = history_new(&lim);
    struct lm_state st;

    if (h == NULL || state_of(&st, n) != 0 || seconds < 2) {
        fprintf(stderr, "usage: ljmpd-history-bench [LOCATIONS [SECONDS]] "
                        "(out of memory, or fewer than 2 seconds)\n");
        return 1;
    }
    /* A tick a second on an injected clock: the scan's slice, the
     * totals, and a frame of the tracked sites when one is due. */
    double *tick = malloc(seconds * sizeof(*tick)), worst = 0;
    if (tick == NULL)
        return 1;
    for (uint32_t k = 0; k < seconds; k++) {
        age(&st, k);
        double a = seconds_now();
        history_sample(h, &st, (k + 1) * SECOND);
        tick[k] = seconds_now() - a;
        worst = tick[k] > worst ? tick[k] : worst;
    }
    uint64_t now = seconds * SECOND;
    /* A leaks answer and a snapshot part's row trends (each location its
     * own row, 16 sparkline points) over top's default window. */
    struct history_suspect s[20];
    uint32_t points, *group_of = malloc((size_t)n * sizeof(*group_of));
    struct history_trend *trends;
    double q[9], t[9];
    long ntrends = 0;
    if (group_of == NULL)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        group_of[i] = i;
    for (int r = 0; r < 9; r++) {
        double a = seconds_now();
        (void)history_leaks(h, now, 300 * SECOND, NULL, s, 20, &points);
        q[r] = seconds_now() - a;
        a = seconds_now();
        ntrends =
            history_trends(h, now, 300 * SECOND, group_of, n, 16, &trends);
        t[r] = seconds_now() - a;
        free(trends);
    }
    printf("%u locations, %u ticks (CPU time): a tick %.3f ms median, %.3f "
           "ms worst "
           "(%u locations scanned a tick); %u sites tracked, %u frames in "
           "the last 300 s; leaks %.3f ms, row trends %.3f ms (%ld rows), "
           "medians of 9; the history holds %llu B\n",
           n, seconds, median(tick, seconds) * 1e3, worst * 1e3,
           HISTORY_SCAN_PER_TICK, h->ntracked, points, median(q, 9) * 1e3,
           median(t, 9) * 1e3, ntrends, (unsigned long long)history_memory(h));
    if (mark_and_diff(&st) != 0)
        return 1;
    free(tick);
    free(group_of);
    free(st.locs);
    free(st.sides);
    history_free(h);
    return 0;
}
