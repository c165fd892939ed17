/* Hashing of byte strings (names, chunk sources). */
#include "lm_hash.h"

#include <string.h>

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
