/* Writes memprof streams of any revision into a growable buffer. */
/* Used by tests, the benchmark generator and recorded files. */
#ifndef LM_ENCODER_H
#define LM_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "lm_decoder.h"

struct lm_buf {
    uint8_t *data;
    size_t len, cap;
    int oom; /* sticky: an append failed */
};

void lm_buf_free(struct lm_buf *b);
void lm_buf_bytes(struct lm_buf *b, const void *p, size_t n);
void lm_buf_byte(struct lm_buf *b, uint8_t v);
void lm_buf_uleb(struct lm_buf *b, uint64_t v);
void lm_buf_string(struct lm_buf *b, const char *s, size_t len);

/* The symbol table. */
void lm_enc_symtab_prologue(struct lm_buf *b, uint8_t ljs_version);
void lm_enc_sym_lfunc(struct lm_buf *b, uint64_t addr, const char *chunk,
                      uint64_t firstline);
void lm_enc_sym_cfunc(struct lm_buf *b, uint64_t addr, const char *name);
void lm_enc_sym_trace(struct lm_buf *b, enum lm_revision rev, uint64_t traceno,
                      uint64_t trace_addr, uint64_t proto, uint64_t line);
/* A stand-in's trace (docs/format.md, "Trace context"): the prototype
 * symbol written next is a stand-in for a prototype on trace traceno. */
void lm_enc_sym_standin(struct lm_buf *b, uint64_t traceno);
void lm_enc_symtab_end(struct lm_buf *b);

/* The symbols a table holds now, as symtab entries of rev: every
 * announced epoch of each prototype (a stand-in's with its trace) and
 * trace and (R3) every C symbol, in arrival order, so that a reader ends
 * with the same current symbols and alias numbers.
 * A reader of them names later events as the table would. */
struct lm_symtab;
void lm_enc_symtab_of(struct lm_buf *b, struct lm_symtab *t,
                      enum lm_revision rev);

/* The events. */
void lm_enc_events_prologue(struct lm_buf *b, uint8_t ljm_version);
void lm_enc_alloc(struct lm_buf *b, enum lm_revision rev,
                  const struct lm_loc_ref *loc, uint64_t naddr, uint64_t nsize);
void lm_enc_free(struct lm_buf *b, enum lm_revision rev,
                 const struct lm_loc_ref *loc, uint64_t oaddr, uint64_t osize);
void lm_enc_realloc(struct lm_buf *b, enum lm_revision rev,
                    const struct lm_loc_ref *loc, uint64_t oaddr,
                    uint64_t osize, uint64_t naddr, uint64_t nsize);
void lm_enc_event_lfunc(struct lm_buf *b, uint64_t addr, const char *chunk,
                        uint64_t firstline);
void lm_enc_event_cfunc(struct lm_buf *b, uint64_t addr, const char *name);
void lm_enc_event_trace(struct lm_buf *b, enum lm_revision rev,
                        uint64_t traceno, uint64_t trace_addr, uint64_t proto,
                        uint64_t line);
/* A trace marker (docs/format.md, "Trace context"): traceno is in effect
 * for the Lua located events that follow (0: none). */
void lm_enc_trace_mark(struct lm_buf *b, uint64_t traceno);
/* The same as lm_enc_sym_standin, as a symbol event. */
void lm_enc_standin(struct lm_buf *b, uint64_t traceno);
void lm_enc_epilogue(struct lm_buf *b);

/*
 * R3S (docs/format.md, "Stacks (R3S)"): an alloc or a realloc that names
 * a stack (bit S, then its id), and the stack symbols: the configuration,
 * a definition (frames innermost first) and a reset.
 */
void lm_enc_alloc_stack(struct lm_buf *b, enum lm_revision rev,
                        const struct lm_loc_ref *loc, uint64_t naddr,
                        uint64_t nsize, uint64_t stack);
void lm_enc_realloc_stack(struct lm_buf *b, enum lm_revision rev,
                          const struct lm_loc_ref *loc, uint64_t oaddr,
                          uint64_t osize, uint64_t naddr, uint64_t nsize,
                          uint64_t stack);
void lm_enc_stack_config(struct lm_buf *b, uint64_t depth,
                         uint64_t sample_bytes);
void lm_enc_stack_def(struct lm_buf *b, uint64_t id,
                      const struct lm_stack_frame *frames, size_t n);
void lm_enc_stack_reset(struct lm_buf *b);

/* Prologues of a whole revision: symtab versions by revision. */
void lm_enc_begin(struct lm_buf *b, enum lm_revision rev);
void lm_enc_begin_events(struct lm_buf *b, enum lm_revision rev);

#endif
