/* Resumable memprof stream decoder: bytes in, typed records out. */
#include "lm_decoder.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_cpu.h"

/* Result of parsing one item. */
enum {
    P_OK,
    P_MORE,
    P_ERR,
};

/*
 * A parse position.  base is the stream offset of start, so that errors can
 * name the absolute offset of the offending byte wherever the item sits (the
 * caller's chunk or the pending buffer).
 */
struct cursor {
    const uint8_t *p, *end, *start;
    uint64_t base;
};

static uint64_t cursor_offset(const struct cursor *c, const uint8_t *at)
{
    return c->base + (uint64_t)(at - c->start);
}

const char *lm_revision_name(enum lm_revision rev)
{
    switch (rev) {
    case LM_REV_R1:
        return "R1";
    case LM_REV_R2:
        return "R2";
    case LM_REV_R3_SEED:
        return "R3-seed";
    case LM_REV_R3:
        return "R3";
    case LM_REV_R3S:
        return "R3S";
    default:
        return "unknown";
    }
}

static void fail(struct lm_decoder *d, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct lm_decoder *d, uint64_t offset, const char *fmt, ...)
{
    va_list ap;

    if (d->phase == LM_PH_ERROR)
        return;
    d->phase = LM_PH_ERROR;
    d->err_offset = offset;
    va_start(ap, fmt);
    vsnprintf(d->errmsg, sizeof(d->errmsg), fmt, ap);
    va_end(ap);
}

void lm_decoder_init(struct lm_decoder *d, const struct lm_limits *limits,
                     lm_sink_fn sink, void *sink_ctx)
{
    memset(d, 0, sizeof(*d));
    d->limits.max_string = LM_DEFAULT_MAX_STRING;
    d->limits.max_buffered = LM_DEFAULT_MAX_BUFFERED;
    if (limits != NULL)
        d->limits = *limits;
    /* Fixed-size items are at most 61 bytes (an R2 realloc on a trace);
     * a stack definition may take more, and is kept whole whatever this
     * limit (see pend_limit). */
    if (d->limits.max_buffered < 64)
        d->limits.max_buffered = 64;
    /* Keeps the sums below from wrapping, whatever the caller asked. */
    if (d->limits.max_string > LM_MAX_STRING_LIMIT)
        d->limits.max_string = LM_MAX_STRING_LIMIT;
    if (d->limits.max_buffered > LM_MAX_STRING_LIMIT + 64)
        d->limits.max_buffered = LM_MAX_STRING_LIMIT + 64;
    d->sink = sink;
    d->sink_ctx = sink_ctx;
    d->use_wide = (uint8_t)(lm_bmi2_is_fast() && lm_avx2_is_there());
}

void lm_decoder_free(struct lm_decoder *d)
{
    free(d->pend);
    d->pend = NULL;
    d->pend_len = d->pend_cap = 0;
}

static int uleb_too_long(struct lm_decoder *d, const struct cursor *c,
                         uint8_t last)
{
    fail(d, cursor_offset(c, c->p),
         (last & 0x80) ? "ULEB128 longer than 10 bytes"
                       : "ULEB128 value does not fit 64 bits");
    return P_ERR;
}

/*
 * ULEB128, bounds-checked: the careful path (symbol tables, the last bytes
 * of a chunk, anything the fast path leaves).  Returns P_OK, P_MORE, or
 * P_ERR for a run longer than ten octets or a value beyond 64 bits.
 */
static int read_uleb(struct lm_decoder *d, struct cursor *c, uint64_t *out)
{
    const uint8_t *p = c->p;
    uint64_t v = 0;
    unsigned int shift = 0;

    for (int i = 0; i < LM_ULEB_MAX_BYTES; i++, shift += 7) {
        if (p >= c->end)
            return P_MORE;
        uint8_t b = *p++;
        if (i == LM_ULEB_MAX_BYTES - 1 && b > 1)
            return uleb_too_long(d, c, b);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            c->p = p;
            return P_OK;
        }
    }
    return P_ERR; /* not reached: the tenth octet ends the loop */
}

/*
 * A string: length, then bytes.  Both limits are checked as soon as the
 * length is known, so that the outcome does not depend on how the input was
 * chunked.
 */
static int read_string(struct lm_decoder *d, struct cursor *c,
                       const uint8_t *item, const char **str, size_t *len)
{
    const uint8_t *at = c->p;
    uint64_t n;
    int r = read_uleb(d, c, &n);

    if (r != P_OK)
        return r;
    if (n > d->limits.max_string) {
        fail(d, cursor_offset(c, at),
             "string of %llu bytes is longer than the limit of %zu",
             (unsigned long long)n, d->limits.max_string);
        return P_ERR;
    }
    /* What the item may need: up to here, the string, one more ULEB. */
    size_t item_size = (size_t)(c->p - item) + (size_t)n;
    if (item_size + LM_ULEB_MAX_BYTES > d->limits.max_buffered) {
        fail(d, cursor_offset(c, at),
             "item of up to %zu bytes is larger than the buffer limit of %zu",
             item_size + LM_ULEB_MAX_BYTES, d->limits.max_buffered);
        return P_ERR;
    }
    if ((uint64_t)(c->end - c->p) < n) {
        d->pend_need = item_size;
        return P_MORE;
    }
    *str = (const char *)c->p;
    *len = (size_t)n;
    c->p += n;
    return P_OK;
}

#define READ(field)                                                            \
    do {                                                                       \
        int r_ = read_uleb(d, c, &(field));                                    \
        if (r_ != P_OK)                                                        \
            return r_;                                                         \
    } while (0)

#define READ_STRING(item, s, n)                                                \
    do {                                                                       \
        int r_ = read_string(d, c, (item), &(s), &(n));                        \
        if (r_ != P_OK)                                                        \
            return r_;                                                         \
    } while (0)

static int read_prologue(struct lm_decoder *d, struct cursor *c,
                         const char *magic, uint8_t *version)
{
    const uint8_t *p = c->p;

    if (c->end - p < LM_PROLOGUE_SIZE)
        return P_MORE;
    if (memcmp(p, magic, 3) != 0) {
        fail(d, cursor_offset(c, p),
             "bad magic %02x %02x %02x: expected the '%s' prologue", p[0], p[1],
             p[2], magic);
        return P_ERR;
    }
    *version = p[3];
    c->p = p + LM_PROLOGUE_SIZE;
    return P_OK;
}

static int parse_symtab_prologue(struct lm_decoder *d, struct cursor *c)
{
    const uint8_t *item = c->p;
    int r = read_prologue(d, c, "ljs", &d->ljs_version);

    if (r != P_OK)
        return r;
    if (d->ljs_version < 1 || d->ljs_version > 3) {
        fail(d, cursor_offset(c, item + 3),
             "unsupported symbol table version %u (ljmp reads 1 to 3)",
             d->ljs_version);
        return P_ERR;
    }
    d->phase = LM_PH_SYMTAB;
    return P_OK;
}

static enum lm_revision revision_of(uint8_t ljs, uint8_t ljm)
{
    if (ljs == 1 && ljm == 1)
        return LM_REV_R1;
    if (ljs == 2 && ljm == 2)
        return LM_REV_R2;
    if (ljs == 2 && ljm == 3)
        return LM_REV_R3_SEED;
    if (ljs == 3 && ljm == 3)
        return LM_REV_R3;
    if (ljs == 3 && ljm == LM_LJM_STACKS)
        return LM_REV_R3S;
    return LM_REV_UNKNOWN;
}

/* R3's layouts of traces and symbols, which R3S keeps. */
static int r3_layout(enum lm_revision rev)
{
    return rev == LM_REV_R3 || rev == LM_REV_R3S;
}

static const uint8_t kind_of_event[] = {0, LM_REC_ALLOC, LM_REC_FREE,
                                        LM_REC_REALLOC};

/* The ULEBs of a location from src in this revision: a Lua function's
 * prototype and line, a C function's address, a trace's number (and its
 * machine code before R3), none for the VM itself. */
static unsigned int location_words(const struct lm_decoder *d, unsigned int src)
{
    switch (src) {
    case LM_SRC_LFUNC:
        return 2;
    case LM_SRC_CFUNC:
        return 1;
    case LM_SRC_TRACE:
        return r3_layout(d->revision) ? 1 : 2;
    default:
        return 0;
    }
}

/* The ULEBs of a plain event: its location's, then two per block. */
static unsigned int fast_ulebs(const struct lm_decoder *d, unsigned int src,
                               unsigned int ev)
{
    return location_words(d, src) + (ev == LM_EV_REALLOC ? 4 : 2);
}

/* Which header bytes are plain events of this revision: for each, the
 * fast path's summary: the ULEBs in bits 12 to 14, the record kind in 8
 * to 11, the location words in 4 and 5, the source in 0 to 3. */
static void init_fast_headers(struct lm_decoder *d)
{
    unsigned int nsources = d->revision == LM_REV_R1 ? 3 : 4;

    memset(d->fast_header, 0, sizeof(d->fast_header));
    for (unsigned int src = 1; src <= nsources; src++)
        for (unsigned int ev = LM_EV_ALLOC; ev <= LM_EV_REALLOC; ev++)
            d->fast_header[ev | src << LM_EV_SOURCE_SHIFT] =
                (uint16_t)(fast_ulebs(d, src, ev) << 12 |
                           kind_of_event[ev] << 8 |
                           location_words(d, src) << 4 | src);
}

static int parse_events_prologue(struct lm_decoder *d, struct cursor *c,
                                 struct lm_record *rec)
{
    const uint8_t *item = c->p;
    int r;

    /* A stream that goes straight on with events lacks the prologue. */
    if (item < c->end && *item != 'l') {
        fail(d, cursor_offset(c, item),
             "byte 0x%02x where the 'ljm' events prologue was expected", *item);
        return P_ERR;
    }
    r = read_prologue(d, c, "ljm", &d->ljm_version);
    if (r != P_OK)
        return r;
    d->revision = revision_of(d->ljs_version, d->ljm_version);
    if (d->revision == LM_REV_UNKNOWN) {
        fail(d, cursor_offset(c, item + 3),
             "unsupported events version %u after symbol table version %u",
             d->ljm_version, d->ljs_version);
        return P_ERR;
    }
    /* R3S says its extension's version in the first reserved byte. */
    if (d->revision == LM_REV_R3S && item[4] != LM_STACKS_EXT_VERSION) {
        fail(d, cursor_offset(c, item + 4),
             "unsupported stacks extension version %u (ljmp reads %u)", item[4],
             LM_STACKS_EXT_VERSION);
        return P_ERR;
    }
    d->phase = LM_PH_EVENTS;
    init_fast_headers(d);
    memset(rec, 0, sizeof(*rec));
    rec->kind = LM_REC_EVENTS_BEGIN;
    rec->offset = cursor_offset(c, item);
    rec->revision = (uint8_t)d->revision;
    return P_OK;
}

/* A symbol body; the header (already read) gave its kind. */
static int parse_sym_body(struct lm_decoder *d, struct cursor *c,
                          const uint8_t *item, struct lm_record *rec)
{
    switch (rec->kind) {
    case LM_REC_SYM_LFUNC:
        READ(rec->addr);
        READ_STRING(item, rec->str, rec->str_len);
        READ(rec->line);
        return P_OK;
    case LM_REC_SYM_CFUNC:
        READ(rec->addr);
        READ_STRING(item, rec->str, rec->str_len);
        return P_OK;
    default: /* LM_REC_SYM_TRACE */
        READ(rec->traceno);
        if (d->ljs_version == 2)
            READ(rec->trace_addr);
        READ(rec->addr);
        READ(rec->line);
        return P_OK;
    }
}

/* Whether a prototype symbol is at a reserved address with its reserved
 * name (lm_format.h). */
static int is_reserved(const struct lm_record *rec, uint64_t addr,
                       const char *name, size_t len)
{
    return rec->addr == addr && rec->str_len == len &&
           memcmp(rec->str, name, len) == 0;
}

/*
 * The trace context (docs/format.md, "Trace context").  A trace marker, a
 * prototype symbol at its reserved address with its reserved name, is no
 * prototype but the trace in effect for the Lua located events after it:
 * the decoder keeps it.  A stand-in symbol says the trace the prototype
 * symbol after it stands for, which that record carries (traceno).  Both
 * stay out of the batch.  P_OK, or P_ERR for a trace number past 32 bits,
 * which no VM has.
 */
static int take_trace_context(struct lm_decoder *d, struct lm_record *rec)
{
    int mark;

    if (rec->kind != LM_REC_SYM_LFUNC)
        return P_OK;
    mark = is_reserved(rec, LM_TRACE_MARK_ADDR, LM_TRACE_MARK_NAME,
                       sizeof(LM_TRACE_MARK_NAME) - 1);
    if (!mark && !is_reserved(rec, LM_STANDIN_ADDR, LM_STANDIN_NAME,
                              sizeof(LM_STANDIN_NAME) - 1)) {
        rec->traceno = d->standin;
        d->standin = 0;
        return P_OK;
    }
    if (rec->line > UINT32_MAX) {
        fail(d, rec->offset, "%s of trace %" PRIu64 ", past 32 bits",
             mark ? "trace marker" : "stand-in", rec->line);
        return P_ERR;
    }
    rec->traceno = rec->line;
    if (mark) {
        rec->kind = LM_REC_TRACE_MARK;
        d->trace = (uint32_t)rec->line;
    } else {
        rec->kind = LM_REC_STANDIN;
        d->standin = (uint32_t)rec->line;
    }
    return P_OK;
}

static int sym_kind_of_type(uint8_t ljs_version, unsigned int type)
{
    if (type == LM_SYM_LFUNC)
        return LM_REC_SYM_LFUNC;
    if (ljs_version == 2 && type == LM_SYM_V2_TRACE)
        return LM_REC_SYM_TRACE;
    if (ljs_version == 3 && type == LM_SYM_V3_CFUNC)
        return LM_REC_SYM_CFUNC;
    if (ljs_version == 3 && type == LM_SYM_V3_TRACE)
        return LM_REC_SYM_TRACE;
    return -1;
}

static int parse_symtab_entry(struct lm_decoder *d, struct cursor *c,
                              struct lm_record *rec)
{
    const uint8_t *item = c->p;
    uint8_t h = *c->p++;

    /* Records are whole values: no field is left from an earlier one. */
    *rec = (struct lm_record){0};
    rec->offset = cursor_offset(c, item);
    if (h & LM_HDR_FINAL) {
        rec->kind = LM_REC_SYMTAB_END;
        d->phase = LM_PH_EVENTS_PROLOGUE;
        return P_OK;
    }
    int kind = sym_kind_of_type(d->ljs_version, h & LM_SYM_TYPE_MASK);
    if (kind < 0) {
        fail(d, rec->offset,
             "unknown symbol type %u in symbol table version %u",
             h & LM_SYM_TYPE_MASK, d->ljs_version);
        return P_ERR;
    }
    rec->kind = (uint8_t)kind;
    int r = parse_sym_body(d, c, item, rec);
    return r == P_OK ? take_trace_context(d, rec) : r;
}

/* Which symbols an event-symtab may carry in this revision. */
static int event_sym_kind(enum lm_revision rev, unsigned int source)
{
    if (rev == LM_REV_R3_SEED)
        return source == LM_SRC_LFUNC ? LM_REC_SYM_LFUNC : -1;
    if (!r3_layout(rev))
        return -1;
    switch (source) {
    case LM_SRC_LFUNC:
        return LM_REC_SYM_LFUNC;
    case LM_SRC_CFUNC:
        return LM_REC_SYM_CFUNC;
    case LM_SRC_TRACE:
        return LM_REC_SYM_TRACE;
    default:
        return -1;
    }
}

/* A location's words, as many as location_words() says (the fast path
 * reads them by the same count). */
static int parse_loc(struct lm_decoder *d, struct cursor *c,
                     struct lm_loc_ref *loc)
{
    unsigned int words = location_words(d, loc->source);

    if (loc->source == LM_SRC_LFUNC)
        loc->trace = d->trace;
    if (words >= 1)
        READ(loc->addr); /* or the trace's number */
    if (words == 2)
        READ(loc->line); /* or the trace's machine code */
    return P_OK;
}

static const char *const event_names[] = {"symtab", "alloc", "free", "realloc"};

/* A frame of a stack definition: tag (value << 2 | kind), then, but for
 * a marker, an address. */
static int parse_frame(struct lm_decoder *d, struct cursor *c,
                       const struct lm_record *rec, struct lm_stack_frame *f)
{
    uint64_t tag;

    READ(tag);
    f->kind = (uint8_t)(tag & LM_FRAME_KIND_MASK);
    f->value = tag >> 2;
    f->addr = 0;
    if (f->kind > LM_FRAME_MARKER) {
        fail(d, rec->offset, "stack frame of kind %u (ljmp reads 0 to 2)",
             f->kind);
        return P_ERR;
    }
    if (f->kind != LM_FRAME_MARKER)
        READ(f->addr);
    return P_OK;
}

/* A stack definition's body: id, frame count, frames (into the
 * decoder's array, see struct lm_decoder). */
static int parse_stack_def(struct lm_decoder *d, struct cursor *c,
                           struct lm_record *rec)
{
    uint64_t id, n;
    int r;

    READ(id);
    if (id == 0 || id > UINT32_MAX) {
        fail(d, rec->offset,
             "stack definition of id %" PRIu64 " (ids are 1 to 2^32 - 1)", id);
        return P_ERR;
    }
    READ(n);
    if (n > LM_STACK_MAX_DEPTH + 1) {
        fail(d, rec->offset,
             "stack definition of %" PRIu64 " frames, more than %d", n,
             LM_STACK_MAX_DEPTH + 1);
        return P_ERR;
    }
    for (uint64_t i = 0; i < n; i++)
        if ((r = parse_frame(d, c, rec, &d->frames[i])) != P_OK)
            return r;
    rec->kind = LM_REC_STACK_DEF;
    rec->stack = (uint32_t)id;
    rec->nframes = (uint32_t)n;
    rec->frames = d->frames;
    return P_OK;
}

/* The stack configuration's body: the depth (1 to the deepest the format
 * has) and the sampling's mean. */
static int parse_stack_config(struct lm_decoder *d, struct cursor *c,
                              struct lm_record *rec)
{
    READ(rec->depth);
    READ(rec->sample_bytes);
    if (rec->depth < 1 || rec->depth > LM_STACK_MAX_DEPTH) {
        fail(d, rec->offset,
             "stack configuration of depth %" PRIu64 " (1 to %d)", rec->depth,
             LM_STACK_MAX_DEPTH);
        return P_ERR;
    }
    rec->kind = LM_REC_STACK_CONFIG;
    return P_OK;
}

/* A stack symbol (R3S, header 0x14): its kind byte says which. */
static int parse_stack_sym(struct lm_decoder *d, struct cursor *c,
                           const uint8_t *item, struct lm_record *rec)
{
    int r = P_OK;

    if (c->p >= c->end)
        return P_MORE;
    uint8_t kind = *c->p++;
    rec->in_events = 1;
    switch (kind) {
    case LM_STACK_DEF:
        r = parse_stack_def(d, c, rec);
        break;
    case LM_STACK_CONFIG:
        r = parse_stack_config(d, c, rec);
        break;
    case LM_STACK_RESET:
        rec->kind = LM_REC_STACK_RESET;
        break;
    default:
        fail(d, rec->offset, "stack symbol of kind %u (ljmp reads 0 to 2)",
             kind);
        return P_ERR;
    }
    rec->size = (uint64_t)(c->p - item);
    return r;
}

/* The stack id after the body of an event with bit S. */
static int read_stack_id(struct lm_decoder *d, struct cursor *c,
                         const uint8_t *item, struct lm_record *rec)
{
    uint64_t id;

    rec->stack_at = (uint8_t)(c->p - item);
    READ(id);
    if (id == 0 || id > UINT32_MAX) {
        fail(d, rec->offset,
             "event names stack %" PRIu64 " (ids are 1 to 2^32 - 1)", id);
        return P_ERR;
    }
    rec->stack = (uint32_t)id;
    return P_OK;
}

/* An R3S header beyond R3's: the stack symbol, or bit S, which only an
 * alloc or a realloc may have.  P_OK for an event with a stack, P_MORE
 * for a plain header (R3's rules), else P_ERR. */
static int stack_header(struct lm_decoder *d, uint8_t h, uint64_t offset)
{
    unsigned int event = h & LM_EV_EVENT_MASK;

    if (!(h & LM_EV_STACK) || (h & 0xc0) != 0)
        return P_MORE;
    if (event == LM_EV_FREE) {
        fail(d, offset, "event header 0x%02x: a free with a stack (bit S)", h);
        return P_ERR;
    }
    return event == LM_EV_SYMTAB ? P_MORE : P_OK;
}

static int parse_event(struct lm_decoder *d, struct cursor *c,
                       struct lm_record *rec)
{
    const uint8_t *item = c->p;
    uint8_t h = *c->p++;
    unsigned int event = h & LM_EV_EVENT_MASK, source;
    int r, stacked = 0;

    *rec = (struct lm_record){0};
    rec->offset = cursor_offset(c, item);
    if (h == LM_HDR_FINAL) {
        rec->kind = LM_REC_END;
        d->phase = LM_PH_DONE;
        return P_OK;
    }
    if (d->revision == LM_REV_R1) {
        source = (h >> LM_EV_SOURCE_SHIFT) & LM_EV_R1_SOURCE_MASK;
        if ((h & 0xf0) != 0 || source == 0)
            goto bad_header;
    } else {
        source = (h >> LM_EV_SOURCE_SHIFT) & LM_EV_SOURCE_MASK;
        if (d->revision == LM_REV_R3S) {
            if (h == (LM_EV_SYMTAB | LM_SRC_STACK << LM_EV_SOURCE_SHIFT))
                return parse_stack_sym(d, c, item, rec);
            if ((r = stack_header(d, h, rec->offset)) == P_ERR)
                return r;
            stacked = r == P_OK;
        }
        if ((h & (stacked ? 0xc0 : 0xe0)) != 0 || source == 0 ||
            source > LM_SRC_TRACE)
            goto bad_header;
    }
    rec->loc.source = (uint8_t)source;
    switch (event) {
    case LM_EV_SYMTAB: {
        int kind = event_sym_kind(d->revision, source);
        if (kind < 0) {
            fail(d, rec->offset,
                 "event header 0x%02x: a symtab event of source %u is not "
                 "part of revision %s",
                 h, source, lm_revision_name(d->revision));
            return P_ERR;
        }
        rec->kind = (uint8_t)kind;
        rec->in_events = 1;
        r = parse_sym_body(d, c, item, rec);
        return r == P_OK ? take_trace_context(d, rec) : r;
    }
    case LM_EV_ALLOC:
        rec->kind = LM_REC_ALLOC;
        if ((r = parse_loc(d, c, &rec->loc)) != P_OK)
            return r;
        READ(rec->naddr);
        READ(rec->nsize);
        return stacked ? read_stack_id(d, c, item, rec) : P_OK;
    case LM_EV_FREE:
        rec->kind = LM_REC_FREE;
        if ((r = parse_loc(d, c, &rec->loc)) != P_OK)
            return r;
        READ(rec->oaddr);
        READ(rec->osize);
        return P_OK;
    default:
        rec->kind = LM_REC_REALLOC;
        if ((r = parse_loc(d, c, &rec->loc)) != P_OK)
            return r;
        READ(rec->oaddr);
        READ(rec->osize);
        READ(rec->naddr);
        READ(rec->nsize);
        return stacked ? read_stack_id(d, c, item, rec) : P_OK;
    }

bad_header:
    fail(d, rec->offset,
         "unknown event header 0x%02x (%s event, source %u) in revision %s", h,
         event_names[event], (h >> LM_EV_SOURCE_SHIFT) & LM_EV_SOURCE_MASK,
         lm_revision_name(d->revision));
    return P_ERR;
}

/* Hands the batch to the sink; a sink error becomes the decoder's. */
static int flush_batch(struct lm_decoder *d)
{
    size_t n = d->nbatch, failed_at = 0;
    char msg[sizeof(d->errmsg)];

    d->nbatch = 0;
    if (n == 0 || d->sink == NULL)
        return 0;
    msg[0] = '\0';
    if (d->sink(d->sink_ctx, d->batch, n, &failed_at, msg, sizeof(msg)) == 0)
        return 0;
    if (failed_at >= n)
        failed_at = n - 1;
    fail(d, d->batch[failed_at].offset, "%s", msg[0] ? msg : "record rejected");
    return -1;
}

/*
 * The fast path: plain events (alloc, free, realloc) while at least
 * FAST_MARGIN bytes remain, so that no read needs a bounds check.  A ULEB
 * is decoded from one 8-byte load without branching on its length (the
 * lengths of addresses, sizes and lines vary from one value to the next,
 * which a loop would mispredict).  Anything else -- a symtab event, the
 * epilogue, a bad header, a ULEB longer than 8 bytes -- is left to the
 * careful path, which also names errors.
 *
 * The path is compiled twice: once for any CPU (fast_event), and once for
 * x86-64 with AVX2 and BMI2 (fast_event_wide), whose PEXT takes the 7-bit
 * groups out of a ULEB in one instruction.  lm_decoder_init() picks one.
 */
enum {
    FAST_MARGIN = 80,  /* see fast_event_wide's loads */
    FAST_MAX_ULEBS = 6 /* in a plain event: location, old and new block */
};

#ifdef LM_HAVE_BMI2
#include <immintrin.h>

#define WIDE_TARGET __attribute__((target("avx2,bmi,bmi2")))

#endif

/* The value of a ULEB of up to 8 bytes (the load masked to its length):
 * the continuation bits squeezed out, as 7-bit groups pair up into 14,
 * then 28, then 56 bits. */
static inline __attribute__((always_inline)) uint64_t squeeze(uint64_t x)
{
    x = (x & 0x007f007f007f007fULL) | ((x & 0x7f007f007f007f00ULL) >> 1);
    x = (x & 0x00003fff00003fffULL) | ((x & 0x3fff00003fff0000ULL) >> 2);
    return (x & 0x000000000fffffffULL) | ((x & 0x0fffffff00000000ULL) >> 4);
}

static inline __attribute__((always_inline)) int uleb8(const uint8_t **pp,
                                                       uint64_t *out)
{
    uint64_t w;

    memcpy(&w, *pp, 8);
    uint64_t stops = ~w & 0x8080808080808080ULL;
    if (__builtin_expect(stops == 0, 0))
        return 0;
    *pp += ((unsigned int)__builtin_ctzll(stops) + 1) >> 3;
    /* The bits up to the first stop bit (BMI1's BLSMSK where targeted). */
    *out = squeeze(w & (stops ^ (stops - 1)));
    return 1;
}

#define FAST_READ(v)                                                           \
    do {                                                                       \
        if (!uleb8(&p, &(v)))                                                  \
            return item;                                                       \
    } while (0)

/* v[words + k], for words of 0 to 2, by selects: an indexed load would
 * read v from memory just after its ULEBs were stored there, and GCC
 * merges two such loads into one of 16 bytes, which no store can forward:
 * every event would wait for its stores to reach the cache. */
static inline __attribute__((always_inline)) uint64_t
block_word(const uint64_t *v, unsigned int words, unsigned int k)
{
    return words == 0 ? v[k] : words == 1 ? v[k + 1] : v[k + 2];
}

/* The fields of struct lm_record before its offset, as they lie there. */
struct record_head {
    uint8_t kind, in_events, revision, stack_at;
    uint32_t stack;
};

_Static_assert(sizeof(struct record_head) ==
                       offsetof(struct lm_record, offset) &&
                   offsetof(struct lm_record, stack) ==
                       offsetof(struct record_head, stack),
               "a record's head as struct record_head lays it out");

/* Fills rec from an event's ULEBs v (location words first); the choice
 * of fields by select, not branches, as kinds come in no order. */
static inline __attribute__((always_inline)) void
fill_event(struct lm_record *rec, unsigned int t, const uint64_t *v,
           uint32_t trace)
{
    unsigned int words = (t >> 4) & 3;
    uint8_t kind = (uint8_t)((t >> 8) & 0xf);
    /* The block's words: old or new, then new. */
    uint64_t b[4] = {block_word(v, words, 0), block_word(v, words, 1),
                     block_word(v, words, 2), block_word(v, words, 3)};
    int alloc = kind == LM_REC_ALLOC, realloc = kind == LM_REC_REALLOC;

    /* The header's fields before the offset, the kind and zeros, in
     * one store rather than five (struct record_head). */
    const struct record_head head = {kind, 0, 0, 0, 0};
    memcpy(rec, &head, sizeof(head));
    rec->loc.source = (uint8_t)(t & 0x0f);
    rec->loc.trace = (t & 0x0f) == LM_SRC_LFUNC ? trace : 0;
    rec->loc.addr = words >= 1 ? v[0] : 0;
    rec->loc.line = words == 2 ? v[1] : 0;
    rec->oaddr = alloc ? 0 : b[0];
    rec->osize = alloc ? 0 : b[1];
    rec->naddr = alloc ? b[0] : realloc ? b[2] : 0;
    rec->nsize = alloc ? b[1] : realloc ? b[3] : 0;
}

/* Decodes one plain event at item into rec; returns the byte after it, or
 * item itself when the careful path must take this one. */
static inline __attribute__((always_inline)) const uint8_t *
fast_event(const struct lm_decoder *d, const uint8_t *item,
           struct lm_record *rec)
{
    const uint8_t *p = item + 1;
    unsigned int t = d->fast_header[*item];
    /* Whole, as fill_event selects among all of them. */
    uint64_t v[FAST_MAX_ULEBS] = {0};

    if (t == 0)
        return item;
    for (unsigned int k = 0; k < t >> 12; k++)
        FAST_READ(v[k]);
    fill_event(rec, t, v, d->trace);
    return p;
}

#undef FAST_READ

#ifdef LM_HAVE_BMI2
/* The ULEB that starts at item + 1 + *start, whose end is the lowest
 * bit of *m; both moved past it.  Past the event's last ULEB, the ends
 * run out at bit 63. */
static inline WIDE_TARGET uint64_t wide_uleb(const uint8_t *item, uint64_t *m,
                                             unsigned int *start)
{
    unsigned int e = (unsigned int)__builtin_ctzll(*m | 1ULL << 63);
    uint64_t w;

    memcpy(&w, item + 1 + *start, 8);
    uint64_t v =
        _pext_u64(w, _bzhi_u64(0x7f7f7f7f7f7f7f7fULL, (e - *start + 1) * 8));
    *m = _blsr_u64(*m);
    *start = e + 1;
    return v;
}

/*
 * fast_event with AVX2 and BMI2.  uleb8 finds where a ULEB ends from its
 * own bytes, so each ULEB's load waits for the one before: about 12
 * cycles a ULEB, 40 an event.  Here one 64-byte compare marks where every
 * ULEB of the event ends; the end of the event (the next one's start) is
 * then a PDEP of that mask away, and the ULEBs' loads are independent of
 * one another.  Four ULEBs are always decoded, six for an event that has
 * them: the loads past the event stay in FAST_MARGIN (at most 1 + 65 + 8
 * bytes in).
 */
static inline WIDE_TARGET const uint8_t *
fast_event_wide(const struct lm_decoder *d, const uint8_t *item,
                struct lm_record *rec)
{
    unsigned int t = d->fast_header[*item];
    __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)item);
    __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(item + 32));
    /* Bit i: byte item + 1 + i ends a ULEB (its top bit is clear). */
    uint64_t ends = ~((uint64_t)(uint32_t)_mm256_movemask_epi8(lo) |
                      (uint64_t)(uint32_t)_mm256_movemask_epi8(hi) << 32) >>
                    1;
    unsigned int n = t >> 12;
    uint64_t last = _pdep_u64(1ULL << ((n - 1) & 63), ends);
    uint64_t v[FAST_MAX_ULEBS], m = ends;
    unsigned int start = 0;

    /* Not a plain event, or not whole in the 63 bytes. */
    if (t == 0 || last == 0)
        return item;
    unsigned int end = (unsigned int)__builtin_ctzll(last);
    /* A ULEB of more than 8 bytes: 8 bytes in a row that do not end one. */
    uint64_t x = ~ends & _bzhi_u64(~0ULL, end);
    x &= x >> 1;
    x &= x >> 2;
    x &= x >> 4;
    if (x != 0)
        return item;
#pragma GCC unroll 4
    /* Four ULEBs always (a Lua or trace site's alloc or free, the most
     * common events, has four); a realloc's last two only when it has
     * them, a branch taken seldom enough to predict. */
    for (int k = 0; k < 4; k++)
        v[k] = wide_uleb(item, &m, &start);
    v[4] = v[5] = 0;
    if (__builtin_expect(n > 4, 0)) {
        v[4] = wide_uleb(item, &m, &start);
        v[5] = wide_uleb(item, &m, &start);
    }
    fill_event(rec, t, v, d->trace);
    return item + 2 + end;
}
#endif

/* A trace marker's bytes but its trace number (see take_trace_mark):
 * where traces take turns at every allocation, one comes before most
 * events, so the fast path takes it too. */
static const uint8_t trace_mark_head[] = {
    LM_EV_SYMTAB | LM_SRC_LFUNC << LM_EV_SOURCE_SHIFT,
    LM_TRACE_MARK_ADDR,
    sizeof(LM_TRACE_MARK_NAME) - 1,
    '[',
    't',
    'r',
    'a',
    'c',
    'e',
    ']'};

_Static_assert(sizeof(trace_mark_head) == 3 + sizeof(LM_TRACE_MARK_NAME) - 1,
               "the marker's name as lm_format.h spells it");

/* Takes a trace marker at item, setting the trace in effect; returns
 * the byte after it, or item itself when the careful path must take it
 * (anything else, or a trace number it would refuse). */
static inline __attribute__((always_inline)) const uint8_t *
fast_trace_mark(struct lm_decoder *d, const uint8_t *item)
{
    const uint8_t *p = item + sizeof(trace_mark_head);
    uint64_t traceno;

    if (memcmp(item, trace_mark_head, sizeof(trace_mark_head)) != 0 ||
        !uleb8(&p, &traceno) || traceno > UINT32_MAX)
        return item;
    d->trace = (uint32_t)traceno;
    d->nrecords[LM_REC_TRACE_MARK]++;
    return p;
}

/* Runs the fast path as far as it goes; P_ERR only if the sink fails. */
static inline __attribute__((always_inline)) int
fast_loop(struct lm_decoder *d, struct cursor *c, int wide)
{
    /* Locals, not fields: stores into records could alias the decoder,
     * and the compiler would reload them after each one. */
    const uint8_t *p = c->p, *end = c->end;
    size_t n = d->nbatch;

    while (end - p >= FAST_MARGIN) {
        struct lm_record *rec = &d->batch[n];
#ifdef LM_HAVE_BMI2
        const uint8_t *next =
            wide ? fast_event_wide(d, p, rec) : fast_event(d, p, rec);
#else
        (void)wide;
        const uint8_t *next = fast_event(d, p, rec);
#endif
        if (next == p) { /* a marker makes no record */
            if ((next = fast_trace_mark(d, p)) == p)
                break;
            p = next;
            continue;
        }
        rec->offset = cursor_offset(c, p);
        d->nrecords[rec->kind]++;
        p = next;
        if (++n == LM_BATCH) {
            c->p = p;
            d->nbatch = n;
            if (flush_batch(d) != 0)
                return P_ERR;
            n = 0;
        }
    }
    c->p = p;
    d->nbatch = n;
    return P_OK;
}

static int fast_loop_portable(struct lm_decoder *d, struct cursor *c)
{
    return fast_loop(d, c, 0);
}

#ifdef LM_HAVE_BMI2
static WIDE_TARGET int fast_loop_wide(struct lm_decoder *d, struct cursor *c)
{
    return fast_loop(d, c, 1);
}
#endif

static int parse_events_fast(struct lm_decoder *d, struct cursor *c)
{
#ifdef LM_HAVE_BMI2
    if (d->use_wide)
        return fast_loop_wide(d, c);
#endif
    return fast_loop_portable(d, c);
}

/* One item at the cursor, whatever the phase. */
static int parse_item(struct lm_decoder *d, struct cursor *c)
{
    struct lm_record *rec = &d->batch[d->nbatch];
    int r;

    if (c->p >= c->end)
        return P_MORE;
    d->pend_need = 0;
    switch (d->phase) {
    case LM_PH_SYMTAB_PROLOGUE:
        return parse_symtab_prologue(d, c);
    case LM_PH_EVENTS_PROLOGUE:
        r = parse_events_prologue(d, c, rec);
        break;
    case LM_PH_SYMTAB:
        r = parse_symtab_entry(d, c, rec);
        break;
    case LM_PH_EVENTS:
        r = parse_event(d, c, rec);
        break;
    case LM_PH_DONE:
        fail(d, cursor_offset(c, c->p), "bytes after the epilogue");
        return P_ERR;
    default:
        return P_ERR;
    }
    if (r != P_OK)
        return r;
    d->nrecords[rec->kind]++;
    /* A trace marker and a stand-in symbol are the decoder's: no record
     * for the sink. */
    if (rec->kind == LM_REC_TRACE_MARK || rec->kind == LM_REC_STANDIN)
        return r;
    /* A stack definition's frames are in the decoder's one array: the
     * sink takes it before the next one is read. */
    if ((++d->nbatch == LM_BATCH || rec->kind == LM_REC_STACK_DEF) &&
        flush_batch(d) != 0)
        return P_ERR;
    return r;
}

static int pend_reserve(struct lm_decoder *d, size_t need)
{
    size_t cap = d->pend_cap ? d->pend_cap : 128;
    uint8_t *p;

    if (need <= d->pend_cap)
        return 0;
    while (cap < need)
        cap *= 2;
    p = realloc(d->pend, cap);
    if (p == NULL)
        return -1;
    d->pend = p;
    d->pend_cap = cap;
    return 0;
}

/* The largest item kept whole across chunks: the limit, but never
 * under a stack definition's longest, whose size no string sets. */
static size_t pend_limit(const struct lm_decoder *d)
{
    return d->limits.max_buffered > LM_STACK_DEF_MAX_BYTES
               ? d->limits.max_buffered
               : LM_STACK_DEF_MAX_BYTES;
}

/*
 * Completes the item cut by the previous chunk boundary, taking bytes from
 * buf.  Returns the number of input bytes used, or (size_t)-1 on error.
 * d->pend_len stays non-zero if buf ran out first.
 */
static size_t finish_pending(struct lm_decoder *d, const uint8_t *buf,
                             size_t len)
{
    size_t used = 0;

    while (used < len) {
        size_t want =
            d->pend_need > d->pend_len ? d->pend_need - d->pend_len : 0;
        size_t take = want > 64 ? want : 64;
        if (take > len - used)
            take = len - used;
        if (d->pend_len >= pend_limit(d)) {
            /* Cannot happen: read_string bounds every item. */
            fail(d, d->offset, "item larger than the buffer limit");
            return (size_t)-1;
        }
        if (d->pend_len + take > pend_limit(d))
            take = pend_limit(d) - d->pend_len;
        if (pend_reserve(d, d->pend_len + take) != 0) {
            fail(d, d->offset, "out of memory buffering an item");
            return (size_t)-1;
        }
        memcpy(d->pend + d->pend_len, buf + used, take);
        size_t before = d->pend_len;
        d->pend_len += take;
        used += take;

        struct cursor c = {d->pend, d->pend + d->pend_len, d->pend, d->offset};
        int r = parse_item(d, &c);
        if (r == P_ERR)
            return (size_t)-1;
        if (r == P_OK) {
            size_t item = (size_t)(c.p - d->pend);
            /* The sink must see strings in pend before it is reused. */
            if (flush_batch(d) != 0)
                return (size_t)-1;
            d->offset += item;
            d->pend_len = 0;
            return used - take + (item - before);
        }
        if (take == 0) { /* cannot happen: max_buffered bounds items */
            fail(d, d->offset, "item larger than the buffer limit");
            return (size_t)-1;
        }
    }
    return used;
}

static enum lm_status status_of(const struct lm_decoder *d)
{
    if (d->phase == LM_PH_ERROR)
        return LM_ERROR;
    return d->phase == LM_PH_DONE ? LM_DONE : LM_NEED_MORE;
}

static void set_consumed(size_t *consumed, size_t n)
{
    if (consumed != NULL)
        *consumed = n;
}

enum lm_status lm_decoder_feed(struct lm_decoder *d, const void *data,
                               size_t len, size_t *consumed)
{
    const uint8_t *buf = data;
    /* Stream offset of buf[0]. */
    uint64_t base = d->offset + d->pend_len;
    size_t off = 0;

    set_consumed(consumed, 0);
    if (d->phase == LM_PH_ERROR)
        return LM_ERROR;
    if (d->phase == LM_PH_DONE) {
        if (len == 0)
            return LM_DONE;
        fail(d, d->offset, "bytes after the epilogue");
        return LM_ERROR;
    }
    if (d->pend_len > 0) {
        off = finish_pending(d, buf, len);
        if (off == (size_t)-1) {
            off = 0;
            goto error;
        }
        if (d->pend_len > 0) {
            set_consumed(consumed, len);
            return LM_NEED_MORE;
        }
    }

    struct cursor c = {buf + off, buf + len, buf + off, base + off};
    const uint8_t *item = c.p;
    while (c.p < c.end && d->phase != LM_PH_DONE) {
        if (d->phase == LM_PH_EVENTS && c.end - c.p >= FAST_MARGIN) {
            if (parse_events_fast(d, &c) != P_OK) {
                off = d->err_offset > base ? (size_t)(d->err_offset - base) : 0;
                goto error;
            }
            if (c.p == c.end)
                break;
        }
        item = c.p;
        int r = parse_item(d, &c);
        if (r == P_ERR) {
            /* A sink error names an earlier record than the item. */
            off = (size_t)(item - buf);
            if (d->err_offset < base + off)
                off = d->err_offset > base ? (size_t)(d->err_offset - base) : 0;
            goto error;
        }
        if (r == P_MORE) {
            c.p = item;
            break;
        }
    }
    if (flush_batch(d) != 0) {
        off = d->err_offset > base ? (size_t)(d->err_offset - base) : 0;
        goto error;
    }
    d->offset = cursor_offset(&c, c.p);

    size_t tail = (size_t)(c.end - c.p);
    if (d->phase == LM_PH_DONE) {
        /* What follows the epilogue is the caller's (a trailer, say). */
        set_consumed(consumed, len - tail);
        return LM_DONE;
    }
    if (tail > 0) {
        if (pend_reserve(d, tail) != 0) {
            fail(d, d->offset, "out of memory buffering an item");
            goto error;
        }
        memcpy(d->pend, c.p, tail);
        d->pend_len = tail;
    }
    set_consumed(consumed, len);
    return status_of(d);

error:
    /* Records read before the bad item are kept: hand them over. */
    flush_batch(d);
    set_consumed(consumed, off);
    return LM_ERROR;
}

static const char *phase_where(const struct lm_decoder *d)
{
    switch (d->phase) {
    case LM_PH_SYMTAB_PROLOGUE:
        return "in the symbol table prologue";
    case LM_PH_SYMTAB:
        return "in the symbol table";
    case LM_PH_EVENTS_PROLOGUE:
        return "before the events prologue";
    default:
        return "in the events";
    }
}

enum lm_status lm_decoder_finish(struct lm_decoder *d)
{
    uint64_t events = d->nrecords[LM_REC_ALLOC] + d->nrecords[LM_REC_FREE] +
                      d->nrecords[LM_REC_REALLOC];

    if (d->phase == LM_PH_DONE || d->phase == LM_PH_ERROR)
        return status_of(d);
    d->err_offset = d->offset;
    if (d->pend_len > 0)
        snprintf(d->errmsg, sizeof(d->errmsg),
                 "stream truncated %s after %llu events: the item at offset "
                 "%llu is cut after %zu bytes",
                 phase_where(d), (unsigned long long)events,
                 (unsigned long long)d->offset, d->pend_len);
    else
        snprintf(d->errmsg, sizeof(d->errmsg),
                 "stream truncated %s after %llu events, at offset %llu "
                 "(no epilogue)",
                 phase_where(d), (unsigned long long)events,
                 (unsigned long long)d->offset);
    return LM_NEED_MORE;
}
