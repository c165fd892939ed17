/* The heap map's growth in place, against a plain array, with failing
 * allocations. */
#define _GNU_SOURCE /* mremap */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/*
 * The map's sources are compiled here with their allocations behind
 * switches that fail them at random, so that a shard's growth meets a
 * failure at each step where one can happen, which must leave the map
 * as it was.
 */
static uint64_t rng = 88172645463325252ULL;
static unsigned int fail_percent;

static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int should_fail(void)
{
    return fail_percent != 0 && next_random() % 100 < fail_percent;
}

static void *failing_malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n);
}

static void *failing_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n);
}

static void *failing_aligned_alloc(size_t a, size_t n)
{
    return should_fail() ? NULL : aligned_alloc(a, n);
}

static void *failing_mmap(void *a, size_t n, int prot, int flags, int fd,
                          off_t off)
{
    return should_fail() ? MAP_FAILED : mmap(a, n, prot, flags, fd, off);
}

static void *failing_mremap(void *p, size_t old, size_t n, int flags)
{
    return should_fail() ? MAP_FAILED : mremap(p, old, n, flags);
}

#define malloc        failing_malloc
#define realloc       failing_realloc
#define aligned_alloc failing_aligned_alloc
#define mmap          failing_mmap
#define mremap        failing_mremap
#include "lm_table.c"
#include "lm_heapmap.c"
#undef malloc
#undef realloc
#undef aligned_alloc
#undef mmap
#undef mremap

/* A shard's control bytes, count and overflow counts are what its slots
 * say they should be, and its room past the table was never written. */
static void check_shard(const struct lm_heap_shard *s)
{
    uint32_t groups = s->cap / LM_HEAP_GROUP, full = 0;
    uint32_t *passing;

    if (s->cap == 0)
        return;
    passing = calloc(groups, sizeof(*passing));
    CU_ASSERT_PTR_NOT_NULL_FATAL(passing);
    for (uint32_t j = 0; j < s->cap; j++) {
        uint8_t c = *lm_heap_ctrl_of(s, j);
        if (c == LM_HEAP_EMPTY)
            continue;
        full++;
        CU_ASSERT_EQUAL(c, lm_heap_tag(s->slots[j].key));
        uint32_t home = lm_heap_home(s, s->slots[j].key);
        for (uint32_t i = home; i != j / LM_HEAP_GROUP * LM_HEAP_GROUP;
             i = lm_heap_next_group(s, i))
            passing[i / LM_HEAP_GROUP]++;
    }
    CU_ASSERT_EQUAL(full, s->count);
    for (uint32_t g = 0; g < groups; g++) {
        uint8_t over = *lm_heap_over_of(s, g * LM_HEAP_GROUP);
        CU_ASSERT(over == LM_HEAP_OVER_STUCK || over == passing[g]);
    }
    free(passing);
    const uint8_t *t = (const uint8_t *)s->slots;
    size_t end = table_bytes(s->cap), room = (size_t)s->room * 64;
    for (size_t i = end; i < room && i < end + 8192; i++)
        if (t[i] != 0) {
            CU_FAIL("the room past a table was written");
            break;
        }
}

/*
 * Keys of shard 0 to `shards` - 1 whose low 32 bits (the home) follow
 * `how`: 0 anywhere; 1 five values (long runs of full groups, stuck
 * counts, wrapping at the end); 2 the top sixteenth of the table (blocks
 * that wait until the pass is over).  Bits 32 to 57 make them unique.
 */
static uint64_t make_key(int how, uint32_t i, unsigned int shards)
{
    static const uint32_t homes[] = {0, 0x7fffffff, 0xfffffff0, 0xffffffff,
                                     0xf8000000};
    uint64_t shard = (next_random() % shards) << (64 - LM_HEAP_SHARD_BITS);
    uint64_t unique = ((uint64_t)i * 0x9e3779b9u & 0x3ffffff) << 32;
    uint32_t low = how == 0   ? (uint32_t)next_random()
                   : how == 1 ? homes[next_random() % 5]
                              : 0xf0000000u | (next_random() & 0x0fffffff);

    return shard | unique | low;
}

struct ref {
    uint64_t key;
    struct lm_block blk;
    int live;
};

/* Puts, replaces and takes blocks at random through four phases (grow,
 * churn, shrink, grow again), failing `percent` of allocations. */
static void churn(int how, unsigned int shards, uint32_t nkeys, long ops,
                  unsigned int percent, int pages_first)
{
    struct ref *r = calloc(nkeys, sizeof(*r));
    struct lm_heapmap m;
    uint64_t live = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    lm_heap_init(&m, 1);
    m.pages_first = (uint8_t)pages_first;
    for (uint32_t i = 0; i < nkeys; i++)
        r[i].key = make_key(how, i + 1, shards);
    fail_percent = percent;
    for (long op = 0; op < ops; op++) {
        static const unsigned int put_in_ten[] = {8, 5, 2, 7};
        int put = next_random() % 10 < put_in_ten[op * 4 / ops];
        struct ref *x = &r[next_random() % nkeys];
        struct lm_block old = {0, 0};
        struct lm_block blk = {(uint32_t)next_random(),
                               (uint32_t)next_random() & 0xffffff};
        uint32_t where;

        for (int k = 0; k < 32 && x->live == put; k++)
            x = &r[next_random() % nkeys];
        if (put || !x->live) {
            int rc = lm_heap_put_hashed(&m, x->key, blk, &old);
            CU_ASSERT(rc != 1 || x->live);
            CU_ASSERT(rc != 1 ||
                      (old.size == x->blk.size && old.loc == x->blk.loc));
            if (rc < 0) { /* a failed growth: the block is not there */
                CU_ASSERT(!x->live);
                CU_ASSERT(!lm_heap_peek_hashed(&m, x->key, &old, &where));
                continue;
            }
            live += !x->live;
            x->live = 1;
            x->blk = blk;
        } else {
            /* A good hint, a wrong one, or none. */
            uint32_t hint = UINT32_MAX;
            if (next_random() % 3 == 0 &&
                lm_heap_peek_hashed(&m, x->key, &old, &where))
                hint = where;
            else if (next_random() % 2 == 0)
                hint = (uint32_t)next_random() % 4096;
            CU_ASSERT_EQUAL(lm_heap_take_hashed(&m, x->key, hint, &blk), 1);
            CU_ASSERT(blk.size == x->blk.size && blk.loc == x->blk.loc);
            x->live = 0;
            live--;
        }
        CU_ASSERT_EQUAL_FATAL(m.count, live);
    }
    fail_percent = 0;
    for (unsigned int s = 0; s < LM_HEAP_SHARDS; s++)
        check_shard(&m.shard[s]);
    for (uint32_t i = 0; i < nkeys; i++) {
        struct lm_block blk;
        uint32_t where;
        int there = lm_heap_peek_hashed(&m, r[i].key, &blk, &where);
        CU_ASSERT_EQUAL(there, r[i].live);
        if (there && r[i].live)
            CU_ASSERT(blk.size == r[i].blk.size && blk.loc == r[i].blk.loc);
    }
    lm_heap_free(&m);
    free(r);
}

static void test_growth_keeps_every_block(void)
{
    for (int how = 0; how <= 2; how++) {
        churn(how, 1, 3000, 200000, 0, how == 1);
        churn(how, 64, 40000, 300000, 0, how != 1);
    }
}

static void test_failed_growth_changes_nothing(void)
{
    for (int how = 0; how <= 2; how++) {
        churn(how, 1, 5000, 200000, 2, how == 2);
        churn(how, 64, 30000, 300000, 1, how != 2);
    }
}

int main(void)
{
    CU_pSuite s;
    unsigned int failures;

    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    s = CU_add_suite("heap map growth", NULL, NULL);
    CU_add_test(s, "growth keeps every block", test_growth_keeps_every_block);
    CU_add_test(s, "a failed growth changes nothing",
                test_failed_growth_changes_nothing);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures != 0;
}
