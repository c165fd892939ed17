/* Tests of the exports: pprof read back with its own schema, folded stacks
 * and speedscope's JSON, from a stream of known sites. */
#include <CUnit/CUnit.h>
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

void register_export_tests(void)
{
    CU_pSuite s = CU_add_suite("export", NULL, NULL);
    CU_add_test(s, "pprof", test_pprof);
    CU_add_test(s, "folded stacks", test_folded);
    CU_add_test(s, "speedscope", test_speedscope);
    CU_add_test(s, "pprof intervals (ljmp-push)", test_pprof_delta);
}
