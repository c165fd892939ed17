/* Strips an R3S stream of its call stacks: the R3 stream of the same events. */
#ifndef LM_STRIP_H
#define LM_STRIP_H

#include <stddef.h>
#include <stdint.h>

#include "lm_decoder.h"

/*
 * A streaming filter (docs/format.md, "Stripping"): bytes in, in chunks of
 * any size, the stream without its stacks out, byte for byte what it was
 * but for the events prologue's version and reserved bytes, the stack
 * symbols dropped, bit S cleared and the stack ids after it dropped.  A
 * stream of another revision passes unchanged.  The filter decodes the
 * stream to find its items (a decoder of its own, whose records may go on
 * to another sink as well): what it writes ends with the last whole item
 * fed, so that a stream that ends early leaves a stream cut between
 * items; a malformed one stops the filter where a feed found it.
 */

/* Writes len bytes; 0, or -1 to stop the filter. */
typedef int (*lm_write_fn)(void *ctx, const void *buf, size_t len);

/* A change the records ask of the bytes (see lm_strip.c). */
struct lm_strip_edit {
    uint64_t offset; /* the item's first byte in the stream */
    uint64_t arg;    /* a dropped item's size, an event's stack_at */
    uint8_t kind;
};

struct lm_strip {
    struct lm_decoder dec;
    lm_write_fn write;
    void *write_ctx;
    lm_sink_fn next; /* the records go on here too, if set */
    void *next_ctx;
    /* Bytes fed that belong to an item not yet whole: from the stream
     * offset `written`, up to which everything is written. */
    uint8_t *held;
    size_t held_len, held_cap;
    uint64_t written;
    struct lm_strip_edit *edits; /* for the bytes not yet written */
    uint32_t nedits, edits_cap;
    uint64_t dropped; /* bytes left out */
    int failed;       /* a write failed, or memory ran out */
};

/* limits: as the decoder's (NULL for the defaults). */
void lm_strip_init(struct lm_strip *st, const struct lm_limits *limits,
                   lm_write_fn write, void *write_ctx);

/* Hands the decoded records to sink as well (before the first feed). */
void lm_strip_chain(struct lm_strip *st, lm_sink_fn sink, void *ctx);

/*
 * Feeds len bytes, writing the stripped stream up to the last whole item:
 * the decoder's status (lm_decoder_feed, *consumed as it says).
 * LM_ERROR for a malformed stream (st->dec says where), or when a write
 * failed or memory ran out (st->failed).
 */
enum lm_status lm_strip_feed(struct lm_strip *st, const void *buf, size_t len,
                             size_t *consumed);

/* How the stream ended, once the input is exhausted (lm_decoder_finish). */
enum lm_status lm_strip_finish(struct lm_strip *st);

void lm_strip_free(struct lm_strip *st);

#endif
