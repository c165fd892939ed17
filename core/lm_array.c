/* Growable arrays: room for one more element, the capacity doubling. */
#include "lm_array.h"

#include <stdlib.h>

int lm_reserve(void **arr, uint32_t *cap, uint32_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 16;
    while (ncap <= n)
        ncap *= 2;
    if (ncap > UINT32_MAX)
        return -1;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = (uint32_t)ncap;
    return 0;
}
