/* Live heap map: sharded SwissTable-style groups of live blocks. */
#include "lm_heapmap.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

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
 * few thousand blocks.  Separate control tables stayed small enough for
 * malloc, and the ones a growing heap left behind were holes it never
 * gave back: 3.7 bytes of peak RSS per live block in s20m.bin.  Growing,
 * the new control words lie past the old table's end (see grow).
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
 * The blocks that the in-place pass of grow() cannot place: those whose
 * new home group lies below their old group (which holds blocks not
 * moved yet), or whose search for room would run past the table's end.
 * A dry run of the same pass on fill counts (fill: a byte per new
 * group), so that their buffer is there before anything moves.
 */
static uint32_t count_late(const struct lm_heap_shard *s,
                           const uint8_t *old_ctrl, uint32_t ncap,
                           uint8_t *fill)
{
    uint32_t late = 0, ngroups = ncap / LM_HEAP_GROUP;

    memset(fill, 0, ngroups);
    for (uint32_t g = s->cap / LM_HEAP_GROUP; g-- > 0;)
        for (uint32_t m = full_in(old_ctrl, g); m != 0; m &= m - 1) {
            uint64_t h = s->slots[g * LM_HEAP_GROUP + lm_heap_first(m)].key;
            uint32_t t = home_group(ncap, h);
            if (t < g) {
                late++;
                continue;
            }
            while (t < ngroups && fill[t] == LM_HEAP_GROUP)
                t++;
            if (t == ngroups)
                late++;
            else
                fill[t]++;
        }
    return late;
}

/*
 * The first empty slot from home's group to the table's end, with fill
 * counting the blocks in each group (the pass fills a group's slots in
 * order): the block is counted in the full groups it passes.  UINT32_MAX
 * if there is none.  The counts, not the control words: a control byte
 * just stored cannot be forwarded to a load of its whole word, and the
 * blocks of a group mostly go to the same new group.
 */
static uint32_t room_before_end(struct lm_heap_shard *s, uint32_t home,
                                uint8_t *fill)
{
    uint32_t ngroups = s->cap / LM_HEAP_GROUP, g = home / LM_HEAP_GROUP;

    while (g < ngroups && fill[g] == LM_HEAP_GROUP)
        g++;
    if (g == ngroups)
        return UINT32_MAX;
    for (uint32_t k = home / LM_HEAP_GROUP; k < g; k++) {
        uint8_t *o = lm_heap_over_of(s, k * LM_HEAP_GROUP);
        if (*o != LM_HEAP_OVER_STUCK)
            (*o)++;
    }
    return g * LM_HEAP_GROUP + fill[g]++;
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
 * there yet wait in late, and are inserted last.
 */
static void move_in_place(struct lm_heap_shard *s, uint32_t old_cap,
                          const uint8_t *old_ctrl, uint8_t *fill,
                          struct lm_heap_slot *late, uint32_t late_cap)
{
    uint32_t nlate = 0;

    memset(fill, 0, s->cap / LM_HEAP_GROUP);
    for (uint32_t g = old_cap / LM_HEAP_GROUP; g-- > 0;) {
        struct lm_heap_slot moving[LM_HEAP_GROUP];
        uint32_t n = 0;

        for (uint32_t m = full_in(old_ctrl, g); m != 0; m &= m - 1)
            moving[n++] = s->slots[g * LM_HEAP_GROUP + lm_heap_first(m)];
        for (uint32_t k = 0; k < n; k++) {
            uint64_t h = moving[k].key;
            uint32_t home = lm_heap_home(s, h), j = UINT32_MAX;
            if (home / LM_HEAP_GROUP >= g)
                j = room_before_end(s, home, fill);
            if (j == UINT32_MAX) {
                assert(nlate < late_cap); /* count_late ran the same pass */
                late[nlate++] = moving[k];
            } else
                lm_heap_place(s, j, h,
                              (struct lm_block){moving[k].size, moving[k].loc});
        }
    }
    for (uint32_t k = 0; k < nlate; k++)
        insert_new(s, late[k].key,
                   (struct lm_block){late[k].size, late[k].loc});
}

/*
 * Grows a shard to cap slots, in place: the table's room is reserved
 * ahead (see lm_table_grow), so that growing costs no page faults for
 * the blocks it holds and no unmapping, and its blocks move within it.
 * Copied into a new table, s20m.bin's blocks took 74 ms of the two-thread
 * worker's 700, half of them in page faults and munmap; moved in place,
 * 41 ms.  Everything that can fail is done before a block moves.
 */
static int grow(struct lm_heap_shard *s, uint32_t cap)
{
    size_t old_ctrl_bytes = ctrl_bytes(s->cap), room = (size_t)s->room * 64;
    uint32_t old_cap = s->cap, nlate = 0;
    uint8_t *scratch = NULL; /* the old control words, then fill counts */
    struct lm_heap_slot *late = NULL;
    void *t;

    if (old_cap != 0) {
        scratch = malloc(old_ctrl_bytes + cap / LM_HEAP_GROUP);
        if (scratch == NULL)
            return -1;
        memcpy(scratch, s->ctrl, old_ctrl_bytes);
        nlate = count_late(s, scratch, cap, scratch + old_ctrl_bytes);
        if (nlate != 0 && (late = malloc(nlate * sizeof(*late))) == NULL)
            goto fail;
    }
    t = lm_table_grow(s->slots, &room, table_bytes(cap));
    if (t == NULL)
        goto fail;
    s->room = (uint32_t)(room / 64);
    set_table(s, t, cap);
    if (old_cap != 0)
        move_in_place(s, old_cap, scratch, scratch + old_ctrl_bytes, late,
                      nlate);
    free(scratch);
    free(late);
    return 0;
fail:
    free(scratch);
    free(late);
    return -1;
}

/*
 * Makes room for one more block: grows by a quarter when 3/4 are live,
 * so that the load stays between 0.6 and 0.75 (19 to 28 bytes a block).
 */
static int make_room(struct lm_heap_shard *s)
{
    uint32_t cap = s->cap;

    if (s->count < s->limit)
        return 0;
    if (cap == 0)
        cap = SHARD_MIN_CAP;
    else
        cap =
            (cap + cap / 4 + LM_HEAP_GROUP - 1) / LM_HEAP_GROUP * LM_HEAP_GROUP;
    return grow(s, cap);
}

int lm_heap_insert_slow(struct lm_heapmap *m, struct lm_heap_shard *s,
                        uint64_t h, struct lm_block blk)
{
    if (make_room(s) != 0)
        return -1;
    insert_new(s, h, blk);
    m->count++;
    return 0;
}

uint64_t lm_heap_memory(const struct lm_heapmap *m)
{
    uint64_t bytes = 0;

    for (unsigned int i = 0; i < LM_HEAP_SHARDS; i++)
        if (m->shard[i].cap != 0)
            bytes += table_bytes(m->shard[i].cap);
    return bytes;
}
