/* A chart's series from a history without a daemon: the frames of a
 * window, a name's locations summed, the sites biggest at any frame. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "lm_state.h"
#include "series.h"
#include "test_units.h"

#define SECOND 1000ull

/* A frame at t of the n sites in v (sorted by loc). */
static void frame(struct history *h, uint64_t t, const struct history_site *v,
                  uint32_t n)
{
    CU_ASSERT_EQUAL_FATAL(history_add_frame(h, t, v, n), 0);
}

static struct history *small_history(void)
{
    struct history_limits lim = {3600 * SECOND, 1u << 20, 16};

    return history_new(&lim);
}

/*
 * Four frames of locations 3, 5, 9 and 12; 5 and 9 are one name (a line
 * in and out of compiled code).  Location 12 holds the most at frame 1
 * and nothing after; 3 grows steadily; 5 + 9 together beat 3 at its
 * highest only when summed; 9 is not tracked at frame 2.
 */
static struct history *four_frames(void)
{
    struct history *h = small_history();
    const struct history_site f0[] = {
        {3, 100, 1, 1, 0}, {5, 300, 1, 1, 0}, {9, 300, 1, 1, 0}};
    const struct history_site f1[] = {{3, 200, 2, 2, 0},
                                      {5, 300, 1, 1, 0},
                                      {9, 300, 1, 1, 0},
                                      {12, 5000, 9, 9, 0}};
    const struct history_site f2[] = {
        {3, 300, 3, 3, 0}, {5, 350, 1, 1, 0}, {12, 0, 0, 9, 9}};
    const struct history_site f3[] = {
        {3, 400, 4, 4, 0}, {5, 350, 1, 1, 0}, {9, 350, 1, 1, 0}};

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    frame(h, 1 * SECOND, f0, 3);
    frame(h, 2 * SECOND, f1, 4);
    frame(h, 3 * SECOND, f2, 3);
    frame(h, 4 * SECOND, f3, 3);
    return h;
}

/* Groups of the union {3, 5, 9, 12}: 5 and 9 share one. */
static const uint32_t groups_of_union[] = {0, 1, 1, 2};

static void test_union_and_window(void)
{
    struct history *h = four_frames();
    struct history_frame u;

    CU_ASSERT_EQUAL(history_first_frame(h, 0), 0);
    CU_ASSERT_EQUAL(history_first_frame(h, 2 * SECOND), 1);
    CU_ASSERT_EQUAL(history_first_frame(h, 2 * SECOND + 1), 2);
    CU_ASSERT_EQUAL(history_first_frame(h, 5 * SECOND), 4);
    CU_ASSERT_EQUAL_FATAL(series_union(h, 0, &u), 0);
    CU_ASSERT_EQUAL_FATAL(u.n, 4);
    CU_ASSERT(u.sites[0].loc == 3 && u.sites[1].loc == 5 &&
              u.sites[2].loc == 9 && u.sites[3].loc == 12);
    free(u.sites);
    /* The last frame alone holds 3, 5 and 9. */
    CU_ASSERT_EQUAL_FATAL(series_union(h, 3, &u), 0);
    CU_ASSERT_EQUAL(u.n, 3);
    CU_ASSERT_EQUAL(u.sites[2].loc, 9);
    free(u.sites);
    /* No frame in the window: no sites. */
    CU_ASSERT_EQUAL_FATAL(series_union(h, 4, &u), 0);
    CU_ASSERT_EQUAL(u.n, 0);
    free(u.sites);
    history_free(h);
}

/* Biggest at any frame first: 12 (5000 once), then 5 + 9 (700), then 3
 * (400); each series' bytes frame by frame, 9's missing frame as 0. */
static void test_biggest_at_any_frame(void)
{
    struct history *h = four_frames();
    struct history_frame u;
    struct series_set set;

    CU_ASSERT_EQUAL_FATAL(series_union(h, 0, &u), 0);
    CU_ASSERT_EQUAL_FATAL(series_build(h, 0, &u, groups_of_union, 3, 10, &set),
                          0);
    CU_ASSERT_EQUAL_FATAL(set.n, 3);
    CU_ASSERT_EQUAL(set.nframes, 4);
    CU_ASSERT_EQUAL(u.sites[set.member[0]].loc, 12);
    CU_ASSERT_EQUAL(set.sites[0], 1);
    CU_ASSERT_EQUAL(groups_of_union[set.member[1]], 1);
    CU_ASSERT_EQUAL(set.sites[1], 2);
    CU_ASSERT_EQUAL(u.sites[set.member[2]].loc, 3);
    static const uint64_t want[3][4] = {
        {0, 5000, 0, 0}, {600, 600, 350, 700}, {100, 200, 300, 400}};
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 4; j++)
            CU_ASSERT_EQUAL(set.bytes[i * 4 + j], want[i][j]);
    series_set_free(&set);
    /* At most two series: the third goes. */
    CU_ASSERT_EQUAL_FATAL(series_build(h, 0, &u, groups_of_union, 3, 2, &set),
                          0);
    CU_ASSERT_EQUAL(set.n, 2);
    CU_ASSERT_EQUAL(u.sites[set.member[0]].loc, 12);
    series_set_free(&set);
    free(u.sites);
    history_free(h);
}

/* The window's frames alone: from frame 2 on, 12 is tracked but holds
 * nothing, and is no series; 5 + 9 (700 at frame 3) come before 3 (400). */
static void test_window_ranks_its_own_frames(void)
{
    struct history *h = four_frames();
    struct history_frame u;
    struct series_set set;
    uint32_t from = history_first_frame(h, 3 * SECOND);

    CU_ASSERT_EQUAL_FATAL(series_union(h, from, &u), 0);
    CU_ASSERT_EQUAL_FATAL(u.n, 4);
    CU_ASSERT_EQUAL_FATAL(
        series_build(h, from, &u, groups_of_union, 3, 10, &set), 0);
    CU_ASSERT_EQUAL_FATAL(set.n, 2);
    CU_ASSERT_EQUAL(set.nframes, 2);
    CU_ASSERT_EQUAL(groups_of_union[set.member[0]], 1);
    CU_ASSERT(set.bytes[0] == 350 && set.bytes[1] == 700);
    CU_ASSERT(set.bytes[2] == 300 && set.bytes[3] == 400);
    series_set_free(&set);
    free(u.sites);
    history_free(h);
}

/* A history with no frame yet has no series, and no frame to chart. */
static void test_no_frames(void)
{
    struct history *h = small_history();
    struct history_frame u;
    struct series_set set;

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(history_first_frame(h, 0), 0);
    CU_ASSERT_EQUAL_FATAL(series_union(h, 0, &u), 0);
    CU_ASSERT_EQUAL(u.n, 0);
    CU_ASSERT_EQUAL_FATAL(series_build(h, 0, &u, NULL, 0, 8, &set), 0);
    CU_ASSERT_EQUAL(set.n, 0);
    CU_ASSERT_EQUAL(set.nframes, 0);
    series_set_free(&set);
    free(u.sites);
    history_free(h);
}

/* Sampled frames carry the session's live bytes then: what a chart
 * stacks the sites in (the rest is the band of the other sites). */
static void test_frames_carry_the_total(void)
{
    struct history *h = small_history();
    struct lm_state st;
    enum { N = 4 };

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    memset(&st, 0, sizeof(st));
    st.nlocs = N;
    /* Aligned as the state's own arrays are. */
    st.locs = aligned_alloc(128, N * sizeof(*st.locs));
    st.sides = aligned_alloc(64, N * sizeof(*st.sides));
    CU_ASSERT_FATAL(st.locs != NULL && st.sides != NULL);
    memset(st.locs, 0, N * sizeof(*st.locs));
    memset(st.sides, 0, N * sizeof(*st.sides));
    for (uint64_t sec = 1; sec <= 3; sec++) {
        for (uint32_t i = 0; i < N; i++)
            st.sides[i].live_bytes = 100 * sec + i;
        st.totals.live_bytes = 1000 * sec;
        history_sample(h, &st, sec * SECOND);
    }
    CU_ASSERT_EQUAL_FATAL(h->nframes, 3);
    for (uint32_t i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(h->frames[i].live_bytes, 1000 * (i + 1));
    free(st.locs);
    free(st.sides);
    history_free(h);
}

void register_series_tests(void)
{
    CU_pSuite s = CU_add_suite("history series", NULL, NULL);

    CU_add_test(s, "the union of a window's sites", test_union_and_window);
    CU_add_test(s, "sites biggest at any frame, a name's summed",
                test_biggest_at_any_frame);
    CU_add_test(s, "a window ranks its own frames",
                test_window_ranks_its_own_frames);
    CU_add_test(s, "no frames yet", test_no_frames);
    CU_add_test(s, "frames carry the session's live bytes",
                test_frames_carry_the_total);
}
