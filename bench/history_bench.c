/* What a session's history costs ljmpd's loop: a tick, a leaks answer and a
 * snapshot's row trends, at a million locations (bench/README.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "history.h"
#include "lm_state.h"

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
    free(tick);
    free(group_of);
    free(st.locs);
    free(st.sides);
    history_free(h);
    return 0;
}
