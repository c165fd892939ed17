/* Call stacks (R3S): per-stack counts in the state, names of frames, the
 * STACKS section, sampling estimates, the bound, and stripping to R3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_report.h"
#include "lm_strip.h"
#include "test_support.h"
#include "test_util.h"

enum { LIB = 0x1000, APP = 0x2000, MAIN = 0x3000, HOT_LINE = 10 };

/* An R3S stream up to its configuration: @lib.lua, @app.lua and
 * @main.lua, and a C symbol. */
static void begin_r3s(struct lm_buf *b, uint64_t depth, uint64_t sample_bytes)
{
    lm_enc_begin(b, LM_REV_R3S);
    lm_enc_sym_lfunc(b, LIB, "@lib.lua", 1);
    lm_enc_sym_lfunc(b, APP, "@app.lua", 1);
    lm_enc_sym_lfunc(b, MAIN, "@main.lua", 0);
    lm_enc_sym_cfunc(b, 0x7000, "libc.so.6:calloc");
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3S);
    lm_enc_stack_config(b, depth, sample_bytes);
}

/* A stack of the hotspot @lib.lua:10 called at @app.lua:LINE, itself
 * called at @main.lua:5, defined as id. */
static void def_caller(struct lm_buf *b, uint64_t id, uint64_t line)
{
    struct lm_stack_frame f[] = {frame_lua(LIB, HOT_LINE), frame_lua(APP, line),
                                 frame_lua(MAIN, 5)};

    lm_enc_stack_def(b, id, f, 3);
}

/*
 * The hotspot reached from @app.lua:20 300 times, then from @app.lua:30
 * 700 times, 16 bytes each; the collector frees the first 200 blocks
 * (all of them the first caller's).
 */
static void two_callers(struct lm_buf *b)
{
    struct lm_loc_ref hot = loc_lua(LIB, HOT_LINE), gc = loc_internal();

    begin_r3s(b, 8, 0);
    def_caller(b, 1, 20);
    def_caller(b, 2, 30);
    for (uint64_t i = 0; i < 1000; i++)
        lm_enc_alloc_stack(b, LM_REV_R3S, &hot, 0x100000 + 16 * i, 16,
                           i < 300 ? 1 : 2);
    for (uint64_t i = 0; i < 200; i++)
        lm_enc_free(b, LM_REV_R3S, &gc, 0x100000 + 16 * i, 16);
    lm_enc_epilogue(b);
    CU_ASSERT_FATAL(!b->oom);
}

static void load(struct lm_profile *p, const struct lm_buf *b, int threads)
{
    char err[128];

    CU_ASSERT_FATAL(lm_profile_init(p, NULL, NULL) == 0);
    if (threads == 2)
        CU_ASSERT(lm_profile_threads(p, 2) == 0);
    CU_ASSERT_EQUAL(feed_chunked(p, b->data, b->len, 0), LM_DONE);
    CU_ASSERT_EQUAL(lm_profile_settle(p, err, sizeof(err)), 0);
}

/* The location of (proto, line) whose stack's second frame is the line
 * caller_line of @app.lua, or LM_NONE. */
static uint32_t stacked_loc_of(const struct lm_state *s, uint64_t proto,
                               uint64_t line, uint64_t caller_line)
{
    for (uint32_t i = 0; i < s->nlocs; i++) {
        const struct lm_loc *l = &s->locs[i];
        uint32_t n;
        if (l->addr != proto || l->line != line || l->stack == 0)
            continue;
        const struct lm_sframe *f = lm_stacks_frames(&s->stacks, l->stack, &n);
        if (n >= 2 && f[1].addr == APP && f[1].value == caller_line)
            return i;
    }
    return LM_NONE;
}

static char *stacks_report(const struct lm_state *s, int json)
{
    struct lm_report_opts o = {.stacks = 1, .json = json};

    return report_with(s, &o);
}

static const char two_callers_stacks[] =
    "STACKS (depth 8, every allocation):\n"
    "@lib.lua:10: 1000 allocs\t+16000B\tlive 12800B in 800 blocks\n"
    "\t@app.lua:30: 700 allocs\t+11200B\tlive 11200B in 700 blocks\n"
    "\t\t@main.lua:5: 700 allocs\t+11200B\tlive 11200B in 700 blocks\n"
    "\t@app.lua:20: 300 allocs\t+4800B\tlive 1600B in 100 blocks\n"
    "\t\t@main.lua:5: 300 allocs\t+4800B\tlive 1600B in 100 blocks\n"
    "\n";

/* One line, two callers: a location each, with exact counts, and one
 * row in the default views; the STACKS section's tree, on one thread
 * and on two. */
static void test_two_callers(void)
{
    struct lm_buf b = {0};

    two_callers(&b);
    for (int threads = 1; threads <= 2; threads++) {
        struct lm_profile p;
        struct lm_counters c;
        load(&p, &b, threads);
        const struct lm_state *s = &p.state;
        uint32_t a = stacked_loc_of(s, LIB, HOT_LINE, 20);
        uint32_t z = stacked_loc_of(s, LIB, HOT_LINE, 30);
        CU_ASSERT_FATAL(a != LM_NONE && z != LM_NONE && a != z);
        lm_state_counters(s, a, &c);
        CU_ASSERT_EQUAL(c.alloc_events, 300);
        CU_ASSERT_EQUAL(c.live_blocks, 100);
        CU_ASSERT_EQUAL(c.live_bytes, 1600);
        lm_state_counters(s, z, &c);
        CU_ASSERT_EQUAL(c.alloc_events, 700);
        CU_ASSERT_EQUAL(c.live_blocks, 700);
        CU_ASSERT_EQUAL(s->stacks.nlocs, 2);
        CU_ASSERT_EQUAL(s->stacks.folded, 0);
        CU_ASSERT_EQUAL(s->stacks.depth, 8);

        char *text = report_string(s, 0, 0, 0);
        CU_ASSERT_PTR_NOT_NULL(
            strstr(text, "@lib.lua:10: 1000 events\t+16000B"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "@lib.lua:10 holds 12800B: 1000 "
                                            "allocs, 200 frees"));
        free(text);
        text = stacks_report(s, 0);
        const char *at = strstr(text, "STACKS");
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        if (strncmp(at, two_callers_stacks, strlen(two_callers_stacks)) != 0)
            fprintf(stderr, "\n--- got\n%s", at);
        CU_ASSERT_NSTRING_EQUAL(at, two_callers_stacks,
                                strlen(two_callers_stacks));
        CU_ASSERT_PTR_NOT_NULL(strstr(at, "\nHEAP SUMMARY:\n"));
        free(text);
        lm_profile_free(&p);
    }
    lm_buf_free(&b);
}

/* The stripped stream, through the filter, in chunks of `chunk`. */
static int collect(void *ctx, const void *buf, size_t len)
{
    lm_buf_bytes(ctx, buf, len);
    return 0;
}

static enum lm_status strip_chunked(const struct lm_buf *in, size_t chunk,
                                    struct lm_buf *out)
{
    struct lm_strip st;
    enum lm_status rc = LM_NEED_MORE;

    lm_strip_init(&st, NULL, collect, out);
    for (size_t off = 0; off < in->len && rc == LM_NEED_MORE; off += chunk) {
        size_t n = in->len - off < chunk ? in->len - off : chunk;
        uint8_t *copy = malloc(n); /* ASan sees a read past the chunk */
        memcpy(copy, in->data + off, n);
        rc = lm_strip_feed(&st, copy, n, NULL);
        free(copy);
    }
    if (rc == LM_NEED_MORE)
        rc = lm_strip_finish(&st);
    lm_strip_free(&st);
    return rc;
}

/* The R3S sample stripped is the R3 sample byte for byte, however it is
 * cut; a stream of another revision passes unchanged. */
static void test_strip_sample(void)
{
    static const size_t chunks[] = {1, 2, 3, 7, 64, 100000};
    struct lm_buf r3s = {0}, r3 = {0};

    sample_stream(&r3s, LM_REV_R3S);
    sample_stream(&r3, LM_REV_R3);
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        struct lm_buf out = {0}, same = {0};
        CU_ASSERT_EQUAL(strip_chunked(&r3s, chunks[c], &out), LM_DONE);
        CU_ASSERT_EQUAL_FATAL(out.len, r3.len);
        CU_ASSERT(memcmp(out.data, r3.data, r3.len) == 0);
        CU_ASSERT_EQUAL(strip_chunked(&r3, chunks[c], &same), LM_DONE);
        CU_ASSERT_EQUAL_FATAL(same.len, r3.len);
        CU_ASSERT(memcmp(same.data, r3.data, r3.len) == 0);
        lm_buf_free(&out);
        lm_buf_free(&same);
    }
    lm_buf_free(&r3s);
    lm_buf_free(&r3);
}

/* A stream cut anywhere strips to R3 cut between items: a prefix of the
 * whole stripped stream that decodes as truncated, never malformed. */
static void test_strip_truncated(void)
{
    struct lm_buf r3s = {0}, r3 = {0};

    sample_stream(&r3s, LM_REV_R3S);
    sample_stream(&r3, LM_REV_R3);
    for (size_t k = 0; k < r3s.len; k++) {
        struct lm_buf cut = {0}, out = {0};
        struct lm_decoder d;
        lm_buf_bytes(&cut, r3s.data, k);
        CU_ASSERT_EQUAL(strip_chunked(&cut, 5, &out), LM_NEED_MORE);
        CU_ASSERT(out.len <= r3.len);
        CU_ASSERT(out.len == 0 || memcmp(out.data, r3.data, out.len) == 0);
        lm_decoder_init(&d, NULL, NULL, NULL);
        if (out.len > 0)
            CU_ASSERT_EQUAL(lm_decoder_feed(&d, out.data, out.len, NULL),
                            LM_NEED_MORE);
        CU_ASSERT_EQUAL(d.pend_len, 0); /* nothing cut */
        lm_decoder_free(&d);
        lm_buf_free(&cut);
        lm_buf_free(&out);
    }
    lm_buf_free(&r3s);
    lm_buf_free(&r3);
}

static int refuse_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return -1;
}

/* A malformed stream stops the filter with the decoder's error; so does
 * a write that fails. */
static void test_strip_errors(void)
{
    struct lm_buf b = {0}, out = {0};
    struct lm_strip st;

    begin_r3s(&b, 4, 0);
    lm_buf_bytes(&b, "\x26\x10\x10\x01", 4); /* a free with a stack */
    CU_ASSERT_EQUAL(strip_chunked(&b, 3, &out), LM_ERROR);
    lm_buf_free(&out);
    lm_buf_free(&b);

    sample_stream(&b, LM_REV_R3S);
    lm_strip_init(&st, NULL, refuse_write, NULL);
    CU_ASSERT_EQUAL(lm_strip_feed(&st, b.data, b.len, NULL), LM_ERROR);
    CU_ASSERT(st.failed);
    CU_ASSERT_EQUAL(lm_strip_feed(&st, b.data, 1, NULL), LM_ERROR);
    lm_strip_free(&st);
    lm_buf_free(&b);
}

/* Whether two events are the same but for where they are and what
 * stack they name. */
static int same_event(const struct lm_record *x, const struct lm_record *y)
{
    return x->kind == y->kind && x->loc.source == y->loc.source &&
           x->loc.trace == y->loc.trace && x->loc.addr == y->loc.addr &&
           x->loc.line == y->loc.line && x->oaddr == y->oaddr &&
           x->osize == y->osize && x->naddr == y->naddr && x->nsize == y->nsize;
}

/* The events of a decoded stream. */
static void events_of(const struct lm_buf *b, struct recorder *r,
                      enum lm_revision *rev)
{
    struct lm_decoder d;
    struct recorder all = {0};

    lm_decoder_init(&d, NULL, recorder_sink, &all);
    CU_ASSERT_EQUAL(lm_decoder_feed(&d, b->data, b->len, NULL), LM_DONE);
    *rev = d.revision;
    for (size_t i = 0; i < all.n; i++) {
        const struct lm_record *x = &all.recs[i].rec;
        if (x->kind >= LM_REC_ALLOC && x->kind <= LM_REC_REALLOC)
            recorder_sink(r, x, 1, NULL, NULL, 0);
    }
    recorder_free(&all);
    lm_decoder_free(&d);
}

/*
 * What Tarantool's heap delta tests per location and per pair of
 * locations, split by stacks: allocations of no bytes with a stack beside
 * others without, and reallocations to no bytes with a stack beside
 * others, of blocks of both.
 */
static void split_tests(struct lm_buf *b)
{
    struct lm_loc_ref hot = loc_lua(LIB, HOT_LINE), re = loc_lua(APP, 40);

    begin_r3s(b, 8, 0);
    def_caller(b, 1, 20);
    def_caller(b, 2, 30);
    lm_enc_alloc_stack(b, LM_REV_R3S, &hot, 0x100, 0, 1);
    lm_enc_alloc(b, LM_REV_R3S, &hot, 0x200, 5);
    lm_enc_alloc_stack(b, LM_REV_R3S, &hot, 0x300, 7, 2);
    lm_enc_realloc_stack(b, LM_REV_R3S, &re, 0x200, 5, 0x400, 0, 2);
    lm_enc_realloc(b, LM_REV_R3S, &re, 0x300, 7, 0x500, 9);
    lm_enc_realloc_stack(b, LM_REV_R3S, &re, 0x100, 0, 0x600, 3, 1);
    lm_enc_epilogue(b);
}

/* Stripped, a stream with stacks is R3 with the same events, and its
 * report without --stacks is the report of the stream with them. */
static void check_strip_keeps(void (*make)(struct lm_buf *), size_t nevents)
{
    struct lm_buf b = {0}, out = {0};
    struct recorder with = {0}, without = {0};
    enum lm_revision rev_with, rev_without;

    make(&b);
    CU_ASSERT_EQUAL(strip_chunked(&b, 100, &out), LM_DONE);
    events_of(&b, &with, &rev_with);
    events_of(&out, &without, &rev_without);
    CU_ASSERT_EQUAL(rev_with, LM_REV_R3S);
    CU_ASSERT_EQUAL(rev_without, LM_REV_R3);
    CU_ASSERT_EQUAL_FATAL(with.n, without.n);
    CU_ASSERT_EQUAL(with.n, nevents);
    for (size_t i = 0; i < with.n; i++)
        CU_ASSERT(same_event(&with.recs[i].rec, &without.recs[i].rec));
    CU_ASSERT_EQUAL(with.recs[0].rec.stack, 1);
    CU_ASSERT_EQUAL(without.recs[0].rec.stack, 0);

    struct lm_profile p, q;
    load(&p, &b, 1);
    load(&q, &out, 1);
    for (int leak = 0; leak <= 1; leak++)
        for (int human = 0; human <= 1; human++) {
            char *x = report_string(&p.state, leak, human, 0);
            char *y = report_string(&q.state, leak, human, 0);
            CU_ASSERT_STRING_EQUAL(x, y);
            free(x);
            free(y);
        }
    struct lm_report_opts o = {.by_trace = 1};
    char *x = report_with(&p.state, &o), *y = report_with(&q.state, &o);
    CU_ASSERT_STRING_EQUAL(x, y);
    free(x);
    free(y);
    CU_ASSERT(memcmp(&p.state.totals, &q.state.totals,
                     sizeof(struct lm_totals)) == 0);
    lm_profile_free(&p);
    lm_profile_free(&q);
    recorder_free(&with);
    recorder_free(&without);
    lm_buf_free(&out);
    lm_buf_free(&b);
}

static void test_strip_keeps_events_and_report(void)
{
    check_strip_keeps(two_callers, 1200);
    check_strip_keeps(split_tests, 6);
}

/*
 * A reset forgets the VM's ids: id 1 names another stack after it, and
 * the first stack defined again under id 2 is the same stack, whose
 * counts go on.  An id not defined since the last reset is an error.
 */
static void test_reset(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref hot = loc_lua(LIB, HOT_LINE);
    struct lm_profile p;

    begin_r3s(&b, 8, 0);
    def_caller(&b, 1, 20);
    for (uint64_t i = 0; i < 100; i++)
        lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x1000 + i * 16, 16, 1);
    lm_enc_stack_reset(&b);
    def_caller(&b, 1, 30);
    def_caller(&b, 2, 20);
    for (uint64_t i = 100; i < 150; i++)
        lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x1000 + i * 16, 16, 1);
    for (uint64_t i = 150; i < 175; i++)
        lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x1000 + i * 16, 16, 2);
    size_t good = b.len;
    lm_enc_stack_reset(&b);
    size_t bad_at = b.len;
    lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x9000, 16, 2);
    lm_enc_epilogue(&b);

    struct lm_buf whole = {0};
    lm_buf_bytes(&whole, b.data, good);
    lm_enc_epilogue(&whole);
    load(&p, &whole, 1);
    struct lm_counters c;
    lm_state_counters(&p.state, stacked_loc_of(&p.state, LIB, HOT_LINE, 20),
                      &c);
    CU_ASSERT_EQUAL(c.alloc_events, 125);
    CU_ASSERT_EQUAL(c.live_blocks, 125);
    lm_state_counters(&p.state, stacked_loc_of(&p.state, LIB, HOT_LINE, 30),
                      &c);
    CU_ASSERT_EQUAL(c.alloc_events, 50);
    CU_ASSERT_EQUAL(p.state.stacks.n, 3); /* none, and two stacks */
    CU_ASSERT_EQUAL(p.state.stacks.resets, 1);
    CU_ASSERT_EQUAL(p.state.stacks.defs, 3);
    lm_profile_free(&p);

    CU_ASSERT_FATAL(lm_profile_init(&p, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 7), LM_ERROR);
    CU_ASSERT_EQUAL(p.dec.err_offset, bad_at);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.dec.errmsg, "not defined"));
    CU_ASSERT_EQUAL(p.state.totals.alloc_events, 175);
    lm_profile_free(&p);
    lm_buf_free(&whole);
    lm_buf_free(&b);
}

/* Frames are named as the report names them: Lua lines (aliases too),
 * C symbols by name, builtins by their symbol alone, markers; a C
 * location is never named by a builtin's symbol below it. */
static void test_frame_names(void)
{
    static const char *const want[] = {
        "function_alias_1:2", "string.rep", "libc.so.6:calloc",
        "CFUNC 0x6000",       "CFUNC 0x12", "[tail call]",
        "[coroutine]",        "@lib.lua:3", "[truncated]"};
    struct lm_stack_frame f[] = {frame_lua(0x4000, 2),
                                 frame_c(17),
                                 frame_c(0x7008),
                                 frame_c(0x6000),
                                 frame_c(18),
                                 frame_marker(LM_MARK_TAILCALL),
                                 frame_marker(LM_MARK_COROUTINE),
                                 frame_lua(LIB, 3),
                                 frame_marker(LM_MARK_TRUNCATED)};
    struct lm_loc_ref site = loc_c(0x5000);
    struct lm_buf b = {0};
    struct lm_profile p;
    char name[128];
    uint32_t n;

    begin_r3s(&b, 8, 0);
    lm_enc_event_lfunc(&b, 0x4000, "local x = 1\nreturn {}", 1);
    lm_enc_event_cfunc(&b, 17, "string.rep");
    lm_enc_stack_def(&b, 1, f, 9);
    lm_enc_alloc_stack(&b, LM_REV_R3S, &site, 0x100, 8, 1);
    lm_enc_epilogue(&b);
    load(&p, &b, 1);
    CU_ASSERT_EQUAL_FATAL(p.state.nlocs, 1);
    lm_state_loc_name(&p.state, 0, name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, "CFUNC 0x5000");
    const struct lm_sframe *fr =
        lm_stacks_frames(&p.state.stacks, p.state.locs[0].stack, &n);
    CU_ASSERT_EQUAL_FATAL(n, 9);
    for (uint32_t i = 0; i < n; i++) {
        lm_state_frame_name(&p.state, &fr[i], name, sizeof(name));
        CU_ASSERT_STRING_EQUAL(name, want[i]);
    }
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A frame is bound to its prototype's epoch when its stack is defined:
 * a module reloaded at the same address makes stacks of its own, and the
 * old ones keep their names. */
static void test_frames_bound_to_epochs(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref hot = loc_lua(MAIN, 7);
    struct lm_stack_frame f[] = {frame_lua(MAIN, 7), frame_lua(LIB, 3)};
    struct lm_profile p;

    begin_r3s(&b, 8, 0);
    lm_enc_stack_def(&b, 1, f, 2);
    lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x100, 8, 1);
    lm_enc_event_lfunc(&b, LIB, "@lib2.lua", 1);
    lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x200, 8, 1);
    lm_enc_stack_reset(&b);
    lm_enc_stack_def(&b, 1, f, 2);
    lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, 0x300, 8, 1);
    lm_enc_epilogue(&b);
    load(&p, &b, 1);
    char *text = stacks_report(&p.state, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "@main.lua:7: 3 allocs\t+24B\t"
                                        "live 24B in 3 blocks\n"
                                        "\t@lib.lua:3: 2 allocs\t+16B\t"
                                        "live 16B in 2 blocks\n"
                                        "\t@lib2.lua:3: 1 allocs\t+8B\t"
                                        "live 8B in 1 blocks\n"));
    free(text);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A small pseudo-random generator (xorshift64*), seeded: the same
 * stream in every run. */
static uint64_t next_random(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545f4914f6cdd1dULL;
}

static double uniform(uint64_t *x)
{
    return (double)(next_random(x) >> 11) * 0x1p-53;
}

/* What a sampled stream really holds: bytes allocated by each caller,
 * and live at the end. */
struct truth {
    uint64_t bytes[2], live[2], allocs[2];
};

enum { SAMPLED = 40000, MEAN = 4096 };

/*
 * SAMPLED allocations at the hotspot of sizes from 16 bytes to 4 KiB and
 * a few up to 64 KiB, a quarter from @app.lua:20, the rest from
 * @app.lua:30; each carries its stack with the VM's chance, 1 -
 * exp(-s/MEAN) (docs/format.md, "Sampling"); every third block freed.
 */
static void sampled_stream(struct lm_buf *b, struct truth *t)
{
    struct lm_loc_ref hot = loc_lua(LIB, HOT_LINE), gc = loc_internal();
    uint64_t seed = 0x9e3779b97f4a7c15ULL;

    memset(t, 0, sizeof(*t));
    begin_r3s(b, 8, MEAN);
    def_caller(b, 1, 20);
    def_caller(b, 2, 30);
    for (uint64_t i = 0; i < SAMPLED; i++) {
        uint64_t r = next_random(&seed);
        uint64_t size = r % 50 == 0 ? 8192 + r % 57344 : 16 + r % 4080;
        int caller = i % 4 != 0;
        double p = -expm1(-(double)size / MEAN);
        uint64_t stack = uniform(&seed) < p ? 1 + (uint64_t)caller : 0;
        enc_alloc_at(b, LM_REV_R3S, &hot, 0x100000 + 65536 * i, size, stack);
        t->bytes[caller] += size;
        t->allocs[caller]++;
        if (i % 3)
            t->live[caller] += size;
        else
            lm_enc_free(b, LM_REV_R3S, &gc, 0x100000 + 65536 * i, size);
    }
    lm_enc_epilogue(b);
    CU_ASSERT_FATAL(!b->oom);
}

static int within(double estimate, double truth, double part)
{
    if (fabs(estimate - truth) <= part * truth)
        return 1;
    fprintf(stderr, "\nestimate %.0f, truth %.0f\n", estimate, truth);
    return 0;
}

/* Sampled stacks: each caller's estimate of bytes allocated, live and
 * allocations within 10% of the truth; the site's own counts exact; the
 * report marks estimates. */
static void test_sampled_estimates(void)
{
    struct lm_buf b = {0};
    struct truth t;
    struct lm_profile p;
    struct lm_counters c;

    sampled_stream(&b, &t);
    load(&p, &b, 1);
    const struct lm_state *s = &p.state;
    struct lm_stack_est *live = calloc(s->nlocs, sizeof(*live));
    CU_ASSERT_FATAL(live != NULL);
    lm_state_stack_live(s, live);
    uint64_t lines[2] = {20, 30};
    double all = 0;
    for (int k = 0; k < 2; k++) {
        uint32_t loc = stacked_loc_of(s, LIB, HOT_LINE, lines[k]);
        CU_ASSERT_FATAL(loc != LM_NONE);
        lm_state_counters(s, loc, &c);
        /* The sampled events, exactly; far fewer than all. */
        CU_ASSERT(c.alloc_events > 1000 && c.alloc_events < t.allocs[k]);
        CU_ASSERT(within(s->stacks.est[loc].bytes, (double)t.bytes[k], 0.1));
        CU_ASSERT(within(s->stacks.est[loc].events, (double)t.allocs[k], 0.1));
        CU_ASSERT(within(live[loc].bytes, (double)t.live[k], 0.1));
        all += s->stacks.est[loc].bytes;
    }
    CU_ASSERT(t.live[0] > 0);
    CU_ASSERT(within(all, (double)(t.bytes[0] + t.bytes[1]), 0.1));
    char *text = stacks_report(s, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "STACKS (depth 8, sampled every 4096 "
                                        "bytes on average: ~ marks "
                                        "estimates):\n@lib.lua:10: 40000 "
                                        "allocs\t+"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\t@app.lua:30: ~"));
    CU_ASSERT_PTR_NULL(strstr(text, "[no stack]"));
    free(text);
    /* The same on two threads. */
    struct lm_profile q;
    load(&q, &b, 2);
    char *x = stacks_report(&p.state, 0), *y = stacks_report(&q.state, 0);
    CU_ASSERT_STRING_EQUAL(x, y);
    free(x);
    free(y);
    lm_profile_free(&q);
    free(live);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/*
 * Past the bound on locations of a site and a stack, an event's stack is
 * dropped: 30 stacks, a bound of 10 (so 10 stacks kept, and the other
 * 20's ids fold), then a second site whose stacks would need locations
 * past it.  The totals stay exact, the folded events are counted and
 * shown as no stack.
 */
static void test_bound_folds(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref hot = loc_lua(LIB, HOT_LINE), other = loc_lua(LIB, 11);
    struct lm_profile p;
    char err[64];
    uint64_t addr = 0x1000;

    begin_r3s(&b, 8, 0);
    for (uint64_t k = 1; k <= 30; k++) {
        def_caller(&b, k, 100 + k);
        for (int i = 0; i < 5; i++, addr += 16)
            lm_enc_alloc_stack(&b, LM_REV_R3S, &hot, addr, 16, k);
    }
    for (uint64_t k = 1; k <= 3; k++)
        for (int i = 0; i < 2; i++, addr += 16)
            lm_enc_alloc_stack(&b, LM_REV_R3S, &other, addr, 16, k);
    lm_enc_epilogue(&b);
    for (int threads = 1; threads <= 2; threads++) {
        CU_ASSERT_FATAL(lm_profile_init(&p, NULL, NULL) == 0);
        p.state.stacks.max_locs = 10;
        if (threads == 2)
            CU_ASSERT(lm_profile_threads(&p, 2) == 0);
        CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
        CU_ASSERT_EQUAL(lm_profile_settle(&p, err, sizeof(err)), 0);
        CU_ASSERT_EQUAL(p.state.stacks.nlocs, 10);
        CU_ASSERT_EQUAL(p.state.stacks.n, 11);
        CU_ASSERT_EQUAL(p.state.stacks.folded, 20 * 5 + 3 * 2);
        CU_ASSERT_EQUAL(p.state.totals.alloc_events, 156);
        CU_ASSERT_EQUAL(p.state.totals.live_blocks, 156);
        char *text = stacks_report(&p.state, 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "STACKS (depth 8, every "
                                            "allocation); 106 events past "
                                            "the bound without theirs:\n"
                                            "@lib.lua:10: 150 allocs"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "\t[no stack]: 100 allocs\t+1600B"
                                            "\tlive 1600B in 100 blocks\n"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "\t@app.lua:101: 5 allocs"));
        CU_ASSERT_PTR_NULL(strstr(text, "\t@app.lua:111:"));
        CU_ASSERT_PTR_NULL(strstr(text, "@lib.lua:11: 6 allocs"));
        free(text);
        lm_profile_free(&p);
    }
    lm_buf_free(&b);
}

/* The STACKS section of a stream without stacks says so; in JSON, the
 * tree with each figure and whether it is an estimate. */
static void test_section_forms(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;

    sample_stream(&b, LM_REV_R3);
    load(&p, &b, 1);
    char *text = stacks_report(&p.state, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "DEALLOCATIONS\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\n\nSTACKS (none: the stream has no "
                                        "call stacks):\n\nHEAP SUMMARY:\n"));
    free(text);
    lm_profile_free(&p);
    lm_buf_free(&b);

    two_callers(&b);
    load(&p, &b, 1);
    text = stacks_report(&p.state, 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "\"stacks\":{\"depth\":8,\"sample_bytes\":0,\"folded\":0,"
                     "\"sites\":[{\"location\":\"@lib.lua:10\",\"allocs\":1000,"
                     "\"alloc_bytes\":16000,\"live_bytes\":12800,"
                     "\"live_blocks\":800,\"estimated\":false,\"callers\":[{"
                     "\"frame\":\"@app.lua:30\",\"allocs\":700,"));
    free(text);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static int setup(void)
{
    return test_dir_make("stacks");
}

static int teardown(void)
{
    return test_dir_remove();
}

/* test_dir/name's bytes. */
static void read_file(const char *name, struct lm_buf *b)
{
    char path[256], buf[4096];
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_FATAL(f != NULL);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        lm_buf_bytes(b, buf, n);
    fclose(f);
}

static void write_file(const char *name, const struct lm_buf *b)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(b->data, 1, b->len, f) == b->len);
    fclose(f);
}

/* ljmpctl report --stacks and --strip-stacks -o on files: the tree, the
 * stripped file's report equal to the stacked one's, and what each
 * refuses. */
static void test_cli(void)
{
    struct lm_buf b = {0};
    char *out, *err, *plain, *stripped;

    two_callers(&b);
    write_file("stacks.bin", &b);
    CU_ASSERT_EQUAL(run_ljmpctl("report --stacks stacks.bin", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, two_callers_stacks));
    CU_ASSERT_STRING_EQUAL(err, "");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("report stacks.bin", &plain, &err), 0);
    free(err);
    CU_ASSERT_EQUAL(
        run_ljmpctl("report --strip-stacks -o r3.bin stacks.bin", &out, &err),
        0);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_STRING_EQUAL(err, "");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("report r3.bin", &stripped, &err), 0);
    CU_ASSERT_STRING_EQUAL(plain, stripped);
    CU_ASSERT_PTR_NULL(strstr(plain, "STACKS"));
    free(plain);
    free(stripped);
    free(err);
    /* Standard input; a cut file leaves what was whole, exit 2. */
    CU_ASSERT_EQUAL(run_ljmpctl("report --strip-stacks -o r3b.bin - "
                                "<stacks.bin",
                                NULL, NULL),
                    0);
    struct lm_buf one = {0}, two = {0}, r3 = {0};
    read_file("r3.bin", &one);
    read_file("r3b.bin", &two);
    CU_ASSERT_FATAL(strip_chunked(&b, 4096, &r3) == LM_DONE);
    CU_ASSERT_EQUAL_FATAL(one.len, r3.len);
    CU_ASSERT_EQUAL_FATAL(two.len, r3.len);
    CU_ASSERT(memcmp(one.data, r3.data, r3.len) == 0);
    CU_ASSERT(memcmp(two.data, r3.data, r3.len) == 0);
    lm_buf_free(&one);
    lm_buf_free(&two);
    lm_buf_free(&r3);
    struct lm_buf cut = {0};
    lm_buf_bytes(&cut, b.data, b.len - 3);
    write_file("cut.bin", &cut);
    CU_ASSERT_EQUAL(
        run_ljmpctl("report --strip-stacks -o r3c.bin cut.bin", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "r3c.bin holds everything before it"));
    free(err);
    static const char *const refused[] = {
        "report --strip-stacks stacks.bin",
        "report -o x.bin stacks.bin",
        "report --strip-stacks -o x.bin 1",
        "report --strip-stacks -o x.bin --tree 1",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        CU_ASSERT_EQUAL(run_ljmpctl(refused[i], NULL, &err), 1);
        CU_ASSERT(strlen(err) > 0);
        free(err);
    }
    lm_buf_free(&cut);
    lm_buf_free(&b);
}

void register_stacks_tests(void)
{
    CU_pSuite s = CU_add_suite("stacks", setup, teardown);

    CU_add_test(s, "one line, two callers", test_two_callers);
    CU_add_test(s, "a reset and ids reused", test_reset);
    CU_add_test(s, "names of frames", test_frame_names);
    CU_add_test(s, "frames bound to epochs", test_frames_bound_to_epochs);
    CU_add_test(s, "sampling estimates", test_sampled_estimates);
    CU_add_test(s, "the bound folds stacks", test_bound_folds);
    CU_add_test(s, "the section's forms", test_section_forms);
    CU_add_test(s, "the R3S sample stripped is the R3 sample",
                test_strip_sample);
    CU_add_test(s, "a cut stream strips to a cut stream", test_strip_truncated);
    CU_add_test(s, "stripping stops at errors", test_strip_errors);
    CU_add_test(s, "stripped: the same events and report",
                test_strip_keeps_events_and_report);
    CU_add_test(s, "ljmpctl report --stacks and --strip-stacks", test_cli);
}
