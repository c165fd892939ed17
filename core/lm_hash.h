/* Hash mixing and the memory helpers shared by the core's containers. */
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

/*
 * Makes room in a growable array for element n (the capacity doubles
 * until it holds n); -1 when out of memory.  Use LM_RESERVE(array, cap,
 * n).
 */
int lm_reserve(void **arr, uint32_t *cap, uint32_t n, size_t elem);

#define LM_RESERVE(arr, cap, n)                                                \
    lm_reserve((void **)&(arr), &(cap), (n), sizeof(*(arr)))

/*
 * Zeroed memory for a table, aligned to 128 bytes (a pair of cache
 * lines).  Large tables are mapped directly so that freeing one returns
 * its pages to the system at once:
 * the heap map's memory bound is measured as resident size, and malloc's
 * dynamic mmap threshold would otherwise keep retired tables resident.
 */
void *lm_table_alloc(size_t size);
void lm_table_free(void *p, size_t size);

/*
 * Grows a table (NULL at first, *room 0) to size bytes or more, keeping
 * its first `used`: the same table, or its pages moved, or a copy, or
 * NULL when out of memory (p unchanged).  *room is what it can hold;
 * lm_table_free(p, *room) frees it.  Small tables come from malloc; from
 * LM_TABLE_GROW_MAPPED bytes a table is mapped pages with
 * address space reserved ahead (resident once touched; under strict
 * overcommit, committed), and moved with its pages when that runs out:
 * growing costs no copy, no page faults for what it held and no
 * unmapping (a TLB shootdown, an interrupt between the CPUs on a
 * virtual machine) but once in several growths.  Bytes never written
 * read zero.
 */
void *lm_table_grow(void *p, size_t *room, size_t used, size_t size);

/* Grown tables under this size come from malloc: as mapped pages, a
 * heap map of a few thousand blocks took 64 pages, one a shard (ljmpd's
 * RSS with 30 small sessions: 641 KiB a session, 798 with tables mapped
 * from 1 KiB). */
#define LM_TABLE_GROW_MAPPED 4096

/* The resident bytes of a grown table whose first `size` are written. */
size_t lm_table_resident(size_t size, size_t room);

#endif
