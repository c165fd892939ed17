/* Sessions' histories without a daemon: the bound and the span on an
 * injected clock, thinning, the tracked sites, the peak and the leak rule. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "session.h"
#include "lm_state.h"
#include "test_units.h"

#define SECOND 1000ull

/* A frame of k sites at t: site 0 keeps a block a second, its live bytes
 * growing with t; the others' saw up and down. */
static void add_frame_at(struct history *h, uint64_t t, uint32_t k)
{
    struct history_site *v = calloc(k, sizeof(*v));

    for (uint32_t i = 0; i < k; i++)
        v[i] = i == 0 ? (struct history_site){0, t, t / 1000, t / 1000, 0}
                      : (struct history_site){i * 3, (t / 1000) % 7 * 100, 1, t,
                                              0};
    CU_ASSERT_EQUAL(history_add_frame(h, t, v, k), 0);
    free(v);
}

/*
 * Three hours at one tick a second against a one-hour span and a small
 * bound: the history never holds more than its bound, never a point older
 * than the span, and when it fills, older points are thinned (no more than
 * half of them go at once), the newest kept at full resolution.
 */
static void test_bound_and_span(void)
{
    struct history_limits lim = {3600 * SECOND, 256u << 10, 64};
    struct history *h = history_new(&lim);
    uint32_t most_frames = 0, thinned_at = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    for (uint64_t t = SECOND; t <= 3 * 3600 * SECOND; t += SECOND) {
        struct history_totals tot = {.t_ms = t, .live_bytes = t};
        uint32_t before = h->ntotals, frames_before = h->nframes;
        history_add_totals(h, &tot);
        if (t >= h->next_frame_ms)
            add_frame_at(h, t, lim.max_sites);
        CU_ASSERT(history_memory(h) <= lim.max_bytes);
        CU_ASSERT(h->totals[0].t_ms + lim.span_ms >= t);
        CU_ASSERT(h->frames[0].t_ms + lim.span_ms + h->step_ms >= t);
        CU_ASSERT(h->ntotals + 1 >= before / 2);
        CU_ASSERT(h->nframes + 1 >= frames_before / 2);
        CU_ASSERT_EQUAL(h->totals[h->ntotals - 1].t_ms, t);
        if (h->thinnings > 0 && thinned_at == 0)
            thinned_at = (uint32_t)(t / SECOND);
        if (h->nframes > most_frames)
            most_frames = h->nframes;
    }
    /* It filled and was thinned, well before the span's end. */
    CU_ASSERT(thinned_at > 0 && thinned_at < 3600);
    CU_ASSERT(h->step_ms == HISTORY_COARSE_STEP_MS);
    uint64_t now = 3 * 3600 * SECOND;
    /* After three hours the frames still reach most of the span back
     * (the oldest are the sparsest: each thinning halves the older half),
     * the totals nearly all of it. */
    CU_ASSERT(now - h->frames[0].t_ms > 2400 * SECOND);
    CU_ASSERT(now - h->totals[0].t_ms > 3000 * SECOND);
    /* The newest totals are a second apart, the oldest further. */
    CU_ASSERT_EQUAL(h->totals[h->ntotals - 1].t_ms -
                        h->totals[h->ntotals - 2].t_ms,
                    SECOND);
    CU_ASSERT(h->totals[1].t_ms - h->totals[0].t_ms > SECOND);
    /* The growing site is still found a suspect over the last ten minutes
     * and the sawing ones are not. */
    struct history_suspect s[8];
    uint32_t points;
    long n = history_leaks(h, now, 600 * SECOND, NULL, s, 8, &points);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT(points >= HISTORY_MIN_POINTS);
    if (n >= 1)
        CU_ASSERT_EQUAL(s[0].loc, 0);
    printf("\n    bound %llu B: %u totals, %u frames (at most %u), "
           "first thinned at %u s, %llu thinnings, %llu B held, frames "
           "from %llu s back ",
           (unsigned long long)lim.max_bytes, h->ntotals, h->nframes,
           most_frames, thinned_at, (unsigned long long)h->thinnings,
           (unsigned long long)history_memory(h),
           (unsigned long long)((now - h->frames[0].t_ms) / SECOND));
    history_free(h);
}

/* Fits one series given as bytes at one point a second. */
static void fit(const double *y, uint32_t n, struct history_fit *f)
{
    double t[64];

    for (uint32_t i = 0; i < n; i++)
        t[i] = i;
    history_fit(t, y, n, f);
}

static void test_leak_rule(void)
{
    struct history_fit f;
    /* Grows every step, by uneven amounts: a leak, however small. */
    double grows[] = {100, 112, 130, 135, 150, 171, 180, 195};
    fit(grows, 8, &f);
    CU_ASSERT(f.slope_per_s > 0);
    CU_ASSERT(f.r2 > 0.95);
    CU_ASSERT_DOUBLE_EQUAL(f.rising, 1.0, 1e-9);
    CU_ASSERT(history_is_suspect(&f, grows[0], grows[7], 1));
    /* Grows steadily while keeping a twentieth of the blocks it
     * allocates: garbage swept by a collector whose cycles lengthen as
     * the heap grows, not a leak. */
    CU_ASSERT_FALSE(history_is_suspect(&f, grows[0], grows[7], 0.05));
    /* Keeping a third (a kept object and two temporaries a line): one. */
    CU_ASSERT(history_is_suspect(&f, grows[0], grows[7], 0.34));
    /* Grows with one dip in eight steps: still one. */
    double dips[] = {100, 120, 140, 135, 160, 180, 200, 220, 240};
    fit(dips, 9, &f);
    CU_ASSERT(history_is_suspect(&f, dips[0], dips[8], 1));
    /* A sawtooth (garbage swept each cycle): not one. */
    double saw[] = {0, 500, 1000, 0, 500, 1000, 0, 500, 1000, 0};
    fit(saw, 10, &f);
    CU_ASSERT_FALSE(history_is_suspect(&f, saw[0], saw[9], 1));
    /* A sawtooth whose peaks grow with the heap: not one either. */
    double rising_saw[] = {0, 600, 1200, 100, 800, 1500, 200, 1000, 1800};
    fit(rising_saw, 9, &f);
    CU_ASSERT(f.slope_per_s > 0);
    CU_ASSERT_FALSE(history_is_suspect(&f, rising_saw[0], rising_saw[8], 1));
    /* Flat: not one. */
    double flat[] = {300, 300, 300, 300, 300, 300};
    fit(flat, 6, &f);
    CU_ASSERT_FALSE(history_is_suspect(&f, flat[0], flat[5], 1));
    /* Too few points: not yet. */
    fit(grows, HISTORY_MIN_POINTS - 1, &f);
    CU_ASSERT_FALSE(history_is_suspect(&f, grows[0], grows[3], 1));
    /* A cache filled once, then steady: not one over a window after. */
    double filled[] = {1000, 1000, 1000, 1000, 1000, 1000, 1000};
    fit(filled, 7, &f);
    CU_ASSERT_FALSE(history_is_suspect(&f, filled[0], filled[6], 1));
}

/* A state of n locations made by hand: what history_sample reads. */
static void state_of(struct lm_state *st, uint32_t n)
{
    memset(st, 0, sizeof(*st));
    st->nlocs = n;
    st->locs = aligned_alloc(128, (size_t)n * sizeof(*st->locs));
    st->sides = aligned_alloc(64, (size_t)n * sizeof(*st->sides));
    CU_ASSERT_PTR_NOT_NULL_FATAL(st->locs);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st->sides);
    memset(st->locs, 0, (size_t)n * sizeof(*st->locs));
    memset(st->sides, 0, (size_t)n * sizeof(*st->sides));
}

static void state_free(struct lm_state *st)
{
    free(st->locs);
    free(st->sides);
}

/* Transient sites: big live bytes, a hundredth of their allocations live. */
static void transient(struct lm_state *st, uint32_t i, uint64_t live)
{
    st->sides[i].live_bytes = live;
    st->sides[i].live_blocks = live / 100;
    st->locs[i].ev.alloc_events = live;
}

/*
 * A small site that keeps every block it allocates is tracked beside
 * hundreds of transient sites a thousand times bigger, sampled, found a
 * suspect while they saw up and down, and its state kept at the peak.
 */
static void test_tracked_sites_and_peak(void)
{
    struct history_limits lim = {3600 * SECOND, 1u << 20, 16};
    struct history *h = history_new(&lim);
    struct lm_state st;
    enum { N = 2000, SMALL = 1234 };

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    state_of(&st, N);
    for (uint64_t sec = 1; sec <= 20; sec++) {
        for (uint32_t i = 0; i < N; i++)
            transient(&st, i, 100000 + (sec % 3) * 50000 + i);
        st.sides[SMALL] = (struct lm_heap_side){.live_bytes = 64 * sec,
                                                .live_blocks = 10 + sec};
        st.locs[SMALL].ev.alloc_events = 10 + sec;
        st.totals.live_bytes = sec == 10 ? ~0ull >> 1 : sec;
        history_sample(h, &st, sec * SECOND);
    }
    /* Tracked: half the sites by live bytes, and the small keeper. */
    CU_ASSERT_EQUAL(h->ntracked, 9);
    int found = 0;
    for (uint32_t i = 0; i < h->ntracked; i++)
        found |= h->tracked[i] == SMALL;
    CU_ASSERT(found);
    CU_ASSERT_EQUAL(h->nframes, 20);
    struct history_suspect s[4];
    uint32_t points;
    long n = history_leaks(h, 20 * SECOND, 60 * SECOND, NULL, s, 4, &points);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) {
        CU_ASSERT_EQUAL(s[0].loc, SMALL);
        CU_ASSERT_DOUBLE_EQUAL(s[0].fit.slope_per_s, 64, 1e-6);
        CU_ASSERT_EQUAL(s[0].window_allocs, 19);
    }
    /* The peak: second 10, with the small site's 640 bytes then. */
    CU_ASSERT_EQUAL(h->peak.t_ms, 10 * SECOND);
    CU_ASSERT_EQUAL(h->peak.n, h->ntracked);
    for (uint32_t i = 0; i < h->peak.n; i++)
        if (h->peak.sites[i].loc == SMALL)
            CU_ASSERT_EQUAL(h->peak.sites[i].live_bytes, 640);
    state_free(&st);
    history_free(h);
}

/* Locations of one name (a line in and out of compiled code) are one
 * suspect: their live bytes summed, the sites counted. */
static void test_locations_of_one_name(void)
{
    struct history_limits lim = {3600 * SECOND, 1u << 20, 8};
    struct history *h = history_new(&lim);
    const uint32_t group[] = {0, 1, 0};

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    for (uint64_t sec = 1; sec <= 8; sec++) {
        /* Locations 4 and 9 grow by 10 and 30 bytes a second; 6 saws. */
        struct history_site v[] = {{4, 10 * sec, sec, sec, 0},
                                   {6, sec % 2 * 1000, 1, sec, 0},
                                   {9, 30 * sec, sec, 2 * sec, 0}};
        CU_ASSERT_EQUAL(history_add_frame(h, sec * SECOND, v, 3), 0);
    }
    struct history_suspect s[4];
    uint32_t points;
    long n = history_leaks(h, 8 * SECOND, 60 * SECOND, group, s, 4, &points);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(points, 8);
    if (n == 1) {
        CU_ASSERT_EQUAL(s[0].sites, 2);
        CU_ASSERT_DOUBLE_EQUAL(s[0].fit.slope_per_s, 40, 1e-6);
        CU_ASSERT_EQUAL(s[0].now.live_bytes, 320);
        CU_ASSERT_EQUAL(s[0].window_allocs, 21);
    }
    /* Each its own: two suspects, the faster first. */
    n = history_leaks(h, 8 * SECOND, 60 * SECOND, NULL, s, 4, &points);
    CU_ASSERT_EQUAL(n, 2);
    if (n == 2) {
        CU_ASSERT_EQUAL(s[0].loc, 9);
        CU_ASSERT_EQUAL(s[1].loc, 4);
    }
    history_free(h);
}

/*
 * Rows' trends for top's GROWTH/MIN and HISTORY: locations mapped to rows
 * (a location past the map's end has none), their live bytes summed per
 * row over the window only, the slope of each, what share of its
 * allocations each kept, and the points spread over the window with the
 * newest last.
 */
static void test_trends_of_rows(void)
{
    struct history_limits lim = {3600 * SECOND, 1u << 20, 8};
    struct history *h = history_new(&lim);
    /* Locations 4 and 9 are row 7; 6 is row 2; 10 and 11 are row 5; 12 is
     * past the map. */
    const uint32_t group_of[12] = {
        [4] = 7, [6] = 2, [9] = 7, [10] = 5, [11] = 5};

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    for (uint64_t sec = 1; sec <= 20; sec++) {
        /* 4 and 9 keep every block they make, 10 and 30 bytes a second
         * (flat before second 11, outside the window asked below); 6
         * saws, keeping none of its 50 allocations a second. */
        uint64_t grown = sec > 10 ? sec - 10 : 0;
        /* 10 and 11 hold 1000 B each, flat; 11 is tracked from second
         * 15 on: its arrival is no growth of their row. */
        struct history_site v[] = {{4, 10 * grown, grown, grown, 0},
                                   {6, sec % 2 * 1000, sec % 2, 50 * sec, 0},
                                   {9, 30 * grown, grown, 2 * grown, 0},
                                   {10, 1000, 10, 10, 0},
                                   {11, 1000, 10, 10, 0},
                                   {12, 5 * sec, sec, sec, 0}};
        struct history_site early[] = {v[0], v[1], v[2], v[3], v[5]};
        CU_ASSERT_EQUAL(sec >= 15
                            ? history_add_frame(h, sec * SECOND, v, 6)
                            : history_add_frame(h, sec * SECOND, early, 5),
                        0);
    }
    struct history_trend *t;
    long n = history_trends(h, 20 * SECOND, 9 * SECOND, group_of, 12, 4, &t);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(t[0].group, 2);
    CU_ASSERT_EQUAL(t[1].group, 5);
    CU_ASSERT_EQUAL(t[1].fit.points, 10);
    CU_ASSERT_EQUAL(t[1].spark[0], 2000);
    CU_ASSERT_DOUBLE_EQUAL(t[1].fit.slope_per_s, 0, 1e-9);
    CU_ASSERT_EQUAL(t[1].spark[3], 2000);
    CU_ASSERT_EQUAL(t[2].group, 7);
    CU_ASSERT_EQUAL(t[2].fit.points, 10);
    CU_ASSERT_DOUBLE_EQUAL(t[2].fit.slope_per_s, 40, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(t[2].fit.r2, 1, 1e-9);
    /* 18 blocks gained for 27 allocations from second 11 to 20. */
    CU_ASSERT_DOUBLE_EQUAL(t[2].kept, 18.0 / 27, 1e-9);
    CU_ASSERT_EQUAL(t[2].nspark, 4);
    CU_ASSERT_EQUAL(t[2].spark[0], 40);  /* second 11 */
    CU_ASSERT_EQUAL(t[2].spark[3], 400); /* second 20 */
    CU_ASSERT(t[2].spark[1] < t[2].spark[2]);
    CU_ASSERT(t[0].fit.r2 < 0.1);
    CU_ASSERT_DOUBLE_EQUAL(t[0].kept, 0, 1e-9);
    CU_ASSERT_PTR_EQUAL(history_trend_of(t, n, 7), &t[2]);
    CU_ASSERT_PTR_NULL(history_trend_of(t, n, 3));
    free(t);
    /* A window of one frame has no trend; an empty history neither. */
    CU_ASSERT_EQUAL(history_trends(h, 20 * SECOND, 0, group_of, 12, 4, &t), 0);
    free(t);
    history_free(h);
    h = history_new(&lim);
    CU_ASSERT_EQUAL(
        history_trends(h, 20 * SECOND, 9 * SECOND, group_of, 12, 4, &t), 0);
    free(t);
    history_free(h);
}

/* A session's memory, as `list` shows it and its budgets count it,
 * includes its history, and names it when it is the biggest part. */
static void test_session_memory_counts_history(void)
{
    struct server srv;
    struct session s;
    struct session_memory m;
    uint64_t biggest;

    memset(&srv, 0, sizeof(srv));
    memset(&s, 0, sizeof(s));
    s.srv = &srv;
    s.mem_fed = 1000;
    s.mem_views = 200;
    uint64_t without = session_memory(&s);
    struct history_limits lim = {3600 * SECOND, 1u << 20, 256};
    struct history *h = history_new(&lim);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    add_frame_at(h, SECOND, 256);
    s.mem_history = history_memory(h);
    CU_ASSERT(s.mem_history >= 256 * sizeof(struct history_site));
    CU_ASSERT_EQUAL(session_memory(&s), without + s.mem_history);
    session_memory_parts(&s, &m);
    CU_ASSERT_EQUAL(m.history, s.mem_history);
    /* A session over budget because of its history says so. */
    s.mem_history = m.history = 1u << 30;
    CU_ASSERT_STRING_EQUAL(session_memory_biggest(&m, &biggest), "history");
    CU_ASSERT_EQUAL(biggest, s.mem_history);
    history_free(h);
}

void register_history_tests(void)
{
    CU_pSuite s = CU_add_suite("history", NULL, NULL);

    CU_add_test(s, "history bound and span", test_bound_and_span);
    CU_add_test(s, "leak rule", test_leak_rule);
    CU_add_test(s, "tracked sites and peak", test_tracked_sites_and_peak);
    CU_add_test(s, "locations of one name", test_locations_of_one_name);
    CU_add_test(s, "trends of rows", test_trends_of_rows);
    CU_add_test(s, "session memory counts its history",
                test_session_memory_counts_history);
}
