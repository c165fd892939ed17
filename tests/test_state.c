/* State tests: heap delta, epochs, aliases, C symbols, overrides, limits. */
#include <stdlib.h>
#include <string.h>

#include "lm_groups.h"
#include "lm_par.h"
#include "lm_report.h"
#include "lm_table.h"
#include "test_util.h"

static void run(struct lm_profile *p, struct lm_buf *b, enum lm_status want)
{
    CU_ASSERT_FATAL(!b->oom);
    lm_profile_init(p, NULL, NULL);
    CU_ASSERT_EQUAL(feed_chunked(p, b->data, b->len, 0), want);
}

/* The location whose name is `name`, or LM_NONE; must be unique. */
static uint32_t loc_named(const struct lm_state *s, const char *name)
{
    uint32_t found = LM_NONE;
    char buf[512];

    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, buf, sizeof(buf));
        if (strcmp(buf, name) == 0) {
            CU_ASSERT_EQUAL(found, LM_NONE);
            found = i;
        }
    }
    if (found == LM_NONE)
        fprintf(stderr, "\nno location named '%s'\n", name);
    return found;
}

static struct lm_counters counters(const struct lm_state *s, const char *name)
{
    uint32_t id = loc_named(s, name);
    struct lm_counters c;

    CU_ASSERT_FATAL(id != LM_NONE);
    lm_state_counters(s, id, &c);
    return c;
}

static void begin_r3(struct lm_buf *b)
{
    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x100, "@h.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
}

/* The override of (kind, site, primary) by name in ovr (n records):
 * exactly one, or NULL. */
static const struct lm_override *
override_named(const struct lm_state *s, const struct lm_override *ovr,
               uint32_t n, uint8_t kind, const char *site, const char *primary)
{
    const struct lm_override *found = NULL;
    uint32_t sid = loc_named(s, site), pid = loc_named(s, primary);

    for (uint32_t i = 0; i < n; i++)
        if (ovr[i].kind == kind && ovr[i].site == sid &&
            ovr[i].primary == pid) {
            CU_ASSERT_PTR_NULL(found);
            found = &ovr[i];
        }
    return found;
}

/*
 * A primary released by more sites than its record keeps pending counts
 * for, in turns, and by one site for more than 4 GiB: every pair's counts
 * are exact, in one record each.
 */
static void test_overrides_past_pending(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref prim = loc_lua(0x100, 1), big = loc_lua(0x100, 2),
                      in = loc_internal();
    enum { SITES = 6, ROUNDS = 50 };

    begin_r3(&b);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < SITES; k++) {
            struct lm_loc_ref site = loc_lua(0x100, 10 + (uint64_t)k);
            lm_enc_alloc(&b, LM_REV_R3, &prim, 0x1000, 16 + (uint64_t)k);
            if (k % 2 == 0) {
                lm_enc_free(&b, LM_REV_R3, &site, 0x1000, 16 + (uint64_t)k);
            } else {
                lm_enc_realloc(&b, LM_REV_R3, &site, 0x1000, 16 + (uint64_t)k,
                               0x2000, 100);
                lm_enc_free(&b, LM_REV_R3, &in, 0x2000, 100);
            }
        }
    for (int r = 0; r < 3; r++) {
        struct lm_loc_ref site = loc_lua(0x100, 30);
        lm_enc_alloc(&b, LM_REV_R3, &big, 0x8000, 0xC0000000u);
        lm_enc_free(&b, LM_REV_R3, &site, 0x8000, 0xC0000000u);
    }
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    uint32_t n = 0;
    struct lm_override *ovr = lm_state_overrides(s, &n);
    CU_ASSERT_FATAL(ovr != NULL);
    CU_ASSERT_EQUAL(n, SITES + SITES / 2 + 1);
    for (int k = 0; k < SITES; k++) {
        char site[32];
        snprintf(site, sizeof(site), "@h.lua:%d", 10 + k);
        const struct lm_override *o = override_named(
            s, ovr, n, k % 2 ? LM_EV_REALLOC : LM_EV_FREE, site, "@h.lua:1");
        CU_ASSERT_FATAL(o != NULL);
        CU_ASSERT_EQUAL(o->count, ROUNDS);
        CU_ASSERT_EQUAL(o->freed, (uint64_t)ROUNDS * (16 + (uint64_t)k));
        CU_ASSERT_EQUAL(o->allocated, k % 2 ? (uint64_t)ROUNDS * 100 : 0);
        if (k % 2) {
            o = override_named(s, ovr, n, LM_EV_FREE, "INTERNAL", site);
            CU_ASSERT_FATAL(o != NULL);
            CU_ASSERT_EQUAL(o->count, ROUNDS);
            CU_ASSERT_EQUAL(o->freed, (uint64_t)ROUNDS * 100);
        }
    }
    const struct lm_override *o =
        override_named(s, ovr, n, LM_EV_FREE, "@h.lua:30", "@h.lua:2");
    CU_ASSERT_FATAL(o != NULL);
    CU_ASSERT_EQUAL(o->count, 3);
    CU_ASSERT_EQUAL(o->freed, 3 * 0xC0000000ull);
    free(ovr);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static void test_heap_delta_exact(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l1 = loc_lua(0x100, 1), l2 = loc_lua(0x100, 2),
                      l3 = loc_lua(0x100, 3), l4 = loc_lua(0x100, 4),
                      in = loc_internal();

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l1, 0x10, 100);
    lm_enc_alloc(&b, LM_REV_R3, &l1, 0x20, 50);
    lm_enc_alloc(&b, LM_REV_R3, &l2, 0x30, 10);
    lm_enc_realloc(&b, LM_REV_R3, &l3, 0x20, 50, 0x40, 80);
    lm_enc_free(&b, LM_REV_R3, &l4, 0x10, 100);
    lm_enc_free(&b, LM_REV_R3, &in, 0x30, 10);
    lm_enc_free(&b, LM_REV_R3, &in, 0x999, 7); /* from before the start */
    lm_enc_alloc(&b, LM_REV_R3, &in, 0, 5);    /* failed */
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(s->totals.live_bytes, 80);
    CU_ASSERT_EQUAL(s->totals.live_blocks, 1);
    CU_ASSERT_EQUAL(s->totals.peak_live_blocks, 3);
    CU_ASSERT_EQUAL(s->heap.count, 1);
    CU_ASSERT_EQUAL(s->totals.unknown_frees, 1);
    CU_ASSERT_EQUAL(s->totals.failed_allocs, 1);
    CU_ASSERT_EQUAL(s->totals.alloc_events, 4);
    CU_ASSERT_EQUAL(s->totals.realloc_events, 1);
    CU_ASSERT_EQUAL(s->totals.free_events, 3);
    CU_ASSERT_EQUAL(s->totals.alloc_bytes, 100 + 50 + 10 + 80 + 5);
    CU_ASSERT_EQUAL(s->totals.freed_bytes, 50 + 100 + 10 + 7);

    struct lm_counters c = counters(s, "@h.lua:1");
    CU_ASSERT_EQUAL(c.alloc_events, 2);
    CU_ASSERT_EQUAL(c.alloc_bytes, 150);
    CU_ASSERT_EQUAL(c.live_bytes, 0);
    CU_ASSERT_EQUAL(c.live_blocks, 0);
    c = counters(s, "@h.lua:3");
    CU_ASSERT_EQUAL(c.realloc_events, 1);
    CU_ASSERT_EQUAL(c.realloc_new_bytes, 80);
    CU_ASSERT_EQUAL(c.realloc_old_bytes, 50);
    CU_ASSERT_EQUAL(c.live_bytes, 80);
    CU_ASSERT_EQUAL(c.live_blocks, 1);
    c = counters(s, "@h.lua:4");
    CU_ASSERT_EQUAL(c.free_events, 1);
    CU_ASSERT_EQUAL(c.free_bytes, 100);
    c = counters(s, "INTERNAL");
    CU_ASSERT_EQUAL(c.free_events, 2);
    CU_ASSERT_EQUAL(c.free_bytes, 17);

    /* Overrides: who released whose blocks. */
    uint32_t novr = 0;
    struct lm_override *ovr = lm_state_overrides(s, &novr);
    CU_ASSERT_EQUAL(novr, 3);
    for (uint32_t i = 0; i < novr; i++) {
        const struct lm_override *o = &ovr[i];
        char site[64], prim[64];
        lm_state_loc_name(s, o->site, site, sizeof(site));
        lm_state_loc_name(s, o->primary, prim, sizeof(prim));
        if (o->kind == LM_EV_REALLOC) {
            CU_ASSERT_STRING_EQUAL(site, "@h.lua:3");
            CU_ASSERT_STRING_EQUAL(prim, "@h.lua:1");
            CU_ASSERT_EQUAL(o->allocated, 80);
            CU_ASSERT_EQUAL(o->freed, 50);
        } else if (strcmp(site, "INTERNAL") == 0) {
            CU_ASSERT_STRING_EQUAL(prim, "@h.lua:2");
            CU_ASSERT_EQUAL(o->freed, 10);
        } else {
            CU_ASSERT_STRING_EQUAL(site, "@h.lua:4");
            CU_ASSERT_STRING_EQUAL(prim, "@h.lua:1");
            CU_ASSERT_EQUAL(o->freed, 100);
            CU_ASSERT_EQUAL(o->allocated, 0);
        }
        CU_ASSERT_EQUAL(o->count, 1);
    }
    free(ovr);

    /* Tarantool's heap delta, per name. */
    char *rep = report_string(s, 1, 0, 0);
    CU_ASSERT_STRING_EQUAL(rep, "HEAP SUMMARY:\n"
                                "@h.lua:1 holds 80B: 3 allocs, 2 frees\n"
                                "INTERNAL holds 5B: 1 allocs, 0 frees\n"
                                "\n");
    free(rep);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A prototype address reused by a new prototype opens a new epoch. */
static void test_proto_epochs(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 3);

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x10, 16);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x20, 16);
    lm_enc_free(&b, LM_REV_R3, &l, 0x10, 16);
    /* The old prototype dies, a new one is born at the same address. */
    lm_enc_event_lfunc(&b, 0x100, "@other.lua", 2);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x30, 32);
    lm_enc_free(&b, LM_REV_R3, &l, 0x20, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    struct lm_counters old = counters(s, "@h.lua:3");
    struct lm_counters cur = counters(s, "@other.lua:3");
    CU_ASSERT_EQUAL(old.alloc_events, 2);
    CU_ASSERT_EQUAL(old.free_events, 1);
    CU_ASSERT_EQUAL(old.live_bytes, 0);
    CU_ASSERT_EQUAL(cur.alloc_events, 1);
    CU_ASSERT_EQUAL(cur.free_events, 1);
    CU_ASSERT_EQUAL(cur.live_bytes, 32);
    CU_ASSERT_EQUAL(s->sym.nprotos, 2);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A trace number reused by a new trace opens a new epoch too. */
static void test_trace_epochs(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref t = loc_trace(1, 0);

    lm_enc_begin(&b, LM_REV_R3);
    /* The start dump is newest first: a trace may precede its proto. */
    lm_enc_sym_trace(&b, LM_REV_R3, 1, 0, 0x100, 4);
    lm_enc_sym_lfunc(&b, 0x100, "@h.lua", 0);
    lm_enc_sym_lfunc(&b, 0x200, "@j.lua", 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &t, 0x10, 16);
    lm_enc_event_trace(&b, LM_REV_R3, 1, 0, 0x200, 9);
    lm_enc_alloc(&b, LM_REV_R3, &t, 0x20, 16);
    lm_enc_alloc(&b, LM_REV_R3, &t, 0x30, 16);
    t = loc_trace(7, 0);
    lm_enc_alloc(&b, LM_REV_R3, &t, 0x40, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(counters(s, "TRACE [1] started at @h.lua:4").alloc_events,
                    1);
    CU_ASSERT_EQUAL(counters(s, "TRACE [1] started at @j.lua:9").alloc_events,
                    2);
    CU_ASSERT_EQUAL(counters(s, "TRACE [7]").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* R2 names traces with their machine code address. */
static void test_r2_trace_names(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref t = loc_trace(3, 0xbeef0);

    lm_enc_begin(&b, LM_REV_R2);
    lm_enc_sym_lfunc(&b, 0x100, "@h.lua", 0);
    lm_enc_sym_trace(&b, LM_REV_R2, 3, 0xbeef0, 0x100, 4);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R2);
    lm_enc_alloc(&b, LM_REV_R2, &t, 0x10, 16);
    t = loc_trace(3, 0xcafe0); /* the same number, other machine code */
    lm_enc_alloc(&b, LM_REV_R2, &t, 0x20, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_NOT_EQUAL(
        loc_named(&p.state, "TRACE [3] 0xbeef0 started at @h.lua:4"), LM_NONE);
    CU_ASSERT_NOT_EQUAL(loc_named(&p.state, "TRACE [3] 0xcafe0"), LM_NONE);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static void test_aliases(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x300, 2);

    begin_r3(&b);
    lm_enc_event_lfunc(&b, 0x300, "local a = {}\nlocal b = {}\n", 0);
    lm_enc_event_lfunc(&b, 0x400, "return 1\n", 0);
    lm_enc_event_lfunc(&b, 0x500, "local a = {}\nlocal b = {}\n", 1);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x10, 16);
    l = loc_lua(0x500, 1);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x20, 16);
    l = loc_lua(0x400, 1);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x30, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(s->sym.naliases, 2);
    CU_ASSERT_NOT_EQUAL(loc_named(s, "function_alias_1:2"), LM_NONE);
    CU_ASSERT_NOT_EQUAL(loc_named(s, "function_alias_1:1"), LM_NONE);
    CU_ASSERT_NOT_EQUAL(loc_named(s, "function_alias_2:1"), LM_NONE);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* C names: the symbol at or below; libraries loaded later rename only
 * what happens after they are announced. */
static void test_c_symbols(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref c = loc_c(0x7050);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_cfunc(&b, 0x7100, "libx.so:later");
    lm_enc_sym_cfunc(&b, 0x7000, "libx.so:first");
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x10, 16);
    c = loc_c(0x10);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x20, 16);
    lm_enc_event_cfunc(&b, 0x7040, "libx.so:inner");
    c = loc_c(0x7050);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x30, 16);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x40, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);

    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(counters(s, "libx.so:first:0x7000").alloc_events, 1);
    CU_ASSERT_EQUAL(counters(s, "libx.so:inner:0x7040").alloc_events, 2);
    CU_ASSERT_EQUAL(counters(s, "CFUNC 0x10").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A C symbol announced between two events at one address renames it, even
 * for the location the lookup cache holds. */
static void test_c_symbol_renames_cached_location(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref c = loc_c(0x1000);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x10, 16);
    lm_enc_event_cfunc(&b, 0x1000, "foo");
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x20, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(counters(&p.state, "CFUNC 0x1000").alloc_events, 1);
    CU_ASSERT_EQUAL(counters(&p.state, "foo:0x1000").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A trace whose start prototype is announced only after it is named by the
 * raw address: a later announcement does not rename it. */
static void test_trace_start_announced_later(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref t = loc_trace(5, 0);

    begin_r3(&b);
    lm_enc_event_trace(&b, LM_REV_R3, 5, 0, 0xabc, 9);
    lm_enc_alloc(&b, LM_REV_R3, &t, 0x10, 16);
    lm_enc_event_lfunc(&b, 0xabc, "@late.lua", 1);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(
        counters(&p.state, "TRACE [5] started at 0xabc:9").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A Lua address never announced is named by its raw address. */
static void test_unknown_proto(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0xabc, 7);

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x10, 16);
    lm_enc_event_lfunc(&b, 0xabc, "@late.lua", 5);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x20, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(counters(&p.state, "0xabc:7").alloc_events, 1);
    CU_ASSERT_EQUAL(counters(&p.state, "@late.lua:7").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A library function LuaJIT built from bytecode has first line ~0,
 * sign-extended by the VM (or 2^32-1 from a writer that widens it without
 * the sign): named "[builtin:NAME]", without a line, as LuaJIT's
 * tracebacks name it. */
static void test_builtin_function_named(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref rm = loc_lua(0x7000, 0), rad = loc_lua(0x7100, 0),
                      h = loc_lua(0x100, 3);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@h.lua", 0);
    lm_enc_sym_lfunc(&b, 0x7000, "remove", UINT64_MAX);
    lm_enc_sym_lfunc(&b, 0x7100, "rad", UINT32_MAX);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &rm, 0x10, 16);
    lm_enc_alloc(&b, LM_REV_R3, &rad, 0x20, 16);
    lm_enc_alloc(&b, LM_REV_R3, &h, 0x30, 16);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(counters(&p.state, "[builtin:remove]").alloc_events, 1);
    CU_ASSERT_EQUAL(counters(&p.state, "[builtin:rad]").alloc_events, 1);
    CU_ASSERT_EQUAL(counters(&p.state, "@h.lua:3").alloc_events, 1);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* An alloc at a live address means a lost free: the old block goes. */
static void test_overwritten_block(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l1 = loc_lua(0x100, 1), l2 = loc_lua(0x100, 2);

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l1, 0x10, 16);
    lm_enc_alloc(&b, LM_REV_R3, &l2, 0x10, 40);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 40);
    CU_ASSERT_EQUAL(p.state.totals.live_blocks, 1);
    CU_ASSERT_EQUAL(p.state.totals.overwritten_blocks, 1);
    CU_ASSERT_EQUAL(counters(&p.state, "@h.lua:1").live_bytes, 0);
    CU_ASSERT_EQUAL(counters(&p.state, "@h.lua:2").live_bytes, 40);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/*
 * A census (docs/format.md, "Census") on one thread or two: a block made
 * after the stream began and announced again is a duplicate (kept as it
 * was), releases of unknown blocks are older blocks, the VM's remainder
 * is a block of the VM internals, and the live bytes are then the VM's
 * heap exactly.
 */
static void census_stream(struct lm_buf *b)
{
    struct lm_loc_ref l1 = loc_lua(CENSUS_PROTO, 1),
                      l2 = loc_lua(CENSUS_PROTO, 2),
                      table = loc_lua(LM_CENSUS_TYPE_FIRST, 0);

    census_begin(b, 900);
    lm_enc_alloc(b, LM_REV_R3, &l1, 0x1000, 100);    /* made after the start */
    lm_enc_alloc(b, LM_REV_R3, &table, 0x1000, 100); /* announced again */
    lm_enc_alloc(b, LM_REV_R3, &table, 0x2000, 200);
    lm_enc_free(b, LM_REV_R3, &l1, 0x3000, 30); /* older, not announced */
    lm_enc_realloc(b, LM_REV_R3, &l2, 0x4000, 40, 0x5000, 50);
    census_complete(b, 1000);
}

static void check_census(const struct lm_state *s)
{
    CU_ASSERT_EQUAL(s->census.state, LM_CENSUS_DONE);
    CU_ASSERT_EQUAL(s->census.begin_total, 900);
    CU_ASSERT_EQUAL(s->census.complete_total, 1000);
    CU_ASSERT_EQUAL(s->census.begin_events, 0);
    CU_ASSERT_EQUAL(s->census.complete_events, 5);
    CU_ASSERT(s->census.complete_offset > s->census.begin_offset);
    CU_ASSERT_EQUAL(s->totals.census_duplicates, 1);
    CU_ASSERT_EQUAL(s->totals.census_preceding_frees, 2);
    CU_ASSERT_EQUAL(s->totals.unknown_frees, 0);
    CU_ASSERT_EQUAL(s->totals.overwritten_blocks, 0);
    CU_ASSERT_EQUAL(s->census.remainder, 1000 - 350);
    CU_ASSERT_EQUAL(s->census.over, 0);
    CU_ASSERT_EQUAL(s->totals.live_bytes, 1000);
    CU_ASSERT_EQUAL(s->totals.live_blocks, 4);
    CU_ASSERT_EQUAL(s->census.complete_blocks, 4);
    CU_ASSERT_EQUAL(counters(s, "@h.lua:1").live_bytes, 100);
    struct lm_counters table = counters(s, "[before profiling] table");
    CU_ASSERT_EQUAL(table.live_bytes, 200);
    /* The duplicate is no allocation of its site's. */
    CU_ASSERT_EQUAL(table.alloc_events, 1);
    CU_ASSERT_EQUAL(table.alloc_bytes, 200);
    CU_ASSERT_EQUAL(s->totals.alloc_events, 3);
    struct lm_counters in = counters(s, "[before profiling] VM internals");
    CU_ASSERT_EQUAL(in.live_bytes, 650);
    CU_ASSERT_EQUAL(in.live_blocks, 1);
    CU_ASSERT_EQUAL(in.alloc_bytes, 650);
    /* The markers are no sites. */
    CU_ASSERT_EQUAL(s->nlocs, 4);
}

static void test_census(void)
{
    for (int threads = 1; threads <= 2; threads++) {
        struct lm_buf b = {0};
        struct lm_profile p;
        char err[128];

        census_stream(&b);
        lm_enc_epilogue(&b);
        CU_ASSERT_FATAL(!b.oom);
        lm_profile_init(&p, NULL, NULL);
        CU_ASSERT_EQUAL_FATAL(lm_profile_threads(&p, threads), 0);
        CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, threads == 2 ? 7 : 0),
                        LM_DONE);
        CU_ASSERT_EQUAL(lm_profile_settle(&p, err, sizeof(err)), 0);
        check_census(&p.state);
        lm_profile_free(&p);
        lm_buf_free(&b);
    }
}

/* After the census, the old rules again: an allocation at a live address
 * is a lost free, a free of an unknown one an unknown free. */
static void test_census_rules_end_with_it(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l3 = loc_lua(CENSUS_PROTO, 3);

    census_stream(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l3, 0x2000, 10);
    lm_enc_free(&b, LM_REV_R3, &l3, 0x6000, 60);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(p.state.totals.census_duplicates, 1);
    CU_ASSERT_EQUAL(p.state.totals.census_preceding_frees, 2);
    CU_ASSERT_EQUAL(p.state.totals.overwritten_blocks, 1);
    CU_ASSERT_EQUAL(p.state.totals.unknown_frees, 1);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 1000 - 200 + 10);
    CU_ASSERT_EQUAL(counters(&p.state, "[before profiling] table").live_bytes,
                    0);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Blocks known beyond what the VM said it held: no internals block, the
 * excess counted. */
static void test_census_over(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref table = loc_lua(LM_CENSUS_TYPE_FIRST, 0);

    census_begin(&b, 100);
    lm_enc_alloc(&b, LM_REV_R3, &table, 0x2000, 300);
    census_complete(&b, 200);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(p.state.census.state, LM_CENSUS_DONE);
    CU_ASSERT_EQUAL(p.state.census.remainder, 0);
    CU_ASSERT_EQUAL(p.state.census.over, 100);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 300);
    CU_ASSERT_EQUAL(
        counters(&p.state, "[before profiling] VM internals").live_bytes, 0);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A remainder of 4 GiB or more takes several blocks (each under 4 GiB),
 * and the live bytes are still the VM's exactly. */
static void test_census_huge_remainder(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    uint64_t total = 10ULL << 30;

    census_begin(&b, total);
    census_complete(&b, total);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(p.state.census.remainder, total);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, total);
    CU_ASSERT_EQUAL(p.state.totals.live_blocks, 3);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A stream cut before the census completed leaves it running: readers
 * call it partial. */
static void test_census_partial(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref table = loc_lua(LM_CENSUS_TYPE_FIRST, 0);

    census_begin(&b, 5000);
    lm_enc_alloc(&b, LM_REV_R3, &table, 0x2000, 300);
    run(&p, &b, LM_NEED_MORE);
    CU_ASSERT_EQUAL(p.state.census.state, LM_CENSUS_RUNNING);
    CU_ASSERT_EQUAL(p.state.census.begin_total, 5000);
    CU_ASSERT_STRING_EQUAL(lm_census_state_name(&p.state.census, 0), "partial");
    CU_ASSERT_STRING_EQUAL(lm_census_state_name(&p.state.census, 1), "running");
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 300);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Census markers in the symbol table at the start (a recording from the
 * middle re-lists every symbol) begin no census, but its names are names. */
static void test_census_markers_in_symtab(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref table = loc_lua(LM_CENSUS_TYPE_FIRST, 0);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, LM_CENSUS_BEGIN, "[census begin]", 100);
    lm_enc_sym_lfunc(&b, LM_CENSUS_COMPLETE, "[census complete]", 100);
    lm_enc_sym_lfunc(&b, LM_CENSUS_TYPE_FIRST, "[before profiling] table", 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_free(&b, LM_REV_R3, &table, 0x2000, 10);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(p.state.census.state, LM_CENSUS_NONE);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 0);
    CU_ASSERT_EQUAL(p.state.totals.unknown_frees, 1);
    CU_ASSERT_NOT_EQUAL(loc_named(&p.state, "[before profiling] table"),
                        LM_NONE);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* The VM internals' name announced just before the census began is its
 * name all the same. */
static void test_census_internals_named_first(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_event_lfunc(&b, LM_CENSUS_INTERNALS,
                       "[before profiling] VM internals", 0);
    lm_enc_event_lfunc(&b, LM_CENSUS_BEGIN, "[census begin]", 100);
    census_complete(&b, 100);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_EQUAL(
        counters(&p.state, "[before profiling] VM internals").live_bytes, 100);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Census names are names: no line, never an alias, even for a name that
 * holds a newline. */
static void test_census_names(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref odd = loc_lua(LM_CENSUS_TYPE_FIRST + 1, 0),
                      unnamed = loc_lua(LM_CENSUS_TYPE_FIRST + 2, 0);

    census_begin(&b, 100);
    lm_enc_event_lfunc(&b, LM_CENSUS_TYPE_FIRST + 1,
                       "[before profiling] table a\nb", 0);
    lm_enc_alloc(&b, LM_REV_R3, &odd, 0x2000, 30);
    lm_enc_alloc(&b, LM_REV_R3, &unnamed, 0x3000, 30);
    lm_enc_epilogue(&b);
    run(&p, &b, LM_DONE);
    CU_ASSERT_NOT_EQUAL(loc_named(&p.state, "[before profiling] table a\nb"),
                        LM_NONE);
    CU_ASSERT_NOT_EQUAL(loc_named(&p.state, "0x12:0"), LM_NONE);
    CU_ASSERT_EQUAL(p.state.sym.naliases, 0);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Sizes LuaJIT cannot allocate (4 GiB or more) are refused before they
 * count anywhere; the report of what came before stays sound. */
static void test_huge_sizes(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 2), in = loc_internal();

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x10, 7);
    lm_enc_realloc(&b, LM_REV_R3, &in, 0x10, 7, 0x20, INT64_MAX);
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 3), LM_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.dec.errmsg, "4 GiB or more"));
    CU_ASSERT_EQUAL(p.state.totals.realloc_events, 0);
    CU_ASSERT_EQUAL(p.state.novr, 0);
    char *rep = report_string(&p.state, 1, 0, 0);
    CU_ASSERT_STRING_EQUAL(rep, "HEAP SUMMARY:\n"
                                "@h.lua:2 holds 7B: 1 allocs, 0 frees\n"
                                "\n");
    free(rep);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Past the location limit the stream fails with a clear error. */
static void test_location_limit(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_state_limits lim = {.max_locations = 10};

    begin_r3(&b);
    for (uint64_t i = 1; i <= 20; i++) {
        struct lm_loc_ref l = loc_lua(0x100, i);
        lm_enc_alloc(&b, LM_REV_R3, &l, 0x10 * i, 16);
    }
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, &lim);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 7), LM_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.dec.errmsg, "too many distinct locations"));
    CU_ASSERT_EQUAL(p.state.nlocs, 10);
    CU_ASSERT_EQUAL(p.state.totals.alloc_events, 10);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A block's key is its address, reversibly: the map keeps keys only. */
static void test_heap_keys_are_addresses(void)
{
    struct lm_heapmap m;
    const uint64_t addrs[] = {
        0, 1, 16, 0x7fffdeadbee0, UINT64_MAX, 0x8000000000000000ULL};

    lm_heap_init(&m, 0x5eed);
    for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
        CU_ASSERT_EQUAL(lm_heap_addr(&m, lm_heap_hash(&m, addrs[i])), addrs[i]);
    for (uint64_t a = 0, x = 99; a < 100000; a++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        CU_ASSERT_EQUAL_FATAL(lm_heap_addr(&m, lm_heap_hash(&m, x)), x);
    }
    lm_heap_free(&m);
}

/* Many blocks: the heap map grows, shrinks and stays exact. */
static void test_heap_map_many_blocks(void)
{
    struct lm_heapmap m;
    struct lm_block blk;
    const uint32_t n = 200000;

    lm_heap_init(&m, 42);
    for (uint32_t i = 1; i <= n; i++)
        CU_ASSERT_EQUAL(lm_heap_put(&m, (uint64_t)i * 16,
                                    (struct lm_block){i, i % 7}, &blk),
                        0);
    CU_ASSERT_EQUAL(m.count, n);
    CU_ASSERT_EQUAL(lm_heap_put(&m, 16, (struct lm_block){99, 3}, &blk), 1);
    CU_ASSERT_EQUAL(blk.size, 1);
    CU_ASSERT_EQUAL(lm_heap_put(&m, 16, (struct lm_block){1, 1}, &blk), 1);
    for (uint32_t i = 1; i <= n; i += 2) {
        CU_ASSERT_EQUAL_FATAL(lm_heap_take(&m, (uint64_t)i * 16, &blk), 1);
        CU_ASSERT_EQUAL(blk.size, i);
        CU_ASSERT_EQUAL(blk.loc, i % 7);
    }
    CU_ASSERT_EQUAL(m.count, n / 2);
    for (uint32_t i = 1; i <= n; i++) {
        int there = lm_heap_take(&m, (uint64_t)i * 16, &blk);
        CU_ASSERT_EQUAL(there, i % 2 == 0);
        if (there)
            CU_ASSERT_EQUAL(blk.size, i);
    }
    CU_ASSERT_EQUAL(m.count, 0);
    /* At most 30 bytes a block at the high-water mark, by construction. */
    CU_ASSERT(lm_heap_memory(&m) <= 30ull * n + LM_HEAP_SHARDS * 16 * 16);
    lm_heap_free(&m);
}

/* Fills out[0..n) with addresses that hash to shard 0 of m and start
 * probing at slot `home` when that shard has cap slots. */
static void addrs_homed_at(struct lm_heapmap *m, uint32_t cap, uint32_t home,
                           uint64_t *out, int n)
{
    struct lm_heap_shard probe = m->shard[0];
    int k = 0;

    probe.cap = cap;
    for (uint64_t a = 1; k < n; a++) {
        uint64_t h = lm_heap_hash(m, a);
        if (lm_heap_shard_of(m, h) == &m->shard[0] &&
            lm_heap_home(&probe, h) == home)
            out[k++] = a;
    }
}

/* Addresses that all start probing at one group of one shard: still
 * exact, however long the probe runs. */
static void test_heap_map_collisions(void)
{
    struct lm_heapmap m;
    struct lm_block blk;
    static uint64_t addrs[300];
    int n = 300;

    lm_heap_init(&m, 7);
    /* Shard 0 at its final size for 300 blocks is 480 slots (60 groups):
     * it grows from 16 by a quarter, rounded up to whole groups, whenever
     * 3/4 are live. */
    addrs_homed_at(&m, 480, 40, addrs, n);
    for (int i = 0; i < n; i++)
        CU_ASSERT_EQUAL_FATAL(
            lm_heap_put(&m, addrs[i], (struct lm_block){(uint32_t)i, 1}, &blk),
            0);
    CU_ASSERT_EQUAL(m.count, 300);
    /* The size the addresses were chosen for: they all collide in it. */
    CU_ASSERT_EQUAL(m.shard[0].cap, 480);
    /* Take every other, then the rest: the group's overflow count, stuck
     * at its ceiling, keeps probes going. */
    for (int i = 0; i < n; i += 2)
        CU_ASSERT_EQUAL(lm_heap_take(&m, addrs[i], &blk), 1);
    for (int i = 1; i < n; i += 2) {
        CU_ASSERT_EQUAL_FATAL(lm_heap_take(&m, addrs[i], &blk), 1);
        CU_ASSERT_EQUAL(blk.size, (uint32_t)i);
    }
    CU_ASSERT_EQUAL(m.count, 0);
    lm_heap_free(&m);
}

/*
 * Random puts, takes and look-ups against a plain array, over addresses
 * half of which start probing at one group: overflow counts that rise,
 * stick at their ceiling and fall again never lose or invent a block.
 */
static void test_heap_map_random_against_reference(void)
{
    enum { N = 600, OPS = 200000 };
    static uint64_t addrs[N];
    static struct lm_block ref[N];
    static int present[N];
    struct lm_heapmap m;
    struct lm_block blk;
    uint64_t r = 99, count = 0;
    int n = N / 2;

    lm_heap_init(&m, 11);
    /* The last group of shard 0 at the size it ends at (about half the
     * addresses are live at a time; checked below): wraps. */
    addrs_homed_at(&m, 304, 296, addrs, n);
    for (uint64_t a = 0x7f0000001000; n < N; a += 48)
        addrs[n++] = a;
    for (int op = 0; op < OPS; op++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int k = (int)((r >> 33) % N), what = (int)((r >> 20) % 3);
        struct lm_block want = {(uint32_t)(r >> 40), (uint32_t)op};
        uint32_t where;
        switch (what) {
        case 0:
            CU_ASSERT_EQUAL_FATAL(lm_heap_put(&m, addrs[k], want, &blk),
                                  present[k]);
            if (present[k])
                CU_ASSERT(blk.size == ref[k].size && blk.loc == ref[k].loc);
            count += !present[k];
            present[k] = 1;
            ref[k] = want;
            break;
        case 1:
            CU_ASSERT_EQUAL_FATAL(lm_heap_take(&m, addrs[k], &blk), present[k]);
            if (present[k])
                CU_ASSERT(blk.size == ref[k].size && blk.loc == ref[k].loc);
            count -= present[k];
            present[k] = 0;
            break;
        default:
            CU_ASSERT_EQUAL_FATAL(
                lm_heap_peek_hashed(&m, lm_heap_hash(&m, addrs[k]), &blk,
                                    &where),
                present[k]);
            break;
        }
        CU_ASSERT_EQUAL_FATAL(m.count, count);
    }
    CU_ASSERT_EQUAL(m.shard[0].cap, 304);
    for (int k = 0; k < N; k++)
        CU_ASSERT_EQUAL(lm_heap_take(&m, addrs[k], &blk), present[k]);
    CU_ASSERT_EQUAL(m.count, 0);
    lm_heap_free(&m);
}

/* Steady churn at a fixed size: memory stays. */
static void test_heap_map_churn(void)
{
    struct lm_heapmap m;
    struct lm_block blk;
    enum { LIVE = 5000, ROUNDS = 200000 };
    static uint64_t live[LIVE];
    uint64_t next = 0x1000, r = 12345;

    lm_heap_init(&m, 3);
    for (int i = 0; i < LIVE; i++) {
        live[i] = next += 32;
        lm_heap_put(&m, live[i], (struct lm_block){32, 2}, &blk);
    }
    uint64_t mem = lm_heap_memory(&m);
    for (int i = 0; i < ROUNDS; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int k = (int)((r >> 33) % LIVE);
        CU_ASSERT_EQUAL_FATAL(lm_heap_take(&m, live[k], &blk), 1);
        live[k] = next += 32;
        CU_ASSERT_EQUAL(lm_heap_put(&m, live[k], (struct lm_block){7, 2}, &blk),
                        0);
    }
    CU_ASSERT_EQUAL(m.count, LIVE);
    CU_ASSERT(lm_heap_memory(&m) <= mem * 3 / 2);
    for (int i = 0; i < LIVE; i++)
        CU_ASSERT_EQUAL(lm_heap_take(&m, live[i], &blk), 1);
    CU_ASSERT_EQUAL(m.count, 0);
    lm_heap_free(&m);
}

/* A table grown from malloc's memory to mapped pages, within its
 * reserved room and past it, keeps what it held; what it never held
 * reads zero. */
static void test_table_grows_keeping_its_bytes(void)
{
    size_t sizes[] = {100, LM_TABLE_GROW_MAPPED - 1, 64 * 1024, 5 << 20};
    size_t room = 0, used = 0;
    unsigned char *t = NULL;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        unsigned char *g = lm_table_grow(t, &room, used, sizes[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        CU_ASSERT(room >= sizes[k]);
        CU_ASSERT_EQUAL((uintptr_t)g % 64, 0);
        for (size_t i = 0; i < used; i++)
            if (g[i] != (unsigned char)(i * 7 + 1)) {
                CU_FAIL("a byte the table held changed");
                break;
            }
        for (size_t i = used; i < sizes[k]; i++)
            if (g[i] != 0) {
                CU_FAIL("a byte the table never held is not zero");
                break;
            }
        for (size_t i = used; i < sizes[k]; i++)
            g[i] = (unsigned char)(i * 7 + 1);
        t = g;
        used = sizes[k];
    }
    lm_table_free(t, room);
}

/* The sums of the group named name (there must be one). */
static struct lm_counters group_sum(const struct lm_groups *g,
                                    const struct lm_counters *sum,
                                    const char *name)
{
    for (uint32_t k = 0; k < g->n; k++)
        if (strcmp(g->v[k].name, name) == 0)
            return sum[k];
    CU_FAIL("no such group");
    return (struct lm_counters){0};
}

/* The text report of s, by trace if by_trace. */
static char *report_by(const struct lm_state *s, int by_trace)
{
    struct lm_report_opts o = {.by_trace = by_trace};

    return report_with(s, &o);
}

/* How a stream says which trace allocated at a line (docs/format.md,
 * "Trace context"). */
enum trace_context { TC_NONE, TC_MARKERS, TC_STANDINS };

/*
 * Events at line 3 of @h.lua: two allocations and a realloc by trace 7's
 * compiled code (one of its blocks freed later by the collector), one by
 * the interpreter, then trace 7 made anew (a new epoch, started at line
 * 5) allocating there once more.  With markers, or at stand-ins for the
 * prototype on the trace as the VM writes them (the new trace's at the
 * same address, as one made after a flush may be), else the same events
 * as a stream without them.
 */
static void trace_context_stream(struct lm_buf *b, enum trace_context tc)
{
    struct lm_loc_ref at3 = loc_lua(0x100, 3), in = loc_internal();
    struct lm_loc_ref on7 = tc == TC_STANDINS ? loc_lua(0x7100, 3) : at3;

    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x100, "@h.lua", 1);
    lm_enc_sym_trace(b, LM_REV_R3, 7, 0, 0x100, 2);
    if (tc == TC_STANDINS) {
        lm_enc_sym_standin(b, 7);
        lm_enc_sym_lfunc(b, 0x7100, "@h.lua", 1);
    }
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    if (tc == TC_MARKERS)
        lm_enc_trace_mark(b, 7);
    lm_enc_alloc(b, LM_REV_R3, &on7, 0x1000, 32);
    lm_enc_alloc(b, LM_REV_R3, &on7, 0x2000, 32);
    lm_enc_realloc(b, LM_REV_R3, &on7, 0x2000, 32, 0x2800, 64);
    if (tc == TC_MARKERS)
        lm_enc_trace_mark(b, 0);
    lm_enc_alloc(b, LM_REV_R3, &at3, 0x3000, 16);
    lm_enc_free(b, LM_REV_R3, &in, 0x1000, 32);
    lm_enc_event_trace(b, LM_REV_R3, 7, 0, 0x100, 5);
    if (tc == TC_MARKERS)
        lm_enc_trace_mark(b, 7);
    if (tc == TC_STANDINS) {
        lm_enc_standin(b, 7);
        lm_enc_event_lfunc(b, 0x7100, "@h.lua", 1);
    }
    lm_enc_alloc(b, LM_REV_R3, &on7, 0x4000, 8);
    lm_enc_epilogue(b);
}

static void check_trace_context(enum trace_context tc);

/* What a trace allocated at a line is that line's in the default report
 * (the same as without markers or stand-ins), its trace's in the by-trace
 * one, live counts and overrides included, on one thread and on two. */
static void test_trace_context(void)
{
    check_trace_context(TC_MARKERS);
    check_trace_context(TC_STANDINS);
}

static void check_trace_context(enum trace_context tc)
{
    struct lm_buf plain = {0}, marked = {0};

    trace_context_stream(&plain, TC_NONE);
    trace_context_stream(&marked, tc);
    struct lm_profile p0, p1;
    run(&p0, &plain, LM_DONE);
    run(&p1, &marked, LM_DONE);
    char *want = report_by(&p0.state, 0), *got = report_by(&p1.state, 0);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
    free(want);

    char *by = report_by(&p1.state, 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(by, "TRACE [7] started at @h.lua:2: 2 events\t+64B\t-0B\n"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(by, "TRACE [7] started at @h.lua:5: 1 events\t+8B\t-0B\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(by, "@h.lua:3: 1 events\t+16B\t-0B\n"));
    /* Held: the realloc's new block, and the interpreter's. */
    CU_ASSERT_PTR_NOT_NULL(
        strstr(by, "TRACE [7] started at @h.lua:2 holds 64B: 3 allocs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(by, "@h.lua:3 holds 16B: 1 allocs"));
    CU_ASSERT_PTR_NULL(strstr(by, "TRACE [7]:"));

    /* Two threads name and count alike. */
    struct lm_profile p2;
    char err[128];
    lm_profile_init(&p2, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(lm_profile_threads(&p2, 2), 0);
    CU_ASSERT_EQUAL(feed_chunked(&p2, marked.data, marked.len, 5), LM_DONE);
    CU_ASSERT_EQUAL(lm_profile_settle(&p2, err, sizeof(err)), 0);
    char *by2 = report_by(&p2.state, 1);
    CU_ASSERT_STRING_EQUAL(by2, by);
    free(by2);
    free(by);

    /* Live views: one group per line by default, per trace by trace
     * (and INTERNAL, the collector's free, in both). */
    struct lm_groups g;
    struct lm_counters sum[4];
    CU_ASSERT_EQUAL_FATAL(lm_groups_init(&g), 0);
    CU_ASSERT_EQUAL(lm_groups_update(&g, &p1.state), 0);
    CU_ASSERT_EQUAL_FATAL(g.n, 2);
    lm_groups_sum(&g, &p1.state, sum);
    CU_ASSERT_EQUAL(group_sum(&g, sum, "@h.lua:3").live_bytes, 88);
    lm_groups_free(&g);
    CU_ASSERT_EQUAL_FATAL(lm_groups_init(&g), 0);
    g.by_trace = 1;
    CU_ASSERT_EQUAL(lm_groups_update(&g, &p1.state), 0);
    CU_ASSERT_EQUAL_FATAL(g.n, 4);
    lm_groups_sum(&g, &p1.state, sum);
    struct lm_counters t2 = group_sum(&g, sum, "TRACE [7] started at @h.lua:2");
    CU_ASSERT_EQUAL(t2.live_bytes, 64);
    CU_ASSERT_EQUAL(t2.alloc_events, 2);
    CU_ASSERT_EQUAL(t2.realloc_events, 1);
    CU_ASSERT_EQUAL(
        group_sum(&g, sum, "TRACE [7] started at @h.lua:5").live_bytes, 8);
    CU_ASSERT_EQUAL(group_sum(&g, sum, "@h.lua:3").live_bytes, 16);
    lm_groups_free(&g);
    /* Markers and stand-in symbols are no prototypes: no symbol of theirs
     * is kept; a stand-in is one (each announcement an epoch). */
    CU_ASSERT_EQUAL(p1.state.sym.nprotos,
                    p0.state.sym.nprotos + (tc == TC_STANDINS ? 2 : 0));
    lm_profile_free(&p0);
    lm_profile_free(&p1);
    lm_profile_free(&p2);
    lm_buf_free(&plain);
    lm_buf_free(&marked);
}

/* Locations printing the same name form one group; groups are updated
 * incrementally and keep their ids. */
static void test_name_groups(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_groups g;
    struct lm_loc_ref at5 = loc_lua(0x100, 5);
    struct lm_loc_ref at6 = loc_lua(0x100, 6);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@a.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &at5, 0x1000, 10);
    /* The module loaded again at the same address: a new epoch. */
    lm_enc_event_lfunc(&b, 0x100, "@a.lua", 1);
    lm_enc_alloc(&b, LM_REV_R3, &at5, 0x2000, 20);
    size_t half = b.len;
    lm_enc_alloc(&b, LM_REV_R3, &at6, 0x3000, 30);
    lm_enc_epilogue(&b);
    CU_ASSERT_FATAL(!b.oom);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&p, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(lm_groups_init(&g), 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, half, 0), LM_NEED_MORE);
    CU_ASSERT_EQUAL(lm_groups_update(&g, &p.state), 0);
    CU_ASSERT_EQUAL(p.state.nlocs, 2);
    CU_ASSERT_EQUAL_FATAL(g.n, 1);
    CU_ASSERT_STRING_EQUAL(g.v[0].name, "@a.lua:5");
    CU_ASSERT_EQUAL(g.v[0].nlocs, 2);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data + half, b.len - half, 0), LM_DONE);
    CU_ASSERT_EQUAL(lm_groups_update(&g, &p.state), 0);
    CU_ASSERT_EQUAL_FATAL(g.n, 2);
    CU_ASSERT_STRING_EQUAL(g.v[0].name, "@a.lua:5");
    CU_ASSERT_STRING_EQUAL(g.v[1].name, "@a.lua:6");
    struct lm_counters sum[2];
    lm_groups_sum(&g, &p.state, sum);
    CU_ASSERT_EQUAL(sum[0].alloc_events, 2);
    CU_ASSERT_EQUAL(sum[0].live_bytes, 30);
    CU_ASSERT_EQUAL(sum[1].live_bytes, 30);
    lm_groups_free(&g);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static char *report_text(const struct lm_state *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct lm_report_opts opts = {0};

    CU_ASSERT_EQUAL(lm_report_write(f, s, &opts), 0);
    fclose(f);
    return text;
}

/* Names of the state's locations, joined, for comparing two states. */
static char *loc_names(const struct lm_state *s)
{
    char *all = NULL, name[256];
    size_t len = 0;
    FILE *f = open_memstream(&all, &len);

    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, name, sizeof(name));
        fprintf(f, "%s|", name);
    }
    fclose(f);
    return all;
}

/* The symbol table re-encoded (a recording started mid-stream) names
 * later events as the original did, alias numbers included, even when
 * chunks were replaced at their address, and by trace too (a stand-in
 * stays one). */
static void test_symtab_reencoded(void)
{
    struct lm_buf b = {0}, r = {0}, tail = {0};
    struct lm_profile p, q;
    struct lm_loc_ref a5 = loc_lua(0x30, 5);
    struct lm_loc_ref b7 = loc_lua(0x20, 7);
    struct lm_loc_ref c9 = loc_lua(0x10, 9);
    struct lm_loc_ref t9 = loc_lua(0x7100, 9);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x10, "local a\nreturn 'A'", 1);
    lm_enc_sym_lfunc(&b, 0x20, "local b\nreturn 'B'", 1);
    lm_enc_sym_cfunc(&b, 0x500, "memcpy");
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_event_lfunc(&b, 0x10, "local c\nreturn 'C'", 1);
    lm_enc_event_lfunc(&b, 0x30, "local a\nreturn 'A'", 1);
    lm_enc_event_trace(&b, LM_REV_R3, 3, 0, 0x10, 8);
    lm_enc_standin(&b, 3);
    lm_enc_event_lfunc(&b, 0x7100, "local c\nreturn 'C'", 1);
    /* The events after the point where a recording would start. */
    lm_enc_alloc(&tail, LM_REV_R3, &a5, 0x1000, 16);
    lm_enc_alloc(&tail, LM_REV_R3, &b7, 0x2000, 16);
    lm_enc_alloc(&tail, LM_REV_R3, &c9, 0x3000, 16);
    lm_enc_alloc(&tail, LM_REV_R3, &t9, 0x4000, 16);
    lm_enc_epilogue(&tail);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&p, NULL, NULL), 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 0), LM_NEED_MORE);
    /* The recording: symbols now, then the same events. */
    lm_enc_symtab_prologue(&r, 3);
    lm_enc_symtab_of(&r, &p.state.sym, LM_REV_R3);
    lm_enc_symtab_end(&r);
    lm_enc_events_prologue(&r, 3);
    lm_buf_bytes(&r, tail.data, tail.len);
    CU_ASSERT_EQUAL(feed_chunked(&p, tail.data, tail.len, 0), LM_DONE);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&q, NULL, NULL), 0);
    CU_ASSERT_EQUAL(feed_chunked(&q, r.data, r.len, 0), LM_DONE);
    char *x = loc_names(&p.state), *y = loc_names(&q.state);
    CU_ASSERT_STRING_EQUAL(x, y);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "function_alias_1:5"));
    free(x);
    free(y);
    x = report_text(&p.state);
    y = report_text(&q.state);
    CU_ASSERT_STRING_EQUAL(x, y);
    /* The stand-in's line is the line's by default, with c9's. */
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "function_alias_3:9: 2 events"));
    free(x);
    free(y);
    x = report_by(&p.state, 1);
    y = report_by(&q.state, 1);
    CU_ASSERT_STRING_EQUAL(x, y);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(x, "TRACE [3] started at function_alias_3:8: 1 events"));
    free(x);
    free(y);
    lm_profile_free(&p);
    lm_profile_free(&q);
    lm_buf_free(&b);
    lm_buf_free(&r);
    lm_buf_free(&tail);
}

/* A stream of random events over `sites` sites, symbols among them. */
static void random_stream(struct lm_buf *b, uint64_t seed, int nevents,
                          int sites)
{
    enum { SLOTS = 100000 };
    static uint64_t live[SLOTS];
    uint64_t r = seed, next = 0x10000;

    memset(live, 0, sizeof(live));
    lm_enc_begin(b, LM_REV_R3);
    for (int i = 0; i < 64; i++)
        lm_enc_sym_lfunc(b, 0x1000 + 16 * (uint64_t)i,
                         i & 1 ? "@a.lua" : "@b.lua", (uint64_t)i);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    for (int i = 0; i < nevents; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t x = r >> 16;
        struct lm_loc_ref loc = {0};
        int site = (int)(x % (uint64_t)sites);
        if (site % 7 == 0) {
            loc.source = LM_SRC_CFUNC;
            loc.addr = 0x500000 + (uint64_t)site;
        } else if (site % 11 == 0) {
            loc.source = LM_SRC_INTERNAL;
        } else {
            loc.source = LM_SRC_LFUNC;
            loc.addr = 0x1000 + 16 * (uint64_t)(site % 64);
            loc.line = (uint64_t)site;
        }
        int k = (int)((x >> 20) % SLOTS);
        uint64_t size = 16 + (x >> 40) % 200;
        if (i % 5000 == 4999)
            lm_enc_event_lfunc(b, 0x1000 + 16 * (uint64_t)(x % 64), "@c.lua",
                               (uint64_t)i);
        else if (i % 997 == 996) /* a block from before the profile */
            lm_enc_free(b, LM_REV_R3, &loc, 0x7f000000 + (uint64_t)i * 16, 32);
        else if (i % 1499 == 1498 && live[k] != 0) /* a free the VM lost */
            lm_enc_alloc(b, LM_REV_R3, &loc, live[k], size);
        else if (i % 2003 == 2002) /* a failed allocation */
            lm_enc_alloc(b, LM_REV_R3, &loc, 0, size);
        else if (live[k] == 0) {
            live[k] = next += 256;
            lm_enc_alloc(b, LM_REV_R3, &loc, live[k], size);
        } else if (x & 0x100000000ULL) {
            lm_enc_free(b, LM_REV_R3, &loc, live[k], size);
            live[k] = 0;
        } else {
            uint64_t n = next += 256;
            lm_enc_realloc(b, LM_REV_R3, &loc, live[k], size, n, size + 8);
            live[k] = n;
        }
    }
    lm_enc_epilogue(b);
}

/* Two ways through the state (set by their direct-path budgets) build
 * the same state from one random stream over `sites` sites. */
static void check_paths_agree(int sites, uint64_t budget_a, uint64_t budget_b)
{
    struct lm_buf b = {0};
    struct lm_profile pa, pb;
    struct lm_state_limits la = {0, budget_a}, lb = {0, budget_b};

    random_stream(&b, 42, 400000, sites);
    CU_ASSERT_FATAL(!b.oom);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&pa, NULL, &la), 0);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&pb, NULL, &lb), 0);
    CU_ASSERT_EQUAL(feed_chunked(&pa, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(feed_chunked(&pb, b.data, b.len, 4096), LM_DONE);
    CU_ASSERT_TRUE(pa.state.totals.live_blocks > 50000);
    CU_ASSERT_EQUAL(
        memcmp(&pa.state.totals, &pb.state.totals, sizeof(struct lm_totals)),
        0);
    CU_ASSERT_EQUAL(pa.state.nlocs, pb.state.nlocs);
    char *ra = report_text(&pa.state), *rb = report_text(&pb.state);
    CU_ASSERT_TRUE(strlen(ra) > 1000);
    CU_ASSERT_STRING_EQUAL(ra, rb);
    free(ra);
    free(rb);
    lm_profile_free(&pa);
    lm_profile_free(&pb);
    lm_buf_free(&b);
}

/*
 * The direct path, the prefetch pipeline, and the heap-only pipeline
 * (a heap too big for the budget, locations small enough: 100 sites make
 * about 130 records of 192 bytes, a quarter of 256 KiB holds them, and
 * 50 k live blocks exceed it) build the same state.
 */
static void test_direct_and_pipelined_agree(void)
{
    check_paths_agree(3000, UINT64_MAX, 1);
    check_paths_agree(100, UINT64_MAX, 256 * 1024);
}

/* Every block of a is in b, with its size and site; b has no others. */
static void check_same_heap(const struct lm_state *a, const struct lm_state *b)
{
    CU_ASSERT_EQUAL(a->heap.count, b->heap.count);
    for (unsigned int k = 0; k < LM_HEAP_SHARDS; k++) {
        const struct lm_heap_shard *s = &a->heap.shard[k];
        for (uint32_t i = 0; i < s->cap; i++) {
            struct lm_block blk;
            uint32_t where;
            if (*lm_heap_ctrl_of(s, i) >= LM_HEAP_EMPTY)
                continue;
            /* The two maps' seeds differ: compare addresses. */
            uint64_t addr = lm_heap_addr(&a->heap, s->slots[i].key);
            if (!lm_heap_peek_hashed(&b->heap, lm_heap_hash(&b->heap, addr),
                                     &blk, &where)) {
                CU_FAIL("a block is missing");
                return;
            }
            CU_ASSERT_EQUAL(blk.size, s->slots[i].size);
            CU_ASSERT_EQUAL(blk.loc, s->slots[i].loc);
        }
    }
}

/*
 * One stream applied on one thread and on two ends in the same state:
 * totals with the peak, counters, overrides (through the report), the
 * heap map.  Its 2000 locations come while the worker applies, so their
 * records move under it (see lm_par.c).  With fewer allowed (max_locs),
 * both stop at the same record with the same error.
 */
static void check_threads_agree(uint64_t budget, size_t chunk,
                                uint32_t max_locs)
{
    struct lm_buf b = {0};
    struct lm_profile one, two;
    struct lm_state_limits lim = {max_locs, budget};
    enum lm_status want = max_locs != 0 ? LM_ERROR : LM_DONE;
    char err[128];

    random_stream(&b, 7, 300000, 2000);
    CU_ASSERT_FATAL(!b.oom);
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&one, NULL, &lim), 0);
    CU_ASSERT_EQUAL(feed_chunked(&one, b.data, b.len, chunk), want);
    if (max_locs == 0) { /* the stream has each kind of oddity */
        CU_ASSERT_TRUE(one.state.totals.unknown_frees > 100);
        CU_ASSERT_TRUE(one.state.totals.overwritten_blocks > 50);
        CU_ASSERT_TRUE(one.state.totals.failed_allocs > 100);
    }
    CU_ASSERT_EQUAL_FATAL(lm_profile_init(&two, NULL, &lim), 0);
    CU_ASSERT_EQUAL_FATAL(lm_profile_threads(&two, 2), 0);
    CU_ASSERT_EQUAL(feed_chunked(&two, b.data, b.len, chunk), want);
    CU_ASSERT_EQUAL(lm_profile_settle(&two, err, sizeof(err)), 0);
    CU_ASSERT_EQUAL(one.dec.err_offset, two.dec.err_offset);
    CU_ASSERT_STRING_EQUAL(one.dec.errmsg, two.dec.errmsg);
    if (max_locs != 0)
        CU_ASSERT_PTR_NOT_NULL(strstr(two.dec.errmsg, "too many"));
    CU_ASSERT_EQUAL(
        memcmp(&one.state.totals, &two.state.totals, sizeof(struct lm_totals)),
        0);
    CU_ASSERT_EQUAL_FATAL(one.state.nlocs, two.state.nlocs);
    for (uint32_t l = 0; l < one.state.nlocs; l++) {
        struct lm_counters c1, c2;
        lm_state_counters(&one.state, l, &c1);
        lm_state_counters(&two.state, l, &c2);
        CU_ASSERT_EQUAL(memcmp(&c1, &c2, sizeof(c1)), 0);
    }
    check_same_heap(&one.state, &two.state);
    char *expected = report_text(&one.state), *got = report_text(&two.state);
    CU_ASSERT_STRING_EQUAL(got, expected);
    free(got);
    free(expected);
    lm_profile_free(&two);
    lm_profile_free(&one);
    lm_buf_free(&b);
}

static void test_threads_agree(void)
{
    check_threads_agree(UINT64_MAX, 0, 0); /* no prefetching */
    check_threads_agree(1, 4096, 0);       /* the full pipeline, in chunks */
    /* Both threads change paths midway: the split plans sites ahead once
     * 266 locations pass a quarter of the budget, the worker pipelines
     * once its heap map and the locations pass all of it (2000 locations
     * take 375 KiB). */
    check_threads_agree(200 << 10, 0, 0);
    /* A cap on locations that the table's growth meets (1024 -> 1500). */
    check_threads_agree(1, 0, 1500);
}

/* An error in the middle leaves both threads' work before it applied. */
static void test_threads_stop_at_error(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 2), in = loc_internal();
    char err[128];

    begin_r3(&b);
    for (uint64_t i = 1; i <= 20000; i++)
        lm_enc_alloc(&b, LM_REV_R3, &l, i * 16, 7);
    lm_enc_realloc(&b, LM_REV_R3, &in, 0x10, 7, 0x20, INT64_MAX);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x900000, 7);
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(lm_profile_threads(&p, 2), 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 1000), LM_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.dec.errmsg, "4 GiB or more"));
    CU_ASSERT_EQUAL(lm_profile_settle(&p, err, sizeof(err)), 0);
    CU_ASSERT_EQUAL(p.state.totals.alloc_events, 20000);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 20000 * 7);
    CU_ASSERT_EQUAL(p.state.totals.peak_live_blocks, 20000);
    CU_ASSERT_EQUAL(p.state.heap.count, 20000);
    CU_ASSERT_EQUAL(p.state.totals.realloc_events, 0);
    /* Settled: no more feeding. */
    CU_ASSERT_EQUAL(lm_profile_settle(&p, err, sizeof(err)), 0);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* The peak of live blocks is the worker's own, exact: 20 k blocks, all
 * freed, then 10 more, over many hand-overs. */
static void test_threads_exact_peak(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref l = loc_lua(0x100, 2);
    struct lm_profile p;
    char err[128];

    begin_r3(&b);
    for (uint64_t i = 1; i <= 20000; i++)
        lm_enc_alloc(&b, LM_REV_R3, &l, i * 16, 7);
    for (uint64_t i = 1; i <= 20000; i++)
        lm_enc_free(&b, LM_REV_R3, &l, i * 16, 7);
    for (uint64_t i = 1; i <= 10; i++)
        lm_enc_alloc(&b, LM_REV_R3, &l, i * 16, 7);
    lm_enc_epilogue(&b);
    CU_ASSERT_FATAL(!b.oom);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(lm_profile_threads(&p, 2), 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(lm_profile_settle(&p, err, sizeof(err)), 0);
    CU_ASSERT_EQUAL(p.state.totals.live_blocks, 10);
    CU_ASSERT_EQUAL(p.state.totals.peak_live_blocks, 20000);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A worker starts only on an empty state: live blocks would be looked
 * for on the wrong side. */
static void test_threads_need_empty_state(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 2);

    begin_r3(&b);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x10, 7);
    run(&p, &b, LM_NEED_MORE);
    CU_ASSERT_EQUAL(lm_profile_threads(&p, 2), -1);
    CU_ASSERT_PTR_NULL(p.par);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

void register_state_tests(void)
{
    CU_pSuite s = CU_add_suite("state", NULL, NULL);

    CU_add_test(s, "heap delta is exact", test_heap_delta_exact);
    CU_add_test(s, "overrides past the pending entries",
                test_overrides_past_pending);
    CU_add_test(s, "prototype epochs", test_proto_epochs);
    CU_add_test(s, "trace epochs", test_trace_epochs);
    CU_add_test(s, "R2 trace names", test_r2_trace_names);
    CU_add_test(s, "aliases", test_aliases);
    CU_add_test(s, "C symbols", test_c_symbols);
    CU_add_test(s, "unknown prototype", test_unknown_proto);
    CU_add_test(s, "a builtin library function", test_builtin_function_named);
    CU_add_test(s, "C symbol renames the cached location",
                test_c_symbol_renames_cached_location);
    CU_add_test(s, "trace start announced later",
                test_trace_start_announced_later);
    CU_add_test(s, "overwritten block", test_overwritten_block);
    CU_add_test(s, "census", test_census);
    CU_add_test(s, "census rules end with it", test_census_rules_end_with_it);
    CU_add_test(s, "census over the VM's heap", test_census_over);
    CU_add_test(s, "census huge remainder", test_census_huge_remainder);
    CU_add_test(s, "census partial", test_census_partial);
    CU_add_test(s, "census markers in the symbol table",
                test_census_markers_in_symtab);
    CU_add_test(s, "census names", test_census_names);
    CU_add_test(s, "census internals named first",
                test_census_internals_named_first);
    CU_add_test(s, "location limit", test_location_limit);
    CU_add_test(s, "huge sizes", test_huge_sizes);
    CU_add_test(s, "heap map keys are addresses", test_heap_keys_are_addresses);
    CU_add_test(s, "heap map with many blocks", test_heap_map_many_blocks);
    CU_add_test(s, "heap map under crafted collisions",
                test_heap_map_collisions);
    CU_add_test(s, "heap map under steady churn", test_heap_map_churn);
    CU_add_test(s, "table grows keeping its bytes",
                test_table_grows_keeping_its_bytes);
    CU_add_test(s, "heap map against a reference",
                test_heap_map_random_against_reference);
    CU_add_test(s, "name groups", test_name_groups);
    CU_add_test(s, "trace context", test_trace_context);
    CU_add_test(s, "symbol table re-encoded", test_symtab_reencoded);
    CU_add_test(s, "direct and pipelined paths agree",
                test_direct_and_pipelined_agree);
    CU_add_test(s, "one thread and two agree", test_threads_agree);
    CU_add_test(s, "two threads stop at an error", test_threads_stop_at_error);
    CU_add_test(s, "two threads keep the exact peak", test_threads_exact_peak);
    CU_add_test(s, "two threads need an empty state",
                test_threads_need_empty_state);
}
