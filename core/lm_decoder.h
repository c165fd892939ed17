/* Resumable, I/O-free decoder of memprof streams (R1, R2, R3-seed, R3). */
#ifndef LM_DECODER_H
#define LM_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "lm_format.h"

/*
 * The decoder takes a stream in chunks of any size and hands whole records,
 * in batches, to a sink.  It never reads past the bytes it is given and keeps
 * no pointer into them between calls: an item cut by a chunk boundary is
 * copied into a small internal buffer whose size is bounded by the limits.
 * Records (and the strings they point to) are valid only during the sink
 * call.
 */

enum lm_record_kind {
    /* addr, str = chunk name, line = first line; traceno = the trace a
     * stand-in stands for (docs/format.md, "Trace context"), 0 for a
     * prototype */
    LM_REC_SYM_LFUNC,
    LM_REC_SYM_CFUNC,    /* addr, str = name */
    LM_REC_SYM_TRACE,    /* traceno, trace_addr (R2/R3-seed), addr, line */
    LM_REC_SYMTAB_END,   /* the end of the symbol table at start */
    LM_REC_EVENTS_BEGIN, /* the events prologue: revision is known */
    LM_REC_ALLOC,        /* loc, naddr, nsize */
    LM_REC_FREE,         /* loc, oaddr, osize */
    LM_REC_REALLOC,      /* loc, oaddr, osize, naddr, nsize */
    /* A trace marker: counted, never handed to the sink (the decoder
     * keeps its trace, struct lm_decoder's trace). */
    LM_REC_TRACE_MARK,
    /* The symbol that makes the next prototype symbol a stand-in:
     * counted, never handed to the sink (the decoder gives its trace to
     * that symbol, struct lm_decoder's standin). */
    LM_REC_STANDIN,
    LM_REC_END, /* the epilogue */
};

/*
 * Where an event says it allocated: a source and two words, named by the
 * source.  A trace's number and machine code share the words of a Lua
 * location's prototype and line, so that a key is compared and hashed as
 * two words whatever its source.  A Lua location also carries the trace
 * in effect when it was written (docs/format.md, "Trace context"): the
 * trace whose compiled code allocated there, 0 for none (in the
 * structure's padding: a record stays as small).
 */
struct lm_loc_ref {
    uint8_t source; /* enum lm_source */
    uint32_t trace; /* Lua: the trace in effect, else 0 */
    union {
        uint64_t addr;    /* proto (Lua) or function (C) address */
        uint64_t traceno; /* trace */
    };
    union {
        uint64_t line;       /* Lua: line of the allocating instruction */
        uint64_t trace_addr; /* trace's machine code (R2, R3-seed only) */
    };
};

/*
 * A record's fields by kind.  An event's blocks and a symbol's fields
 * share their words: the fast path writes a record per event, and 32
 * bytes it need not zero make a batch of records lighter on the cache.
 */
struct lm_record {
    uint8_t kind;      /* enum lm_record_kind */
    uint8_t in_events; /* symbol announced by an event-symtab */
    uint8_t revision;  /* LM_REC_EVENTS_BEGIN: enum lm_revision */
    uint64_t offset;   /* stream offset of the record's first byte */
    union {
        struct { /* alloc, free, realloc */
            struct lm_loc_ref loc;
            uint64_t oaddr, osize, naddr, nsize;
        };
        struct { /* symbols */
            uint64_t addr, line, traceno, trace_addr;
            const char *str;
            size_t str_len;
        };
    };
};

/*
 * The sink consumes a batch of records in stream order.  A non-zero return
 * stops decoding: the decoder reports an error at the offset of record
 * *failed_at, with the message the sink wrote into errbuf.
 */
typedef int (*lm_sink_fn)(void *ctx, const struct lm_record *recs, size_t n,
                          size_t *failed_at, char *errbuf, size_t errlen);

enum lm_status {
    LM_NEED_MORE = 0, /* all input consumed, the stream goes on */
    LM_DONE = 1,      /* epilogue read: the stream is complete */
    LM_ERROR = -1,    /* malformed input or a limit hit; see errmsg */
};

struct lm_limits {
    size_t max_string;   /* longest chunk or symbol name accepted */
    size_t max_buffered; /* largest item (kept whole when a chunk cuts it) */
};

#define LM_DEFAULT_MAX_STRING   (1u << 20)
#define LM_MAX_STRING_LIMIT     (1u << 30) /* larger limits are lowered */
#define LM_DEFAULT_MAX_BUFFERED ((1u << 20) + 64)
#define LM_BATCH                256

enum lm_phase {
    LM_PH_SYMTAB_PROLOGUE,
    LM_PH_SYMTAB,
    LM_PH_EVENTS_PROLOGUE,
    LM_PH_EVENTS,
    LM_PH_DONE,
    LM_PH_ERROR,
};

struct lm_decoder {
    enum lm_phase phase;
    uint8_t ljs_version, ljm_version;
    uint8_t use_wide; /* the fast path with AVX2 and BMI2 (x86-64) */
    enum lm_revision revision;
    struct lm_limits limits;
    uint64_t offset; /* stream offset of the first byte not yet consumed */
    uint64_t nrecords[LM_REC_END + 1];
    /* The trace in effect for Lua located events: the last trace
     * marker's (docs/format.md, "Trace context"), 0 before any. */
    uint32_t trace;
    /* The trace of a stand-in symbol read, for the prototype symbol
     * after it (LM_REC_SYM_LFUNC's traceno), 0 if none is due. */
    uint32_t standin;
    /* Per event header byte: kind << 8 | location words << 4 | source
     * for an alloc, free or realloc the fast path decodes, 0 for anything
     * else. */
    uint16_t fast_header[256];
    /* An item cut by a chunk boundary. */
    uint8_t *pend;
    size_t pend_len, pend_cap, pend_need;
    /* Records waiting for the sink. */
    struct lm_record batch[LM_BATCH];
    size_t nbatch;
    lm_sink_fn sink;
    void *sink_ctx;
    /* The first error, sticky. */
    uint64_t err_offset;
    char errmsg[192];
};

/* limits may be NULL for the defaults. */
void lm_decoder_init(struct lm_decoder *d, const struct lm_limits *limits,
                     lm_sink_fn sink, void *sink_ctx);
void lm_decoder_free(struct lm_decoder *d);

/*
 * Feeds len bytes.  *consumed (may be NULL) tells how many were taken: all
 * of them for LM_NEED_MORE, up to and including the epilogue for LM_DONE
 * (the caller owns what follows, e.g. a transport trailer), and up to the
 * bad item for LM_ERROR.  Feeding after LM_DONE is an error ("bytes after
 * the epilogue"); after LM_ERROR it returns LM_ERROR again.
 */
enum lm_status lm_decoder_feed(struct lm_decoder *d, const void *buf,
                               size_t len, size_t *consumed);

/*
 * Says how the stream ended once the input is exhausted: LM_DONE for a
 * complete stream, LM_ERROR for malformed input, LM_NEED_MORE for a
 * truncated one, with a description of where and why in errmsg.
 */
enum lm_status lm_decoder_finish(struct lm_decoder *d);

#endif
