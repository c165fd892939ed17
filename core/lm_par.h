/* Applies a stream's records on two threads: one reads, both apply. */
#ifndef LM_PAR_H
#define LM_PAR_H

#include <stddef.h>
#include <stdint.h>

#include "lm_state.h"

/*
 * A big profile is bound by cache misses in its heap map, and a report
 * has a second core idle.  The caller's thread resolves every event's
 * location and counts the event there (symbols and locations must be
 * seen in stream order), and hands the event's heap operations to a
 * worker thread in batches; the worker applies them to a part of the
 * state of its own (see lm_state_split): blocks, their owners' live
 * counts, overrides.  lm_par_finish() merges the part back, and the
 * state is then the one lm_state_apply() would have built.
 *
 * By default the worker holds every block.  lm_par_set_share() can keep
 * a share of block addresses on the caller's side; then the peak of live
 * blocks is sampled at each hand-over (every few thousand operations)
 * rather than after each event: a lower bound, no further below the
 * true peak than the heap grows between two hand-overs.
 *
 * The worker keeps its own counters for the locations that own its
 * blocks (records of 192 bytes, in zeroed table memory of which only
 * the pages it uses become resident): up to twice the location memory
 * of one thread.
 */
struct lm_par;

/* Starts the worker for s, a state nothing was applied to yet (blocks
 * already live would be looked for on the wrong side); NULL when that is
 * not so, when out of memory or without a thread. */
struct lm_par *lm_par_new(struct lm_state *s);

/* The worker's share of block addresses, in 65536ths (tests use 0 and
 * 65536 to give all blocks to one side): 0, or -1 once records came. */
int lm_par_set_share(struct lm_par *p, uint32_t share);

/* Applies records in stream order: an lm_sink_fn, with an lm_par as its
 * context. */
int lm_par_apply(void *par, const struct lm_record *recs, size_t n,
                 size_t *failed_at, char *errbuf, size_t errlen);

/*
 * Waits for the worker and merges its part into the state (also after
 * an error in lm_par_apply: the state then holds the records before it,
 * unless memory ran out).  0, or -1 with a message in errbuf when out of
 * memory.
 */
int lm_par_finish(struct lm_par *p, char *errbuf, size_t errlen);

/* Finishes if needed, and frees. */
void lm_par_free(struct lm_par *p);

#endif
