/* Tests of the exports: pprof read back with its own schema, folded stacks
 * and speedscope's JSON, from streams of known sites and call stacks. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lm_export.h"
#include "pprof_delta.h"
#include "profile.pb-c.h"
#include "test_util.h"

#define A_LUA 0x1000 /* @a.lua, its function defined on line 10 */
#define B_LUA 0x2000 /* @b.lua, line 1 */
#define CFUNC 0x5000 /* my_cfunc */

/*
 * Known sites: @a.lua:12 makes three blocks of 100 (one freed by the GC),
 * @b.lua:5 one of 40 that @b.lua:6 reallocates to 80, my_cfunc one of
 * 24, and trace 3 (started at @a.lua:12) two of 16.
 */
static void known_stream(struct lm_buf *b)
{
    struct lm_loc_ref a12 = loc_lua(A_LUA, 12), b5 = loc_lua(B_LUA, 5),
                      b6 = loc_lua(B_LUA, 6), c = loc_c(CFUNC),
                      t3 = loc_trace(3, 0), gc = loc_internal();

    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, A_LUA, "@a.lua", 10);
    lm_enc_sym_lfunc(b, B_LUA, "@b.lua", 1);
    lm_enc_sym_cfunc(b, CFUNC, "my_cfunc");
    lm_enc_sym_trace(b, LM_REV_R3, 3, 0, A_LUA, 12);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    for (uint64_t i = 1; i <= 3; i++)
        lm_enc_alloc(b, LM_REV_R3, &a12, 0x100 * i, 100);
    lm_enc_free(b, LM_REV_R3, &gc, 0x100, 100);
    lm_enc_alloc(b, LM_REV_R3, &b5, 0x1000, 40);
    lm_enc_realloc(b, LM_REV_R3, &b6, 0x1000, 40, 0x2000, 80);
    lm_enc_alloc(b, LM_REV_R3, &c, 0x3000, 24);
    lm_enc_alloc(b, LM_REV_R3, &t3, 0x4000, 16);
    lm_enc_alloc(b, LM_REV_R3, &t3, 0x4100, 16);
    lm_enc_epilogue(b);
}

/* The export of the stream in b (freed here) in format f with value v, as
 * a malloc'd buffer of *len bytes. */
static char *export_of(struct lm_buf *b, enum lm_export_format f,
                       enum lm_export_value v, size_t *len)
{
    struct lm_profile p;
    struct lm_export_opts o = {.format = f, .value = v, .time_ms = 1000};
    char *out = NULL;
    FILE *mem = open_memstream(&out, len);

    CU_ASSERT_FATAL(!b->oom && mem != NULL);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b->data, b->len, 0), LM_DONE);
    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(lm_export_write(mem, &s, NULL, 1, &o), 0);
    CU_ASSERT_EQUAL(fclose(mem), 0);
    lm_profile_free(&p);
    lm_buf_free(b);
    return out;
}

/* The export of the known stream in format f with value v. */
static char *export_known(enum lm_export_format f, enum lm_export_value v,
                          size_t *len)
{
    struct lm_buf b = {0};

    known_stream(&b);
    return export_of(&b, f, v, len);
}

/* gunzip of data[0..len), as a malloc'd buffer of *out_len bytes. */
static uint8_t *gunzip(const char *data, size_t len, size_t *out_len)
{
    size_t cap = 1 << 20;
    uint8_t *out = malloc(cap);
    z_stream z;

    memset(&z, 0, sizeof(z));
    CU_ASSERT_FATAL(out != NULL && inflateInit2(&z, 15 + 16) == Z_OK);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    CU_ASSERT_EQUAL(inflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    inflateEnd(&z);
    return out;
}

typedef Perftools__Profiles__Profile Profile;

static const char *str(const Profile *p, int64_t i)
{
    CU_ASSERT_FATAL(i >= 0 && (size_t)i < p->n_string_table);
    return p->string_table[i];
}

/* Frame k of sample s (0: its leaf), as "FUNCTION LINE" into buf;
 * checks the ids it goes through. */
static const char *frame_of(const Profile *p,
                            const Perftools__Profiles__Sample *s, size_t k,
                            char *buf, size_t len)
{
    CU_ASSERT_FATAL(k < s->n_location_id);
    uint64_t id = s->location_id[k];
    CU_ASSERT_FATAL(id >= 1 && id <= p->n_location);
    const Perftools__Profiles__Location *l = p->location[id - 1];
    CU_ASSERT_FATAL(l->id == id && l->n_line == 1);
    uint64_t fid = l->line[0]->function_id;
    CU_ASSERT_FATAL(fid >= 1 && fid <= p->n_function);
    const Perftools__Profiles__Function *f = p->function[fid - 1];
    CU_ASSERT_FATAL(f->id == fid);
    snprintf(buf, len, "%s %lld", str(p, f->name), (long long)l->line[0]->line);
    return buf;
}

/* The sample at function `fn`, line `line` (and trace label, if any). */
static const Perftools__Profiles__Sample *
sample_at(const Profile *p, const char *fn, int64_t line, uint64_t trace)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        CU_ASSERT_FATAL(s->n_location_id == 1 && s->n_value == 4);
        CU_ASSERT_FATAL(s->location_id[0] >= 1 &&
                        s->location_id[0] <= p->n_location);
        const Perftools__Profiles__Location *l =
            p->location[s->location_id[0] - 1];
        CU_ASSERT_FATAL(l->id == s->location_id[0] && l->n_line == 1);
        uint64_t fid = l->line[0]->function_id;
        CU_ASSERT_FATAL(fid >= 1 && fid <= p->n_function);
        const Perftools__Profiles__Function *f = p->function[fid - 1];
        CU_ASSERT_FATAL(f->id == fid);
        uint64_t t = 0;
        for (size_t k = 0; k < s->n_label; k++)
            if (strcmp(str(p, s->label[k]->key), "trace") == 0)
                t = (uint64_t)s->label[k]->num;
        if (strcmp(str(p, f->name), fn) == 0 && l->line[0]->line == line &&
            t == trace)
            return s;
    }
    return NULL;
}

static void expect_values(const Perftools__Profiles__Sample *s, int64_t ao,
                          int64_t as, int64_t io, int64_t is)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->value[0], ao);
    CU_ASSERT_EQUAL(s->value[1], as);
    CU_ASSERT_EQUAL(s->value[2], io);
    CU_ASSERT_EQUAL(s->value[3], is);
}

/* pprof: the four sample types, each site's values, functions by chunk
 * and definition line, a trace as the line it starts at with a label. */
static void test_pprof(void)
{
    static const char *const types[][2] = {{"alloc_objects", "count"},
                                           {"alloc_space", "bytes"},
                                           {"inuse_objects", "count"},
                                           {"inuse_space", "bytes"}};
    size_t len, plen;
    char *gz = export_known(LM_EXPORT_PPROF, LM_VALUE_INUSE_SPACE, &len);
    uint8_t *raw = gunzip(gz, len, &plen);
    Profile *p = perftools__profiles__profile__unpack(NULL, plen, raw);

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(str(p, 0), "");
    CU_ASSERT_EQUAL_FATAL(p->n_sample_type, 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_STRING_EQUAL(str(p, p->sample_type[i]->type), types[i][0]);
        CU_ASSERT_STRING_EQUAL(str(p, p->sample_type[i]->unit), types[i][1]);
    }
    CU_ASSERT_STRING_EQUAL(str(p, p->default_sample_type), "inuse_space");
    CU_ASSERT_EQUAL(p->time_nanos, 1000000000);
    expect_values(sample_at(p, "@a.lua:10", 12, 0), 3, 300, 2, 200);
    expect_values(sample_at(p, "@b.lua:1", 5, 0), 1, 40, 0, 0);
    expect_values(sample_at(p, "@b.lua:1", 6, 0), 1, 80, 1, 80);
    expect_values(sample_at(p, "my_cfunc", 0, 0), 1, 24, 1, 24);
    expect_values(sample_at(p, "@a.lua:10", 12, 3), 2, 32, 2, 32);
    /* The GC's free made and holds nothing: no sample. */
    CU_ASSERT_PTR_NULL(sample_at(p, "INTERNAL", 0, 0));
    CU_ASSERT_EQUAL(p->n_sample, 5);
    for (size_t i = 0; i < p->n_function; i++)
        if (strcmp(str(p, p->function[i]->name), "@a.lua:10") == 0) {
            CU_ASSERT_STRING_EQUAL(str(p, p->function[i]->filename), "a.lua");
            CU_ASSERT_EQUAL(p->function[i]->start_line, 10);
        }
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(raw);
    free(gz);
}

/* Folded stacks: one line per named place holding bytes, in name order. */
static void test_folded(void)
{
    size_t len;
    char *text = export_known(LM_EXPORT_FOLDED, LM_VALUE_INUSE_SPACE, &len);

    CU_ASSERT_STRING_EQUAL(text, "@a.lua:12 200\n"
                                 "@b.lua:6 80\n"
                                 "TRACE [3] started at @a.lua:12 32\n"
                                 "my_cfunc 24\n");
    free(text);
    text = export_known(LM_EXPORT_FOLDED, LM_VALUE_ALLOC_OBJECTS, &len);
    CU_ASSERT_STRING_EQUAL(text, "@a.lua:12 3\n"
                                 "@b.lua:5 1\n"
                                 "@b.lua:6 1\n"
                                 "TRACE [3] started at @a.lua:12 2\n"
                                 "my_cfunc 1\n");
    free(text);
}

/* A block of 64 bytes made by table.remove, a library function LuaJIT
 * built from bytecode: its first line is ~0, as the VM writes it. */
static void builtin_stream(struct lm_buf *b)
{
    struct lm_loc_ref rm = loc_lua(0x7000, 0);

    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x7000, "remove", UINT64_MAX);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    lm_enc_alloc(b, LM_REV_R3, &rm, 0x100, 64);
    lm_enc_epilogue(b);
}

/* A library function LuaJIT built from bytecode (its first line ~0, as
 * the VM writes it): one function "[builtin:remove]" without a line, in
 * pprof and in folded stacks, not "remove:18446744073709551615". */
static void test_builtin_function(void)
{
    struct lm_buf b = {0};
    size_t len, plen;

    builtin_stream(&b);
    char *gz = export_of(&b, LM_EXPORT_PPROF, LM_VALUE_INUSE_SPACE, &len);
    uint8_t *raw = gunzip(gz, len, &plen);
    Profile *p = perftools__profiles__profile__unpack(NULL, plen, raw);

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    expect_values(sample_at(p, "[builtin:remove]", 0, 0), 1, 64, 1, 64);
    CU_ASSERT_EQUAL_FATAL(p->n_function, 1);
    CU_ASSERT_EQUAL(p->function[0]->start_line, 0);
    CU_ASSERT_STRING_EQUAL(str(p, p->function[0]->system_name),
                           "[builtin:remove]");
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(raw);
    free(gz);

    builtin_stream(&b);
    char *text = export_of(&b, LM_EXPORT_FOLDED, LM_VALUE_INUSE_SPACE, &len);
    CU_ASSERT_STRING_EQUAL(text, "[builtin:remove] 64\n");
    free(text);
}

/* speedscope: a sampled profile whose weights sum to its end value. */
static void test_speedscope(void)
{
    size_t len;
    char *text = export_known(LM_EXPORT_SPEEDSCOPE, LM_VALUE_INUSE_SPACE, &len);

    CU_ASSERT_PTR_NOT_NULL(strstr(
        text, "\"$schema\":\"https://www.speedscope.app/file-format-schema"));
    CU_ASSERT_PTR_NOT_NULL(strstr(
        text, "{\"name\":\"@a.lua:12\",\"file\":\"a.lua\",\"line\":12}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"version\":\"0.6.0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"type\":\"sampled\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"unit\":\"bytes\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"weights\":[200,80,32,24]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"endValue\":336"));
    free(text);
}

/* The pprof export of the known stream's first `events` events (all of
 * them past its end), as a malloc'd buffer of *len bytes. */
static char *pprof_of_prefix(size_t events, size_t *len)
{
    struct lm_buf b = {0};
    struct lm_loc_ref a12 = loc_lua(A_LUA, 12), b5 = loc_lua(B_LUA, 5);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, A_LUA, "@a.lua", 10);
    lm_enc_sym_lfunc(&b, B_LUA, "@b.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (uint64_t i = 1; i <= events && i <= 4; i++)
        lm_enc_alloc(&b, LM_REV_R3, &a12, 0x100 * i, 100);
    if (events > 4)
        lm_enc_alloc(&b, LM_REV_R3, &b5, 0x1000, 40);
    lm_enc_epilogue(&b);
    return export_of(&b, LM_EXPORT_PPROF, LM_VALUE_INUSE_SPACE, len);
}

/* d's next interval profile of the export of the known stream's first
 * `events` events, read back. */
static Profile *delta_of(struct pprof_delta *d, size_t events)
{
    uint8_t *out = NULL, *raw;
    size_t out_len = 0, raw_len, len;
    char *gz = pprof_of_prefix(events, &len);

    CU_ASSERT_EQUAL_FATAL(
        pprof_delta_next(d, (const uint8_t *)gz, len, &out, &out_len), 0);
    raw = gunzip((const char *)out, out_len, &raw_len);
    Profile *p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    free(raw);
    free(out);
    free(gz);
    return p;
}

/* ljmp-push's intervals: allocations since the previous profile, live
 * values as they are; a place new in an interval has all of its own. */
static void test_pprof_delta(void)
{
    struct pprof_delta *d = pprof_delta_new();
    Profile *p;

    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    p = delta_of(d, 2);
    expect_values(sample_at(p, "@a.lua:10", 12, 0), 2, 200, 2, 200);
    perftools__profiles__profile__free_unpacked(p, NULL);
    p = delta_of(d, 5);
    expect_values(sample_at(p, "@a.lua:10", 12, 0), 2, 200, 4, 400);
    expect_values(sample_at(p, "@b.lua:1", 5, 0), 1, 40, 1, 40);
    perftools__profiles__profile__free_unpacked(p, NULL);
    p = delta_of(d, 5);
    expect_values(sample_at(p, "@a.lua:10", 12, 0), 0, 0, 4, 400);
    expect_values(sample_at(p, "@b.lua:1", 5, 0), 0, 0, 1, 40);
    perftools__profiles__profile__free_unpacked(p, NULL);
    /* Not a profile: refused, d unchanged. */
    uint8_t *out = NULL;
    size_t out_len;
    CU_ASSERT_EQUAL(
        pprof_delta_next(d, (const uint8_t *)"nope", 4, &out, &out_len), -1);
    CU_ASSERT(pprof_delta_memory(d) > 0);
    pprof_delta_free(d);
}

/* -- Call stacks (R3S) ---------------------------------------------------- */

enum { LIB = 0x1000, APP = 0x2000, MAIN = 0x3000, REP = 5 };

/* An R3S stream up to its configuration: @lib.lua (defined on line 1),
 * @app.lua (1), @main.lua (0), and the builtin string.rep. */
static void begin_r3s(struct lm_buf *b, uint64_t sample_bytes)
{
    lm_enc_begin(b, LM_REV_R3S);
    lm_enc_sym_lfunc(b, LIB, "@lib.lua", 1);
    lm_enc_sym_lfunc(b, APP, "@app.lua", 1);
    lm_enc_sym_lfunc(b, MAIN, "@main.lua", 0);
    lm_enc_sym_cfunc(b, REP, "string.rep");
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3S);
    lm_enc_stack_config(b, 8, sample_bytes);
}

/* Stack id: @lib.lua:10 called at @app.lua:LINE, called at @main.lua:5. */
static void def_caller(struct lm_buf *b, uint64_t id, uint64_t line)
{
    struct lm_stack_frame f[] = {frame_lua(LIB, 10), frame_lua(APP, line),
                                 frame_lua(MAIN, 5)};

    lm_enc_stack_def(b, id, f, 3);
}

/*
 * @lib.lua:10 reached from @app.lua:20 300 times and from @app.lua:30 700
 * times, 16 bytes each, the collector freeing the first 200; and
 * string.rep called at @app.lua:7 twice (32 bytes each), its stack
 * deeper than the VM wrote.
 */
static void two_callers(struct lm_buf *b)
{
    struct lm_loc_ref hot = loc_lua(LIB, 10), app7 = loc_lua(APP, 7),
                      gc = loc_internal();
    struct lm_stack_frame rep[] = {frame_c(REP), frame_lua(APP, 7),
                                   frame_lua(MAIN, 5),
                                   frame_marker(LM_MARK_TRUNCATED)};

    begin_r3s(b, 0);
    def_caller(b, 1, 20);
    def_caller(b, 2, 30);
    lm_enc_stack_def(b, 3, rep, 4);
    for (uint64_t i = 0; i < 1000; i++)
        lm_enc_alloc_stack(b, LM_REV_R3S, &hot, 0x100000 + 16 * i, 16,
                           i < 300 ? 1 : 2);
    for (uint64_t i = 0; i < 200; i++)
        lm_enc_free(b, LM_REV_R3S, &gc, 0x100000 + 16 * i, 16);
    lm_enc_alloc_stack(b, LM_REV_R3S, &app7, 0x200000, 32, 3);
    lm_enc_alloc_stack(b, LM_REV_R3S, &app7, 0x200100, 32, 3);
    lm_enc_epilogue(b);
    CU_ASSERT_FATAL(!b->oom);
}

static char *export_two_callers(enum lm_export_format f, enum lm_export_value v,
                                size_t *len)
{
    struct lm_buf b = {0};

    two_callers(&b);
    return export_of(&b, f, v, len);
}

static Profile *unpack_pprof(const char *gz, size_t len)
{
    size_t plen;
    uint8_t *raw = gunzip(gz, len, &plen);
    Profile *p = perftools__profiles__profile__unpack(NULL, plen, raw);

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    free(raw);
    return p;
}

/* The sample whose frames, leaf first, are `frames` ("FUNCTION LINE",
 * n of them), or NULL. */
static const Perftools__Profiles__Sample *
sample_of_stack(const Profile *p, const char *const *frames, size_t n)
{
    char buf[256];

    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        size_t k = 0;
        if (s->n_location_id != n)
            continue;
        while (k < n &&
               strcmp(frame_of(p, s, k, buf, sizeof(buf)), frames[k]) == 0)
            k++;
        if (k == n)
            return s;
    }
    return NULL;
}

/* pprof: a sample per stack, its locations leaf first, one location per
 * distinct frame; the innermost frame that is the site left out, one
 * that is not (a builtin) kept. */
static void test_pprof_stacks(void)
{
    static const char *const from20[] = {"@lib.lua:1 10", "@app.lua:1 20",
                                         "@main.lua:0 5"};
    static const char *const from30[] = {"@lib.lua:1 10", "@app.lua:1 30",
                                         "@main.lua:0 5"};
    static const char *const rep[] = {"@app.lua:1 7", "string.rep 0",
                                      "@app.lua:1 7", "@main.lua:0 5",
                                      "[truncated] 0"};
    size_t len;
    char *gz = export_two_callers(LM_EXPORT_PPROF, LM_VALUE_INUSE_SPACE, &len);
    Profile *p = unpack_pprof(gz, len);

    CU_ASSERT_EQUAL(p->n_sample, 3);
    expect_values(sample_of_stack(p, from20, 3), 300, 4800, 100, 1600);
    expect_values(sample_of_stack(p, from30, 3), 700, 11200, 700, 11200);
    expect_values(sample_of_stack(p, rep, 5), 2, 64, 2, 64);
    /* lib:10, app:20, app:30, main:5, app:7, string.rep, [truncated]. */
    CU_ASSERT_EQUAL(p->n_location, 7);
    CU_ASSERT_EQUAL(p->n_comment, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(gz);
}

/* Folded stacks: the frames root first, each stack's count. */
static void test_folded_stacks(void)
{
    size_t len;
    char *text =
        export_two_callers(LM_EXPORT_FOLDED, LM_VALUE_ALLOC_OBJECTS, &len);

    CU_ASSERT_STRING_EQUAL(text,
                           "@main.lua:5;@app.lua:20;@lib.lua:10 300\n"
                           "@main.lua:5;@app.lua:30;@lib.lua:10 700\n"
                           "[truncated];@main.lua:5;@app.lua:7;string.rep;"
                           "@app.lua:7 2\n");
    free(text);
}

/* speedscope: each sample the stack's frames from the root. */
static void test_speedscope_stacks(void)
{
    size_t len;
    char *text =
        export_two_callers(LM_EXPORT_SPEEDSCOPE, LM_VALUE_ALLOC_OBJECTS, &len);

    /* Frames in the order places were met: lib:10, app:20, main:5, app:30,
     * app:7, string.rep, [truncated]. */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"frames\":[{\"name\":\"@lib.lua:10\","
                                        "\"file\":\"lib.lua\",\"line\":10},"
                                        "{\"name\":\"@app.lua:20\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text,
                                  "\"samples\":[[2,1,0],[2,3,0],[6,2,4,5,4]],"
                                  "\"weights\":[300,700,2],\"endValue\":1002"));
    free(text);
}

/* Each process's stacks under it, merged. */
static void test_merged_stacks(void)
{
    struct lm_buf b1 = {0}, b2 = {0};
    struct lm_profile p1, p2;
    struct lm_report_member m[] = {{1, 1, "luajit a.lua"},
                                   {2, 2, "luajit b.lua"}};
    struct lm_export_opts o = {.format = LM_EXPORT_FOLDED,
                               .value = LM_VALUE_ALLOC_OBJECTS};
    char *out = NULL;
    size_t len;
    FILE *mem = open_memstream(&out, &len);

    two_callers(&b1);
    known_stream(&b2);
    lm_profile_init(&p1, NULL, NULL);
    lm_profile_init(&p2, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p1, b1.data, b1.len, 0), LM_DONE);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p2, b2.data, b2.len, 0), LM_DONE);
    const struct lm_state *s[] = {&p1.state, &p2.state};
    CU_ASSERT_EQUAL(lm_export_write(mem, s, m, 2, &o), 0);
    CU_ASSERT_EQUAL(fclose(mem), 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "luajit (1);@main.lua:5;@app.lua:30;@lib.lua:10 700\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "luajit (2);@a.lua:12 3\n"));
    free(out);
    lm_profile_free(&p1);
    lm_profile_free(&p2);
    lm_buf_free(&b1);
    lm_buf_free(&b2);
}

/*
 * Sampled every 1000 bytes: four allocations of 500 bytes at @lib.lua:10
 * from @app.lua:20 carried the stack (one of them freed since), six did
 * not, and @app.lua:40 made a block without one.
 */
static void sampled_stream(struct lm_buf *b)
{
    struct lm_loc_ref hot = loc_lua(LIB, 10), app40 = loc_lua(APP, 40),
                      gc = loc_internal();

    begin_r3s(b, 1000);
    def_caller(b, 1, 20);
    for (uint64_t i = 0; i < 10; i++)
        enc_alloc_at(b, LM_REV_R3S, &hot, 0x100000 + 0x1000 * i, 500,
                     i < 4 ? 1 : 0);
    lm_enc_free(b, LM_REV_R3S, &gc, 0x100000, 500);
    lm_enc_alloc(b, LM_REV_R3S, &app40, 0x300000, 64);
    lm_enc_epilogue(b);
    CU_ASSERT_FATAL(!b->oom);
}

/* Sampled stacks: the stacked samples' estimates (each event weighed by
 * 1 / (1 - exp(-s/M))), rounded; nothing of the events without a stack;
 * a comment that says so. */
static void test_pprof_sampled(void)
{
    static const char *const from20[] = {"@lib.lua:1 10", "@app.lua:1 20",
                                         "@main.lua:0 5"};
    struct lm_buf b = {0};
    size_t len;
    double w = 1 / (1 - exp(-500.0 / 1000));

    sampled_stream(&b);
    char *gz = export_of(&b, LM_EXPORT_PPROF, LM_VALUE_INUSE_SPACE, &len);
    Profile *p = unpack_pprof(gz, len);
    CU_ASSERT_EQUAL(p->n_sample, 1);
    expect_values(sample_of_stack(p, from20, 3), llround(4 * w),
                  llround(4 * 500 * w), llround(3 * w), llround(3 * 500 * w));
    CU_ASSERT_EQUAL_FATAL(p->n_comment, 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(str(p, p->comment[0]), "sampled every 1000 bytes on average"));
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(gz);
}

/* What lm_export_samples handed over. */
struct taken {
    char text[1024];
    size_t len;
    int estimated;
};

static int take_sample(void *ctx, const struct lm_export_sample *s)
{
    struct taken *t = ctx;

    for (uint32_t j = 0; j < s->nframes; j++)
        t->len += (size_t)snprintf(t->text + t->len, sizeof(t->text) - t->len,
                                   "%s%s", j ? ";" : "", s->frames[j]);
    t->len +=
        (size_t)snprintf(t->text + t->len, sizeof(t->text) - t->len, " %llu\n",
                         (unsigned long long)s->v[LM_VALUE_ALLOC_OBJECTS]);
    t->estimated |= s->estimated;
    return t->len > 600; /* stops the walk */
}

/* The samples in memory: frames root first, named as reports print
 * them; estimates said; the walk stopped by the callback. */
static void test_samples_in_memory(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct taken t = {0};

    two_callers(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    const struct lm_state *s = &p.state;
    CU_ASSERT_EQUAL(lm_export_samples(&s, NULL, 1, take_sample, &t), 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(t.text, "@main.lua:5;@app.lua:20;@lib.lua:10 300\n"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(t.text, "@main.lua:5;@app.lua:30;@lib.lua:10 700\n"));
    CU_ASSERT_FALSE(t.estimated);
    t.len = 700; /* the next sample stops it */
    CU_ASSERT_EQUAL(lm_export_samples(&s, NULL, 1, take_sample, &t), 1);
    lm_profile_free(&p);
    lm_buf_free(&b);

    memset(&t, 0, sizeof(t));
    sampled_stream(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(lm_export_samples(&s, NULL, 1, take_sample, &t), 0);
    CU_ASSERT_STRING_EQUAL(t.text, "@main.lua:5;@app.lua:20;@lib.lua:10 10\n");
    CU_ASSERT_TRUE(t.estimated);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Samples as sorted text lines, to compare two ways of getting them. */
struct lines {
    char **v;
    size_t n, estimated;
};

static int take_line(void *ctx, const struct lm_export_sample *s)
{
    struct lines *l = ctx;
    char *line = NULL, *next;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);

    CU_ASSERT_FATAL(f != NULL);
    for (uint32_t j = 0; j < s->nframes; j++)
        fprintf(f, "%s%s", j ? ";" : "", s->frames[j]);
    fprintf(f, " %llu %llu %llu %llu trace %llu member %u pid %u %s",
            (unsigned long long)s->v[0], (unsigned long long)s->v[1],
            (unsigned long long)s->v[2], (unsigned long long)s->v[3],
            (unsigned long long)s->trace, s->member, s->pid,
            s->command ? s->command : "-");
    fclose(f);
    l->estimated += s->estimated != 0;
    next = line;
    l->v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
    CU_ASSERT_FATAL(l->v != NULL);
    l->v[l->n++] = next;
    return 0;
}

static int cmp_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_lines(struct lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* The samples of states (members may be NULL) in memory and read back
 * from their pprof are the same, frames named alike, and for one state
 * as many estimated (a merged pprof says only that some process's
 * stacks were sampled); how many. */
static size_t check_round_trip(const struct lm_state *const *states,
                               const struct lm_report_member *members, size_t n)
{
    struct lines direct = {0}, back = {0};
    struct lm_export_opts o = {.format = LM_EXPORT_PPROF};
    char *gz = NULL;
    size_t len, count;
    FILE *mem = open_memstream(&gz, &len);

    CU_ASSERT_EQUAL(lm_export_write(mem, states, members, n, &o), 0);
    CU_ASSERT_EQUAL_FATAL(fclose(mem), 0);
    CU_ASSERT_EQUAL(lm_export_samples(states, members, n, take_line, &direct),
                    0);
    CU_ASSERT_EQUAL(
        lm_export_read_pprof((const uint8_t *)gz, len, take_line, &back), 0);
    CU_ASSERT_EQUAL_FATAL(direct.n, back.n);
    if (n == 1)
        CU_ASSERT_EQUAL(direct.estimated, back.estimated);
    qsort(direct.v, direct.n, sizeof(char *), cmp_lines);
    qsort(back.v, back.n, sizeof(char *), cmp_lines);
    for (size_t i = 0; i < direct.n; i++) {
        CU_ASSERT_STRING_EQUAL(back.v[i], direct.v[i]);
    }
    count = direct.n;
    free_lines(&direct);
    free_lines(&back);
    /* Not a profile, or one cut short: refused. */
    CU_ASSERT_EQUAL(
        lm_export_read_pprof((const uint8_t *)gz, len / 2, take_line, &back),
        -1);
    CU_ASSERT_EQUAL(
        lm_export_read_pprof((const uint8_t *)"nope", 4, take_line, &back), -1);
    free_lines(&back);
    free(gz);
    return count;
}

/* pprof read back names every kind of frame as the export does: Lua
 * lines, traces, C functions, builtins, markers, census names; merged
 * processes by their labels; estimates by the comment on sampling. */
static void test_read_pprof(void)
{
    void (*streams[])(struct lm_buf *) = {known_stream, two_callers,
                                          sampled_stream};
    struct lm_profile p[3];
    const struct lm_state *s[3];
    struct lm_report_member m[] = {{11, 1, "luajit a.lua"},
                                   {22, 2, "luajit b.lua"},
                                   {33, 3, "luajit c.lua"}};

    for (int i = 0; i < 3; i++) {
        struct lm_buf b = {0};
        streams[i](&b);
        lm_profile_init(&p[i], NULL, NULL);
        CU_ASSERT_EQUAL_FATAL(feed_chunked(&p[i], b.data, b.len, 0), LM_DONE);
        s[i] = &p[i].state;
        lm_buf_free(&b);
        CU_ASSERT(check_round_trip(&s[i], NULL, 1) > 0);
    }
    CU_ASSERT_EQUAL(check_round_trip(s, m, 3), 5 + 3 + 1);
    for (int i = 0; i < 3; i++)
        lm_profile_free(&p[i]);

    /* Every record type of R3S, stacks of every frame kind among them. */
    struct lm_buf b = {0};
    sample_stream(&b, LM_REV_R3S);
    lm_profile_init(&p[0], NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p[0], b.data, b.len, 0), LM_DONE);
    CU_ASSERT(check_round_trip(s, NULL, 1) > 5);
    lm_profile_free(&p[0]);
    lm_buf_free(&b);
}

void register_export_tests(void)
{
    CU_pSuite s = CU_add_suite("export", NULL, NULL);
    CU_add_test(s, "pprof", test_pprof);
    CU_add_test(s, "folded stacks", test_folded);
    CU_add_test(s, "speedscope", test_speedscope);
    CU_add_test(s, "a builtin library function", test_builtin_function);
    CU_add_test(s, "pprof intervals (ljmp-push)", test_pprof_delta);
    CU_add_test(s, "pprof with call stacks", test_pprof_stacks);
    CU_add_test(s, "folded call stacks", test_folded_stacks);
    CU_add_test(s, "speedscope call stacks", test_speedscope_stacks);
    CU_add_test(s, "merged call stacks", test_merged_stacks);
    CU_add_test(s, "pprof of sampled stacks", test_pprof_sampled);
    CU_add_test(s, "samples in memory", test_samples_in_memory);
    CU_add_test(s, "pprof read back", test_read_pprof);
}
