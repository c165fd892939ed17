/* Writes memprof streams of any revision into a growable buffer. */
#include "lm_encoder.h"

#include <stdlib.h>
#include <string.h>

#include "lm_format.h"
#include "lm_symtab.h"

void lm_buf_free(struct lm_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void lm_buf_bytes(struct lm_buf *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (d == NULL) {
            b->oom = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void lm_buf_byte(struct lm_buf *b, uint8_t v)
{
    lm_buf_bytes(b, &v, 1);
}

void lm_buf_uleb(struct lm_buf *b, uint64_t v)
{
    uint8_t tmp[LM_ULEB_MAX_BYTES];
    size_t n = 0;

    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v != 0)
            tmp[n] |= 0x80;
        n++;
    } while (v != 0);
    lm_buf_bytes(b, tmp, n);
}

void lm_buf_string(struct lm_buf *b, const char *s, size_t len)
{
    lm_buf_uleb(b, len);
    lm_buf_bytes(b, s, len);
}

/* A prologue; ext is its first reserved byte (R3S's extension version). */
static void prologue(struct lm_buf *b, const char *magic, uint8_t version,
                     uint8_t ext)
{
    uint8_t p[LM_PROLOGUE_SIZE] = {(uint8_t)magic[0],
                                   (uint8_t)magic[1],
                                   (uint8_t)magic[2],
                                   version,
                                   ext,
                                   0,
                                   0};
    lm_buf_bytes(b, p, sizeof(p));
}

/* R3's layouts of traces and symbols, which R3S keeps. */
static int r3_layout(enum lm_revision rev)
{
    return rev == LM_REV_R3 || rev == LM_REV_R3S;
}

void lm_enc_symtab_prologue(struct lm_buf *b, uint8_t ljs_version)
{
    prologue(b, "ljs", ljs_version, 0);
}

static void sym_lfunc_body(struct lm_buf *b, uint64_t addr, const char *chunk,
                           size_t len, uint64_t firstline)
{
    lm_buf_uleb(b, addr);
    lm_buf_string(b, chunk, len);
    lm_buf_uleb(b, firstline);
}

static void sym_trace_body(struct lm_buf *b, enum lm_revision rev,
                           uint64_t traceno, uint64_t trace_addr,
                           uint64_t proto, uint64_t line)
{
    lm_buf_uleb(b, traceno);
    if (!r3_layout(rev))
        lm_buf_uleb(b, trace_addr);
    lm_buf_uleb(b, proto);
    lm_buf_uleb(b, line);
}

void lm_enc_sym_lfunc(struct lm_buf *b, uint64_t addr, const char *chunk,
                      uint64_t firstline)
{
    lm_buf_byte(b, LM_SYM_LFUNC);
    sym_lfunc_body(b, addr, chunk, strlen(chunk), firstline);
}

void lm_enc_sym_cfunc(struct lm_buf *b, uint64_t addr, const char *name)
{
    lm_buf_byte(b, LM_SYM_V3_CFUNC);
    lm_buf_uleb(b, addr);
    lm_buf_string(b, name, strlen(name));
}

void lm_enc_sym_trace(struct lm_buf *b, enum lm_revision rev, uint64_t traceno,
                      uint64_t trace_addr, uint64_t proto, uint64_t line)
{
    lm_buf_byte(b, r3_layout(rev) ? LM_SYM_V3_TRACE : LM_SYM_V2_TRACE);
    sym_trace_body(b, rev, traceno, trace_addr, proto, line);
}

void lm_enc_symtab_end(struct lm_buf *b)
{
    lm_buf_byte(b, LM_HDR_FINAL);
}

void lm_enc_events_prologue(struct lm_buf *b, uint8_t ljm_version)
{
    prologue(b, "ljm", ljm_version,
             ljm_version == LM_LJM_STACKS ? LM_STACKS_EXT_VERSION : 0);
}

static void event_header(struct lm_buf *b, unsigned int event,
                         unsigned int source)
{
    lm_buf_byte(b, (uint8_t)(event | source << LM_EV_SOURCE_SHIFT));
}

static void loc(struct lm_buf *b, enum lm_revision rev,
                const struct lm_loc_ref *l)
{
    switch (l->source) {
    case LM_SRC_LFUNC:
        lm_buf_uleb(b, l->addr);
        lm_buf_uleb(b, l->line);
        break;
    case LM_SRC_CFUNC:
        lm_buf_uleb(b, l->addr);
        break;
    case LM_SRC_TRACE:
        lm_buf_uleb(b, l->traceno);
        if (!r3_layout(rev))
            lm_buf_uleb(b, l->trace_addr);
        break;
    default:
        break;
    }
}

void lm_enc_alloc(struct lm_buf *b, enum lm_revision rev,
                  const struct lm_loc_ref *l, uint64_t naddr, uint64_t nsize)
{
    event_header(b, LM_EV_ALLOC, l->source);
    loc(b, rev, l);
    lm_buf_uleb(b, naddr);
    lm_buf_uleb(b, nsize);
}

void lm_enc_free(struct lm_buf *b, enum lm_revision rev,
                 const struct lm_loc_ref *l, uint64_t oaddr, uint64_t osize)
{
    event_header(b, LM_EV_FREE, l->source);
    loc(b, rev, l);
    lm_buf_uleb(b, oaddr);
    lm_buf_uleb(b, osize);
}

void lm_enc_realloc(struct lm_buf *b, enum lm_revision rev,
                    const struct lm_loc_ref *l, uint64_t oaddr, uint64_t osize,
                    uint64_t naddr, uint64_t nsize)
{
    event_header(b, LM_EV_REALLOC, l->source);
    loc(b, rev, l);
    lm_buf_uleb(b, oaddr);
    lm_buf_uleb(b, osize);
    lm_buf_uleb(b, naddr);
    lm_buf_uleb(b, nsize);
}

void lm_enc_event_lfunc(struct lm_buf *b, uint64_t addr, const char *chunk,
                        uint64_t firstline)
{
    event_header(b, LM_EV_SYMTAB, LM_SRC_LFUNC);
    sym_lfunc_body(b, addr, chunk, strlen(chunk), firstline);
}

void lm_enc_trace_mark(struct lm_buf *b, uint64_t traceno)
{
    lm_enc_event_lfunc(b, LM_TRACE_MARK_ADDR, LM_TRACE_MARK_NAME, traceno);
}

void lm_enc_standin(struct lm_buf *b, uint64_t traceno)
{
    lm_enc_event_lfunc(b, LM_STANDIN_ADDR, LM_STANDIN_NAME, traceno);
}

void lm_enc_sym_standin(struct lm_buf *b, uint64_t traceno)
{
    lm_enc_sym_lfunc(b, LM_STANDIN_ADDR, LM_STANDIN_NAME, traceno);
}

void lm_enc_event_cfunc(struct lm_buf *b, uint64_t addr, const char *name)
{
    event_header(b, LM_EV_SYMTAB, LM_SRC_CFUNC);
    lm_buf_uleb(b, addr);
    lm_buf_string(b, name, strlen(name));
}

void lm_enc_event_trace(struct lm_buf *b, enum lm_revision rev,
                        uint64_t traceno, uint64_t trace_addr, uint64_t proto,
                        uint64_t line)
{
    event_header(b, LM_EV_SYMTAB, LM_SRC_TRACE);
    sym_trace_body(b, rev, traceno, trace_addr, proto, line);
}

/* The header of an alloc or realloc that names a stack (bit S). */
static void stacked_header(struct lm_buf *b, unsigned int event,
                           unsigned int source)
{
    lm_buf_byte(b,
                (uint8_t)(event | source << LM_EV_SOURCE_SHIFT | LM_EV_STACK));
}

void lm_enc_alloc_stack(struct lm_buf *b, enum lm_revision rev,
                        const struct lm_loc_ref *l, uint64_t naddr,
                        uint64_t nsize, uint64_t stack)
{
    stacked_header(b, LM_EV_ALLOC, l->source);
    loc(b, rev, l);
    lm_buf_uleb(b, naddr);
    lm_buf_uleb(b, nsize);
    lm_buf_uleb(b, stack);
}

void lm_enc_realloc_stack(struct lm_buf *b, enum lm_revision rev,
                          const struct lm_loc_ref *l, uint64_t oaddr,
                          uint64_t osize, uint64_t naddr, uint64_t nsize,
                          uint64_t stack)
{
    stacked_header(b, LM_EV_REALLOC, l->source);
    loc(b, rev, l);
    lm_buf_uleb(b, oaddr);
    lm_buf_uleb(b, osize);
    lm_buf_uleb(b, naddr);
    lm_buf_uleb(b, nsize);
    lm_buf_uleb(b, stack);
}

/* A stack symbol's header and kind. */
static void stack_symbol(struct lm_buf *b, uint8_t kind)
{
    event_header(b, LM_EV_SYMTAB, LM_SRC_STACK);
    lm_buf_byte(b, kind);
}

void lm_enc_stack_config(struct lm_buf *b, uint64_t depth,
                         uint64_t sample_bytes)
{
    stack_symbol(b, LM_STACK_CONFIG);
    lm_buf_uleb(b, depth);
    lm_buf_uleb(b, sample_bytes);
}

void lm_enc_stack_def(struct lm_buf *b, uint64_t id,
                      const struct lm_stack_frame *frames, size_t n)
{
    stack_symbol(b, LM_STACK_DEF);
    lm_buf_uleb(b, id);
    lm_buf_uleb(b, n);
    for (size_t i = 0; i < n; i++) {
        lm_buf_uleb(b, frames[i].value << 2 | frames[i].kind);
        if (frames[i].kind != LM_FRAME_MARKER)
            lm_buf_uleb(b, frames[i].addr);
    }
}

void lm_enc_stack_reset(struct lm_buf *b)
{
    stack_symbol(b, LM_STACK_RESET);
}

void lm_enc_epilogue(struct lm_buf *b)
{
    lm_buf_byte(b, LM_HDR_FINAL);
}

static const uint8_t ljs_of[] = {0, 1, 2, 2, 3, 3};
static const uint8_t ljm_of[] = {0, 1, 2, 3, 3, LM_LJM_STACKS};

void lm_enc_begin(struct lm_buf *b, enum lm_revision rev)
{
    lm_enc_symtab_prologue(b, ljs_of[rev]);
}

void lm_enc_begin_events(struct lm_buf *b, enum lm_revision rev)
{
    lm_enc_events_prologue(b, ljm_of[rev]);
}

void lm_enc_symtab_of(struct lm_buf *b, struct lm_symtab *t,
                      enum lm_revision rev)
{
    size_t len;

    /* Every announced epoch in arrival order: the last one at an address
     * is its current one for the reader too, and chunk names appear in
     * their first order, so aliases get the same numbers. */
    for (uint32_t i = 0; i < t->nprotos; i++) {
        const struct lm_proto *p = &t->protos[i];
        if (p->chunk == LM_NONE)
            continue;
        const char *chunk = lm_symtab_str(t, p->chunk, &len);
        if (p->trace != 0)
            lm_enc_sym_standin(b, p->trace);
        lm_buf_byte(b, LM_SYM_LFUNC);
        sym_lfunc_body(b, p->addr, chunk, len, p->firstline);
    }
    for (uint32_t i = 0; i < t->ntraces; i++) {
        const struct lm_trace *tr = &t->traces[i];
        if (!tr->known)
            continue;
        lm_enc_sym_trace(b, rev, tr->traceno, tr->trace_addr, tr->start_addr,
                         tr->start_line);
    }
    /* In arrival order: a later name for an address wins, as it did.  Only
     * R3's symbol table has C symbols. */
    for (uint32_t i = 0; r3_layout(rev) && i < t->ncfuncs; i++) {
        const char *name = lm_symtab_str(t, t->cfuncs[i].name, &len);
        lm_buf_byte(b, LM_SYM_V3_CFUNC);
        lm_buf_uleb(b, t->cfuncs[i].addr);
        lm_buf_string(b, name, len);
    }
}
