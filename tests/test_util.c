/* Helpers shared by the CUnit suites: sample streams and a recording sink. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lm_report.h"
#include "test_support.h"

#ifndef LJMP_TEST_DATA
#error "LJMP_TEST_DATA must name tests/expected"
#endif

int recorder_sink(void *ctx, const struct lm_record *recs, size_t n,
                  size_t *failed_at, char *errbuf, size_t errlen)
{
    struct recorder *r = ctx;

    (void)failed_at;
    (void)errbuf;
    (void)errlen;
    for (size_t i = 0; i < n; i++) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->recs = realloc(r->recs, r->cap * sizeof(*r->recs));
            CU_ASSERT_FATAL(r->recs != NULL);
        }
        struct saved_record *s = &r->recs[r->n++];
        memset(s, 0, sizeof(*s));
        s->rec = recs[i];
        /* A definition's frames, while they last. */
        if (recs[i].kind == LM_REC_STACK_DEF) {
            memcpy(s->frames, recs[i].frames,
                   recs[i].nframes * sizeof(*s->frames));
            s->rec.frames = NULL;
            continue;
        }
        /* A symbol's name, while it lasts (an event's words share str). */
        if (recs[i].kind <= LM_REC_SYM_TRACE && recs[i].str != NULL) {
            size_t len = recs[i].str_len < sizeof(s->str) - 1
                             ? recs[i].str_len
                             : sizeof(s->str) - 1;
            memcpy(s->str, recs[i].str, len);
            s->str[len] = '\0';
            s->rec.str = NULL;
        }
    }
    return 0;
}

void recorder_free(struct recorder *r)
{
    free(r->recs);
    memset(r, 0, sizeof(*r));
}

struct lm_loc_ref loc_internal(void)
{
    return (struct lm_loc_ref){.source = LM_SRC_INTERNAL};
}

struct lm_loc_ref loc_lua(uint64_t proto, uint64_t line)
{
    return (struct lm_loc_ref){
        .source = LM_SRC_LFUNC, .addr = proto, .line = line};
}

struct lm_loc_ref loc_c(uint64_t addr)
{
    return (struct lm_loc_ref){.source = LM_SRC_CFUNC, .addr = addr};
}

struct lm_loc_ref loc_trace(uint64_t traceno, uint64_t trace_addr)
{
    return (struct lm_loc_ref){
        .source = LM_SRC_TRACE, .traceno = traceno, .trace_addr = trace_addr};
}

void census_begin(struct lm_buf *b, uint64_t begin_total)
{
    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, CENSUS_PROTO, "@h.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    lm_enc_event_lfunc(b, LM_CENSUS_BEGIN, "[census begin]", begin_total);
    lm_enc_event_lfunc(b, LM_CENSUS_INTERNALS,
                       "[before profiling] VM internals", 0);
    lm_enc_event_lfunc(b, LM_CENSUS_TYPE_FIRST, "[before profiling] table", 0);
}

void census_complete(struct lm_buf *b, uint64_t total)
{
    lm_enc_event_lfunc(b, LM_CENSUS_COMPLETE, "[census complete]", total);
}

int same_frames(const struct lm_stack_frame *a, const struct lm_stack_frame *b,
                size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].addr != b[i].addr ||
            a[i].value != b[i].value)
            return 0;
    return 1;
}

struct lm_stack_frame frame_lua(uint64_t proto, uint64_t line)
{
    return (struct lm_stack_frame){LM_FRAME_LUA, proto, line};
}

struct lm_stack_frame frame_c(uint64_t addr)
{
    return (struct lm_stack_frame){LM_FRAME_C, addr, 0};
}

struct lm_stack_frame frame_marker(uint64_t marker)
{
    return (struct lm_stack_frame){LM_FRAME_MARKER, 0, marker};
}

void enc_alloc_at(struct lm_buf *b, enum lm_revision rev,
                  const struct lm_loc_ref *l, uint64_t naddr, uint64_t nsize,
                  uint64_t stack)
{
    if (rev == LM_REV_R3S && stack != 0)
        lm_enc_alloc_stack(b, rev, l, naddr, nsize, stack);
    else
        lm_enc_alloc(b, rev, l, naddr, nsize);
}

void enc_realloc_at(struct lm_buf *b, enum lm_revision rev,
                    const struct lm_loc_ref *l, uint64_t oaddr, uint64_t osize,
                    uint64_t naddr, uint64_t nsize, uint64_t stack)
{
    if (rev == LM_REV_R3S && stack != 0)
        lm_enc_realloc_stack(b, rev, l, oaddr, osize, naddr, nsize, stack);
    else
        lm_enc_realloc(b, rev, l, oaddr, osize, naddr, nsize);
}

/* R3S's stack symbols of the sample: the configuration and two stacks,
 * one with a C frame and a truncation marker. */
static void sample_stacks(struct lm_buf *b)
{
    struct lm_stack_frame one[] = {frame_lua(0x100, 2), frame_lua(0x200, 9)};
    struct lm_stack_frame two[] = {frame_lua(0x200, 6), frame_c(0x7010),
                                   frame_marker(LM_MARK_TRUNCATED)};

    lm_enc_stack_config(b, 2, 0);
    lm_enc_stack_def(b, 1, one, 2);
    lm_enc_stack_def(b, 2, two, 3);
}

void sample_stream(struct lm_buf *b, enum lm_revision rev)
{
    int traces = rev != LM_REV_R1;
    int enrich = rev >= LM_REV_R3_SEED;
    int r3 = rev == LM_REV_R3 || rev == LM_REV_R3S;
    int stacks = rev == LM_REV_R3S;
    struct lm_loc_ref l;

    lm_enc_begin(b, rev);
    lm_enc_sym_lfunc(b, 0x100, "@app.lua", 0);
    lm_enc_sym_lfunc(b, 0x200, "@app.lua", 5);
    if (r3)
        lm_enc_sym_cfunc(b, 0x7000, "libc.so.6:calloc");
    if (traces)
        lm_enc_sym_trace(b, rev, 1, 0xa000, 0x200, 6);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, rev);
    if (stacks)
        sample_stacks(b);

    l = loc_lua(0x100, 2);
    enc_alloc_at(b, rev, &l, 0x1000, 64, 1);
    l = loc_lua(0x200, 6);
    enc_alloc_at(b, rev, &l, 0x2000, 32, 2);
    l = loc_lua(0x200, 7);
    enc_realloc_at(b, rev, &l, 0x2000, 32, 0x3000, 96, 1);
    l = loc_internal();
    enc_alloc_at(b, rev, &l, 0x4000, 16, 2);
    lm_enc_free(b, rev, &l, 0x1000, 64);
    l = loc_c(0x7010);
    lm_enc_alloc(b, rev, &l, 0x5000, 128);
    if (traces) {
        l = loc_trace(1, 0xa000);
        lm_enc_alloc(b, rev, &l, 0x6000, 48);
    }
    if (enrich) {
        lm_enc_event_lfunc(b, 0x300, "local t = {}\nreturn t", 0);
        l = loc_lua(0x300, 1);
        lm_enc_alloc(b, rev, &l, 0x7000, 24);
    }
    if (stacks) { /* the ids again, for other stacks */
        struct lm_stack_frame other[] = {frame_lua(0x300, 1)};
        lm_enc_stack_reset(b);
        lm_enc_stack_def(b, 1, other, 1);
    }
    if (r3) {
        lm_enc_event_trace(b, rev, 2, 0, 0x300, 1);
        l = loc_trace(2, 0);
        enc_alloc_at(b, rev, &l, 0x8000, 8, 1);
        lm_enc_event_cfunc(b, 0x9000, "libfoo.so:bar");
        l = loc_c(0x9004);
        enc_alloc_at(b, rev, &l, 0x8100, 8, 1);
    }
    l = loc_lua(0x100, 3);
    lm_enc_free(b, rev, &l, 0x3000, 96);
    lm_enc_free(b, rev, &l, 0xdead0, 10);
    lm_enc_epilogue(b);
    if (b->oom)
        abort();
}

enum lm_status feed_chunked(struct lm_profile *p, const uint8_t *buf,
                            size_t len, size_t chunk)
{
    enum lm_status st = LM_NEED_MORE;
    size_t off = 0;

    if (chunk == 0)
        chunk = len ? len : 1;
    while (off < len) {
        size_t n = len - off < chunk ? len - off : chunk, used;
        /* Each chunk in its own allocation so ASan catches over-reads. */
        uint8_t *copy = malloc(n);
        memcpy(copy, buf + off, n);
        st = lm_profile_feed(p, copy, n, &used);
        free(copy);
        if (st == LM_ERROR)
            return st;
        if (st == LM_DONE && used < n)
            return lm_profile_feed(p, buf + off + used, n - used, &used);
        off += n;
    }
    return lm_decoder_finish(&p->dec);
}

char *report_with(const struct lm_state *s, const struct lm_report_opts *o)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(lm_report_write(f, s, o) == 0);
    fclose(f);
    return out;
}

char *report_string(const struct lm_state *s, int leak_only, int human,
                    int json)
{
    struct lm_report_opts o = {
        .leak_only = leak_only, .human_readable = human, .json = json};

    return report_with(s, &o);
}

char *read_expected(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", LJMP_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

int run_ljmpctl(const char *args, char **out, char **err)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "cd %s && %s %s >out.txt 2>err.txt", test_dir,
             LJMPCTL_PATH, args);
    int st = system(cmd);
    if (out != NULL)
        *out = test_slurp("out.txt");
    if (err != NULL)
        *err = test_slurp("err.txt");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
