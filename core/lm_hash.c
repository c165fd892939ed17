/* Byte hashing, growable arrays and page-backed table memory. */
#include "lm_hash.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { TABLE_MMAP_MIN = 4 * 1024 };

uint64_t lm_hash_bytes(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0x243f6a8885a308d3ULL ^ len;

    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = lm_mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, len);
    return lm_mix64(h ^ w ^ ((uint64_t)len << 56));
}

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

void *lm_table_alloc(size_t size)
{
    if (size < TABLE_MMAP_MIN) {
        /* Cache-line aligned, as mapped pages are. */
        size_t rounded = (size + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, rounded);
        if (p != NULL)
            memset(p, 0, rounded);
        return p;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void lm_table_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (size < TABLE_MMAP_MIN)
        free(p);
    else
        munmap(p, size);
}
