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
 * state (see lm_state_split): it holds every block and override record,
 * and lowers the live counts of released blocks' owners and writes
 * pending overrides into the caller's heap sides, a table that the caller
 * does not write (the caller counts new blocks in its location records;
 * see struct lm_loc).
 * lm_par_finish() gives the part's blocks and overrides to the state,
 * which is then the one lm_state_apply() would have built.
 */
struct lm_par;

/* The CPUs this process may run on (1 when that cannot be told): two
 * threads pay off only with a second one. */
int lm_par_cpus(void);

/* Starts the worker for s, a state nothing was applied to yet (its
 * blocks would not be the worker's); NULL when that is not so, when out
 * of memory or without a thread. */
struct lm_par *lm_par_new(struct lm_state *s);

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

/* Finishes if needed, ends the worker thread (not at the finish: see
 * lm_par.c), and frees.  Where peak memory counts, free the state first,
 * but only after lm_par_finish(), which merges into it. */
void lm_par_free(struct lm_par *p);

#endif
