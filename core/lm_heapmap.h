/* Live heap map: block address -> (size, allocation site), compact. */
#ifndef LM_HEAPMAP_H
#define LM_HEAPMAP_H

#include <stdint.h>

#include "lm_hash.h"

/*
 * Robin Hood open addressing, 16 bytes a slot: the address, the size, and
 * the location and the slot's distance from its home packed in one word.
 * The stored distance makes look-ups of absent blocks stop early and lets
 * deletion shift the run back without rehashing a single key.  The map is
 * split into shards by the top bits of the hash; a shard grows by half
 * when 80% full, so memory stays between 20 and 30 bytes per live block and
 * a resize never holds more than one shard's two tables at once (no RSS
 * spike when the heap doubles).  A run longer than a distance byte can say
 * (which takes addresses crafted against the hash) re-spreads the shard
 * with a new salt.  Address 0 marks an empty slot: a failed
 * allocation (address 0) is never stored.
 */

#define LM_HEAP_MAX_SIZE   UINT32_MAX
#define LM_HEAP_LOC_BITS   24
#define LM_HEAP_MAX_LOC    ((1U << LM_HEAP_LOC_BITS) - 1)
#define LM_HEAP_MAX_DIST   255
#define LM_HEAP_SHARD_BITS 6
#define LM_HEAP_SHARDS     (1U << LM_HEAP_SHARD_BITS)

struct lm_heap_slot {
    uint64_t addr;
    uint32_t size;
    uint32_t locdist; /* loc << 8 | distance from home */
};

struct lm_heap_shard {
    struct lm_heap_slot *slots;
    uint32_t cap, count, limit;
    uint64_t salt; /* odd; a new one re-spreads a shard after collisions */
};

struct lm_heapmap {
    struct lm_heap_shard shard[LM_HEAP_SHARDS];
    uint64_t seed;
    uint64_t count;
    uint64_t reseeds; /* shards re-spread after a run grew too long */
};

/* A block as stored: its size and allocation site. */
struct lm_block {
    uint32_t size;
    uint32_t loc;
};

static inline uint64_t lm_heap_hash(const struct lm_heapmap *m, uint64_t addr)
{
    return lm_mix64(addr ^ m->seed);
}

static inline struct lm_heap_shard *lm_heap_shard_of(struct lm_heapmap *m,
                                                     uint64_t h)
{
    return &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
}

static inline uint32_t lm_heap_home(const struct lm_heap_shard *s, uint64_t h)
{
    return (uint32_t)((((h * s->salt) >> 32) * s->cap) >> 32);
}

/* Brings the block's slot towards the cache ahead of its use. */
static inline void lm_heap_prefetch(struct lm_heapmap *m, uint64_t h)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);

    if (s->slots != NULL)
        __builtin_prefetch(&s->slots[lm_heap_home(s, h)], 1);
}

/* seed varies the hash; any value works. */
void lm_heap_init(struct lm_heapmap *m, uint64_t seed);
void lm_heap_free(struct lm_heapmap *m);

/*
 * Stores a block at addr (non-zero).  Returns 1 if a block was already
 * recorded there (returned in *old, replaced), 0 if not, -1 when out of
 * memory.
 */
int lm_heap_put_hashed(struct lm_heapmap *m, uint64_t hash, uint64_t addr,
                       struct lm_block blk, struct lm_block *old);

/* Removes a block: 1 and the block in *blk if it was there, else 0. */
int lm_heap_take_hashed(struct lm_heapmap *m, uint64_t hash, uint64_t addr,
                        struct lm_block *blk);

/* The same, hashing addr here (hash = lm_heap_hash(m, addr)). */
static inline int lm_heap_put(struct lm_heapmap *m, uint64_t addr,
                              struct lm_block blk, struct lm_block *old)
{
    return lm_heap_put_hashed(m, lm_heap_hash(m, addr), addr, blk, old);
}

static inline int lm_heap_take(struct lm_heapmap *m, uint64_t addr,
                               struct lm_block *blk)
{
    return lm_heap_take_hashed(m, lm_heap_hash(m, addr), addr, blk);
}

/* Bytes held by the map's tables. */
uint64_t lm_heap_memory(const struct lm_heapmap *m);

#endif
