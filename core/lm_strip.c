/* Strips an R3S stream of its call stacks: the R3 stream of the same events. */
#include "lm_strip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_format.h"

/*
 * The decoder says where each item starts (a record's offset) and, for
 * what stripping changes, what to change: the events prologue's version
 * and reserved bytes (R3S only), a stack symbol's bytes (its size), an
 * event's bit S and the stack id at stack_at.  The sink lists those
 * edits; once a feed returns, every item before the decoder's offset is
 * whole, and its bytes are written with the edits applied.
 */
enum {
    EDIT_PROLOGUE, /* version 3, reserved bytes zero */
    EDIT_DROP,     /* arg bytes left out */
    EDIT_UNSTACK,  /* bit S cleared, the id at arg left out */
};

static int add_edit(struct lm_strip *st, uint8_t kind, uint64_t offset,
                    uint64_t arg)
{
    if (LM_RESERVE(st->edits, st->edits_cap, st->nedits) != 0)
        return -1;
    st->edits[st->nedits++] = (struct lm_strip_edit){offset, arg, kind};
    return 0;
}

/* The edit a record asks for, if any. */
static int note_record(struct lm_strip *st, const struct lm_record *r)
{
    switch (r->kind) {
    case LM_REC_EVENTS_BEGIN:
        if (r->revision != LM_REV_R3S)
            return 0;
        return add_edit(st, EDIT_PROLOGUE, r->offset, 0);
    case LM_REC_STACK_DEF:
    case LM_REC_STACK_CONFIG:
    case LM_REC_STACK_RESET:
        return add_edit(st, EDIT_DROP, r->offset, r->size);
    case LM_REC_ALLOC:
    case LM_REC_REALLOC:
        if (r->stack_at == 0)
            return 0;
        return add_edit(st, EDIT_UNSTACK, r->offset, r->stack_at);
    default:
        return 0;
    }
}

static int strip_sink(void *ctx, const struct lm_record *recs, size_t n,
                      size_t *failed_at, char *errbuf, size_t errlen)
{
    struct lm_strip *st = ctx;

    for (size_t i = 0; i < n; i++)
        if (note_record(st, &recs[i]) != 0) {
            st->failed = 1;
            *failed_at = i;
            snprintf(errbuf, errlen, "out of memory stripping stacks");
            return -1;
        }
    if (st->next == NULL)
        return 0;
    return st->next(st->next_ctx, recs, n, failed_at, errbuf, errlen);
}

void lm_strip_init(struct lm_strip *st, const struct lm_limits *limits,
                   lm_write_fn write, void *write_ctx)
{
    memset(st, 0, sizeof(*st));
    lm_decoder_init(&st->dec, limits, strip_sink, st);
    st->write = write;
    st->write_ctx = write_ctx;
}

void lm_strip_chain(struct lm_strip *st, lm_sink_fn sink, void *ctx)
{
    st->next = sink;
    st->next_ctx = ctx;
}

void lm_strip_free(struct lm_strip *st)
{
    lm_decoder_free(&st->dec);
    free(st->held);
    free(st->edits);
    memset(st, 0, sizeof(*st));
}

/* The bytes fed and not yet written: what was held, then the chunk. */
struct fed {
    const uint8_t *held, *buf;
    uint64_t at; /* the stream offset of held[0] */
    size_t held_len, len;
};

static const uint8_t *byte_at(const struct fed *f, uint64_t off)
{
    uint64_t i = off - f->at;

    return i < f->held_len ? f->held + i : f->buf + (i - f->held_len);
}

static int put(struct lm_strip *st, const void *p, size_t n)
{
    if (n == 0 || st->failed)
        return st->failed ? -1 : 0;
    if (st->write(st->write_ctx, p, n) != 0)
        st->failed = 1;
    return st->failed ? -1 : 0;
}

/* Writes the stream's bytes [from, to) as fed. */
static int put_range(struct lm_strip *st, const struct fed *f, uint64_t from,
                     uint64_t to)
{
    uint64_t held_end = f->at + f->held_len;

    if (from < held_end && from < to) {
        uint64_t end = to < held_end ? to : held_end;
        if (put(st, byte_at(f, from), (size_t)(end - from)) != 0)
            return -1;
        from = end;
    }
    return from < to ? put(st, byte_at(f, from), (size_t)(to - from)) : 0;
}

/* The length of the ULEB at off (whole: its item is). */
static uint64_t uleb_length(const struct fed *f, uint64_t off)
{
    uint64_t n = 1;

    while (*byte_at(f, off + n - 1) & 0x80)
        n++;
    return n;
}

/* Applies edit e, the bytes before it written: the offset after it. */
static uint64_t apply_edit(struct lm_strip *st, const struct fed *f,
                           const struct lm_strip_edit *e)
{
    static const uint8_t r3_tail[] = {3, 0, 0, 0};
    uint8_t h;

    switch (e->kind) {
    case EDIT_PROLOGUE:
        put_range(st, f, e->offset, e->offset + 3);
        put(st, r3_tail, sizeof(r3_tail));
        return e->offset + LM_PROLOGUE_SIZE;
    case EDIT_DROP:
        st->dropped += e->arg;
        return e->offset + e->arg;
    default: /* EDIT_UNSTACK */
        h = (uint8_t)(*byte_at(f, e->offset) & ~LM_EV_STACK);
        put(st, &h, 1);
        put_range(st, f, e->offset + 1, e->offset + e->arg);
        uint64_t idlen = uleb_length(f, e->offset + e->arg);
        st->dropped += idlen;
        return e->offset + e->arg + idlen;
    }
}

/* Writes the stream up to upto, every edit before it applied. */
static int write_upto(struct lm_strip *st, const struct fed *f, uint64_t upto)
{
    uint64_t at = st->written;

    for (uint32_t i = 0; i < st->nedits; i++) {
        const struct lm_strip_edit *e = &st->edits[i];
        put_range(st, f, at, e->offset);
        at = apply_edit(st, f, e);
    }
    st->nedits = 0;
    put_range(st, f, at, upto);
    st->written = upto;
    return st->failed ? -1 : 0;
}

/* Keeps the bytes fed from upto on (an item not yet whole) for the next
 * feed: 0, or -1 when out of memory. */
static int hold_rest(struct lm_strip *st, const struct fed *f, uint64_t upto)
{
    uint64_t end = f->at + f->held_len + f->len;
    size_t n = (size_t)(end - upto), from_held = 0;

    st->held_len = 0;
    if (n == 0)
        return 0;

    if (upto < f->at + f->held_len) {
        from_held = (size_t)(f->at + f->held_len - upto);
        memmove(st->held, st->held + (upto - f->at), from_held);
    }
    if (n > st->held_cap) {
        size_t cap = st->held_cap ? st->held_cap : 256;
        while (cap < n)
            cap *= 2;
        uint8_t *p = realloc(st->held, cap);
        if (p == NULL)
            return -1;
        st->held = p;
        st->held_cap = cap;
    }
    memcpy(st->held + from_held, f->buf + (f->len - (n - from_held)),
           n - from_held);
    st->held_len = n;
    return 0;
}

enum lm_status lm_strip_feed(struct lm_strip *st, const void *buf, size_t len,
                             size_t *consumed)
{
    struct fed f = {st->held, buf, st->written, st->held_len, len};
    size_t used = 0;
    enum lm_status rc;

    if (consumed != NULL)
        *consumed = 0;
    if (st->failed)
        return LM_ERROR;
    rc = lm_decoder_feed(&st->dec, buf, len, &used);
    if (consumed != NULL)
        *consumed = used;
    if (rc == LM_ERROR || st->failed)
        return LM_ERROR;
    /* Every item before the decoder's offset is whole, its edits noted;
     * bytes after the epilogue are the caller's. */
    f.len = used;
    if (write_upto(st, &f, st->dec.offset) != 0)
        return LM_ERROR;
    if (rc == LM_NEED_MORE && hold_rest(st, &f, st->dec.offset) != 0) {
        st->failed = 1;
        return LM_ERROR;
    }
    if (rc == LM_DONE)
        st->held_len = 0;
    return rc;
}

enum lm_status lm_strip_finish(struct lm_strip *st)
{
    return lm_decoder_finish(&st->dec);
}
