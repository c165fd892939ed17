/* Live heap map: block address -> (size, allocation site), compact. */
#ifndef LM_HEAPMAP_H
#define LM_HEAPMAP_H

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lm_hash.h"

/*
 * Open addressing in groups of 8 slots, after Abseil's SwissTable: a
 * control byte per slot (empty, or 7 bits of the hash) lets one compare
 * test a whole group (see lm_heap_match_tag), so a look-up touches one
 * control word and, nearly always, one slot.  Slots are 16 bytes
 * (key, size, location), 17 and an eighth with the group's control word
 * (see LM_HEAP_CTRL_STRIDE).  Groups are
 * probed linearly.  A block's key is its address's hash, which is a
 * bijection (see lm_heap_hash): equal keys are equal addresses, so the
 * map never needs the address itself, and an operation handed between
 * threads carries the key alone.
 *
 * Each group also counts the blocks that hash to it but live in a later
 * group, because it was full when they came (after folly's F14): a
 * look-up stops at the first group whose count is zero, so a block that
 * is not there -- every new allocation -- is nearly always known absent
 * after one group, and a deletion just empties its slot and lowers the
 * counts along its probe.  No deleted marks, so no purges.  A count that
 * reaches 255 stays there until the shard grows (exact, only slower).
 *
 * The map is split into shards by the top bits of the hash; a shard grows
 * by a quarter when 3/4 of it is live, so memory stays between 19 and 28
 * bytes per live block.  A shard grows in place, in address space
 * reserved ahead (see lm_heapmap.c's grow): no second table, so no RSS
 * spike when the heap doubles.  Address 0 is never stored: a failed
 * allocation (address 0) makes no block.
 */

#define LM_HEAP_MAX_SIZE   UINT32_MAX
#define LM_HEAP_SHARD_BITS 6
#define LM_HEAP_SHARDS     (1U << LM_HEAP_SHARD_BITS)
#define LM_HEAP_GROUP      8

struct lm_heap_slot {
    uint64_t key; /* lm_heap_hash() of the block's address */
    uint32_t size;
    uint32_t loc;
};

/*
 * A group's control word: its 8 control bytes, then the count of blocks
 * that overflowed it, in 9 bytes.  A probe reads both, and an insertion
 * (nearly always a block that is not there) stops at the count: kept in
 * a table of their own, the counts were one more cache miss per new
 * block, and one more page.
 */
#define LM_HEAP_CTRL_STRIDE (LM_HEAP_GROUP + 1)

/* A shard's table: its slots, then their control words. */
struct lm_heap_shard {
    uint8_t *ctrl;              /* cap / 8 control words */
    struct lm_heap_slot *slots; /* cap slots; the table */
    uint32_t cap;               /* a multiple of LM_HEAP_GROUP */
    uint32_t count, limit;
    uint32_t room; /* the table's room, in 64-byte lines */
};

struct lm_heapmap {
    struct lm_heap_shard shard[LM_HEAP_SHARDS];
    uint64_t seed;
    uint64_t count;
    uint8_t *scratch; /* for growing shards (see lm_heapmap.c) */
    size_t scratch_cap;
    /* Tables are mapped pages from the first, not malloc's while small:
     * a part's (see lm_state_join), whose thread's malloc arena would
     * keep the holes they leave. */
    uint8_t pages_first;
};

/* A block as stored: its size and allocation site. */
struct lm_block {
    uint32_t size;
    uint32_t loc;
};

/*
 * A block's key: an odd multiplier, whose high half, folded onto the low,
 * makes the home depend on every bit of the address.  Both steps are
 * invertible, so distinct addresses never share a key; three instructions
 * against lm_mix64's nine, on one or two addresses an event.
 */
#define LM_HEAP_MUL     0x9e3779b97f4a7c15ULL
#define LM_HEAP_MUL_INV 0xf1de83e19937733dULL /* its inverse mod 2^64 */

static inline uint64_t lm_heap_hash(const struct lm_heapmap *m, uint64_t addr)
{
    uint64_t x = (addr ^ m->seed) * LM_HEAP_MUL;

    return x ^ x >> 32;
}

/* The address whose key is h (x ^ x >> 32 is its own inverse). */
static inline uint64_t lm_heap_addr(const struct lm_heapmap *m, uint64_t h)
{
    return (h ^ h >> 32) * LM_HEAP_MUL_INV ^ m->seed;
}

static inline struct lm_heap_shard *lm_heap_shard_of(struct lm_heapmap *m,
                                                     uint64_t h)
{
    return &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
}

/* The first slot of the group where the probe for hash h starts: the low
 * 32 bits of the hash scaled to the groups (the shard takes the top bits,
 * the control byte bits 50 to 56). */
static inline uint32_t lm_heap_home(const struct lm_heap_shard *s, uint64_t h)
{
    uint64_t groups = s->cap / LM_HEAP_GROUP;
    return (uint32_t)(((h & 0xffffffffu) * groups) >> 32) * LM_HEAP_GROUP;
}

/* The control word of the group that starts at slot i. */
static inline uint8_t *lm_heap_ctrl_group(const struct lm_heap_shard *s,
                                          uint32_t i)
{
    return s->ctrl + (size_t)(i / LM_HEAP_GROUP) * LM_HEAP_CTRL_STRIDE;
}

/* The control byte of slot j. */
static inline uint8_t *lm_heap_ctrl_of(const struct lm_heap_shard *s,
                                       uint32_t j)
{
    return lm_heap_ctrl_group(s, j) + j % LM_HEAP_GROUP;
}

/* The overflow count of the group that starts at slot i. */
static inline uint8_t *lm_heap_over_of(const struct lm_heap_shard *s,
                                       uint32_t i)
{
    return lm_heap_ctrl_group(s, i) + LM_HEAP_GROUP;
}

/*
 * Brings the block's control word and the slots of its home group (two
 * lines of a page-aligned table, and the control word's one or, for one
 * group in eight, two) towards the cache ahead of its use: nearly every
 * look-up and insertion ends in the home group, so the slot's miss
 * overlaps the control word's instead of following it.  Always inlined:
 * GCC deems a function whose only effect is a prefetch "const" and
 * deletes calls to it.
 */
static inline __attribute__((always_inline)) void
lm_heap_prefetch(struct lm_heapmap *m, uint64_t h)
{
    const struct lm_heap_shard *s = lm_heap_shard_of(m, h);

    if (s->cap != 0) {
        uint32_t i = lm_heap_home(s, h);
        const char *slots = (const char *)&s->slots[i];
        const uint8_t *ctrl = lm_heap_ctrl_group(s, i);
        /* One line, or two for one group in eight. */
        __builtin_prefetch(ctrl);
        __builtin_prefetch(ctrl + LM_HEAP_GROUP);
        __builtin_prefetch(slots);
        __builtin_prefetch(slots + LM_HEAP_GROUP * sizeof(*s->slots) - 1);
    }
}

/* seed varies the hash; any value works. */
void lm_heap_init(struct lm_heapmap *m, uint64_t seed);
void lm_heap_free(struct lm_heapmap *m);

/* -- The hot path, inlined into the callers; growth is in lm_heapmap.c. */

/* The control byte of an empty slot; full ones hold a 7-bit tag. */
#define LM_HEAP_EMPTY 0x80
/* An overflow count too high to keep exactly. */
#define LM_HEAP_OVER_STUCK 255

/*
 * A group's control bytes are matched all at once, into a mask with bit k
 * set for slot k: with SSE2, a byte compare and its sign bits (what
 * SwissTable does with 16-slot groups); elsewhere, the same in a 64-bit
 * word, the bytes' top bits then gathered by a multiply.
 */
#ifdef __SSE2__
typedef __m128i lm_heap_group_t;

static inline lm_heap_group_t lm_heap_group(const uint8_t *ctrl)
{
    return _mm_loadl_epi64((const __m128i *)(const void *)ctrl);
}

/* The tag is spread over the low 8 bytes by a multiply, not by
 * _mm_set1_epi8: GCC spills that one's byte and reloads it as a dword,
 * a store that cannot forward to the load, which would make every probe
 * wait for the store to reach the cache. */
static inline uint32_t lm_heap_match_tag(lm_heap_group_t g, uint8_t tag)
{
    __m128i tags = _mm_cvtsi64_si128((long long)(0x0101010101010101ULL * tag));

    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(g, tags)) & 0xff;
}

/* Empty bytes are the only ones with the top bit set. */
static inline uint32_t lm_heap_match_empty(lm_heap_group_t g)
{
    return (uint32_t)_mm_movemask_epi8(g) & 0xff;
}
#else
typedef uint64_t lm_heap_group_t;

#define LM_HEAP_LSBS 0x0101010101010101ULL
#define LM_HEAP_MSBS 0x8080808080808080ULL

/* Byte k in bits 8k..8k+7. */
static inline lm_heap_group_t lm_heap_group(const uint8_t *ctrl)
{
    uint64_t g;

    memcpy(&g, ctrl, sizeof(g));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    g = __builtin_bswap64(g);
#endif
    return g;
}

/* Bit 8k+7 of m, for each k, into bit k. */
static inline uint32_t lm_heap_gather(uint64_t m)
{
    return (uint32_t)(((m >> 7) * 0x0102040810204080ULL) >> 56);
}

static inline uint32_t lm_heap_match_tag(lm_heap_group_t g, uint8_t tag)
{
    uint64_t x = g ^ (LM_HEAP_LSBS * tag);
    return lm_heap_gather(
        ~(((x & ~LM_HEAP_MSBS) + ~LM_HEAP_MSBS) | x | ~LM_HEAP_MSBS));
}

static inline uint32_t lm_heap_match_empty(lm_heap_group_t g)
{
    return lm_heap_gather(g & LM_HEAP_MSBS);
}
#endif

static inline uint32_t lm_heap_first(uint32_t mask)
{
    return (uint32_t)__builtin_ctz(mask);
}

/* Seven bits of the hash for the control byte (not the shard's bits). */
static inline uint8_t lm_heap_tag(uint64_t h)
{
    return (uint8_t)((h >> 50) & 0x7f);
}

static inline uint32_t lm_heap_next_group(const struct lm_heap_shard *s,
                                          uint32_t i)
{
    i += LM_HEAP_GROUP;
    return i == s->cap ? 0 : i;
}

/*
 * The probe: index of the slot holding key, or UINT32_MAX; with
 * free_at, also the first empty slot of the home group, where a new
 * block would go (UINT32_MAX if the group is full), so that a put probes
 * once, not twice.  Inlined with free_at constant, so a plain look-up
 * pays nothing for it.
 */
static inline __attribute__((always_inline)) uint32_t
lm_heap_probe(const struct lm_heap_shard *s, uint32_t home, uint8_t tag,
              uint64_t key, uint32_t *free_at)
{
    uint32_t i = home;

    if (free_at != NULL) {
        uint32_t free =
            lm_heap_match_empty(lm_heap_group(lm_heap_ctrl_group(s, i)));
        *free_at = free != 0 ? i + lm_heap_first(free) : UINT32_MAX;
    }
    for (uint32_t probed = 0; probed < s->cap; probed += LM_HEAP_GROUP) {
        lm_heap_group_t g = lm_heap_group(lm_heap_ctrl_group(s, i));
        for (uint32_t m = lm_heap_match_tag(g, tag); m != 0; m &= m - 1) {
            uint32_t j = i + lm_heap_first(m);
            if (s->slots[j].key == key)
                return j;
        }
        if (*lm_heap_over_of(s, i) == 0)
            break;
        i = lm_heap_next_group(s, i);
    }
    return UINT32_MAX;
}

/* Fills slot j with a block whose hash is h.  Field by field from
 * registers: a slot built on the stack and copied whole is read back by
 * one 16-byte load that its three stores cannot forward to. */
static inline void lm_heap_place(struct lm_heap_shard *s, uint32_t j,
                                 uint64_t h, struct lm_block blk)
{
    *lm_heap_ctrl_of(s, j) = lm_heap_tag(h);
    s->slots[j].key = h;
    s->slots[j].size = blk.size;
    s->slots[j].loc = blk.loc;
    s->count++;
}

/* A block homed at home went past the groups from home up to (not
 * including) the group of slot last, or came back from them. */
void lm_heap_count_overflow(struct lm_heap_shard *s, uint32_t home,
                            uint32_t last, int delta);

/* Inserts an absent block when its home group is full or the shard must
 * grow first: 0, or -1 when out of memory. */
int lm_heap_insert_slow(struct lm_heapmap *m, struct lm_heap_shard *s,
                        uint64_t h, struct lm_block blk);

/*
 * Stores a block whose key is h = lm_heap_hash(m, addr) (addr non-zero).
 * Returns 1 if a block was already recorded there (returned in *old,
 * replaced), 0 if not, -1 when out of memory.
 */
static inline __attribute__((always_inline)) int
lm_heap_put_hashed(struct lm_heapmap *m, uint64_t h, struct lm_block blk,
                   struct lm_block *old)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    uint32_t free_at = UINT32_MAX;

    if (s->cap != 0) {
        uint32_t j =
            lm_heap_probe(s, lm_heap_home(s, h), lm_heap_tag(h), h, &free_at);
        if (j != UINT32_MAX) {
            old->size = s->slots[j].size;
            old->loc = s->slots[j].loc;
            s->slots[j].size = blk.size;
            s->slots[j].loc = blk.loc;
            return 1;
        }
    }
    if (free_at == UINT32_MAX || s->count >= s->limit)
        return lm_heap_insert_slow(m, s, h, blk);
    lm_heap_place(s, free_at, h, blk); /* the home group had room */
    m->count++;
    return 0;
}

/*
 * Removes a block: 1 and the block in *blk if it was there, else 0.  hint
 * is the slot where lm_heap_peek_hashed() saw it (checked, so it may be
 * stale), or UINT32_MAX.
 */
static inline __attribute__((always_inline)) int
lm_heap_take_hashed(struct lm_heapmap *m, uint64_t h, uint32_t hint,
                    struct lm_block *blk)
{
    struct lm_heap_shard *s = lm_heap_shard_of(m, h);
    uint32_t j = hint;

    if (s->cap == 0)
        return 0;
    uint32_t home = lm_heap_home(s, h);
    /* Keys are unique: a full slot holding h is the block's. */
    if (j >= s->cap || *lm_heap_ctrl_of(s, j) >= LM_HEAP_EMPTY ||
        s->slots[j].key != h)
        j = lm_heap_probe(s, home, lm_heap_tag(h), h, NULL);
    if (j == UINT32_MAX)
        return 0;
    blk->size = s->slots[j].size;
    blk->loc = s->slots[j].loc;
    *lm_heap_ctrl_of(s, j) = LM_HEAP_EMPTY;
    if (j - home >= LM_HEAP_GROUP) /* it had overflowed its home group */
        lm_heap_count_overflow(s, home, j, -1);
    s->count--;
    m->count--;
    return 1;
}

/* Looks a block up without removing it: 1, *blk and its slot in *where if
 * it is there. */
static inline int lm_heap_peek_hashed(const struct lm_heapmap *m, uint64_t h,
                                      struct lm_block *blk, uint32_t *where)
{
    const struct lm_heap_shard *s = &m->shard[h >> (64 - LM_HEAP_SHARD_BITS)];
    uint32_t j;

    if (s->cap == 0)
        return 0;
    j = lm_heap_probe(s, lm_heap_home(s, h), lm_heap_tag(h), h, NULL);
    if (j == UINT32_MAX)
        return 0;
    blk->size = s->slots[j].size;
    blk->loc = s->slots[j].loc;
    *where = j;
    return 1;
}

/* The same, hashing addr here. */
static inline int lm_heap_put(struct lm_heapmap *m, uint64_t addr,
                              struct lm_block blk, struct lm_block *old)
{
    return lm_heap_put_hashed(m, lm_heap_hash(m, addr), blk, old);
}

static inline int lm_heap_take(struct lm_heapmap *m, uint64_t addr,
                               struct lm_block *blk)
{
    return lm_heap_take_hashed(m, lm_heap_hash(m, addr), UINT32_MAX, blk);
}

/* Bytes held by the map's tables. */
uint64_t lm_heap_memory(const struct lm_heapmap *m);

#endif
