/* The core's diffs: signed changes, ranking by each key, totals, and two
 * ends' sites matched by name. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lm_diff.h"
#include "test_util.h"

/* A row whose live bytes and blocks go from -> to, allocs as given. */
static struct lm_diff_row row(const char *name, uint64_t from, uint64_t to,
                              uint64_t allocs)
{
    struct lm_diff_row r;

    memset(&r, 0, sizeof(r));
    r.name = name;
    r.sites = 1;
    r.from.live_bytes = from;
    r.to.live_bytes = to;
    r.from.live_blocks = from / 8;
    r.to.live_blocks = to / 8;
    r.to.allocs = allocs;
    r.to.alloc_bytes = allocs * 16;
    return r;
}

static void test_delta(void)
{
    CU_ASSERT_EQUAL(lm_diff_delta(10, 25), 15);
    CU_ASSERT_EQUAL(lm_diff_delta(25, 10), -15);
    CU_ASSERT_EQUAL(lm_diff_delta(7, 7), 0);
    CU_ASSERT_EQUAL(lm_diff_delta(0, UINT64_MAX), INT64_MAX);
    CU_ASSERT_EQUAL(lm_diff_delta(UINT64_MAX, 0), INT64_MIN);
    CU_ASSERT_EQUAL(lm_diff_delta(1, (uint64_t)INT64_MAX + 1), INT64_MAX);
}

/* The names of the first n rows, joined by spaces. */
static void names_of(const struct lm_diff_row *r, size_t n, char *out,
                     size_t len)
{
    size_t at = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i ? " " : "",
                               r[i].name);
}

/* Each key ranks biggest first, ties by name, only the top asked for
 * moved to the front. */
static void test_rank(void)
{
    struct lm_diff_row base[] = {
        row("a", 100, 50, 0),   /* -50 */
        row("b", 0, 400, 3),    /* +400 */
        row("c", 1000, 0, 1),   /* -1000 */
        row("d", 10, 210, 9),   /* +200 */
        row("e", 20, 220, 2),   /* +200, after d by name */
        row("f", 500, 500, 40), /* 0 */
    };
    enum { N = sizeof(base) / sizeof(base[0]) };
    struct lm_diff_row v[N];
    char names[64];

    memcpy(v, base, sizeof(v));
    CU_ASSERT_EQUAL(lm_diff_rank(v, N, LM_DIFF_GROWTH, N), N);
    names_of(v, N, names, sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "b d e f a c");
    memcpy(v, base, sizeof(v));
    CU_ASSERT_EQUAL(lm_diff_rank(v, N, LM_DIFF_GROWTH, 3), 3);
    names_of(v, 3, names, sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "b d e");
    memcpy(v, base, sizeof(v));
    lm_diff_rank(v, N, LM_DIFF_CHANGE, 2);
    names_of(v, 2, names, sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "c b");
    memcpy(v, base, sizeof(v));
    lm_diff_rank(v, N, LM_DIFF_ALLOCS, 2);
    names_of(v, 2, names, sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "f d");
    memcpy(v, base, sizeof(v));
    lm_diff_rank(v, N, LM_DIFF_ALLOC_BYTES, 1);
    CU_ASSERT_STRING_EQUAL(v[0].name, "f");
    memcpy(v, base, sizeof(v));
    lm_diff_rank(v, N, LM_DIFF_BLOCKS, N);
    names_of(v, N, names, sizeof(names));
    CU_ASSERT_STRING_EQUAL(names, "b d e f a c");
    /* Asked for more than there are; none at all. */
    CU_ASSERT_EQUAL(lm_diff_rank(v, 2, LM_DIFF_GROWTH, 10), 2);
    CU_ASSERT_EQUAL(lm_diff_rank(v, 0, LM_DIFF_GROWTH, 10), 0);
    CU_ASSERT_EQUAL(lm_diff_rank(v, N, LM_DIFF_GROWTH, 0), 0);
}

/* A heap of many rows gives the same top as a full sort would. */
static void test_rank_many(void)
{
    enum { N = 5000, TOP = 37 };
    struct lm_diff_row *v = calloc(N, sizeof(*v));
    char(*names)[16] = calloc(N, sizeof(*names));
    uint64_t x = 12345;

    CU_ASSERT_FATAL(v != NULL && names != NULL);
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(names[i], sizeof(names[i]), "s%zu", i);
        v[i] = row(names[i], (x >> 33) % 1000, (x >> 13) % 1000, 0);
    }
    CU_ASSERT_EQUAL(lm_diff_rank(v, N, LM_DIFF_GROWTH, TOP), TOP);
    for (size_t i = 1; i < TOP; i++) {
        int64_t a =
            lm_diff_delta(v[i - 1].from.live_bytes, v[i - 1].to.live_bytes);
        int64_t b = lm_diff_delta(v[i].from.live_bytes, v[i].to.live_bytes);
        CU_ASSERT(a > b || (a == b && strcmp(v[i - 1].name, v[i].name) < 0));
    }
    /* Nothing left behind ranks above the last one shown. */
    int64_t last =
        lm_diff_delta(v[TOP - 1].from.live_bytes, v[TOP - 1].to.live_bytes);
    for (size_t i = TOP; i < N; i++)
        CU_ASSERT(lm_diff_delta(v[i].from.live_bytes, v[i].to.live_bytes) <=
                  last);
    free(v);
    free(names);
}

/* Rows offered one at a time keep the same top as a rank of them all. */
static void test_top_offered(void)
{
    enum { N = 3000, TOP = 25 };
    struct lm_diff_row *all = calloc(N, sizeof(*all)), kept[TOP];
    char(*names)[16] = calloc(N, sizeof(*names));
    struct lm_diff_top top = {kept, 0, TOP, LM_DIFF_CHANGE};
    uint64_t x = 99;

    CU_ASSERT_FATAL(all != NULL && names != NULL);
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(names[i], sizeof(names[i]), "s%zu", i);
        all[i] = row(names[i], (x >> 33) % 500, (x >> 13) % 500, 0);
        lm_diff_top_offer(&top, &all[i]);
    }
    CU_ASSERT_EQUAL(lm_diff_top_finish(&top), TOP);
    CU_ASSERT_EQUAL(lm_diff_rank(all, N, LM_DIFF_CHANGE, TOP), TOP);
    for (size_t i = 0; i < TOP; i++)
        CU_ASSERT_STRING_EQUAL(kept[i].name, all[i].name);
    /* Fewer offered than kept: all of them, in order. */
    struct lm_diff_top few = {kept, 0, TOP, LM_DIFF_GROWTH};
    lm_diff_top_offer(&few, &all[0]);
    lm_diff_top_offer(&few, &all[1]);
    CU_ASSERT_EQUAL(lm_diff_top_finish(&few), 2);
    free(all);
    free(names);
}

static struct lm_diff_site site(const char *name, uint64_t blocks)
{
    struct lm_diff_site s;

    memset(&s, 0, sizeof(s));
    s.name = name;
    s.sites = 1;
    s.c.live_blocks = s.c.allocs = blocks;
    s.c.live_bytes = s.c.alloc_bytes = 32 * blocks;
    return s;
}

/* Sites of two ends are matched by name, whatever their order; one on
 * one end only has zeros on the other; the total sums them. */
static void test_match_and_total(void)
{
    struct lm_diff_site old[] = {site("@a.lua:3", 10), site("@a.lua:7", 3),
                                 site("INTERNAL", 4)};
    struct lm_diff_site new[] = {site("INTERNAL", 4), site("@a.lua:9", 2),
                                 site("@a.lua:3", 25)};
    struct lm_diff_row rows[6], total;

    size_t n = lm_diff_match(old, 3, new, 3, rows);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_STRING_EQUAL(rows[0].name, "@a.lua:3");
    CU_ASSERT_EQUAL(rows[0].from.live_blocks, 10);
    CU_ASSERT_EQUAL(rows[0].to.live_blocks, 25);
    CU_ASSERT_STRING_EQUAL(rows[1].name, "@a.lua:7");
    CU_ASSERT_EQUAL(rows[1].to.live_blocks, 0);
    CU_ASSERT_STRING_EQUAL(rows[2].name, "@a.lua:9");
    CU_ASSERT_EQUAL(rows[2].from.live_blocks, 0);
    CU_ASSERT_EQUAL(rows[2].to.live_bytes, 64);
    CU_ASSERT_STRING_EQUAL(rows[3].name, "INTERNAL");
    CU_ASSERT_FALSE(lm_diff_changed(&rows[3]));
    CU_ASSERT(lm_diff_changed(&rows[0]));
    lm_diff_total(rows, n, &total);
    CU_ASSERT_EQUAL(total.from.live_blocks, 17);
    CU_ASSERT_EQUAL(total.to.live_blocks, 31);
    CU_ASSERT_EQUAL(total.sites, 4);
    CU_ASSERT_EQUAL(lm_diff_rank(rows, n, LM_DIFF_GROWTH, 1), 1);
    CU_ASSERT_STRING_EQUAL(rows[0].name, "@a.lua:3");
}

/* A location's counters as a diff compares them: reallocs are
 * allocations too, their new blocks' bytes allocated bytes. */
static void test_counts_of(void)
{
    struct lm_counters c = {0};
    struct lm_diff_counts d;

    c.live_bytes = 100;
    c.live_blocks = 2;
    c.alloc_events = 5;
    c.alloc_bytes = 80;
    c.realloc_events = 3;
    c.realloc_new_bytes = 60;
    c.realloc_old_bytes = 30;
    c.free_events = 7;
    c.free_bytes = 70;
    lm_diff_counts_of(&c, &d);
    CU_ASSERT_EQUAL(d.live_bytes, 100);
    CU_ASSERT_EQUAL(d.live_blocks, 2);
    CU_ASSERT_EQUAL(d.allocs, 8);
    CU_ASSERT_EQUAL(d.alloc_bytes, 140);
    CU_ASSERT_EQUAL(d.frees, 7);
    CU_ASSERT_FALSE(lm_diff_counts_zero(&d));
    memset(&d, 0, sizeof(d));
    CU_ASSERT(lm_diff_counts_zero(&d));
}

void register_diff_tests(void)
{
    CU_pSuite s = CU_add_suite("diff", NULL, NULL);

    CU_add_test(s, "signed changes", test_delta);
    CU_add_test(s, "ranking by each key", test_rank);
    CU_add_test(s, "ranking many rows", test_rank_many);
    CU_add_test(s, "the top of rows offered one at a time", test_top_offered);
    CU_add_test(s, "sites matched by name, and the total",
                test_match_and_total);
    CU_add_test(s, "a location's counters as a diff sees them", test_counts_of);
}
