/* Marks and diffs without a daemon: packing, the store's bound, names and
 * memory, and the sums of a diff's ends (marks, start, peak, now) by name. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "history.h"
#include "lm_groups.h"
#include "lm_state.h"
#include "marks.h"
#include "session.h"
#include "test_units.h"

/* A state of n locations made by hand: what a mark reads. */
static void state_of(struct lm_state *st, uint32_t n)
{
    memset(st, 0, sizeof(*st));
    st->nlocs = n;
    st->locs = aligned_alloc(128, (size_t)n * sizeof(*st->locs) + 128);
    st->sides = aligned_alloc(64, (size_t)n * sizeof(*st->sides) + 64);
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

/* Location i holds blocks blocks of size bytes, of allocs allocations. */
static void set_loc(struct lm_state *st, uint32_t i, uint64_t blocks,
                    uint64_t size, uint64_t allocs)
{
    st->sides[i].live_blocks = blocks;
    st->sides[i].live_bytes = blocks * size;
    st->locs[i].ev.alloc_events = allocs;
    st->locs[i].ev.alloc_bytes = allocs * size;
}

/* A mark of st, named name, taken within a bound that fits it. */
static struct mark *mark_of(const struct lm_state *st, const char *name)
{
    struct mark *m = calloc(1, sizeof(*m));

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(marks_pack(st, UINT64_MAX / 2, m), 0);
    snprintf(m->name, sizeof(m->name), "%s", name);
    return m;
}

/*
 * A mark keeps each location with a counter above 0, in order, with its
 * counters exact (big ones too), and nothing of the others; it is a few
 * bytes a location.
 */
static void test_pack_and_read(void)
{
    struct lm_state st;
    enum { N = 3000 };
    uint32_t nonzero = 0;

    state_of(&st, N);
    for (uint32_t i = 0; i < N; i++) {
        if (i % 3 == 1)
            continue; /* all 0: left out */
        set_loc(&st, i, i % 7, 48, i);
        st.locs[i].ev.realloc_events = i % 5;
        st.locs[i].ev.realloc_new_bytes = (i % 5) * 100;
        st.locs[i].ev.free_events = i % 11;
        nonzero += i > 0;
    }
    st.sides[2].live_bytes = 1ull << 40; /* a big counter */
    struct mark *m = mark_of(&st, "big");
    CU_ASSERT_EQUAL(m->nsites, nonzero);
    CU_ASSERT(m->len < (size_t)m->nsites * 12);
    CU_ASSERT_EQUAL(mark_memory(m), sizeof(*m) + m->len);
    struct mark_reader r;
    struct lm_diff_counts c, want, sum = {0};
    uint32_t loc, n = 0, prev = 0;
    mark_read_begin(m, &r);
    while (mark_read_next(&r, &loc, &c)) {
        lm_diff_counts_at(&st, loc, &want);
        CU_ASSERT(n == 0 || loc > prev);
        CU_ASSERT_EQUAL(memcmp(&c, &want, sizeof(c)), 0);
        CU_ASSERT_FALSE(lm_diff_counts_zero(&c));
        lm_diff_counts_add(&sum, &c);
        prev = loc;
        n++;
    }
    CU_ASSERT_EQUAL(n, nonzero);
    CU_ASSERT_EQUAL(memcmp(&sum, &m->sum, sizeof(sum)), 0);
    mark_free(m);
    state_free(&st);
}

/* A mark that would pack into more than its room holds nothing: the
 * caller refuses it; one byte more and it fits.  A state without sites
 * packs to an empty mark, which reads as none. */
static void test_pack_within_room(void)
{
    struct lm_state st;
    struct mark m;

    state_of(&st, 20000);
    for (uint32_t i = 0; i < 20000; i++)
        set_loc(&st, i, 1 + i % 3, 64, 1 + i % 9);
    struct mark *whole = mark_of(&st, "whole");
    memset(&m, 0, sizeof(m));
    CU_ASSERT_EQUAL(marks_pack(&st, whole->len - 1, &m), 1);
    CU_ASSERT_PTR_NULL(m.packed);
    CU_ASSERT_EQUAL(m.nsites, 0);
    CU_ASSERT_EQUAL(marks_pack(&st, whole->len, &m), 0);
    CU_ASSERT_EQUAL(m.len, whole->len);
    CU_ASSERT_EQUAL(memcmp(m.packed, whole->packed, m.len), 0);
    free(m.packed);
    /* An empty state packs to nothing. */
    struct lm_state empty;
    state_of(&empty, 1);
    memset(&m, 0, sizeof(m));
    CU_ASSERT_EQUAL(marks_pack(&empty, 0, &m), 0);
    CU_ASSERT_EQUAL(m.len, 0);
    CU_ASSERT_EQUAL(m.nsites, 0);
    struct mark_reader r;
    struct lm_diff_counts c;
    uint32_t loc;
    mark_read_begin(&m, &r);
    CU_ASSERT_EQUAL(mark_read_next(&r, &loc, &c), 0);
    state_free(&empty);
    mark_free(whole);
    state_free(&st);
}

static void test_names(void)
{
    char why[160];

    CU_ASSERT_EQUAL(marks_name_ok("before", why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(marks_name_ok("after-deploy_2", why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(marks_name_ok("m1", why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(marks_name_ok("", why, sizeof(why)), -1);
    CU_ASSERT_EQUAL(marks_name_ok("1234", why, sizeof(why)), -1);
    CU_ASSERT_EQUAL(marks_name_ok("a.bin", why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "'.'"));
    CU_ASSERT_EQUAL(marks_name_ok("peak", why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "one of a diff's ends"));
    CU_ASSERT_EQUAL(marks_name_ok("now", why, sizeof(why)), -1);
    CU_ASSERT_EQUAL(marks_name_ok("start", why, sizeof(why)), -1);
    CU_ASSERT_EQUAL(
        marks_name_ok("a23456789012345678901234567890123", why, sizeof(why)),
        -1);
    CU_ASSERT_EQUAL(
        marks_name_ok("a2345678901234567890123456789012", why, sizeof(why)), 0);
}

/*
 * The store: generated names in turn, skipping those in use; a name in
 * use replaced in place of none; past MARKS_MAX the oldest dropped and
 * named; removal; and what it holds, the marks' bytes summed.
 */
static void test_store(void)
{
    struct marks *ms = calloc(1, sizeof(*ms));
    struct lm_state st;
    char name[MARK_NAME_MAX + 1], dropped[MARK_NAME_MAX + 1];
    int replaced;

    CU_ASSERT_PTR_NOT_NULL_FATAL(ms);
    state_of(&st, 100);
    for (uint32_t i = 0; i < 100; i++)
        set_loc(&st, i, i, 16, i);
    marks_put(ms, mark_of(&st, "m2"), &replaced, dropped, sizeof(dropped));
    CU_ASSERT_FALSE(replaced);
    marks_auto_name(ms, name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, "m1");
    marks_auto_name(ms, name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, "m3"); /* m2 is in use */
    CU_ASSERT_EQUAL(marks_freed_by(ms, "m9"), 0);
    CU_ASSERT_EQUAL(marks_freed_by(ms, "m2"), mark_memory(ms->v[0]));
    /* Replaced: still one mark of that name, now the newest. */
    marks_put(ms, mark_of(&st, "base"), &replaced, dropped, sizeof(dropped));
    marks_put(ms, mark_of(&st, "m2"), &replaced, dropped, sizeof(dropped));
    CU_ASSERT(replaced);
    CU_ASSERT_STRING_EQUAL(dropped, "");
    CU_ASSERT_EQUAL(ms->n, 2);
    CU_ASSERT_STRING_EQUAL(ms->v[0]->name, "base");
    CU_ASSERT_STRING_EQUAL(ms->v[1]->name, "m2");
    /* Filled to the bound, then one more drops the oldest. */
    for (unsigned i = 2; i < MARKS_MAX; i++) {
        snprintf(name, sizeof(name), "x%u", i);
        marks_put(ms, mark_of(&st, name), &replaced, dropped, sizeof(dropped));
        CU_ASSERT_STRING_EQUAL(dropped, "");
    }
    CU_ASSERT_EQUAL(ms->n, MARKS_MAX);
    CU_ASSERT_EQUAL(marks_freed_by(ms, "new"), mark_memory(ms->v[0]));
    marks_put(ms, mark_of(&st, "new"), &replaced, dropped, sizeof(dropped));
    CU_ASSERT_FALSE(replaced);
    CU_ASSERT_STRING_EQUAL(dropped, "base");
    CU_ASSERT_EQUAL(ms->n, MARKS_MAX);
    CU_ASSERT_PTR_NULL(marks_find(ms, "base"));
    CU_ASSERT_PTR_NOT_NULL(marks_find(ms, "new"));
    CU_ASSERT_STRING_EQUAL(ms->v[MARKS_MAX - 1]->name, "new");
    /* What it holds: itself and each mark. */
    uint64_t bytes = sizeof(*ms);
    for (unsigned i = 0; i < ms->n; i++)
        bytes += sizeof(struct mark) + ms->v[i]->len;
    CU_ASSERT_EQUAL(marks_memory(ms), bytes);
    uint64_t one = mark_memory(marks_find(ms, "x5"));
    CU_ASSERT_EQUAL(marks_remove(ms, "x5"), 0);
    CU_ASSERT_EQUAL(marks_remove(ms, "x5"), -1);
    CU_ASSERT_EQUAL(marks_memory(ms), bytes - one);
    CU_ASSERT_EQUAL(ms->n, MARKS_MAX - 1);
    marks_free(ms);
    state_free(&st);
}

/* Name groups by hand: location i is in group of[i]; the first named of
 * them named (the rest unnamed, as past a session's budget). */
struct hand_groups {
    struct lm_groups g;
    struct lm_group v[8];
    uint32_t of[16];
};

static void groups_of(struct hand_groups *h, const char *const *names,
                      uint32_t ngroups, const uint32_t *of, uint32_t named)
{
    memset(h, 0, sizeof(*h));
    for (uint32_t i = 0; i < ngroups; i++)
        h->v[i].name = (char *)names[i];
    for (uint32_t i = 0; i < named; i++) {
        h->of[i] = of[i];
        h->v[of[i]].nlocs++;
    }
    h->g.v = h->v;
    h->g.n = ngroups;
    h->g.group_of = h->of;
    h->g.nlocs = named;
}

/* The rows that changed between two ends (at most 16, by growth), and
 * its total. */
static long rows_between(const struct lm_groups *g, const struct diff_end *a,
                         const struct diff_end *b, struct lm_diff_row *rows,
                         struct lm_diff_row *total, uint32_t *unnamed)
{
    struct diff_sums d = {0};
    struct lm_diff_top top = {rows, 0, 16, LM_DIFF_GROWTH};

    CU_ASSERT_EQUAL_FATAL(diff_sum_ends(g, a, b, &d), 0);
    uint32_t changed = diff_top(g, &d, &top, total);
    CU_ASSERT_EQUAL(lm_diff_top_finish(&top), changed);
    *unnamed = d.unnamed;
    diff_sums_free(&d);
    return changed;
}

static const struct lm_diff_row *row_named(const struct lm_diff_row *rows,
                                           long n, const char *name)
{
    for (long i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

/*
 * Two marks of a state that kept blocks at one line, freed another's and
 * made a new location of a third: the rows are the names' changes, the
 * locations of one name summed; start is all zeros; now is the state as
 * it is; a location not yet named is counted, not shown.
 */
static void test_diff_of_marks(void)
{
    static const char *const names[] = {"@a.lua:1", "@a.lua:2", "INTERNAL",
                                        "@b.lua:9"};
    static const uint32_t of[] = {0, 0, 1, 2, 3, 3};
    struct hand_groups hg;
    struct lm_state st;
    struct lm_diff_row rows[16], total;
    uint32_t unnamed;

    state_of(&st, 6);
    set_loc(&st, 0, 10, 32, 10);
    set_loc(&st, 1, 2, 32, 4);
    set_loc(&st, 2, 50, 16, 50);
    st.locs[3].ev.free_events = 7;
    struct mark *a = mark_of(&st, "a");
    set_loc(&st, 0, 110, 32, 110); /* kept 100 more */
    set_loc(&st, 1, 7, 32, 9);     /* kept 5 more */
    set_loc(&st, 2, 0, 16, 80);    /* 30 more made, all freed */
    st.locs[3].ev.free_events = 87;
    set_loc(&st, 5, 3, 100, 3); /* a new location of @b.lua:9 */
    struct mark *b = mark_of(&st, "b");
    groups_of(&hg, names, 4, of, 6);
    struct diff_end from = {DIFF_END_MARK, a, NULL, NULL};
    struct diff_end to = {DIFF_END_MARK, b, NULL, NULL};

    long n = rows_between(&hg.g, &from, &to, rows, &total, &unnamed);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(unnamed, 0);
    const struct lm_diff_row *r = row_named(rows, n, "@a.lua:1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.live_blocks, r->to.live_blocks), 105);
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.allocs, r->to.allocs), 105);
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.live_bytes, r->to.live_bytes),
                    105 * 32);
    CU_ASSERT_EQUAL(r->sites, 2);
    r = row_named(rows, n, "@a.lua:2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.live_blocks, r->to.live_blocks), -50);
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.allocs, r->to.allocs), 30);
    r = row_named(rows, n, "INTERNAL");
    CU_ASSERT_EQUAL(lm_diff_delta(r->from.frees, r->to.frees), 80);
    r = row_named(rows, n, "@b.lua:9");
    CU_ASSERT_EQUAL(r->from.live_bytes, 0);
    CU_ASSERT_EQUAL(r->to.live_bytes, 300);
    CU_ASSERT_EQUAL(total.to.live_bytes, 117 * 32 + 300);
    /* Ranked by growth. */
    CU_ASSERT_STRING_EQUAL(rows[0].name, "@a.lua:1");
    CU_ASSERT_STRING_EQUAL(rows[n - 1].name, "@a.lua:2");

    /* From the start: every counter of the mark; now: b's state. */
    struct diff_end start = {DIFF_END_START, NULL, NULL, NULL};
    struct diff_end now = {DIFF_END_NOW, NULL, NULL, &st};
    n = rows_between(&hg.g, &start, &from, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(total.to.live_blocks, 62);
    CU_ASSERT_EQUAL(total.from.live_blocks, 0);
    n = rows_between(&hg.g, &to, &now, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(total.to.live_blocks, 120);
    /* Locations 4 and 5 not named yet: left out, and counted. */
    groups_of(&hg, names, 4, of, 4);
    n = rows_between(&hg.g, &from, &now, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(unnamed, 1);
    CU_ASSERT_PTR_NULL(row_named(rows, n, "@b.lua:9"));
    mark_free(a);
    mark_free(b);
    state_free(&st);
}

/* A diff to or from the peak compares the sites the history tracked
 * then, on both ends, with their allocated bytes. */
static void test_diff_with_peak(void)
{
    static const char *const names[] = {"@big.lua:1", "@cache.lua:2",
                                        "@other.lua:3"};
    static const uint32_t of[] = {0, 1, 2};
    struct history_limits lim = {3600000, 1u << 20, 2};
    struct history *h = history_new(&lim);
    struct hand_groups hg;
    struct lm_state st;
    struct lm_diff_row rows[16], total;
    uint32_t unnamed;

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    state_of(&st, 3);
    set_loc(&st, 0, 100, 64, 1000); /* the most bytes, keeps a tenth */
    set_loc(&st, 1, 9, 8, 9);       /* keeps all it makes */
    set_loc(&st, 2, 5, 4, 500);     /* neither */
    st.totals.live_bytes = 6492;
    history_sample(h, &st, 1000);
    CU_ASSERT_EQUAL_FATAL(h->peak.n, 2);
    groups_of(&hg, names, 3, of, 3);
    struct mark *m = mark_of(&st, "m");
    set_loc(&st, 1, 20, 8, 20);
    set_loc(&st, 2, 50, 4, 600);
    st.totals.live_bytes = 100; /* not a new peak */
    history_sample(h, &st, 2000);
    struct diff_end start = {DIFF_END_START, NULL, NULL, NULL};
    struct diff_end peak = {DIFF_END_PEAK, NULL, h, NULL};
    struct diff_end now = {DIFF_END_NOW, NULL, NULL, &st};
    struct diff_end mark = {DIFF_END_MARK, m, NULL, NULL};

    long n = rows_between(&hg.g, &start, &peak, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_PTR_NULL(row_named(rows, n, "@other.lua:3"));
    const struct lm_diff_row *r = row_named(rows, n, "@cache.lua:2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->to.live_blocks, 9);
    CU_ASSERT_EQUAL(r->to.alloc_bytes, 72);
    /* From the peak to now: the tracked sites alone, @other.lua:3's
     * growth left out. */
    n = rows_between(&hg.g, &peak, &now, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_STRING_EQUAL(rows[0].name, "@cache.lua:2");
    CU_ASSERT_EQUAL(
        lm_diff_delta(rows[0].from.live_blocks, rows[0].to.live_blocks), 11);
    /* A mark to the peak: the same sites. */
    n = rows_between(&hg.g, &mark, &peak, rows, &total, &unnamed);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(total.from.live_bytes, 6400 + 72);
    mark_free(m);
    state_free(&st);
    history_free(h);
}

/* A session's memory, as `list` shows it and its budgets count it,
 * includes its marks, and names them when they are the biggest part. */
static void test_session_memory_counts_marks(void)
{
    struct server srv;
    struct session s;
    struct session_memory m;
    uint64_t biggest;

    memset(&srv, 0, sizeof(srv));
    memset(&s, 0, sizeof(s));
    s.srv = &srv;
    s.mem_fed = 1000;
    s.mem_history = 300;
    uint64_t without = session_memory(&s);
    s.mem_marks = 4096;
    CU_ASSERT_EQUAL(session_memory(&s), without + 4096);
    session_memory_parts(&s, &m);
    CU_ASSERT_EQUAL(m.marks, 4096);
    s.mem_marks = m.marks = 1u << 30;
    CU_ASSERT_STRING_EQUAL(session_memory_biggest(&m, &biggest), "marks");
    CU_ASSERT_EQUAL(biggest, 1u << 30);
}

/* This thread's CPU time: what the work costs the loop, whatever else
 * the host runs meanwhile. */
void register_marks_tests(void)
{
    CU_pSuite s = CU_add_suite("marks", NULL, NULL);

    CU_add_test(s, "a mark packs the sites with a counter", test_pack_and_read);
    CU_add_test(s, "a mark within its room", test_pack_within_room);
    CU_add_test(s, "marks' names", test_names);
    CU_add_test(s, "marks' store: bound, replacement, memory", test_store);
    CU_add_test(s, "a diff of two marks, start and now", test_diff_of_marks);
    CU_add_test(s, "a diff with the peak", test_diff_with_peak);
    CU_add_test(s, "session memory counts its marks",
                test_session_memory_counts_marks);
}
