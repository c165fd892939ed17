/* Decoder tests: every record of every revision, chunking, malformed input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_report.h"
#include "lm_strip.h"
#include "test_util.h"

static const enum lm_revision revisions[] = {
    LM_REV_R1, LM_REV_R2, LM_REV_R3_SEED, LM_REV_R3, LM_REV_R3S};

static enum lm_status decode_to(struct recorder *r, const uint8_t *buf,
                                size_t len, size_t chunk, struct lm_decoder *d)
{
    enum lm_status st = LM_NEED_MORE;

    lm_decoder_init(d, NULL, recorder_sink, r);
    for (size_t off = 0; off < len;) {
        size_t n = chunk && len - off > chunk ? chunk : len - off, used;
        st = lm_decoder_feed(d, buf + off, n, &used);
        if (st != LM_NEED_MORE)
            return st;
        off += n;
    }
    return lm_decoder_finish(d);
}

static const struct saved_record *nth(const struct recorder *r, int kind,
                                      size_t n)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->recs[i].rec.kind == kind && n-- == 0)
            return &r->recs[i];
    return NULL;
}

static size_t count(const struct recorder *r, int kind)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++)
        n += r->recs[i].rec.kind == kind;
    return n;
}

/* The sample stream's records, field by field, in each revision. */
static void test_records_of_every_revision(void)
{
    for (size_t v = 0; v < sizeof(revisions) / sizeof(revisions[0]); v++) {
        enum lm_revision rev = revisions[v];
        struct lm_buf b = {0};
        struct recorder r = {0};
        struct lm_decoder d;

        sample_stream(&b, rev);
        CU_ASSERT_EQUAL_FATAL(decode_to(&r, b.data, b.len, 0, &d), LM_DONE);
        CU_ASSERT_EQUAL(d.revision, rev);

        int traces = rev != LM_REV_R1, enrich = rev >= LM_REV_R3_SEED;
        int r3 = rev >= LM_REV_R3, stacks = rev == LM_REV_R3S;
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYM_LFUNC), 2u + enrich);
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYM_CFUNC), r3 ? 2u : 0u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYM_TRACE),
                        (size_t)traces + (size_t)r3);
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYMTAB_END), 1u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_EVENTS_BEGIN), 1u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_ALLOC),
                        4u + traces + enrich + 2u * r3);
        CU_ASSERT_EQUAL(count(&r, LM_REC_REALLOC), 1u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_FREE), 3u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_END), 1u);
        CU_ASSERT_EQUAL(count(&r, LM_REC_STACK_CONFIG), (size_t)stacks);
        CU_ASSERT_EQUAL(count(&r, LM_REC_STACK_DEF), 3u * stacks);
        CU_ASSERT_EQUAL(count(&r, LM_REC_STACK_RESET), (size_t)stacks);
        CU_ASSERT_EQUAL(r.recs[r.n - 1].rec.kind, LM_REC_END);
        CU_ASSERT_EQUAL(r.recs[r.n - 1].rec.offset, b.len - 1);

        const struct saved_record *s = nth(&r, LM_REC_SYM_LFUNC, 1);
        CU_ASSERT_EQUAL(s->rec.addr, 0x200);
        CU_ASSERT_EQUAL(s->rec.line, 5);
        CU_ASSERT_STRING_EQUAL(s->str, "@app.lua");
        CU_ASSERT_EQUAL(s->rec.in_events, 0);

        s = nth(&r, LM_REC_REALLOC, 0);
        CU_ASSERT_EQUAL(s->rec.loc.source, LM_SRC_LFUNC);
        CU_ASSERT_EQUAL(s->rec.loc.addr, 0x200);
        CU_ASSERT_EQUAL(s->rec.loc.line, 7);
        CU_ASSERT_EQUAL(s->rec.oaddr, 0x2000);
        CU_ASSERT_EQUAL(s->rec.osize, 32);
        CU_ASSERT_EQUAL(s->rec.naddr, 0x3000);
        CU_ASSERT_EQUAL(s->rec.nsize, 96);

        s = nth(&r, LM_REC_FREE, 0);
        CU_ASSERT_EQUAL(s->rec.loc.source, LM_SRC_INTERNAL);
        CU_ASSERT_EQUAL(s->rec.oaddr, 0x1000);
        CU_ASSERT_EQUAL(s->rec.osize, 64);

        s = nth(&r, LM_REC_ALLOC, 3);
        CU_ASSERT_EQUAL(s->rec.loc.source, LM_SRC_CFUNC);
        CU_ASSERT_EQUAL(s->rec.loc.addr, 0x7010);

        if (traces) {
            s = nth(&r, LM_REC_SYM_TRACE, 0);
            CU_ASSERT_EQUAL(s->rec.traceno, 1);
            CU_ASSERT_EQUAL(s->rec.trace_addr, r3 ? 0u : 0xa000u);
            CU_ASSERT_EQUAL(s->rec.addr, 0x200);
            CU_ASSERT_EQUAL(s->rec.line, 6);
            s = nth(&r, LM_REC_ALLOC, 4);
            CU_ASSERT_EQUAL(s->rec.loc.source, LM_SRC_TRACE);
            CU_ASSERT_EQUAL(s->rec.loc.traceno, 1);
            CU_ASSERT_EQUAL(s->rec.loc.trace_addr, r3 ? 0u : 0xa000u);
        }
        if (enrich) {
            s = nth(&r, LM_REC_SYM_LFUNC, 2);
            CU_ASSERT_EQUAL(s->rec.in_events, 1);
            CU_ASSERT_EQUAL(s->rec.addr, 0x300);
            CU_ASSERT_STRING_EQUAL(s->str, "local t = {}\nreturn t");
        }
        if (stacks) {
            s = nth(&r, LM_REC_STACK_CONFIG, 0);
            CU_ASSERT_EQUAL(s->rec.depth, 2);
            CU_ASSERT_EQUAL(s->rec.sample_bytes, 0);
            CU_ASSERT_EQUAL(s->rec.size, 4);
            s = nth(&r, LM_REC_STACK_DEF, 1);
            CU_ASSERT_EQUAL(s->rec.stack, 2);
            CU_ASSERT_EQUAL_FATAL(s->rec.nframes, 3);
            CU_ASSERT_EQUAL(s->frames[0].kind, LM_FRAME_LUA);
            CU_ASSERT_EQUAL(s->frames[0].addr, 0x200);
            CU_ASSERT_EQUAL(s->frames[0].value, 6);
            CU_ASSERT_EQUAL(s->frames[1].kind, LM_FRAME_C);
            CU_ASSERT_EQUAL(s->frames[1].addr, 0x7010);
            CU_ASSERT_EQUAL(s->frames[2].kind, LM_FRAME_MARKER);
            CU_ASSERT_EQUAL(s->frames[2].value, LM_MARK_TRUNCATED);
            /* 14 00 02 03, then 6 << 2 | 0 with 0x200 (2 bytes), 1 with
             * 0x7010 (3 bytes), and 1 << 2 | 2. */
            CU_ASSERT_EQUAL(s->rec.size, 12);
            CU_ASSERT_EQUAL(nth(&r, LM_REC_STACK_DEF, 2)->rec.stack, 1);
            CU_ASSERT_EQUAL(nth(&r, LM_REC_STACK_DEF, 2)->rec.nframes, 1);
        }
        /* Events name their stacks in R3S only; frees never do. */
        s = nth(&r, LM_REC_ALLOC, 0);
        CU_ASSERT_EQUAL(s->rec.stack, stacks ? 1u : 0u);
        /* The header, 0x100 (2 bytes), 2, 0x1000 (2 bytes), 64. */
        CU_ASSERT_EQUAL(s->rec.stack_at, stacks ? 7u : 0u);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 2)->rec.stack, stacks ? 2u : 0u);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_REALLOC, 0)->rec.stack,
                        stacks ? 1u : 0u);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 3)->rec.stack, 0);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_FREE, 0)->rec.stack, 0);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_FREE, 0)->rec.stack_at, 0);
        if (r3) {
            s = nth(&r, LM_REC_SYM_TRACE, 1);
            CU_ASSERT_EQUAL(s->rec.in_events, 1);
            CU_ASSERT_EQUAL(s->rec.traceno, 2);
            CU_ASSERT_EQUAL(s->rec.addr, 0x300);
            s = nth(&r, LM_REC_SYM_CFUNC, 1);
            CU_ASSERT_EQUAL(s->rec.in_events, 1);
            CU_ASSERT_EQUAL(s->rec.addr, 0x9000);
            CU_ASSERT_STRING_EQUAL(s->str, "libfoo.so:bar");
        }
        recorder_free(&r);
        lm_decoder_free(&d);
        lm_buf_free(&b);
    }
}

/* Every field of the record's kind (padding aside: records come from two
 * decoding paths). */
static int same_record(const struct saved_record *a,
                       const struct saved_record *b)
{
    const struct lm_record *x = &a->rec, *y = &b->rec;

    if (x->kind != y->kind || x->in_events != y->in_events ||
        x->revision != y->revision || x->offset != y->offset ||
        x->stack != y->stack || x->stack_at != y->stack_at)
        return 0;
    if (x->kind >= LM_REC_ALLOC && x->kind <= LM_REC_REALLOC)
        return x->loc.source == y->loc.source && x->loc.addr == y->loc.addr &&
               x->loc.line == y->loc.line && x->loc.trace == y->loc.trace &&
               x->oaddr == y->oaddr && x->osize == y->osize &&
               x->naddr == y->naddr && x->nsize == y->nsize;
    if (x->kind >= LM_REC_STACK_DEF && x->kind <= LM_REC_STACK_RESET)
        return x->nframes == y->nframes && x->depth == y->depth &&
               x->sample_bytes == y->sample_bytes && x->size == y->size &&
               same_frames(a->frames, b->frames, x->nframes);
    return x->addr == y->addr && x->line == y->line &&
           x->traceno == y->traceno && x->trace_addr == y->trace_addr &&
           x->str_len == y->str_len && strcmp(a->str, b->str) == 0;
}

/* Same records, same offsets, whatever the chunking. */
static void test_chunking_gives_identical_records(void)
{
    static const size_t chunks[] = {1, 2, 3, 7, 13, 64, 100000};

    for (size_t v = 0; v < sizeof(revisions) / sizeof(revisions[0]); v++) {
        struct lm_buf b = {0};
        struct recorder whole = {0};
        struct lm_decoder d;

        sample_stream(&b, revisions[v]);
        CU_ASSERT_EQUAL(decode_to(&whole, b.data, b.len, 0, &d), LM_DONE);
        lm_decoder_free(&d);
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            struct recorder r = {0};
            CU_ASSERT_EQUAL(decode_to(&r, b.data, b.len, chunks[c], &d),
                            LM_DONE);
            CU_ASSERT_EQUAL_FATAL(r.n, whole.n);
            for (size_t i = 0; i < r.n; i++)
                CU_ASSERT(same_record(&r.recs[i], &whole.recs[i]));
            recorder_free(&r);
            lm_decoder_free(&d);
        }
        recorder_free(&whole);
        lm_buf_free(&b);
    }
}

/* Decodes buf whole, with or without the AVX2 and BMI2 fast path. */
static enum lm_status decode_whole(struct recorder *r, const uint8_t *buf,
                                   size_t len, int wide)
{
    struct lm_decoder d;
    enum lm_status st;

    lm_decoder_init(&d, NULL, recorder_sink, r);
    d.use_wide = (uint8_t)wide;
    st = lm_decoder_feed(&d, buf, len, NULL);
    lm_decoder_free(&d);
    return st;
}

/*
 * ULEBs of every length from 1 to 10 bytes, in every field of every event
 * kind and source: the fast path (portable, and with AVX2 and BMI2 where
 * the CPU has them) decodes what the careful path (one byte at a time)
 * does.
 */
static void test_fast_paths_agree(void)
{
    struct lm_buf b = {0};
    struct recorder careful = {0}, portable = {0}, wide = {0};
    struct lm_decoder d;
    uint64_t v[64];
    size_t nv = 0;

    for (unsigned int bits = 0; bits <= 64; bits += 7)
        for (int k = 0; k < 3; k++)
            if (nv < 64)
                v[nv++] = bits == 0   ? (uint64_t)k
                          : bits < 64 ? (1ULL << (bits - 1)) + (uint64_t)k * 3
                                      : UINT64_MAX - (uint64_t)k;
    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x1000, "@fast.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (size_t i = 0; i < nv * 3; i++) {
        uint64_t x = v[i % nv], y = v[(i * 7 + 1) % nv],
                 z = v[(i * 5 + 2) % nv];
        struct lm_loc_ref locs[] = {loc_lua(0x1000, y), loc_c(x),
                                    loc_trace(z, 0), loc_internal()};
        const struct lm_loc_ref *l = &locs[i % 4];
        lm_enc_alloc(&b, LM_REV_R3, l, x, (uint32_t)y);
        lm_enc_realloc(&b, LM_REV_R3, l, x, (uint32_t)y, z, (uint32_t)x);
        lm_enc_free(&b, LM_REV_R3, l, z, (uint32_t)x);
    }
    lm_enc_epilogue(&b);

    CU_ASSERT_EQUAL(decode_to(&careful, b.data, b.len, 1, &d), LM_DONE);
    int have_wide = d.use_wide; /* what this CPU's decoders use */
    lm_decoder_free(&d);
    CU_ASSERT_EQUAL(decode_whole(&portable, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(decode_whole(&wide, b.data, b.len, have_wide), LM_DONE);
    CU_ASSERT_EQUAL_FATAL(portable.n, careful.n);
    CU_ASSERT_EQUAL_FATAL(wide.n, careful.n);
    for (size_t i = 0; i < careful.n; i++) {
        CU_ASSERT(same_record(&portable.recs[i], &careful.recs[i]));
        CU_ASSERT(same_record(&wide.recs[i], &careful.recs[i]));
    }
    recorder_free(&careful);
    recorder_free(&portable);
    recorder_free(&wide);
    lm_buf_free(&b);
}

/*
 * Every truncated prefix says "need more" and, once the rest arrives,
 * ends in the same state as feeding the whole buffer.
 */
static void test_every_prefix_then_rest(void)
{
    for (size_t v = 0; v < sizeof(revisions) / sizeof(revisions[0]); v++) {
        struct lm_buf b = {0};
        struct lm_profile whole;

        /* The report says it all, with the stacks of R3S. */
        struct lm_report_opts o = {.json = 1,
                                   .stacks = revisions[v] == LM_REV_R3S};

        sample_stream(&b, revisions[v]);
        lm_profile_init(&whole, NULL, NULL);
        CU_ASSERT_EQUAL(feed_chunked(&whole, b.data, b.len, 0), LM_DONE);
        char *expected = report_with(&whole.state, &o);

        for (size_t k = 0; k < b.len; k++) {
            struct lm_profile p;
            size_t used;
            lm_profile_init(&p, NULL, NULL);
            uint8_t *prefix = malloc(k ? k : 1);
            memcpy(prefix, b.data, k);
            CU_ASSERT_EQUAL(lm_profile_feed(&p, prefix, k, &used),
                            LM_NEED_MORE);
            CU_ASSERT_EQUAL(used, k);
            free(prefix);
            /* Asking how it ended says truncated, and changes nothing. */
            CU_ASSERT_EQUAL(lm_decoder_finish(&p.dec), LM_NEED_MORE);
            CU_ASSERT_PTR_NOT_NULL(strstr(p.dec.errmsg, "truncated"));
            CU_ASSERT_EQUAL(lm_profile_feed(&p, b.data + k, b.len - k, &used),
                            LM_DONE);
            CU_ASSERT_EQUAL(used, b.len - k);
            char *got = report_with(&p.state, &o);
            CU_ASSERT_STRING_EQUAL(got, expected);
            CU_ASSERT_EQUAL(p.state.totals.live_bytes,
                            whole.state.totals.live_bytes);
            free(got);
            lm_profile_free(&p);
        }
        free(expected);
        lm_profile_free(&whole);
        lm_buf_free(&b);
    }
}

/* The epilogue ends the stream; what follows belongs to the caller. */
static void test_bytes_after_epilogue(void)
{
    struct lm_buf b = {0};
    struct lm_decoder d;
    size_t used;

    sample_stream(&b, LM_REV_R3);
    size_t len = b.len;
    lm_buf_bytes(&b, "TRAILER", 7);
    lm_decoder_init(&d, NULL, NULL, NULL);
    CU_ASSERT_EQUAL(lm_decoder_feed(&d, b.data, b.len, &used), LM_DONE);
    CU_ASSERT_EQUAL(used, len);
    CU_ASSERT_EQUAL(lm_decoder_feed(&d, b.data + used, 7, &used), LM_ERROR);
    CU_ASSERT_EQUAL(d.err_offset, len);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "after the epilogue"));
    CU_ASSERT_EQUAL(lm_decoder_finish(&d), LM_ERROR);
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

/* A malformed stream: its bytes, where it goes wrong and what is said. */
struct bad_case {
    const char *name;
    struct lm_buf buf;
    uint64_t offset;
    const char *message;
    struct lm_limits limits;
};

/* An R3 stream up to the first event, then `tail`. */
static void r3_with_events(struct lm_buf *b, const uint8_t *tail, size_t n)
{
    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x100, "@a.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    lm_buf_bytes(b, tail, n);
}

/* The same in R3S. */
static void r3s_with_events(struct lm_buf *b, const uint8_t *tail, size_t n)
{
    lm_enc_begin(b, LM_REV_R3S);
    lm_enc_sym_lfunc(b, 0x100, "@a.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3S);
    lm_buf_bytes(b, tail, n);
}

static void check_bad(struct bad_case *c)
{
    static const size_t chunks[] = {0, 1, 5};

    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        struct recorder r = {0};
        struct lm_decoder d;
        enum lm_status st = LM_NEED_MORE;
        size_t len = c->buf.len, chunk = chunks[i] ? chunks[i] : len;

        lm_decoder_init(&d, c->limits.max_string ? &c->limits : NULL,
                        recorder_sink, &r);
        for (size_t off = 0; off < len && st == LM_NEED_MORE; off += chunk) {
            size_t n = len - off < chunk ? len - off : chunk, used;
            st = lm_decoder_feed(&d, c->buf.data + off, n, &used);
            if (st == LM_DONE && used < n)
                st = lm_decoder_feed(&d, c->buf.data + off + used, n - used,
                                     &used);
        }
        if (st == LM_NEED_MORE)
            st = lm_decoder_finish(&d);
        CU_ASSERT_EQUAL(st, LM_ERROR);
        if (d.err_offset != c->offset || strstr(d.errmsg, c->message) == NULL)
            fprintf(stderr, "\n%s (chunk %zu): offset %llu '%s'\n", c->name,
                    chunk, (unsigned long long)d.err_offset, d.errmsg);
        CU_ASSERT_EQUAL(d.err_offset, c->offset);
        CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, c->message));
        /* Errors are sticky. */
        CU_ASSERT_EQUAL(lm_decoder_feed(&d, "x", 1, NULL), LM_ERROR);
        recorder_free(&r);
        lm_decoder_free(&d);
    }
    lm_buf_free(&c->buf);
}

static void test_malformed_inputs(void)
{
    /* The R3 prefix: 7 + (1 + 2 + 7 + 1) + 1 + 7 = 26 bytes. */
    const uint64_t ev = 26;
    struct bad_case c;

    memset(&c, 0, sizeof(c));
    c.name = "overlong ULEB128";
    {
        uint8_t t[] = {0x05, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                       0x80, 0x80, 0x80, 0x80, 0x01, 0x10};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev + 1;
    c.message = "longer than 10 bytes";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "ULEB128 beyond 64 bits";
    {
        uint8_t t[] = {0x05, 0xff, 0xff, 0xff, 0xff, 0xff,
                       0xff, 0xff, 0xff, 0xff, 0x02, 0x10};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev + 1;
    c.message = "does not fit 64 bits";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "string over the limit";
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_enc_sym_lfunc(&c.buf, 0x100, "@a.lua", 0);
    lm_enc_sym_lfunc(&c.buf, 0x200, "@a-much-longer-name.lua", 0);
    lm_enc_symtab_end(&c.buf);
    c.offset = 7 + 11 + 3; /* the second entry's length field */
    c.message = "longer than the limit of 16";
    c.limits.max_string = 16;
    c.limits.max_buffered = 1000;
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "item over the buffer limit";
    /* A 100-byte name: within max_string, but the item exceeds 64. */
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_buf_byte(&c.buf, 0);
    lm_buf_uleb(&c.buf, 0x100);
    lm_buf_uleb(&c.buf, 100);
    for (int i = 0; i < 100; i++)
        lm_buf_byte(&c.buf, 'n');
    lm_buf_uleb(&c.buf, 0);
    lm_enc_symtab_end(&c.buf);
    c.offset = 7 + 3;
    c.message = "item of up to 114 bytes is larger than the buffer limit of 64";
    c.limits.max_string = 1000;
    c.limits.max_buffered = 64;
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "item near the buffer limit";
    /* The string fits, but with the ULEB after it the item might not. */
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_buf_byte(&c.buf, 0);
    lm_buf_uleb(&c.buf, 0x100);
    lm_buf_uleb(&c.buf, 90);
    for (int i = 0; i < 90; i++)
        lm_buf_byte(&c.buf, 'n');
    lm_buf_bytes(&c.buf, "\x80\x80\x80\x80\x01", 5);
    lm_enc_symtab_end(&c.buf);
    c.offset = 7 + 3;
    c.message =
        "item of up to 104 bytes is larger than the buffer limit of 100";
    c.limits.max_string = 1000;
    c.limits.max_buffered = 100;
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "unknown source 5";
    {
        uint8_t t[] = {0x15, 0x00, 0x10};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev;
    c.message = "unknown event header 0x15";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "source 0";
    {
        uint8_t t[] = {0x01, 0x00, 0x10};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev;
    c.message = "unknown event header 0x01";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "reserved bits set";
    {
        uint8_t t[] = {0x05, 0x10, 0x20, 0x25, 0x10, 0x10};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev + 3;
    c.message = "unknown event header 0x25";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "epilogue bit with others";
    {
        uint8_t t[] = {0x81};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev;
    c.message = "unknown event header 0x81";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "internal symtab event";
    {
        uint8_t t[] = {0x04, 0x00};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = ev;
    c.message = "not part of revision R3";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "symtab event in R2";
    lm_enc_begin(&c.buf, LM_REV_R2);
    lm_enc_symtab_end(&c.buf);
    lm_enc_begin_events(&c.buf, LM_REV_R2);
    lm_enc_event_lfunc(&c.buf, 0x100, "@a.lua", 0);
    c.offset = 15;
    c.message = "not part of revision R2";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "trace source in R1";
    lm_enc_begin(&c.buf, LM_REV_R1);
    lm_enc_symtab_end(&c.buf);
    lm_enc_begin_events(&c.buf, LM_REV_R1);
    lm_buf_byte(&c.buf, 0x11);
    c.offset = 15;
    c.message = "unknown event header 0x11";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "unknown symbol type";
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_buf_byte(&c.buf, 0x03);
    c.offset = 7;
    c.message = "unknown symbol type 3";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "cfunc symbol in ljs 2";
    lm_enc_begin(&c.buf, LM_REV_R2);
    lm_enc_sym_lfunc(&c.buf, 0x100, "@a.lua", 0);
    lm_buf_byte(&c.buf, 0x02);
    c.offset = 18;
    c.message = "unknown symbol type 2";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "wrong symtab magic";
    lm_buf_bytes(&c.buf, "ljx\x03\0\0\0\x80", 8);
    c.offset = 0;
    c.message = "bad magic";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "unsupported symtab version";
    lm_enc_symtab_prologue(&c.buf, 4);
    c.offset = 3;
    c.message = "unsupported symbol table version 4";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "wrong events magic";
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_enc_symtab_end(&c.buf);
    lm_buf_bytes(&c.buf, "lj", 2);
    lm_buf_bytes(&c.buf, "s\x03\0\0\0", 5);
    c.offset = 8;
    c.message = "bad magic";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "unsupported combination";
    lm_enc_symtab_prologue(&c.buf, 3);
    lm_enc_symtab_end(&c.buf);
    lm_enc_events_prologue(&c.buf, 2);
    c.offset = 11;
    c.message = "unsupported events version 2 after symbol table version 3";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "event before the prologue";
    lm_enc_begin(&c.buf, LM_REV_R3);
    lm_enc_symtab_end(&c.buf);
    {
        struct lm_loc_ref l = loc_internal();
        lm_enc_alloc(&c.buf, LM_REV_R3, &l, 0x10, 16);
    }
    c.offset = 8;
    c.message = "where the 'ljm' events prologue was expected";
    check_bad(&c);
}

/* An R3S stream whose events go wrong at its first event: the offset of
 * the first byte that is wrong (0: the event's), and what is said. */
static void check_bad_r3s(const char *name, const uint8_t *tail, size_t n,
                          uint64_t at, const char *message)
{
    struct bad_case c;

    memset(&c, 0, sizeof(c));
    c.name = name;
    r3s_with_events(&c.buf, tail, n);
    c.offset = 26 + at; /* the prefix, as R3's */
    c.message = message;
    check_bad(&c);
}

/* R3S's checks (docs/format.md, "What the decoder checks"). */
static void test_malformed_stacks(void)
{
    struct bad_case c;

    memset(&c, 0, sizeof(c));
    c.name = "stacks extension version 2";
    lm_enc_begin(&c.buf, LM_REV_R3S);
    lm_enc_symtab_end(&c.buf);
    lm_buf_bytes(&c.buf, "ljm\x53\x02\0\0", 7);
    c.offset = 8 + 4;
    c.message = "unsupported stacks extension version 2 (ljmp reads 1)";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "stacks after symbol table version 2";
    lm_enc_begin(&c.buf, LM_REV_R2);
    lm_enc_symtab_end(&c.buf);
    lm_enc_events_prologue(&c.buf, LM_LJM_STACKS);
    c.offset = 8 + 3;
    c.message = "unsupported events version 83 after symbol table version 2";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "bit S before R3S";
    {
        uint8_t t[] = {0x25, 0x10, 0x10, 0x01};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = 26;
    c.message = "unknown event header 0x25";
    check_bad(&c);

    memset(&c, 0, sizeof(c));
    c.name = "stack symbol before R3S";
    {
        uint8_t t[] = {0x14, 0x02};
        r3_with_events(&c.buf, t, sizeof(t));
    }
    c.offset = 26;
    c.message = "unknown event header 0x14";
    check_bad(&c);

    uint8_t free_s[] = {0x26, 0x10, 0x10, 0x01};
    check_bad_r3s("bit S on a free", free_s, sizeof(free_s), 0,
                  "a free with a stack");
    uint8_t sym_s[] = {0x28, 0x01, 0x00, 0x00};
    check_bad_r3s("bit S on a symbol", sym_s, sizeof(sym_s), 0,
                  "unknown event header 0x28");
    uint8_t alloc_5[] = {0x15, 0x10, 0x10};
    check_bad_r3s("source 5 on an alloc", alloc_5, sizeof(alloc_5), 0,
                  "unknown event header 0x15");
    uint8_t id0[] = {0x25, 0x10, 0x10, 0x00};
    check_bad_r3s("an event naming stack 0", id0, sizeof(id0), 0,
                  "event names stack 0 (ids are 1 to 2^32 - 1)");
    uint8_t id33[] = {0x27, 0x10, 0x10, 0x20, 0x20,
                      0x80, 0x80, 0x80, 0x80, 0x10};
    check_bad_r3s("an event naming a stack past 32 bits", id33, sizeof(id33), 0,
                  "event names stack 4294967296");
    uint8_t kind3[] = {0x14, 0x00, 0x01, 0x01, 0x03, 0x10};
    check_bad_r3s("a frame of kind 3", kind3, sizeof(kind3), 0,
                  "stack frame of kind 3");
    uint8_t deep[] = {0x14, 0x00, 0x01, LM_STACK_MAX_DEPTH + 2, 0x06};
    check_bad_r3s("a definition of 66 frames", deep, sizeof(deep), 0,
                  "stack definition of 66 frames, more than 65");
    uint8_t def0[] = {0x14, 0x00, 0x00, 0x00};
    check_bad_r3s("a definition of id 0", def0, sizeof(def0), 0,
                  "stack definition of id 0");
    uint8_t def33[] = {0x14, 0x00, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00};
    check_bad_r3s("a definition past 32 bits", def33, sizeof(def33), 0,
                  "stack definition of id 4294967296");
    uint8_t kind9[] = {0x14, 0x09};
    check_bad_r3s("a stack symbol of kind 9", kind9, sizeof(kind9), 0,
                  "stack symbol of kind 9");
    uint8_t depth0[] = {0x14, 0x01, 0x00, 0x00};
    check_bad_r3s("a configuration of depth 0", depth0, sizeof(depth0), 0,
                  "stack configuration of depth 0");
    uint8_t depth65[] = {0x14, 0x01, 0x41, 0x00};
    check_bad_r3s("a configuration of depth 65", depth65, sizeof(depth65), 0,
                  "stack configuration of depth 65");
}

/* The deepest definition, one frame past the depth with the marker, is
 * larger than the smallest buffer limit: kept whole all the same, fed a
 * byte at a time. */
static void test_deep_stack_in_small_buffer(void)
{
    struct lm_stack_frame f[LM_STACK_MAX_DEPTH + 1];
    struct lm_limits lim = {16, 64};
    struct lm_buf b = {0};
    struct recorder r = {0};
    struct lm_decoder d;

    for (int i = 0; i < LM_STACK_MAX_DEPTH; i++)
        f[i] = i % 2 ? frame_c(UINT64_MAX - (uint64_t)i)
                     : frame_lua(UINT64_MAX / 3, UINT32_MAX);
    f[LM_STACK_MAX_DEPTH] = frame_marker(LM_MARK_TRUNCATED);
    lm_enc_begin(&b, LM_REV_R3S);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3S);
    lm_enc_stack_config(&b, LM_STACK_MAX_DEPTH, 0);
    lm_enc_stack_def(&b, UINT32_MAX, f, LM_STACK_MAX_DEPTH + 1);
    lm_enc_epilogue(&b);
    CU_ASSERT(b.len > 800); /* more than 12 times the buffer limit */
    lm_decoder_init(&d, &lim, recorder_sink, &r);
    enum lm_status st = LM_NEED_MORE;
    for (size_t i = 0; i < b.len && st == LM_NEED_MORE; i++)
        st = lm_decoder_feed(&d, b.data + i, 1, NULL);
    CU_ASSERT_EQUAL(st, LM_DONE);
    const struct saved_record *s = nth(&r, LM_REC_STACK_DEF, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->rec.stack, UINT32_MAX);
    CU_ASSERT_EQUAL(s->rec.nframes, LM_STACK_MAX_DEPTH + 1);
    CU_ASSERT(same_frames(s->frames, f, LM_STACK_MAX_DEPTH + 1));
    recorder_free(&r);
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

/* Events with a stack take the careful path between the fast path's
 * runs: the records are the careful path's, however they mix. */
static void test_fast_paths_agree_with_stacks(void)
{
    struct lm_buf b = {0};
    struct recorder careful = {0}, portable = {0}, wide = {0};
    struct lm_stack_frame f[] = {frame_lua(0x1000, 3), frame_c(0x7000)};
    struct lm_decoder d;

    lm_enc_begin(&b, LM_REV_R3S);
    lm_enc_sym_lfunc(&b, 0x1000, "@fast.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3S);
    lm_enc_stack_config(&b, 4, 0);
    for (uint64_t i = 0; i < 600; i++) {
        struct lm_loc_ref l = i % 3 ? loc_lua(0x1000, i % 11) : loc_c(i << 20);
        uint64_t stack = i % 5 == 1 || i % 7 == 0 ? 1 + i % 3 : 0;
        if (i < 3)
            lm_enc_stack_def(&b, i + 1, f, 1 + i % 2);
        enc_alloc_at(&b, LM_REV_R3S, &l, 0x10000 + i * 64, 16 + i, stack);
        enc_realloc_at(&b, LM_REV_R3S, &l, 0x10000 + i * 64, 16 + i,
                       i << 40 | 0x30, 32, stack ? 4 - stack : 0);
        lm_enc_free(&b, LM_REV_R3S, &l, i << 40 | 0x30, 32);
    }
    lm_enc_epilogue(&b);
    CU_ASSERT_EQUAL(decode_to(&careful, b.data, b.len, 1, &d), LM_DONE);
    int have_wide = d.use_wide;
    lm_decoder_free(&d);
    CU_ASSERT_EQUAL(decode_whole(&portable, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(decode_whole(&wide, b.data, b.len, have_wide), LM_DONE);
    CU_ASSERT_EQUAL_FATAL(portable.n, careful.n);
    CU_ASSERT_EQUAL_FATAL(wide.n, careful.n);
    for (size_t i = 0; i < careful.n; i++) {
        CU_ASSERT(same_record(&portable.recs[i], &careful.recs[i]));
        CU_ASSERT(same_record(&wide.recs[i], &careful.recs[i]));
    }
    CU_ASSERT_EQUAL(nth(&careful, LM_REC_ALLOC, 1)->rec.stack, 2);
    CU_ASSERT_EQUAL(nth(&careful, LM_REC_REALLOC, 1)->rec.stack, 2);
    CU_ASSERT_EQUAL(nth(&careful, LM_REC_ALLOC, 2)->rec.stack, 0);
    recorder_free(&careful);
    recorder_free(&portable);
    recorder_free(&wide);
    lm_buf_free(&b);
}

/* Limits far above what the arithmetic can hold are lowered. */
static void test_huge_limits(void)
{
    struct lm_buf b = {0};
    struct lm_limits lim = {SIZE_MAX, SIZE_MAX};
    struct recorder r = {0};
    struct lm_decoder d;

    sample_stream(&b, LM_REV_R3);
    lm_decoder_init(&d, &lim, recorder_sink, &r);
    CU_ASSERT_EQUAL(d.limits.max_string, LM_MAX_STRING_LIMIT);
    for (size_t i = 0; i < b.len; i++)
        lm_decoder_feed(&d, b.data + i, 1, NULL);
    CU_ASSERT_EQUAL(lm_decoder_finish(&d), LM_DONE);
    recorder_free(&r);
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

/* A sink that rejects one record: the decoder stops right before it. */
struct rejecting_sink {
    size_t seen, reject_at;
};

static int reject_sink(void *ctx, const struct lm_record *recs, size_t n,
                       size_t *failed_at, char *errbuf, size_t errlen)
{
    struct rejecting_sink *rs = ctx;

    (void)recs;
    if (rs->seen + n <= rs->reject_at) {
        rs->seen += n;
        return 0;
    }
    *failed_at = rs->reject_at - rs->seen;
    snprintf(errbuf, errlen, "rejected");
    return -1;
}

static void test_sink_error_offsets(void)
{
    struct lm_buf b = {0};
    struct recorder all = {0};
    struct lm_decoder d;

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (int i = 0; i < 600; i++) {
        struct lm_loc_ref l = loc_lua(0x100, (uint64_t)i % 7);
        lm_enc_alloc(&b, LM_REV_R3, &l, 0x1000 + 16 * (uint64_t)i, 16);
    }
    lm_enc_epilogue(&b);
    CU_ASSERT_EQUAL(decode_to(&all, b.data, b.len, 0, &d), LM_DONE);
    lm_decoder_free(&d);
    static const size_t chunks[] = {0, 1, 100};
    for (size_t c = 0; c < 3; c++) {
        struct rejecting_sink rs = {0, 300};
        size_t chunk = chunks[c] ? chunks[c] : b.len, off = 0, used = 0;
        enum lm_status st = LM_NEED_MORE;
        lm_decoder_init(&d, NULL, reject_sink, &rs);
        uint64_t at = all.recs[300].rec.offset;
        while (off < b.len && st == LM_NEED_MORE) {
            size_t n = b.len - off < chunk ? b.len - off : chunk;
            st = lm_decoder_feed(&d, b.data + off, n, &used);
            if (st == LM_NEED_MORE)
                off += n;
        }
        CU_ASSERT_EQUAL(st, LM_ERROR);
        CU_ASSERT_EQUAL(d.err_offset, at);
        /* This call consumed up to the rejected record; bytes of it that
         * earlier calls handed over were consumed then. */
        CU_ASSERT_EQUAL(used, at > off ? at - off : 0);
        CU_ASSERT_STRING_EQUAL(d.errmsg, "rejected");
        lm_decoder_free(&d);
    }
    recorder_free(&all);
    lm_buf_free(&b);
}

/* Trace markers (docs/format.md, "Trace context"): the decoder's own (no
 * record), whose trace each later Lua located event carries, on the careful
 * path and the fast one, however the stream is cut; a prototype at the marker's
 * address with another name stays a prototype. */
static void test_trace_markers(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref lua = loc_lua(0x100, 3), c = loc_c(0x7000);
    struct lm_loc_ref four = loc_lua(LM_TRACE_MARK_ADDR, 1);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@h.lua", 1);
    lm_enc_sym_lfunc(&b, LM_TRACE_MARK_ADDR, LM_TRACE_MARK_NAME, 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &lua, 0x1000, 16);
    lm_enc_trace_mark(&b, 7);
    for (uint64_t i = 0; i < 40; i++) { /* enough for the fast path */
        lm_enc_alloc(&b, LM_REV_R3, &lua, 0x2000 + 16 * i, 16);
        lm_enc_alloc(&b, LM_REV_R3, &c, 0x9000 + 16 * i, 16);
    }
    lm_enc_realloc(&b, LM_REV_R3, &lua, 0x2000, 16, 0x3000, 32);
    lm_enc_free(&b, LM_REV_R3, &lua, 0x3000, 32);
    lm_enc_event_lfunc(&b, LM_TRACE_MARK_ADDR, "@four.lua", 1);
    lm_enc_alloc(&b, LM_REV_R3, &four, 0x4000, 16);
    lm_enc_trace_mark(&b, 0);
    lm_enc_alloc(&b, LM_REV_R3, &lua, 0x5000, 16);
    lm_enc_epilogue(&b);
    CU_ASSERT_FATAL(!b.oom);

    size_t chunks[] = {0, 1, 7, 100};
    for (size_t k = 0; k < sizeof(chunks) / sizeof(*chunks); k++) {
        struct recorder r = {0};
        struct lm_decoder d;
        CU_ASSERT_EQUAL_FATAL(decode_to(&r, b.data, b.len, chunks[k], &d),
                              LM_DONE);
        /* Counted, kept by the decoder: no record for the sink. */
        CU_ASSERT_EQUAL(d.nrecords[LM_REC_TRACE_MARK], 3);
        CU_ASSERT_EQUAL(count(&r, LM_REC_TRACE_MARK), 0);
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYM_LFUNC), 2);
        CU_ASSERT_STRING_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 1)->str, "@four.lua");
        /* Before the first marker of the events: none in effect. */
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 0)->rec.loc.trace, 0);
        for (size_t i = 0; i < 40; i++) {
            CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 1 + 2 * i)->rec.loc.trace, 7);
            /* Only Lua locations carry a trace. */
            CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 2 + 2 * i)->rec.loc.trace, 0);
        }
        CU_ASSERT_EQUAL(nth(&r, LM_REC_REALLOC, 0)->rec.loc.trace, 7);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_FREE, 0)->rec.loc.trace, 7);
        /* A prototype at the address is no marker: the trace stays. */
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 81)->rec.loc.trace, 7);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 82)->rec.loc.trace, 0);
        recorder_free(&r);
        lm_decoder_free(&d);
    }
    lm_buf_free(&b);
}

/* A marker's trace past 32 bits is no VM's: an error at the marker. */
static void test_trace_marker_past_32_bits(void)
{
    struct lm_buf b = {0};
    struct recorder r = {0};
    struct lm_decoder d;

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    size_t at = b.len;
    lm_enc_trace_mark(&b, 1ull << 32);
    lm_enc_epilogue(&b);
    CU_ASSERT_EQUAL(decode_to(&r, b.data, b.len, 0, &d), LM_ERROR);
    CU_ASSERT_EQUAL(d.err_offset, at);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "trace marker"));
    recorder_free(&r);
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

/* Stand-ins (docs/format.md, "Trace context"): the stand-in symbol is the
 * decoder's own (no record), and the prototype symbol right after it, in
 * the symbol table or as an event, carries its trace; one at the reserved
 * address with another name is a prototype, and no symbol but the next
 * one takes the trace, however the stream is cut.  Events stay as they
 * are: the state names them (test_state). */
static void test_standins(void)
{
    struct lm_buf b = {0};
    struct lm_loc_ref at = loc_lua(0x7100, 3);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@h.lua", 1);
    lm_enc_sym_standin(&b, 4);
    lm_enc_sym_lfunc(&b, 0x7100, "@h.lua", 1);
    lm_enc_sym_lfunc(&b, 0x7200, "@h.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &at, 0x1000, 16);
    lm_enc_standin(&b, 9);
    for (uint64_t i = 0; i < 40; i++) /* the fast path does not take it */
        lm_enc_alloc(&b, LM_REV_R3, &at, 0x2000 + 16 * i, 16);
    lm_enc_event_lfunc(&b, 0x7300, "@i.lua", 5);
    lm_enc_event_lfunc(&b, LM_STANDIN_ADDR, "@five.lua", 1);
    lm_enc_event_lfunc(&b, 0x7400, "@i.lua", 5);
    lm_enc_epilogue(&b);
    CU_ASSERT_FATAL(!b.oom);

    size_t chunks[] = {0, 1, 7, 100};
    for (size_t k = 0; k < sizeof(chunks) / sizeof(*chunks); k++) {
        struct recorder r = {0};
        struct lm_decoder d;
        CU_ASSERT_EQUAL_FATAL(decode_to(&r, b.data, b.len, chunks[k], &d),
                              LM_DONE);
        CU_ASSERT_EQUAL(d.nrecords[LM_REC_STANDIN], 2);
        CU_ASSERT_EQUAL(count(&r, LM_REC_STANDIN), 0);
        CU_ASSERT_EQUAL(count(&r, LM_REC_SYM_LFUNC), 6);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 0)->rec.traceno, 0);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 1)->rec.addr, 0x7100);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 1)->rec.traceno, 4);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 2)->rec.traceno, 0);
        /* Events between a stand-in symbol and its prototype's. */
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 3)->rec.addr, 0x7300);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 3)->rec.traceno, 9);
        CU_ASSERT_STRING_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 4)->str, "@five.lua");
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 4)->rec.traceno, 0);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_SYM_LFUNC, 5)->rec.traceno, 0);
        CU_ASSERT_EQUAL(count(&r, LM_REC_ALLOC), 41);
        CU_ASSERT_EQUAL(nth(&r, LM_REC_ALLOC, 40)->rec.loc.trace, 0);
        CU_ASSERT_EQUAL(d.standin, 0);
        recorder_free(&r);
        lm_decoder_free(&d);
    }
    lm_buf_free(&b);
}

/* A stand-in's trace past 32 bits is no VM's: an error at its symbol. */
static void test_standin_past_32_bits(void)
{
    struct lm_buf b = {0};
    struct recorder r = {0};
    struct lm_decoder d;

    lm_enc_begin(&b, LM_REV_R3);
    size_t at = b.len;
    lm_enc_sym_standin(&b, 1ull << 32);
    lm_enc_sym_lfunc(&b, 0x7100, "@h.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_epilogue(&b);
    CU_ASSERT_EQUAL(decode_to(&r, b.data, b.len, 0, &d), LM_ERROR);
    CU_ASSERT_EQUAL(d.err_offset, at);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "stand-in"));
    recorder_free(&r);
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

/* Records before a malformed item are delivered, nothing after it. */
static void test_records_before_error_are_kept(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 3);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@a.lua", 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x1000, 10);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x2000, 20);
    lm_buf_byte(&b, 0x7f);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x3000, 30);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 0), LM_ERROR);
    CU_ASSERT_EQUAL(p.state.totals.alloc_events, 2);
    CU_ASSERT_EQUAL(p.state.totals.live_bytes, 30);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static void test_truncation_message(void)
{
    struct lm_buf b = {0};
    struct lm_decoder d;

    sample_stream(&b, LM_REV_R3);
    lm_decoder_init(&d, NULL, NULL, NULL);
    /* Cut inside the realloc event (the third event). */
    CU_ASSERT_EQUAL(lm_decoder_feed(&d, b.data, b.len - 20, NULL),
                    LM_NEED_MORE);
    CU_ASSERT_EQUAL(lm_decoder_finish(&d), LM_NEED_MORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "stream truncated in the events"));
    CU_ASSERT_EQUAL(d.err_offset, d.offset);
    lm_decoder_free(&d);

    lm_decoder_init(&d, NULL, NULL, NULL);
    CU_ASSERT_EQUAL(lm_decoder_feed(&d, b.data, 12, NULL), LM_NEED_MORE);
    CU_ASSERT_EQUAL(lm_decoder_finish(&d), LM_NEED_MORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "in the symbol table"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d.errmsg, "offset 7 is cut after 5 bytes"));
    lm_decoder_free(&d);
    lm_buf_free(&b);
}

void register_decoder_tests(void)
{
    CU_pSuite s = CU_add_suite("decoder", NULL, NULL);

    CU_add_test(s, "records of every revision", test_records_of_every_revision);
    CU_add_test(s, "chunking gives identical records",
                test_chunking_gives_identical_records);
    CU_add_test(s, "every prefix, then the rest", test_every_prefix_then_rest);
    CU_add_test(s, "fast paths agree with the careful one",
                test_fast_paths_agree);
    CU_add_test(s, "bytes after the epilogue", test_bytes_after_epilogue);
    CU_add_test(s, "malformed inputs", test_malformed_inputs);
    CU_add_test(s, "malformed stacks (R3S)", test_malformed_stacks);
    CU_add_test(s, "the deepest stack in the smallest buffer",
                test_deep_stack_in_small_buffer);
    CU_add_test(s, "fast paths agree between events with stacks",
                test_fast_paths_agree_with_stacks);
    CU_add_test(s, "records before an error are kept",
                test_records_before_error_are_kept);
    CU_add_test(s, "truncation message", test_truncation_message);
    CU_add_test(s, "trace markers", test_trace_markers);
    CU_add_test(s, "trace marker past 32 bits", test_trace_marker_past_32_bits);
    CU_add_test(s, "stand-ins", test_standins);
    CU_add_test(s, "stand-in past 32 bits", test_standin_past_32_bits);
    CU_add_test(s, "huge limits are lowered", test_huge_limits);
    CU_add_test(s, "sink error offsets", test_sink_error_offsets);
}
