/* Hash mixing: 64-bit words, their combination, and byte strings. */
#ifndef LM_HASH_H
#define LM_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A fast 64-bit mixer (the finaliser of splitmix64). */
static inline uint64_t lm_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* lm_mix64's inverse: each step undone in reverse order. */
static inline uint64_t lm_unmix64(uint64_t x)
{
    x ^= x >> 31 ^ x >> 62;
    x *= 0x319642b2d24d8ec3ULL; /* 0x94d049bb133111eb's inverse mod 2^64 */
    x ^= x >> 27 ^ x >> 54;
    x *= 0x96de1b173f119089ULL; /* 0xbf58476d1ce4e5b9's */
    x ^= x >> 30 ^ x >> 60;
    return x;
}

static inline uint64_t lm_hash_combine(uint64_t h, uint64_t v)
{
    return lm_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t lm_hash_bytes(const void *data, size_t len);

#endif
