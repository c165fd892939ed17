/* Live heap map: sharded SwissTable-style groups of live blocks. */
#include "lm_heapmap.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "lm_table.h"

enum { SHARD_MIN_CAP = 16 };

void lm_heap_count_overflow(struct lm_heap_shard *s, uint32_t home,
                            uint32_t last, int delta)
{
    uint32_t end = last / LM_HEAP_GROUP * LM_HEAP_GROUP;

    for (uint32_t i = home; i != end; i = lm_heap_next_group(s, i)) {
        uint8_t *o = lm_heap_over_of(s, i);
        if (*o != LM_HEAP_OVER_STUCK)
            *o = (uint8_t)(*o + delta);
    }
}

void lm_heap_init(struct lm_heapmap *m, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->seed = seed;
}

static size_t ctrl_bytes(uint32_t cap)
{
    return (size_t)cap / LM_HEAP_GROUP * LM_HEAP_CTRL_STRIDE;
}

/*
 * A shard's slots and control words share one table (the slots first):
 * one allocation, big enough to be mapped pages once the shard holds a
 * few thousand blocks.  Separate control tables would stay small enough
 * for malloc, and those a growing heap left behind would be holes that
 * malloc keeps resident, on top of the peak.  Growing, the new control
 * words lie past the old table's end (see grow).
 */
static size_t table_bytes(uint32_t cap)
{
    return (size_t)cap * sizeof(struct lm_heap_slot) + ctrl_bytes(cap);
}

/* Frees a shard's table and leaves it empty. */
static void shard_release(struct lm_heap_shard *s)
{
    if (s->slots != NULL)
        lm_table_free(s->slots, (size_t)s->room * 64);
    *s = (struct lm_heap_shard){0};
}

void lm_heap_free(struct lm_heapmap *m)
{
    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        shard_release(&m->shard[i]);
    free(m->scratch);
    m->scratch = NULL;
    m->scratch_cap = 0;
    m->count = 0;
}

/* Places an absent block in the first group with room, counting it in
 * the full groups it passes; the shard has room (count < cap). */
static void insert_new(struct lm_heap_shard *s, uint64_t h, struct lm_block blk)
{
    uint32_t home = lm_heap_home(s, h), i = home;

    for (;;) {
        uint32_t free =
            lm_heap_match_empty(lm_heap_group(lm_heap_ctrl_group(s, i)));
        if (free != 0) {
            uint32_t j = i + lm_heap_first(free);
            lm_heap_count_overflow(s, home, j, +1);
            lm_heap_place(s, j, h, blk);
            return;
        }
        i = lm_heap_next_group(s, i);
    }
}

/* The slots of group g that a copy of its control words says are full. */
static uint32_t full_in(const uint8_t *ctrl, uint32_t g)
{
    return ~lm_heap_match_empty(
               lm_heap_group(ctrl + (size_t)g * LM_HEAP_CTRL_STRIDE)) &
           0xff;
}

/* The group where the probe for h starts in a shard of cap slots. */
static uint32_t home_group(uint32_t cap, uint64_t h)
{
    struct lm_heap_shard s = {.cap = cap};

    return lm_heap_home(&s, h) / LM_HEAP_GROUP;
}

/*
 * Where grow()'s pass puts a block of old group g whose new home group
 * is t: the first group from t up with room (fill counts the blocks the
 * pass put in each: it fills a group's slots in order), counted there;
 * or UINT32_MAX if the block must wait until the pass is over, when t
 * lies below g (a group that holds blocks not moved yet) or no group
 * before the end has room.  The counts, not the control words: a
 * control byte just stored cannot be forwarded to a load of its whole
 * word, and the blocks of a group mostly go to the same new group.
 */
static uint32_t pass_target(uint8_t *fill, uint32_t ngroups, uint32_t g,
                            uint32_t t)
{
    if (t < g)
        return UINT32_MAX;
    while (t < ngroups && fill[t] == LM_HEAP_GROUP)
        t++;
    if (t == ngroups)
        return UINT32_MAX;
    fill[t]++;
    return t;
}

/* The blocks grow()'s pass will leave waiting: a dry run of it on the
 * fill counts alone, so that their buffer is there before a block moves. */
static uint32_t count_late(const struct lm_heap_shard *s,
                           const uint8_t *old_ctrl, uint32_t cap, uint8_t *fill)
{
    uint32_t late = 0, ngroups = cap / LM_HEAP_GROUP;

    memset(fill, 0, ngroups);
    for (uint32_t g = s->cap / LM_HEAP_GROUP; g-- > 0;)
        for (uint32_t m = full_in(old_ctrl, g); m != 0; m &= m - 1) {
            uint64_t h = s->slots[g * LM_HEAP_GROUP + lm_heap_first(m)].key;
            late +=
                pass_target(fill, ngroups, g, home_group(cap, h)) == UINT32_MAX;
        }
    return late;
}

/* Makes s's table hold cap slots, all empty, at t. */
static void set_table(struct lm_heap_shard *s, void *t, uint32_t cap)
{
    s->slots = t;
    s->ctrl = (uint8_t *)t + (size_t)cap * sizeof(struct lm_heap_slot);
    s->cap = cap;
    s->count = 0;
    s->limit = cap / 4 * 3;
    for (uint32_t i = 0; i < cap; i += LM_HEAP_GROUP) {
        memset(lm_heap_ctrl_group(s, i), LM_HEAP_EMPTY, LM_HEAP_GROUP);
        *lm_heap_over_of(s, i) = 0;
    }
}

/*
 * Moves the blocks of a shard grown to cap slots from the old layout
 * (old_ctrl: a copy of its control words; the slots where they were) to
 * the new one, in place, from the top group down: a block's new home is
 * at or above its old one (homes scale with the table), so it goes to
 * groups already emptied, or past the old end.  The few that cannot go
 * there yet (see pass_target) wait in late, and are inserted last.
 */
static void move_in_place(struct lm_heap_shard *s, uint32_t old_cap,
                          const uint8_t *old_ctrl, uint8_t *fill,
                          struct lm_heap_slot *late, uint32_t late_cap)
{
    uint32_t nlate = 0, ngroups = s->cap / LM_HEAP_GROUP;

    memset(fill, 0, ngroups);
    for (uint32_t g = old_cap / LM_HEAP_GROUP; g-- > 0;) {
        struct lm_heap_slot moving[LM_HEAP_GROUP];
        uint32_t n = 0;

        for (uint32_t m = full_in(old_ctrl, g); m != 0; m &= m - 1)
            moving[n++] = s->slots[g * LM_HEAP_GROUP + lm_heap_first(m)];
        for (uint32_t k = 0; k < n; k++) {
            uint64_t h = moving[k].key;
            uint32_t t = lm_heap_home(s, h) / LM_HEAP_GROUP;
            uint32_t u = pass_target(fill, ngroups, g, t);
            if (u == UINT32_MAX) {
                assert(nlate < late_cap); /* count_late ran the same pass */
                late[nlate++] = moving[k];
                continue;
            }
            lm_heap_count_overflow(s, t * LM_HEAP_GROUP, u * LM_HEAP_GROUP, +1);
            lm_heap_place(s, u * LM_HEAP_GROUP + fill[u] - 1, h,
                          (struct lm_block){moving[k].size, moving[k].loc});
        }
    }
    for (uint32_t k = 0; k < nlate; k++)
        insert_new(s, late[k].key,
                   (struct lm_block){late[k].size, late[k].loc});
}

/* m's scratch buffer, with room for n bytes: kept from one growth to the
 * next (the largest shard's control words and a little more), so that
 * growing allocates no memory of its own. */
static uint8_t *scratch(struct lm_heapmap *m, size_t n)
{
    if (n > m->scratch_cap) {
        uint8_t *p = realloc(m->scratch, n);
        if (p == NULL)
            return NULL;
        m->scratch = p;
        m->scratch_cap = n;
    }
    return m->scratch;
}

/*
 * Grows a shard of m to cap slots, in place: a table's room is reserved
 * ahead (see lm_table_grow), so that growing costs no page faults for
 * the blocks it holds and no unmapping, and its blocks move within it.
 * A copy into a new table would spend about half its time faulting the
 * new pages in and unmapping the old ones.  Everything that can fail is
 * done before a block moves.  The scratch: the old control words, the
 * fill counts, the late blocks.
 */
static int grow(struct lm_heapmap *m, struct lm_heap_shard *s, uint32_t cap)
{
    size_t old_ctrl_bytes = ctrl_bytes(s->cap), room = (size_t)s->room * 64;
    size_t late_at = (old_ctrl_bytes + cap / LM_HEAP_GROUP + 15) & ~(size_t)15;
    uint32_t old_cap = s->cap, nlate = 0;
    uint8_t *buf = NULL;
    void *t;

    /* The new control words lie past the old table's end. */
    assert((size_t)cap * sizeof(struct lm_heap_slot) >= table_bytes(old_cap));
    if (old_cap != 0) {
        if ((buf = scratch(m, late_at)) == NULL)
            return -1;
        memcpy(buf, s->ctrl, old_ctrl_bytes);
        nlate = count_late(s, buf, cap, buf + old_ctrl_bytes);
        if ((buf = scratch(m, late_at + nlate * sizeof(*s->slots))) == NULL)
            return -1;
    }
    t = lm_table_grow(s->slots, &room, table_bytes(old_cap),
                      m->pages_first && table_bytes(cap) < LM_TABLE_GROW_MAPPED
                          ? LM_TABLE_GROW_MAPPED
                          : table_bytes(cap));
    if (t == NULL)
        return -1;
    s->room = (uint32_t)(room / 64);
    set_table(s, t, cap);
    if (old_cap != 0)
        move_in_place(s, old_cap, buf, buf + old_ctrl_bytes,
                      (struct lm_heap_slot *)(void *)(buf + late_at), nlate);
    return 0;
}

/*
 * Makes room for one more block: grows by a quarter when 3/4 are live,
 * so that the load stays between 0.6 and 0.75 (19 to 28 bytes a block).
 */
static int make_room(struct lm_heapmap *m, struct lm_heap_shard *s)
{
    uint32_t cap = s->cap;

    if (s->count < s->limit)
        return 0;
    if (cap == 0)
        cap = SHARD_MIN_CAP;
    else
        cap =
            (cap + cap / 4 + LM_HEAP_GROUP - 1) / LM_HEAP_GROUP * LM_HEAP_GROUP;
    return grow(m, s, cap);
}

int lm_heap_insert_slow(struct lm_heapmap *m, struct lm_heap_shard *s,
                        uint64_t h, struct lm_block blk)
{
    if (make_room(m, s) != 0)
        return -1;
    insert_new(s, h, blk);
    m->count++;
    return 0;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = m->scratch_cap;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        if (m->shard[i].cap != 0)
            bytes += lm_table_resident(table_bytes(m->shard[i].cap),
                                       (size_t)m->shard[i].room * 64);
    return bytes;
}
