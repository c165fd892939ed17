/* libFuzzer target: decoder + state + report on arbitrary bytes, fed in
 * chunks whose sizes the input chooses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_encoder.h"
#include "lm_groups.h"
#include "lm_par.h"
#include "lm_report.h"
#include "lm_profile.h"
#include "lm_state.h"
#include "lm_strip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Groups named as locations appeared still match every location's name
 * (names are fixed at birth) and account for every live block. */
static void check_groups(struct lm_groups *g, const struct lm_state *s)
{
    char name[512];
    uint64_t blocks = 0;

    if (lm_groups_update(g, s) != 0)
        abort();
    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, name, sizeof(name));
        if (strncmp(name, g->v[g->group_of[i]].name, sizeof(name) - 1) != 0)
            abort();
    }
    struct lm_counters *sum = calloc(g->n + 1, sizeof(*sum));
    if (sum != NULL) {
        lm_groups_sum(g, s, sum);
        for (uint32_t i = 0; i < g->n; i++)
            blocks += sum[i].live_blocks;
        if (blocks != s->totals.live_blocks)
            abort();
        free(sum);
    }
    lm_groups_free(g);
}

/* Feeds data in chunks, naming groups as the locations come (like a live
 * view) when g is given, and asks the decoder how the stream ended. */
static void feed(struct lm_profile *p, const uint8_t *data, size_t size,
                 size_t chunk, struct lm_groups *g)
{
    enum lm_status st = LM_NEED_MORE;

    for (size_t off = 0; off < size && st == LM_NEED_MORE;) {
        size_t n = size - off < chunk ? size - off : chunk, used;
        /* A private copy: any read past it is caught by ASan. */
        uint8_t *copy = malloc(n);
        memcpy(copy, data + off, n);
        st = lm_profile_feed(p, copy, n, &used);
        free(copy);
        if (used > n)
            abort();
        off += n;
        if (g != NULL && lm_groups_update(g, &p->state) != 0)
            abort();
    }
    lm_decoder_finish(&p->dec);
}

/* The text report of a state (everything but the totals), malloc'd
 * (NULL if it cannot be made). */
static char *report_of(const struct lm_state *s)
{
    struct lm_report_opts opts = {0};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL)
        return NULL;
    if (lm_report_write(f, s, &opts) != 0)
        abort();
    fclose(f);
    return text;
}

/* Two threads end where one does: the same error at the same offset, the
 * same totals, the same report. */
static void check_one_thread_agrees(const uint8_t *data, size_t size,
                                    size_t chunk, const struct lm_limits *lim,
                                    const struct lm_state_limits *slim,
                                    const struct lm_profile *two)
{
    struct lm_profile one;

    if (lm_profile_init(&one, lim, slim) != 0)
        return;
    one.state.stacks.max_locs = two->state.stacks.max_locs;
    feed(&one, data, size, chunk, NULL);
    if (one.dec.phase != two->dec.phase ||
        one.dec.err_offset != two->dec.err_offset ||
        strcmp(one.dec.errmsg, two->dec.errmsg) != 0)
        abort();
    if (memcmp(&one.state.totals, &two->state.totals,
               sizeof(struct lm_totals)) != 0)
        abort();
    char *r1 = report_of(&one.state), *r2 = report_of(&two->state);
    if (r1 != NULL && r2 != NULL && strcmp(r1, r2) != 0)
        abort();
    free(r1);
    free(r2);
    lm_profile_free(&one);
}

static int append(void *ctx, const void *buf, size_t len)
{
    struct lm_buf *b = ctx;

    lm_buf_bytes(b, buf, len);
    return b->oom ? -1 : 0;
}

/*
 * A stream the state took whole, stripped of its stacks (lm_strip.h),
 * is whole R3 (or the stream as it was) whose state has the same totals
 * and the same report without --stacks.
 */
static void check_stripped_agrees(const uint8_t *data, size_t size,
                                  size_t chunk, const struct lm_limits *lim,
                                  const struct lm_state_limits *slim,
                                  const struct lm_profile *p)
{
    struct lm_buf out = {0};
    struct lm_strip st;
    struct lm_profile q;
    enum lm_status rc = LM_NEED_MORE;

    if (p->dec.phase != LM_PH_DONE)
        return;
    lm_strip_init(&st, lim, append, &out);
    for (size_t off = 0; off < size && rc == LM_NEED_MORE; off += chunk)
        rc = lm_strip_feed(&st, data + off,
                           size - off < chunk ? size - off : chunk, NULL);
    int failed = st.failed;
    lm_strip_free(&st);
    if (failed || lm_profile_init(&q, lim, slim) != 0) {
        lm_buf_free(&out);
        return; /* out of memory */
    }
    if (rc != LM_DONE)
        abort();
    feed(&q, out.data, out.len, out.len ? out.len : 1, NULL);
    if (q.dec.phase != LM_PH_DONE || q.dec.revision == LM_REV_R3S ||
        memcmp(&q.state.totals, &p->state.totals, sizeof(struct lm_totals)))
        abort();
    char *r1 = report_of(&p->state), *r2 = report_of(&q.state);
    if (r1 != NULL && r2 != NULL && strcmp(r1, r2) != 0)
        abort();
    free(r1);
    free(r2);
    lm_profile_free(&q);
    lm_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct lm_limits limits = {4096, 4096 + 64};
    struct lm_state_limits state_limits = {1 << 16, 0};
    static const uint64_t budgets[3] = {UINT64_MAX, 1, 4096};
    struct lm_profile p;
    char err[128];

    if (size < 1)
        return 0;
    /*
     * The first byte picks the chunk size: 1..255, or 0 for all at once;
     * modulo 3, the path records take through the state (direct, the full
     * prefetch pipeline, or the heap-only one once 256 blocks are live at
     * under 5 locations), which must agree; with bit 6 set, two threads,
     * checked against one; with bit 7, a bound of 8 locations of a site
     * and a stack, so that stacks fold.
     */
    uint8_t how = data[0];
    size_t chunk = how ? how : size;
    int threads = how & 0x40 ? 2 : 1;
    state_limits.direct_bytes = budgets[how % 3];
    data++;
    size--;
    if (lm_profile_init(&p, &limits, &state_limits) != 0)
        return 0;
    if (how & 0x80)
        p.state.stacks.max_locs = 8;
    if (threads == 2 && lm_profile_threads(&p, 2) != 0)
        abort();
    struct lm_groups g;
    int groups_ok = lm_groups_init(&g) == 0;
    feed(&p, data, size, chunk, groups_ok ? &g : NULL);
    if (lm_profile_settle(&p, err, sizeof(err)) != 0)
        abort(); /* only out of memory */
    if (threads == 2)
        check_one_thread_agrees(data, size, chunk, &limits, &state_limits, &p);
    check_stripped_agrees(data, size, chunk, &limits, &state_limits, &p);
    /* Names, sorting and overrides must hold for whatever was accepted. */
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull != NULL) {
        struct lm_report_opts opts = {.human_readable = 1};
        if (lm_report_write(devnull, &p.state, &opts) != 0)
            abort();
        opts.json = 1;
        lm_report_write(devnull, &p.state, &opts);
        opts.by_trace = 1; /* by trace: markers' and stand-ins' epochs */
        lm_report_write(devnull, &p.state, &opts);
        opts.by_trace = 0;
        opts.stacks = 1; /* each site's callers, estimates and all */
        lm_report_write(devnull, &p.state, &opts);
        opts.json = 0;
        if (lm_report_write(devnull, &p.state, &opts) != 0)
            abort();
        fclose(devnull);
    }
    /* The live heap must match the heap map exactly. */
    if (p.state.totals.live_blocks != p.state.heap.count)
        abort();
    /* Name groups (live views), named as locations appeared, still match
     * every location's name and account for every live block. */
    if (groups_ok)
        check_groups(&g, &p.state);
    lm_profile_free(&p);
    return 0;
}
