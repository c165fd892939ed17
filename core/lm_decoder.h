/* Resumable, I/O-free decoder of memprof streams (R1, R2, R3-seed, R3, R3S). */
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
    /* Stack symbols (R3S, docs/format.md, "Stacks (R3S)"): a definition
     * (stack = its id, nframes and frames), the configuration (depth,
     * sample_bytes), a reset of every id. */
    LM_REC_STACK_DEF,
    LM_REC_STACK_CONFIG,
    LM_REC_STACK_RESET,
    LM_REC_END, /* the epilogue */
};

/*
 * A frame of a stack definition as the stream says it: a Lua function's
 * prototype and current line, a C function's address (a builtin's number
 * below LM_BUILTIN_ADDR_LIMIT), or a marker (LM_MARK_*).
 */
struct lm_stack_frame {
    uint8_t kind;   /* LM_FRAME_LUA, LM_FRAME_C or LM_FRAME_MARKER */
    uint64_t addr;  /* Lua: the prototype; C: the function; marker: 0 */
    uint64_t value; /* Lua: the line; C: 0; marker: the marker */
};

/* The bytes a stack definition takes at most: its header, kind, id and
 * count, and LM_STACK_MAX_DEPTH + 1 frames of two ULEBs.  An item the
 * decoder may keep whole across chunks, whatever the buffer limit. */
#define LM_STACK_DEF_MAX_BYTES                                                 \
    (2 + 2 * LM_ULEB_MAX_BYTES +                                               \
     (LM_STACK_MAX_DEPTH + 1) * 2 * LM_ULEB_MAX_BYTES)

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
    /* An alloc or realloc that names a stack: where its id starts, in
     * bytes from the record's first, so that a filter can drop it
     * (lm_strip.h); else 0. */
    uint8_t stack_at;
    /* An alloc or realloc: the id of its stack (R3S), 0 for none; a
     * stack definition: the id it defines.  In the header's padding: a
     * record stays as small. */
    uint32_t stack;
    uint64_t offset; /* stream offset of the record's first byte */
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
        struct { /* stack symbols */
            /* A definition's frames, innermost first, in the decoder:
             * valid during the sink call, as a string is. */
            const struct lm_stack_frame *frames;
            uint32_t nframes;
            uint64_t depth, sample_bytes; /* the configuration */
            uint64_t size;                /* the item's bytes */
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
    /* The frames of the stack definition read last: the batch is handed
     * over after each definition, so that one array serves them all. */
    struct lm_stack_frame frames[LM_STACK_MAX_DEPTH + 1];
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
