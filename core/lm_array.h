/* Growable arrays: room for one more element, the capacity doubling. */
#ifndef LM_ARRAY_H
#define LM_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/*
 * Makes room in a growable array for element n (the capacity doubles
 * until it holds n); -1 when out of memory.  Use LM_RESERVE(array, cap,
 * n).
 */
int lm_reserve(void **arr, uint32_t *cap, uint32_t n, size_t elem);

#define LM_RESERVE(arr, cap, n)                                                \
    lm_reserve((void **)&(arr), &(cap), (n), sizeof(*(arr)))

#endif
