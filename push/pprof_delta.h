/* Successive pprof exports of one session turned into interval profiles:
 * allocations since the last push, live values as they are. */
#ifndef LJMP_PPROF_DELTA_H
#define LJMP_PPROF_DELTA_H

#include <stddef.h>
#include <stdint.h>

/* What was allocated at each sample (by its place and labels) when the
 * last profile was taken. */
struct pprof_delta;

struct pprof_delta *pprof_delta_new(void);
void pprof_delta_free(struct pprof_delta *d);

/*
 * Reads gz[0..len), a gzipped pprof profile of cumulative values as
 * `ljmpctl export` writes it, and makes *out (malloc'd, *out_len bytes,
 * gzipped) the same profile with alloc_objects and alloc_space as the
 * change since the previous profile given to d (the first: since the
 * start), and inuse_* unchanged.  0, or -1 for a profile that is not
 * one (left unchanged in d).
 */
int pprof_delta_next(struct pprof_delta *d, const uint8_t *gz, size_t len,
                     uint8_t **out, size_t *out_len);

/* Bytes d holds. */
size_t pprof_delta_memory(const struct pprof_delta *d);

#endif
