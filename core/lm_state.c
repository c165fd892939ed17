/* Profile state: applies decoded records to locations, heap and overrides. */
#include "lm_state.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_hash.h"
#include "lm_table.h"

/* The per-event path: inlined into the loops that apply records, where
 * GCC would otherwise keep calls whose register saves and restores are
 * a tenth of an event's instructions. */
#define HOT inline __attribute__((always_inline))

int lm_state_init(struct lm_state *s, const struct lm_state_limits *limits)
{
    memset(s, 0, sizeof(*s));
    s->max_locs = LM_DEFAULT_MAX_LOCATIONS;
    if (limits != NULL && limits->max_locations != 0)
        s->max_locs = limits->max_locations;
    if (s->max_locs > LM_MAX_LOCATIONS)
        s->max_locs = LM_MAX_LOCATIONS;
    s->direct_bytes = LM_DEFAULT_DIRECT_BYTES;
    if (limits != NULL && limits->direct_bytes != 0)
        s->direct_bytes = limits->direct_bytes;
    lm_stacks_init(&s->stacks, LM_DEFAULT_MAX_STACK_LOCATIONS);
    s->last_loc = LM_NONE;
    s->census.internals_loc = LM_NONE;
    s->site_cache = lm_table_alloc(LM_SITE_CACHE * sizeof(*s->site_cache));
    /* ASLR makes the state's address a seed a stream cannot predict. */
    lm_heap_init(&s->heap, lm_mix64((uint64_t)(uintptr_t)s));
    if (s->site_cache == NULL || lm_symtab_init(&s->sym) != 0 ||
        lm_hindex_init(&s->loc_index) != 0 ||
        lm_hindex_init(&s->ovr_index) != 0) {
        lm_state_free(s);
        return -1;
    }
    return 0;
}

void lm_state_free(struct lm_state *s)
{
    lm_symtab_free(&s->sym);
    lm_heap_free(&s->heap);
    lm_hindex_free(&s->loc_index);
    lm_hindex_free(&s->ovr_index);
    /* A part has no records (NULL) and its heap sides are lent. */
    lm_table_free(s->locs, (size_t)s->locs_cap * sizeof(*s->locs));
    if (!s->locs_lent)
        lm_table_free(s->sides, (size_t)s->locs_cap * sizeof(*s->sides));
    lm_table_free(s->site_cache, LM_SITE_CACHE * sizeof(*s->site_cache));
    free(s->cfunc_locs);
    free(s->ovr);
    free(s->census.dups);
    lm_stacks_free(&s->stacks);
    memset(s, 0, sizeof(*s));
}

/* The hash of a location's key: r, and the stack (0 for none, which
 * adds nothing: a stream without stacks hashes as it did). */
static uint64_t ref_hash(const struct lm_loc_ref *r, uint32_t stack)
{
    /* Odd multipliers spread each word upwards, and the high half folded
     * onto the low brings every bit to the low ones, which the tables
     * index by, in fewer instructions than lm_mix64 on every event. */
    uint64_t x =
        (r->addr * 0x9e3779b97f4a7c15ULL) ^
        ((r->line ^ (uint64_t)r->trace << 40) * 0xc2b2ae3d27d4eb4fULL) ^
        ((uint64_t)r->source << 59) ^ (uint64_t)stack * 0xd6e8feb86659fd93ULL;

    return x ^ x >> 32;
}

static uint64_t loc_hash(const struct lm_loc *l)
{
    struct lm_loc_ref r = {.source = l->source,
                           .trace = l->trace,
                           .addr = l->addr,
                           .line = l->line};
    return ref_hash(&r, l->stack);
}

static int loc_is(const struct lm_loc *l, const struct lm_loc_ref *r,
                  uint32_t stack)
{
    return l->addr == r->addr && l->line == r->line && l->source == r->source &&
           l->trace == r->trace && l->stack == stack;
}

/* The site cache's location for a ref_hash() h, or LM_NONE (see struct
 * lm_state: 0 - 1). */
static uint32_t site_cached(const struct lm_state *s, uint64_t h)
{
    return s->site_cache[h & (LM_SITE_CACHE - 1)] - 1;
}

static void site_cache_set(struct lm_state *s, uint64_t h, uint32_t id)
{
    s->site_cache[h & (LM_SITE_CACHE - 1)] = id + 1;
}

/* Takes a location out of the index: later events get a new one. */
static void retire_loc(struct lm_state *s, uint32_t id)
{
    struct lm_loc *l = &s->locs[id];

    if (l->retired)
        return;
    l->retired = 1;
    uint64_t h = loc_hash(l);
    lm_hindex_remove(&s->loc_index, h, id);
    if (site_cached(s, h) == id)
        site_cache_set(s, h, LM_NONE);
    s->last_loc = LM_NONE;
}

static void retire_list(struct lm_state *s, uint32_t first)
{
    for (uint32_t id = first; id != LM_NONE; id = s->locs[id].next)
        retire_loc(s, id);
}

/* A trace epoch's Lua locations (see struct lm_loc, trace). */
static void retire_trace_list(struct lm_state *s, uint32_t first)
{
    for (uint32_t id = first; id != LM_NONE; id = s->locs[id].trace_next)
        retire_loc(s, id);
}

/*
 * The C symbol that names a C address: the nearest at or below it, but
 * for a builtin's (R3S: a number below LM_BUILTIN_ADDR_LIMIT, where no
 * code is), which names its own number only; LM_NONE for none.
 */
static uint32_t cfunc_symbol(struct lm_state *s, uint64_t addr)
{
    uint32_t sym = lm_symtab_cfunc_floor(&s->sym, addr);

    if (sym != LM_NONE && s->sym.cfuncs[sym].addr < LM_BUILTIN_ADDR_LIMIT &&
        s->sym.cfuncs[sym].addr != addr)
        return LM_NONE;
    return sym;
}

/* New C symbols may rename C locations: retire those whose name moved. */
static void retire_renamed_cfunc_locs(struct lm_state *s)
{
    uint32_t kept = 0;

    for (uint32_t i = 0; i < s->ncfunc_locs; i++) {
        uint32_t id = s->cfunc_locs[i];
        struct lm_loc *l = &s->locs[id];
        if (cfunc_symbol(s, l->addr) != l->sym)
            retire_loc(s, id);
        else
            s->cfunc_locs[kept++] = id;
    }
    s->ncfunc_locs = kept;
    s->cfuncs_changed = 0;
}

/* A Lua location's trace in effect: its key's (a trace marker's), or
 * its prototype epoch's if that is a stand-in's; 0 for none. */
static uint32_t loc_trace(const struct lm_state *s, const struct lm_loc *l)
{
    if (l->trace != 0 || l->sym == LM_NONE)
        return l->trace;
    return s->sym.protos[l->sym].trace;
}

/* A new Lua location's trace in effect: bound to the trace's current
 * epoch (a placeholder if none was announced), listed in it. */
static int bind_trace(struct lm_state *s, struct lm_loc *l, uint32_t id)
{
    uint32_t trace = loc_trace(s, l);

    if (trace == 0)
        return 0;
    l->trace_sym = lm_symtab_trace_current(&s->sym, trace);
    if (l->trace_sym == LM_NONE)
        return -1;
    l->trace_next = s->sym.traces[l->trace_sym].ctx_locs;
    s->sym.traces[l->trace_sym].ctx_locs = id;
    return 0;
}

/* The epoch a new location belongs to; links it into the epoch's list. */
static int bind_symbol(struct lm_state *s, uint32_t id)
{
    struct lm_loc *l = &s->locs[id];
    uint32_t *head = NULL;

    switch (l->source) {
    case LM_SRC_LFUNC:
        l->sym = lm_symtab_proto_current(&s->sym, l->addr);
        if (l->sym == LM_NONE || bind_trace(s, l, id) != 0)
            return -1;
        head = &s->sym.protos[l->sym].locs;
        break;
    case LM_SRC_TRACE:
        l->sym = lm_symtab_trace_current(&s->sym, l->traceno);
        if (l->sym == LM_NONE)
            return -1;
        head = &s->sym.traces[l->sym].locs;
        break;
    case LM_SRC_CFUNC:
        l->sym = cfunc_symbol(s, l->addr);
        if (LM_RESERVE(s->cfunc_locs, s->cfunc_locs_cap, s->ncfunc_locs) != 0)
            return -1;
        s->cfunc_locs[s->ncfunc_locs++] = id;
        return 0;
    default:
        return 0;
    }
    l->next = *head;
    *head = id;
    return 0;
}

/*
 * Location records and their heap sides are cache-line aligned (see
 * struct lm_loc), in table memory: a big array is mapped pages, which a
 * resize gives back, not a hole in malloc's heap that stays resident.
 */
static int resize_locs(struct lm_state *s, uint32_t cap)
{
    struct lm_loc *p = lm_table_alloc((size_t)cap * sizeof(*p));
    struct lm_heap_side *e = lm_table_alloc((size_t)cap * sizeof(*e));

    if (p == NULL || e == NULL) {
        lm_table_free(p, (size_t)cap * sizeof(*p));
        lm_table_free(e, (size_t)cap * sizeof(*e));
        return -1;
    }
    if (s->nlocs > 0) {
        memcpy(p, s->locs, (size_t)s->nlocs * sizeof(*p));
        memcpy(e, s->sides, (size_t)s->nlocs * sizeof(*e));
    }
    lm_table_free(s->locs, (size_t)s->locs_cap * sizeof(*p));
    lm_table_free(s->sides, (size_t)s->locs_cap * sizeof(*e));
    s->locs = p;
    s->sides = e;
    s->locs_cap = cap;
    return 0;
}

static uint32_t new_loc(struct lm_state *s, const struct lm_loc_ref *r,
                        uint32_t stack, uint64_t h, const char **err)
{
    uint32_t id = s->nlocs;

    if (id >= s->max_locs) {
        *err = "too many distinct locations";
        return LM_NONE;
    }
    if (lm_state_reserve_locs(s, id + 1) != 0)
        goto oom;
    struct lm_loc *l = &s->locs[id];
    memset(l, 0, sizeof(*l));
    memset(&s->sides[id], 0, sizeof(s->sides[id]));
    l->source = r->source;
    l->addr = r->addr;
    l->line = r->line;
    l->trace = r->source == LM_SRC_LFUNC ? r->trace : 0;
    l->stack = stack;
    l->sym = l->trace_sym = LM_NONE;
    l->next = l->trace_next = LM_NONE;
    /* Counted only once reachable, so a failure leaves nothing behind. */
    if (lm_hindex_insert(&s->loc_index, h, id) != 0)
        goto oom;
    if (bind_symbol(s, id) != 0) {
        lm_hindex_remove(&s->loc_index, h, id);
        goto oom;
    }
    s->nlocs++;
    s->stacks.nlocs += stack != 0;
    return id;
oom:
    *err = "out of memory";
    return LM_NONE;
}

static uint32_t fold_stack(struct lm_state *s, const struct lm_loc_ref *r,
                           const char **err);

/* The location of r and stack, whose ref_hash() is h; created if new. */
static HOT uint32_t get_loc(struct lm_state *s, const struct lm_loc_ref *r,
                            uint32_t stack, int hashed, uint64_t h,
                            const char **err)
{
    uint32_t id, slot;

    /* The one-entry cache: without a hash at hand, the fields decide. */
    if (s->last_loc != LM_NONE && (!hashed || s->last_hash == h) &&
        loc_is(&s->locs[s->last_loc], r, stack))
        return s->last_loc;
    if (!hashed)
        h = ref_hash(r, stack);
    if (s->cfuncs_changed)
        retire_renamed_cfunc_locs(s);
    id = site_cached(s, h);
    if (id != LM_NONE && loc_is(&s->locs[id], r, stack))
        goto cached;
    LM_HINDEX_FOREACH(&s->loc_index, h, id, slot)
    {
        if (loc_is(&s->locs[id], r, stack))
            goto found;
    }
    if (stack != 0 && s->stacks.nlocs >= s->stacks.max_locs)
        return fold_stack(s, r, err);
    id = new_loc(s, r, stack, h, err);
    if (id == LM_NONE)
        return LM_NONE;
found:
    site_cache_set(s, h, id);
cached:
    s->last_loc = id;
    s->last_hash = h;
    return id;
}

/* The location of an event whose stack is dropped, as its site's
 * locations of a stack reached their bound: its site's without one.
 * Out of line, as get_loc is inlined into it. */
static __attribute__((noinline)) uint32_t
fold_stack(struct lm_state *s, const struct lm_loc_ref *r, const char **err)
{
    s->stacks.folded++;
    return get_loc(s, r, 0, 0, 0, err);
}

static uint64_t ovr_hash(uint8_t kind, uint32_t site, uint32_t primary)
{
    return lm_mix64(((uint64_t)site << 32 | primary) ^ ((uint64_t)kind << 62));
}

/* The override record of (kind, site, primary), or LM_NONE. */
static uint32_t override_find(const struct lm_state *s, uint8_t kind,
                              uint32_t site, uint32_t primary, uint64_t h)
{
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&s->ovr_index, h, id, slot)
    {
        const struct lm_override *o = &s->ovr[id];
        if (o->site == site && o->primary == primary && o->kind == kind)
            return id;
    }
    return LM_NONE;
}

/* The override record of (kind, site, primary), whose ovr_hash is h,
 * created if new. */
static uint32_t override_id_hashed(struct lm_state *s, uint8_t kind,
                                   uint32_t site, uint32_t primary, uint64_t h)
{
    uint32_t id = override_find(s, kind, site, primary, h);

    if (id != LM_NONE)
        return id;
    if (LM_RESERVE(s->ovr, s->ovr_cap, s->novr) != 0)
        return LM_NONE;
    id = s->novr;
    if (lm_hindex_insert(&s->ovr_index, h, id) != 0)
        return LM_NONE;
    s->novr++;
    s->ovr[id] = (struct lm_override){site, primary, kind, 0, 0, 0};
    return id;
}

static uint32_t override_id(struct lm_state *s, uint8_t kind, uint32_t site,
                            uint32_t primary)
{
    return override_id_hashed(s, kind, site, primary,
                              ovr_hash(kind, site, primary));
}

static uint32_t pending_tag(uint8_t kind, uint32_t site)
{
    return site << 2 | (uint32_t)(kind == LM_EV_FREE) << 1 | 1;
}

static uint8_t pending_kind(uint32_t tag)
{
    return tag & 2 ? LM_EV_FREE : LM_EV_REALLOC;
}

static uint32_t pending_site(uint32_t tag)
{
    return tag >> 2;
}

/* Adds a pending entry's counts to an override record. */
static void fold_pending(struct lm_override *o, const struct lm_ovr_pending *p)
{
    o->count += p->count;
    o->allocated += p->allocated;
    o->freed += p->freed;
}

/* Moves a pending entry's counts of primary's overrides into their
 * record (made if new), keeping its tag: 0, or -1 when out of memory. */
static int flush_pending(struct lm_state *s, uint32_t primary,
                         struct lm_ovr_pending *p)
{
    if (p->count == 0)
        return 0;
    uint32_t id =
        override_id(s, pending_kind(p->tag), pending_site(p->tag), primary);
    if (id == LM_NONE)
        return -1;
    fold_pending(&s->ovr[id], p);
    p->count = p->allocated = p->freed = 0;
    return 0;
}

static uint64_t evicted_hash(const struct lm_ovr_evicted *e)
{
    return ovr_hash(pending_kind(e->p.tag), pending_site(e->p.tag), e->primary);
}

/*
 * Folds the queue of evicted entries into their records (see struct
 * lm_ovr_evicted), in a pipeline: AHEAD entries ahead, the index slot is
 * fetched; half as far ahead, the record it names.  0, or -1 when out of
 * memory, the entries not folded still queued.
 */
static int fold_evicted(struct lm_state *s)
{
    enum { AHEAD = 16 };
    uint64_t h[LM_OVR_EVICTED];
    uint32_t n = s->nevicted, slot;

    for (uint32_t k = 0; k < n; k++) {
        h[k] = evicted_hash(&s->evicted[k]);
        if (k < AHEAD)
            __builtin_prefetch(&s->ovr_index.slots[h[k] & s->ovr_index.mask]);
    }
    for (uint32_t k = 0; k < n; k++) {
        const struct lm_ovr_evicted *e = &s->evicted[k];
        if (k + AHEAD < n)
            __builtin_prefetch(
                &s->ovr_index.slots[h[k + AHEAD] & s->ovr_index.mask]);
        if (k + AHEAD / 2 < n) {
            uint32_t id =
                lm_hindex_first(&s->ovr_index, h[k + AHEAD / 2], &slot);
            if (id != LM_NONE)
                __builtin_prefetch(&s->ovr[id]);
        }
        uint32_t id =
            override_id_hashed(s, pending_kind(e->p.tag),
                               pending_site(e->p.tag), e->primary, h[k]);
        if (id == LM_NONE) {
            memmove(s->evicted, e, (n - k) * sizeof(*e));
            s->nevicted = n - k;
            return -1;
        }
        fold_pending(&s->ovr[id], &e->p);
    }
    s->nevicted = 0;
    return 0;
}

/* The entry of primary's pending overrides for tag: found and moved one
 * place up (the most used stay in front), or made in the last place, whose
 * counts are queued for their record first.  NULL when out of memory. */
static HOT struct lm_ovr_pending *pending_entry(struct lm_state *s,
                                                uint32_t primary, uint32_t tag)
{
    struct lm_ovr_pending *pend = s->sides[primary].pending;

    if (pend[0].tag == tag)
        return &pend[0];
    for (int k = 1; k < LM_OVR_PENDING; k++)
        if (pend[k].tag == tag) {
            struct lm_ovr_pending t = pend[k - 1];
            pend[k - 1] = pend[k];
            pend[k] = t;
            return &pend[k - 1];
        }
    struct lm_ovr_pending *last = &pend[LM_OVR_PENDING - 1];
    if (last->count != 0) {
        /* A fold that ran out of memory may still have made room. */
        if (s->nevicted == LM_OVR_EVICTED && fold_evicted(s) != 0 &&
            s->nevicted == LM_OVR_EVICTED)
            return NULL;
        s->evicted[s->nevicted++] = (struct lm_ovr_evicted){primary, *last};
    }
    *last = (struct lm_ovr_pending){tag, 0, 0, 0};
    return last;
}

/* Credits a realloc/free site, named by its pending_tag(), with
 * releasing a block of primary (sizes below 4 GiB, as the heap map holds
 * them). */
static HOT int note_override(struct lm_state *s, uint32_t tag, uint32_t primary,
                             uint32_t allocated, uint32_t freed)
{
    struct lm_ovr_pending *p = pending_entry(s, primary, tag);

    if (p == NULL)
        return -1;
    if (p->count == UINT32_MAX || p->allocated > UINT32_MAX - allocated ||
        p->freed > UINT32_MAX - freed) {
        if (flush_pending(s, primary, p) != 0)
            return -1;
    }
    p->count++;
    p->allocated += allocated;
    p->freed += freed;
    return 0;
}

/* The body runs for every pending entry p with counts; i is its primary. */
#define FOR_EACH_PENDING(s, i, p)                                              \
    for (uint32_t i = 0; i < (s)->nlocs; i++)                                  \
        for (struct lm_ovr_pending *p = (s)->sides[i].pending;                 \
             p < (s)->sides[i].pending + LM_OVR_PENDING; p++)                  \
            if (p->count != 0)

/* The record of (kind, site, primary) in o, a copy of s's records with
 * new ones from `made` up to k: s's own, or a new one, or LM_NONE. */
static uint32_t copied_override(const struct lm_state *s,
                                const struct lm_override *o, uint32_t made,
                                uint32_t k, uint8_t kind, uint32_t site,
                                uint32_t primary)
{
    uint32_t id =
        override_find(s, kind, site, primary, ovr_hash(kind, site, primary));

    for (uint32_t j = made; j < k && id == LM_NONE; j++)
        if (o[j].site == site && o[j].primary == primary && o[j].kind == kind)
            id = j;
    return id;
}

/* Adds an entry's counts to its record in o, made at o[*k] if new. */
static void copy_entry(const struct lm_state *s, struct lm_override *o,
                       uint32_t made, uint32_t search_end, uint32_t *k,
                       uint32_t primary, const struct lm_ovr_pending *p)
{
    uint8_t kind = pending_kind(p->tag);
    uint32_t site = pending_site(p->tag);
    uint32_t id = copied_override(s, o, made, search_end, kind, site, primary);

    if (id == LM_NONE) {
        id = (*k)++;
        o[id] = (struct lm_override){site, primary, kind, 0, 0, 0};
    }
    fold_pending(&o[id], p);
}

struct lm_override *lm_state_overrides(const struct lm_state *s, uint32_t *n)
{
    size_t entries = s->nevicted;
    uint32_t k, queued_end;
    struct lm_override *o;

    /* Room for a record of every entry: pairs whose counts are all
     * pending or queued have none yet. */
    FOR_EACH_PENDING(s, i, p)
    {
        (void)i;
        entries++;
    }
    o = malloc(((size_t)s->novr + entries + 1) * sizeof(*o));
    if (o == NULL)
        return NULL;
    if (s->novr > 0)
        memcpy(o, s->ovr, s->novr * sizeof(*o));
    k = s->novr;
    /* The queue (empty unless memory ran out, see fold_queue) may hold a
     * pair more than once, and a pair pending too; a primary's pending
     * pairs differ. */
    for (uint32_t j = 0; j < s->nevicted; j++)
        copy_entry(s, o, s->novr, k, &k, s->evicted[j].primary,
                   &s->evicted[j].p);
    queued_end = k;
    FOR_EACH_PENDING(s, i, p)
    {
        copy_entry(s, o, s->novr, queued_end, &k, i, p);
    }
    *n = k;
    return o;
}

static HOT void lower_owner(struct lm_state *s, uint32_t loc, uint64_t size)
{
    struct lm_heap_side *owner = &s->sides[loc];

    owner->live_bytes -= size;
    owner->live_blocks--;
}

static HOT void lower_totals(struct lm_state *s, uint64_t size)
{
    s->totals.live_bytes -= size;
    s->totals.live_blocks--;
}

static HOT void unlink_block(struct lm_state *s, struct lm_block blk)
{
    lower_owner(s, blk.loc, blk.size);
    lower_totals(s, blk.size);
}

/* Records a new live block, whose address hashes to h, for loc; the
 * site's live counts too unless the reading thread counted them (see
 * struct lm_loc's split_bytes). */
static inline __attribute__((always_inline)) int
put_block(struct lm_state *s, uint32_t loc, uint64_t h, uint64_t nsize,
          int count_site, const char **err)
{
    struct lm_block old = {0, 0}; /* set when put returns 1 */
    int r = lm_heap_put_hashed(&s->heap, h,
                               (struct lm_block){(uint32_t)nsize, loc}, &old);

    if (r < 0) {
        *err = "out of memory";
        return -1;
    }
    if (r == 1) {
        /* The stream lost a free: the old block is gone all the same. */
        unlink_block(s, old);
        s->totals.overwritten_blocks++;
    }
    if (count_site) {
        s->sides[loc].live_bytes += nsize;
        s->sides[loc].live_blocks++;
    }
    s->totals.live_bytes += nsize;
    if (++s->totals.live_blocks > s->totals.peak_live_blocks)
        s->totals.peak_live_blocks = s->totals.live_blocks;
    return 0;
}

static HOT int add_block(struct lm_state *s, uint32_t loc, uint64_t h,
                         uint64_t nsize, const char **err)
{
    return put_block(s, loc, h, nsize, 1, err);
}

/* Hashes of an event's keys, computed ahead (see lm_state_apply). */
struct plan {
    uint64_t loc;  /* ref_hash of the location, if loc_hashed */
    uint64_t o, n; /* heap hashes of the old and new block addresses */
    int loc_hashed;
    uint32_t oslot; /* where the old block was seen, or UINT32_MAX */
};

/* Counts a failed allocation (address 0: nothing became live); says
 * whether naddr was one. */
static HOT int alloc_failed(struct lm_state *s, uint64_t naddr)
{
    if (naddr != 0)
        return 0;
    s->totals.failed_allocs++;
    return 1;
}

/* A new block at naddr, unless the allocation failed. */
static HOT int add_block_at(struct lm_state *s, uint32_t loc, uint64_t naddr,
                            uint64_t h, uint64_t nsize, const char **err)
{
    return alloc_failed(s, naddr) ? 0 : add_block(s, loc, h, nsize, err);
}

/* What a release changes in its block's owner's heap side: its live
 * counts fall, and the releasing site is credited in its pending
 * overrides. */
struct owner_change {
    uint32_t primary;
    uint32_t tag; /* the releasing site's pending_tag() */
    uint32_t allocated, freed;
};

/* Applies a release to its block's owner: live counts and overrides. */
static HOT int change_owner(struct lm_state *s, const struct owner_change *c,
                            const char **err)
{
    lower_owner(s, c->primary, c->freed);
    if (note_override(s, c->tag, c->primary, c->allocated, c->freed) != 0) {
        *err = "out of memory";
        return -1;
    }
    return 0;
}

/* Takes a released block out of the heap map and the totals: 1, or 0 for
 * a block allocated before profiling started (no site to credit), counted
 * in *unknown: unknown_frees, or census_preceding_frees while a census
 * runs (a block it has not announced yet, or never will: it was dead). */
static HOT int take_released(struct lm_state *s, uint64_t h, uint32_t hint,
                             struct lm_block *blk, uint64_t *unknown)
{
    if (!lm_heap_take_hashed(&s->heap, h, hint, blk)) {
        (*unknown)++;
        return 0;
    }
    lower_totals(s, blk->size);
    return 1;
}

/* Releases the old block of p for a realloc/free site. */
static HOT int release_block(struct lm_state *s, uint8_t kind, uint32_t site,
                             const struct plan *p, uint64_t nsize,
                             uint64_t *unknown, const char **err)
{
    struct lm_block blk;

    if (!take_released(s, p->o, p->oslot, &blk, unknown))
        return 0;
    return change_owner(s,
                        &(struct owner_change){blk.loc, pending_tag(kind, site),
                                               (uint32_t)nsize, blk.size},
                        err);
}

/* An event counted at its site and in the totals. */
static HOT void count_alloc(struct lm_state *s, struct lm_event_counters *c,
                            uint64_t nsize)
{
    c->alloc_events++;
    c->alloc_bytes += nsize;
    s->totals.alloc_events++;
    s->totals.alloc_bytes += nsize;
}

static HOT void count_free(struct lm_state *s, struct lm_event_counters *c,
                           uint64_t osize)
{
    c->free_events++;
    c->free_bytes += osize;
    s->totals.free_events++;
    s->totals.freed_bytes += osize;
}

static HOT void count_realloc(struct lm_state *s, struct lm_event_counters *c,
                              uint64_t osize, uint64_t nsize)
{
    c->realloc_events++;
    c->realloc_new_bytes += nsize;
    c->realloc_old_bytes += osize;
    s->totals.realloc_events++;
    s->totals.alloc_bytes += nsize;
    s->totals.freed_bytes += osize;
}

static HOT void count_event(struct lm_state *s, const struct lm_record *r,
                            struct lm_event_counters *c)
{
    if (r->kind == LM_REC_ALLOC)
        count_alloc(s, c, r->nsize);
    else if (r->kind == LM_REC_FREE)
        count_free(s, c, r->osize);
    else
        count_realloc(s, c, r->osize, r->nsize);
}

/* A stacked location's estimate takes a sampled event (see
 * lm_stacks_weight): its bytes, a realloc's new ones. */
static int weigh_event(struct lm_state *s, uint32_t loc,
                       const struct lm_record *r, const char **err)
{
    struct lm_stack_est *e;

    if (s->stacks.sample_bytes == 0)
        return 0; /* every event has its stack: the counts are exact */
    if ((e = lm_stacks_est(&s->stacks, loc)) == NULL) {
        *err = "out of memory";
        return -1;
    }
    double w = lm_stacks_weight(&s->stacks, r->nsize);
    e->events += w;
    e->bytes += w * (double)r->nsize;
    return 0;
}

/*
 * The location of an event that names a stack (R3S): its site's with the
 * stack the VM's id stands for, weighed if sampled; its site's without
 * one when the stack was dropped at the bound (folded).  Out of line:
 * R3's events never come here.
 */
static __attribute__((noinline)) uint32_t
stacked_loc(struct lm_state *s, const struct lm_record *r, const char **err)
{
    uint32_t stack = lm_stacks_lookup(&s->stacks, r->stack), loc;

    if (stack == LM_NONE) {
        *err = "an event names a stack not defined since the last reset";
        return LM_NONE;
    }
    if (stack == 0)
        return fold_stack(s, &r->loc, err);
    loc = get_loc(s, &r->loc, stack, 0, 0, err);
    if (loc != LM_NONE && s->locs[loc].stack != 0 &&
        weigh_event(s, loc, r, err) != 0)
        return LM_NONE;
    return loc;
}

/* Whether an allocation at a live address is a census duplicate: the
 * census announced a block the state knows (made after the stream
 * began), which stays as it is.  Counted. */
static int census_duplicate(struct lm_state *s, uint64_t h)
{
    struct lm_block blk;
    uint32_t where;

    if (!lm_heap_peek_hashed(&s->heap, h, &blk, &where))
        return 0;
    s->totals.census_duplicates++;
    return 1;
}

/* Takes a duplicate's allocation back from its site's counters: the
 * census's records of blocks the state knows are ignored (the totals
 * keep counting the stream's events, which a VM's trailer checks). */
static void uncount_duplicate(struct lm_event_counters *c, uint64_t size)
{
    c->alloc_events--;
    c->alloc_bytes -= size;
}

/* apply_event's heap side while a census runs (see struct lm_census):
 * an allocation at a live address is a duplicate, a release of an
 * unknown block one from before the census. */
static __attribute__((noinline)) int
apply_census_event(struct lm_state *s, const struct lm_record *r,
                   const struct plan *h, uint32_t loc, const char **err)
{
    uint64_t *preceding = &s->totals.census_preceding_frees;

    switch (r->kind) {
    case LM_REC_ALLOC:
        if (alloc_failed(s, r->naddr))
            return 0;
        if (census_duplicate(s, h->n)) {
            uncount_duplicate(&s->locs[loc].ev, r->nsize);
            return 0;
        }
        return add_block(s, loc, h->n, r->nsize, err);
    case LM_REC_FREE:
        return release_block(s, LM_EV_FREE, loc, h, 0, preceding, err);
    default: /* LM_REC_REALLOC */
        if (release_block(s, LM_EV_REALLOC, loc, h, r->nsize, preceding, err))
            return -1;
        return add_block_at(s, loc, r->naddr, h->n, r->nsize, err);
    }
}

static HOT int apply_event(struct lm_state *s, const struct lm_record *r,
                           const struct plan *h, const char **err)
{
    /* LuaJIT sizes blocks with 32-bit MSize: larger is not a VM's
     * stream, and checked before anything changes. */
    if (r->osize > LM_HEAP_MAX_SIZE || r->nsize > LM_HEAP_MAX_SIZE) {
        *err = "block size of 4 GiB or more";
        return -1;
    }
    uint32_t loc = __builtin_expect(r->stack != 0, 0)
                       ? stacked_loc(s, r, err)
                       : get_loc(s, &r->loc, 0, h->loc_hashed, h->loc, err);

    if (loc == LM_NONE)
        return -1;
    struct lm_event_counters *c = &s->locs[loc].ev;
    uint64_t *unknown = &s->totals.unknown_frees;
    if (__builtin_expect(s->census.state == LM_CENSUS_RUNNING, 0)) {
        count_event(s, r, c);
        return apply_census_event(s, r, h, loc, err);
    }
    switch (r->kind) {
    case LM_REC_ALLOC:
        count_alloc(s, c, r->nsize);
        return add_block_at(s, loc, r->naddr, h->n, r->nsize, err);
    case LM_REC_FREE:
        count_free(s, c, r->osize);
        return release_block(s, LM_EV_FREE, loc, h, 0, unknown, err);
    default: /* LM_REC_REALLOC */
        count_realloc(s, c, r->osize, r->nsize);
        if (release_block(s, LM_EV_REALLOC, loc, h, r->nsize, unknown, err))
            return -1;
        return add_block_at(s, loc, r->naddr, h->n, r->nsize, err);
    }
}

/* The location of the census's remainder (the VM internals' name, at line
 * 0), made if new; LM_NONE when out of memory or locations. */
static uint32_t census_internals_loc(struct lm_state *s, const char **err)
{
    struct lm_loc_ref ref = {
        .source = LM_SRC_LFUNC, .addr = LM_CENSUS_INTERNALS, .line = 0};

    if (s->census.internals_loc == LM_NONE)
        s->census.internals_loc = get_loc(s, &ref, 0, 0, 0, err);
    return s->census.internals_loc;
}

/*
 * The census completed with the VM holding total bytes: what the state
 * holds beyond the blocks it knows is one live block at loc (several, each
 * under 4 GiB, past that), at addresses below the census limit, which no
 * VM block has, counted live at loc.  Done by the state that holds the
 * blocks (a part with two threads); the site's allocation is counted by
 * the state that holds the locations (census_count_remainder).
 */
static int census_place_remainder(struct lm_state *s, uint32_t loc,
                                  uint64_t total, const char **err)
{
    uint64_t live = s->totals.live_bytes;
    uint64_t addr = LM_CENSUS_INTERNALS;

    if (live > total) {
        s->census.over += live - total;
        s->census.complete_blocks = s->totals.live_blocks;
        return 0;
    }
    s->census.remainder += total - live;
    for (uint64_t left = total - live; left > 0; addr++) {
        uint64_t size = left < LM_HEAP_MAX_SIZE ? left : LM_HEAP_MAX_SIZE;
        if (put_block(s, loc, lm_heap_hash(&s->heap, addr), size, 1, err) != 0)
            return -1;
        left -= size;
    }
    s->census.complete_blocks = s->totals.live_blocks;
    return 0;
}

/* The internals block's allocation events: one per block under 4 GiB. */
static uint64_t remainder_blocks(uint64_t bytes)
{
    return bytes / LM_HEAP_MAX_SIZE + (bytes % LM_HEAP_MAX_SIZE != 0);
}

/* Counts the remainder at its site as allocated there (so that the report's
 * heap summary, which credits allocations, shows it); not in the totals,
 * which count the stream's events. */
static void census_count_remainder(struct lm_state *s, uint64_t bytes)
{
    struct lm_loc *l = &s->locs[s->census.internals_loc];

    l->ev.alloc_events += remainder_blocks(bytes);
    l->ev.alloc_bytes += bytes;
}

/* The census completed, on a state that holds its blocks: 0, or -1. */
static int census_settle(struct lm_state *s, const char **err)
{
    uint32_t loc = census_internals_loc(s, err);

    if (loc == LM_NONE ||
        census_place_remainder(s, loc, s->census.complete_total, err) != 0)
        return -1;
    census_count_remainder(s, s->census.remainder);
    return 0;
}

/* A census marker (docs/format.md, "Census"): 1 when it completed the
 * census (the heap side's part still to do), else 0. */
static int census_marker(struct lm_state *s, const struct lm_record *r)
{
    struct lm_census *c = &s->census;
    uint64_t events = lm_totals_events(&s->totals);

    if (r->addr == LM_CENSUS_BEGIN) {
        /* The VM internals' name may come just before the marker: a name
         * all the same (no location can be at it yet to have a name). */
        uint32_t in = lm_symtab_proto_announced(&s->sym, LM_CENSUS_INTERNALS);
        if (in != LM_NONE && s->sym.protos[in].locs == LM_NONE)
            s->sym.protos[in].census = 1;
        c->state = LM_CENSUS_RUNNING;
        c->begin_total = r->line;
        c->begin_offset = r->offset;
        c->begin_events = events;
        return 0;
    }
    if (c->state == LM_CENSUS_DONE)
        return 0; /* a second completion: the first placed the rest */
    c->state = LM_CENSUS_DONE;
    c->complete_total = r->line;
    c->complete_offset = r->offset;
    c->complete_events = events;
    return 1;
}

/* A symbol event at a census marker's address. */
static int is_census_marker(const struct lm_record *r)
{
    return r->kind == LM_REC_SYM_LFUNC && r->in_events &&
           (r->addr == LM_CENSUS_BEGIN || r->addr == LM_CENSUS_COMPLETE);
}

/* A frame of a definition, bound to the symbols current now (see
 * lm_stacks.h): 0, or -1 when out of memory. */
static int bind_frame(struct lm_state *s, const struct lm_stack_frame *in,
                      struct lm_sframe *out)
{
    *out = (struct lm_sframe){in->addr, in->value, LM_NONE, in->kind};
    if (in->kind == LM_FRAME_LUA) {
        out->sym = lm_symtab_proto_current(&s->sym, in->addr);
        return out->sym == LM_NONE ? -1 : 0;
    }
    if (in->kind == LM_FRAME_C)
        out->sym = cfunc_symbol(s, in->addr);
    return 0;
}

/* A stack definition: its frames bound and interned, the VM's id
 * naming the stack.  0, or -1 when out of memory. */
static int define_stack(struct lm_state *s, const struct lm_record *r)
{
    struct lm_sframe f[LM_STACK_MAX_DEPTH + 1];
    uint32_t stack;

    for (uint32_t i = 0; i < r->nframes; i++)
        if (bind_frame(s, &r->frames[i], &f[i]) != 0)
            return -1;
    stack = lm_stacks_intern(&s->stacks, f, r->nframes);
    if (stack == LM_NONE)
        return -1;
    return lm_stacks_define(&s->stacks, r->stack, stack);
}

/* A stack symbol (R3S).  Not counted in the totals' symtab_events: the
 * totals are those of the stream stripped of its stacks. */
static int apply_stack_symbol(struct lm_state *s, const struct lm_record *r)
{
    switch (r->kind) {
    case LM_REC_STACK_DEF:
        return define_stack(s, r);
    case LM_REC_STACK_CONFIG:
        s->stacks.configured = 1;
        s->stacks.depth = (uint32_t)r->depth;
        s->stacks.sample_bytes = r->sample_bytes;
        return 0;
    default: /* LM_REC_STACK_RESET */
        lm_stacks_reset(&s->stacks);
        return 0;
    }
}

/* Applies a symbol record: 0, -1 when out of memory, or 1 when it
 * completed a census, whose remainder the caller places. */
static int apply_symbol(struct lm_state *s, const struct lm_record *r)
{
    uint32_t retired = LM_NONE;

    if (r->kind >= LM_REC_STACK_DEF && r->kind <= LM_REC_STACK_RESET)
        return apply_stack_symbol(s, r);

    /* A symbol may rename what the one-entry cache holds. */
    s->last_loc = LM_NONE;
    s->totals.symtab_events += r->in_events;
    switch (r->kind) {
    case LM_REC_SYM_LFUNC:
        s->totals.lfunc_symbols++;
        if (r->addr == LM_CENSUS_BEGIN || r->addr == LM_CENSUS_COMPLETE)
            s->census.names = 1;
        if (lm_symtab_add_proto(&s->sym, r->addr, r->str, r->str_len, r->line,
                                lm_census_addr(s, r->addr),
                                (uint32_t)r->traceno, &retired) != 0)
            return -1;
        if (retired != LM_NONE)
            retire_list(s, s->sym.protos[retired].locs);
        return is_census_marker(r) ? census_marker(s, r) : 0;
    case LM_REC_SYM_TRACE:
        s->totals.trace_symbols++;
        if (lm_symtab_add_trace(&s->sym, r->traceno, r->trace_addr, r->addr,
                                r->line, &retired) != 0)
            return -1;
        if (retired != LM_NONE) {
            retire_list(s, s->sym.traces[retired].locs);
            retire_trace_list(s, s->sym.traces[retired].ctx_locs);
        }
        return 0;
    case LM_REC_SYM_CFUNC:
        s->totals.cfunc_symbols++;
        if (lm_symtab_add_cfunc(&s->sym, r->addr, r->str, r->str_len) != 0)
            return -1;
        s->cfuncs_changed = s->ncfunc_locs > 0;
        return 0;
    case LM_REC_SYMTAB_END:
        lm_symtab_resolve_trace_starts(&s->sym);
        return 0;
    case LM_REC_EVENTS_BEGIN:
        s->revision = r->revision;
        return 0;
    default: /* the end of the symtab or of the stream */
        return 0;
    }
}

/* apply_symbol on a state that holds its blocks: a census's completion
 * places its remainder at once. */
static int apply_symbol_settled(struct lm_state *s, const struct lm_record *r,
                                const char **err)
{
    int rc = apply_symbol(s, r);

    return rc == 1 ? census_settle(s, err) : rc;
}

static int is_event(const struct lm_record *r)
{
    return r->kind >= LM_REC_ALLOC && r->kind <= LM_REC_REALLOC;
}

/*
 * The hot path is bound by cache misses as much as by instructions: a
 * block's control group and slot in the heap map, the location record of
 * the site, and that of the released block's owner are each a miss in a
 * big profile.  So records are planned ahead in two stages, each reading
 * what the one before brought into the cache: FAR records ahead, keys are
 * hashed, the heap control groups with their home slots and the location
 * index slots prefetched; NEAR ahead, the site's and the owner's location
 * records.  What the stages read is only a hint: the records in between
 * may change it.  No stage finds the slot in the group before prefetching
 * it: that costs more instructions than the line it would save.  The
 * heap-only pipeline (see locs_fit_in_cache) and the worker's (see
 * apply_ops) look HEAP_FAR ahead: far enough to hide a miss to the shared
 * cache or memory, near enough that the core's miss buffers do not run
 * out and stall the prefetches.  All four distances were chosen by
 * measurement (bench/compare.sh; see "Tuned values" in bench/README.md).
 */
enum { FAR = 24, NEAR = 8, RING = 32, HEAP_FAR = 16, SPLIT_NEAR = 16 };

/*
 * Where a location is read (see struct lm_loc): a site's event reads the
 * key and counts itself (the key line, and the line of its event
 * counters), a new block's site and a released block's owner change their
 * live counts and overrides (the heap line).  Always inlined, like
 * lm_heap_prefetch, or GCC drops the calls.
 */
static inline __attribute__((always_inline)) void
prefetch_site(const struct lm_state *s, uint32_t id)
{
    __builtin_prefetch(&s->locs[id]);
    __builtin_prefetch((const char *)&s->locs[id] + 64);
}

static inline __attribute__((always_inline)) void
prefetch_heap_side(const struct lm_heap_side *side)
{
    __builtin_prefetch(side);
}

static void plan_far(struct lm_state *s, const struct lm_record *r,
                     struct plan *p)
{
    if (!is_event(r))
        return;
    p->oslot = UINT32_MAX;
    p->loc = ref_hash(&r->loc, 0); /* an event's stack is found later */
    p->loc_hashed = 1;
    __builtin_prefetch(&s->loc_index.slots[p->loc & s->loc_index.mask]);
    if (r->kind != LM_REC_ALLOC) {
        p->o = lm_heap_hash(&s->heap, r->oaddr);
        lm_heap_prefetch(&s->heap, p->o);
    }
    if (r->kind != LM_REC_FREE) {
        p->n = lm_heap_hash(&s->heap, r->naddr);
        lm_heap_prefetch(&s->heap, p->n);
    }
}

static void plan_near(struct lm_state *s, const struct lm_record *r,
                      struct plan *p)
{
    uint32_t slot, id;
    struct lm_block blk;

    if (!is_event(r))
        return;
    id = site_cached(s, p->loc);
    if (id == LM_NONE)
        id = lm_hindex_first(&s->loc_index, p->loc, &slot);
    if (id != LM_NONE) {
        prefetch_site(s, id);
        if (r->kind != LM_REC_FREE)
            prefetch_heap_side(&s->sides[id]);
    }
    if (r->kind != LM_REC_ALLOC &&
        lm_heap_peek_hashed(&s->heap, p->o, &blk, &p->oslot))
        prefetch_heap_side(&s->sides[blk.loc]);
}

/* Hashes only: what apply_event needs when nothing is worth prefetching. */
static HOT void plan_hashes(struct lm_state *s, const struct lm_record *r,
                            struct plan *p)
{
    /* The location's hash only if the one-entry cache misses. */
    p->oslot = UINT32_MAX;
    p->loc_hashed = 0;
    if (r->kind != LM_REC_ALLOC)
        p->o = lm_heap_hash(&s->heap, r->oaddr);
    if (r->kind != LM_REC_FREE)
        p->n = lm_heap_hash(&s->heap, r->naddr);
}

/* Hashes, and the heap map's lines prefetched: the one stage worth its
 * cost while the location records stay in the cache. */
static HOT void plan_heap(struct lm_state *s, const struct lm_record *r,
                          struct plan *p)
{
    if (!is_event(r))
        return;
    plan_hashes(s, r, p);
    if (r->kind != LM_REC_ALLOC)
        lm_heap_prefetch(&s->heap, p->o);
    if (r->kind != LM_REC_FREE)
        lm_heap_prefetch(&s->heap, p->n);
}

/*
 * While the heap map and the locations fit in the caches, the pipeline's
 * lookups ahead cost more instructions than the misses they hide cost
 * time: records are applied directly.  The size counted is the
 * heap map's live blocks (16 bytes a slot) and the locations.
 */
#define LOC_BYTES (sizeof(struct lm_loc) + sizeof(struct lm_heap_side))

static int fits_in_cache(const struct lm_state *s)
{
    return s->heap.count * 16 + (uint64_t)s->nlocs * LOC_BYTES <
           s->direct_bytes;
}

/*
 * A big heap with few locations (a real VM's stream: hundreds of
 * thousands of live blocks at a few hundred sites) needs only the heap
 * map prefetched: finding the site's and the owner's records ahead costs
 * a heap look-up more per release and saves no miss, as those records
 * stay in the cache.  With thousands of sites their records are evicted
 * by the heap map's traffic, and the full pipeline wins again, hence a
 * quarter of the direct budget (chosen by bench/compare.sh on a VM's
 * recording and a synthetic stream; see bench/README.md).
 */
static int locs_fit_in_cache(const struct lm_state *s)
{
    return (uint64_t)s->nlocs * LOC_BYTES < s->direct_bytes / 4;
}

/* Applies records in order, with the heap map planned `ahead` records
 * ahead (0: each record planned as it comes). */
static HOT int apply_simple(struct lm_state *s, const struct lm_record *recs,
                            size_t n, const size_t ahead, size_t *failed_at,
                            char *errbuf, size_t errlen)
{
    struct plan ring[RING];

    for (size_t i = 0; i < n && i < ahead; i++)
        plan_heap(s, &recs[i], &ring[i % RING]);
    for (size_t i = 0; i < n; i++) {
        const struct lm_record *r = &recs[i];
        const char *err = "out of memory";
        struct plan *p = &ring[i % RING];
        int rc;

        if (ahead != 0 && i + ahead < n)
            plan_heap(s, &recs[i + ahead], &ring[(i + ahead) % RING]);
        if (is_event(r)) {
            if (ahead == 0)
                plan_hashes(s, r, p);
            rc = apply_event(s, r, p, &err);
        } else {
            rc = apply_symbol_settled(s, r, &err);
        }
        if (rc != 0) {
            *failed_at = i;
            snprintf(errbuf, errlen, "cannot apply record: %s", err);
            return -1;
        }
    }
    return 0;
}

/* The two uses of apply_simple, each compiled for its distance (and not
 * inlined into apply_records, which measured slower). */
static __attribute__((noinline)) int apply_direct(struct lm_state *s,
                                                  const struct lm_record *recs,
                                                  size_t n, size_t *failed_at,
                                                  char *errbuf, size_t errlen)
{
    return apply_simple(s, recs, n, 0, failed_at, errbuf, errlen);
}

static __attribute__((noinline)) int
apply_heap_only(struct lm_state *s, const struct lm_record *recs, size_t n,
                size_t *failed_at, char *errbuf, size_t errlen)
{
    return apply_simple(s, recs, n, HEAP_FAR, failed_at, errbuf, errlen);
}

static int apply_records(struct lm_state *s, const struct lm_record *recs,
                         size_t n, size_t *failed_at, char *errbuf,
                         size_t errlen)
{
    struct plan ring[RING];

    if (fits_in_cache(s))
        return apply_direct(s, recs, n, failed_at, errbuf, errlen);
    if (locs_fit_in_cache(s))
        return apply_heap_only(s, recs, n, failed_at, errbuf, errlen);

    for (size_t i = 0; i < n && i < FAR; i++)
        plan_far(s, &recs[i], &ring[i % RING]);
    for (size_t i = 0; i < n && i < NEAR; i++)
        plan_near(s, &recs[i], &ring[i % RING]);
    for (size_t i = 0; i < n; i++) {
        const struct lm_record *r = &recs[i];
        const char *err = "out of memory";
        int rc;

        if (i + FAR < n)
            plan_far(s, &recs[i + FAR], &ring[(i + FAR) % RING]);
        if (i + NEAR < n)
            plan_near(s, &recs[i + NEAR], &ring[(i + NEAR) % RING]);
        if (is_event(r))
            rc = apply_event(s, r, &ring[i % RING], &err);
        else
            rc = apply_symbol_settled(s, r, &err);
        if (rc != 0) {
            *failed_at = i;
            snprintf(errbuf, errlen, "cannot apply record: %s", err);
            return -1;
        }
    }
    return 0;
}

/* Folds what an apply left queued (see struct lm_ovr_evicted), so that
 * readers find it in the records; out of memory, it stays queued. */
static void fold_queue(struct lm_state *s)
{
    if (s->nevicted != 0)
        (void)fold_evicted(s);
}

int lm_state_apply(void *state, const struct lm_record *recs, size_t n,
                   size_t *failed_at, char *errbuf, size_t errlen)
{
    struct lm_state *s = state;
    int rc = apply_records(s, recs, n, failed_at, errbuf, errlen);

    fold_queue(s);
    return rc;
}

/* -- Two threads: the main state and a part (see lm_state.h and lm_par.h). */

void lm_state_join(struct lm_state *part, const struct lm_state *s)
{
    part->heap.seed = s->heap.seed;
    part->heap.pages_first = 1;
}

/* A location's counters and key, fetched ahead: with thousands of sites,
 * most events miss the one-entry cache, and their records are not in L1. */
static HOT void plan_loc(struct lm_state *s, const struct lm_record *r,
                         uint64_t *h)
{
    if (!is_event(r))
        return;
    *h = ref_hash(&r->loc, 0);
    uint32_t id = site_cached(s, *h);
    if (id != LM_NONE)
        prefetch_site(s, id);
}

/* The operation by which a part places the remainder of a census that
 * completed (see census_settle): 0, or -1 when out of memory. */
static int census_end_op(struct lm_state *s, struct lm_op *op, const char **err)
{
    uint32_t loc = census_internals_loc(s, err);

    if (loc == LM_NONE)
        return -1;
    *op = lm_op_make(s->census.complete_total, 0, loc | LM_OP_CENSUS_END,
                     LM_OP_ALLOC);
    return 0;
}

int lm_state_split(struct lm_state *s, const struct lm_record *recs, size_t n,
                   struct lm_op *ops, size_t *nops, size_t *failed_at,
                   const char **err)
{
    uint64_t hashes[RING];
    /* Planned only when the locations are many: with a few, the one-entry
     * cache nearly always holds the site, and compares without a hash.
     * SPLIT_NEAR ahead, not NEAR: this loop does less per record than
     * lm_state_apply's (no heap map), so a site's miss needs more records
     * to hide it (chosen by THREADS=2 bench/compare.sh; see "Tuned
     * values" in bench/README.md). */
    size_t near = locs_fit_in_cache(s) ? 0 : SPLIT_NEAR;
    size_t i, k = 0; /* locals: stores into ops could alias *nops */

    for (i = 0; i < n && i < near; i++)
        plan_loc(s, &recs[i], &hashes[i % RING]);
    for (i = 0; i < n; i++) {
        const struct lm_record *r = &recs[i];
        uint32_t loc;

        if (near != 0 && i + near < n)
            plan_loc(s, &recs[i + near], &hashes[(i + near) % RING]);
        if (!is_event(r)) {
            *err = "out of memory";
            int rc = apply_symbol(s, r);
            if (rc < 0)
                goto fail;
            if (rc == 1 && census_end_op(s, &ops[k++], err) != 0)
                goto fail;
            continue;
        }
        if ((r->osize | r->nsize) > LM_HEAP_MAX_SIZE) {
            *err = "block size of 4 GiB or more";
            goto fail;
        }
        loc = __builtin_expect(r->stack != 0, 0)
                  ? stacked_loc(s, r, err)
                  : get_loc(s, &r->loc, 0, near != 0,
                            near ? hashes[i % RING] : 0, err);
        if (loc == LM_NONE)
            goto fail;
        /* Counted here, where the site's record was just read. */
        count_event(s, r, &s->locs[loc].ev);
        /* While a census runs, the heap side applies its rules. */
        uint32_t tagged =
            loc | (s->census.state == LM_CENSUS_RUNNING ? LM_OP_CENSUS : 0);
        if (r->kind != LM_REC_ALLOC)
            ops[k++] = lm_op_make(
                lm_heap_hash(&s->heap, r->oaddr), (uint32_t)r->nsize, tagged,
                r->kind == LM_REC_FREE ? LM_OP_FREE : LM_OP_REALLOC_OLD);
        if (r->kind != LM_REC_FREE && !alloc_failed(s, r->naddr)) {
            ops[k++] = lm_op_make(
                lm_heap_hash(&s->heap, r->naddr), (uint32_t)r->nsize, tagged,
                r->kind == LM_REC_ALLOC ? LM_OP_ALLOC : LM_OP_REALLOC_NEW);
            s->locs[loc].split_bytes += r->nsize;
            s->locs[loc].split_blocks++;
        }
    }
    *nops = k;
    return 0;
fail:
    *nops = k;
    *failed_at = i;
    return -1;
}

int lm_state_reserve_locs(struct lm_state *s, uint32_t n)
{
    uint32_t cap = s->locs_cap ? s->locs_cap : 64;

    if (n > s->max_locs)
        n = s->max_locs; /* new_loc refuses more */
    if (n <= s->locs_cap)
        return 0;
    while (cap < n)
        cap *= 2;
    return resize_locs(s, cap);
}

void lm_state_lend_sides(struct lm_state *part, struct lm_heap_side *sides,
                         uint32_t nlocs)
{
    part->sides = sides;
    part->nlocs = nlocs;
    part->locs_lent = 1;
}

/*
 * The owner of a block an operation releases is known only once the
 * block's slot is read, and with thousands of sites its heap side has
 * left the cache by then (the heap map's traffic evicts it), so its
 * change (struct owner_change) waits OWNER_LAG releases, with the side
 * prefetched in the meantime (the lag chosen by THREADS=2
 * bench/compare.sh; see bench/README.md).  The changes add up whatever
 * their order; the totals, whose peak depends on it, change at once.
 * When memory runs out, the changes still waiting are dropped: the
 * stream cannot be applied whole, and a reader of two threads gets no
 * profile (lm_par_finish fails).
 */
enum { OWNER_LAG = 8 }; /* a power of two */

/* The last OWNER_LAG changes queued, in c[k % OWNER_LAG] for the k-th:
 * once full, a queued change pushes out the oldest, which is applied. */
struct owner_lag {
    struct owner_change c[OWNER_LAG];
    size_t queued; /* releases queued in this call */
};

/* Applies the changes still waiting: 0, or -1 when out of memory. */
static int settle_owners(struct lm_state *s, struct owner_lag *lag,
                         const char **err)
{
    size_t k = lag->queued > OWNER_LAG ? lag->queued - OWNER_LAG : 0;

    for (; k < lag->queued; k++)
        if (change_owner(s, &lag->c[k % OWNER_LAG], err) != 0)
            return -1;
    return 0;
}

/* release_block for an operation: the owner's change lags (see
 * OWNER_LAG). */
static HOT int release_lagged(struct lm_state *s, uint8_t kind, uint32_t site,
                              uint64_t h, uint32_t allocated,
                              struct owner_lag *lag, uint64_t *unknown,
                              const char **err)
{
    struct lm_block blk;

    if (!take_released(s, h, UINT32_MAX, &blk, unknown))
        return 0;
    prefetch_heap_side(&s->sides[blk.loc]);
    struct owner_change *c = &lag->c[lag->queued % OWNER_LAG];
    if (lag->queued >= OWNER_LAG && change_owner(s, c, err) != 0)
        return -1;
    *c = (struct owner_change){blk.loc, pending_tag(kind, site), allocated,
                               blk.size};
    lag->queued++;
    return 0;
}

/* A duplicate a part found, listed for lm_state_absorb to take back
 * from its site's event counters: 0, or -1 when out of memory. */
static int list_duplicate(struct lm_state *s, uint32_t loc, uint32_t size,
                          const char **err)
{
    struct lm_census *c = &s->census;

    if (LM_RESERVE(c->dups, c->dups_cap, c->ndups) != 0) {
        *err = "out of memory";
        return -1;
    }
    c->dups[c->ndups++] = (struct lm_census_dup){loc, size};
    return 0;
}

/* apply_op for an operation the census flags: its completion, and events
 * under apply_census_event's rules.  A duplicate's site counted its block
 * (split_bytes), which the part takes back from its live counts. */
static __attribute__((noinline)) int apply_census_op(struct lm_state *s,
                                                     const struct lm_op *op,
                                                     struct owner_lag *lag,
                                                     const char **err)
{
    uint32_t loc = lm_op_loc(op);
    uint64_t *preceding = &s->totals.census_preceding_frees;

    if (op->loc_kind & LM_OP_CENSUS_END)
        return census_place_remainder(s, loc, op->hash, err);
    switch (lm_op_kind(op)) {
    case LM_OP_FREE:
        return release_lagged(s, LM_EV_FREE, loc, op->hash, 0, lag, preceding,
                              err);
    case LM_OP_REALLOC_OLD:
        return release_lagged(s, LM_EV_REALLOC, loc, op->hash, op->size, lag,
                              preceding, err);
    case LM_OP_ALLOC:
        if (census_duplicate(s, op->hash)) {
            lower_owner(s, loc, op->size);
            return list_duplicate(s, loc, op->size, err);
        }
        /* fall through */
    default: /* LM_OP_REALLOC_NEW */
        return put_block(s, loc, op->hash, op->size, 0, err);
    }
}

/* An operation's effect on blocks, live counts and overrides: the rest
 * of apply_event's, the event being counted by lm_state_split. */
static HOT int apply_op(struct lm_state *s, const struct lm_op *op,
                        struct owner_lag *lag, const char **err)
{
    if (__builtin_expect(op->loc_kind & (LM_OP_CENSUS | LM_OP_CENSUS_END), 0))
        return apply_census_op(s, op, lag, err);
    switch (lm_op_kind(op)) {
    case LM_OP_FREE:
        return release_lagged(s, LM_EV_FREE, lm_op_loc(op), op->hash, 0, lag,
                              &s->totals.unknown_frees, err);
    case LM_OP_REALLOC_OLD:
        return release_lagged(s, LM_EV_REALLOC, lm_op_loc(op), op->hash,
                              op->size, lag, &s->totals.unknown_frees, err);
    default: /* LM_OP_ALLOC, LM_OP_REALLOC_NEW: the site counted */
        return put_block(s, lm_op_loc(op), op->hash, op->size, 0, err);
    }
}

/*
 * lm_state_apply's pipeline for operations, whose hashes are made: the
 * heap map planned `far` ahead (0 when it fits in the cache), and owners
 * found only as their blocks are taken (see OWNER_LAG): a
 * stage that looked the released block up ahead, to prefetch its owner,
 * cost a probe more per release, and 1.05 to 1.08 of the time.
 * Inlined with far constant, so that the loop for all but the last `far`
 * has no test of it.
 */
static HOT int apply_ops_with(struct lm_state *s, const struct lm_op *ops,
                              size_t n, const char **err, const size_t far)
{
    struct owner_lag lag = {.queued = 0};
    size_t i;

    for (i = 0; i < n && i < far; i++)
        lm_heap_prefetch(&s->heap, ops[i].hash);
    for (i = 0; far != 0 && i + far < n; i++) {
        lm_heap_prefetch(&s->heap, ops[i + far].hash);
        if (apply_op(s, &ops[i], &lag, err) != 0)
            return -1;
    }
    for (; i < n; i++)
        if (apply_op(s, &ops[i], &lag, err) != 0)
            return -1;
    return settle_owners(s, &lag, err);
}

static int apply_ops(struct lm_state *s, const struct lm_op *ops, size_t n,
                     const char **err)
{
    if (fits_in_cache(s))
        return apply_ops_with(s, ops, n, err, 0);
    return apply_ops_with(s, ops, n, err, HEAP_FAR);
}

int lm_state_apply_ops(struct lm_state *s, const struct lm_op *ops, size_t n,
                       const char **err)
{
    int rc = apply_ops(s, ops, n, err);

    fold_queue(s);
    return rc;
}

void lm_state_absorb(struct lm_state *s, struct lm_state *part)
{
    /* s applied no operation: the part's blocks and overrides are the
     * profile's, and its pending overrides are in s's heap sides already. */
    assert(s->heap.count == 0 && s->novr == 0 && s->nevicted == 0);
    struct lm_heapmap heap = s->heap;
    struct lm_override *ovr = s->ovr;
    uint32_t ovr_cap = s->ovr_cap;
    struct lm_hindex ovr_index = s->ovr_index;

    s->heap = part->heap;
    s->ovr = part->ovr;
    s->novr = part->novr;
    s->ovr_cap = part->ovr_cap;
    s->ovr_index = part->ovr_index;
    memcpy(s->evicted, part->evicted, sizeof(s->evicted));
    s->nevicted = part->nevicted;
    lm_totals_add(&s->totals, &part->totals);
    /* The part placed the census's remainder; its site counts it here. */
    s->census.remainder += part->census.remainder;
    s->census.over += part->census.over;
    if (part->census.complete_blocks != 0)
        s->census.complete_blocks = part->census.complete_blocks;
    if (part->census.remainder != 0)
        census_count_remainder(s, part->census.remainder);
    for (uint32_t i = 0; i < part->census.ndups; i++)
        uncount_duplicate(&s->locs[part->census.dups[i].loc].ev,
                          part->census.dups[i].size);
    /* The worker's releases took the sites' live counts below zero
     * (modulo 2^64) where the blocks they released were counted here. */
    for (uint32_t i = 0; i < s->nlocs; i++) {
        struct lm_loc *l = &s->locs[i];
        s->sides[i].live_bytes += l->split_bytes;
        s->sides[i].live_blocks += l->split_blocks;
        l->split_bytes = l->split_blocks = 0;
    }
    part->heap = heap; /* s's own, empty, freed with the part */
    part->ovr = ovr;
    part->ovr_cap = ovr_cap;
    part->ovr_index = ovr_index;
    lm_state_free(part);
}

void lm_state_counters(const struct lm_state *s, uint32_t loc,
                       struct lm_counters *c)
{
    const struct lm_heap_side *l = &s->sides[loc];
    const struct lm_event_counters *e = &s->locs[loc].ev;

#define LM_COPY_LIVE(name) c->name = l->name;
    LM_LIVE_COUNTERS(LM_COPY_LIVE)
#undef LM_COPY_LIVE
#define LM_COPY_EVENTS(name) c->name = e->name;
    LM_EVENT_COUNTERS(LM_COPY_EVENTS)
#undef LM_COPY_EVENTS
}

/* Name of a Lua location: chunk (or its alias) and line. */
static int lfunc_name(const struct lm_state *s, uint32_t proto, uint64_t addr,
                      uint64_t line, char *buf, size_t len)
{
    const struct lm_symtab *t = &s->sym;

    if (addr == 0)
        return snprintf(buf, len, "INTERNAL");
    if (proto == LM_NONE || t->protos[proto].chunk == LM_NONE)
        return snprintf(buf, len, "0x%" PRIx64 ":%" PRIu64, addr, line);
    uint32_t chunk = t->protos[proto].chunk;
    size_t clen;
    const char *cs = lm_symtab_str(t, chunk, &clen);
    /* A census name is a name, not a chunk: no line, never an alias. */
    if (t->protos[proto].census)
        return snprintf(buf, len, "%.*s", (int)clen, cs);
    if (lm_proto_builtin(&t->protos[proto]))
        return snprintf(buf, len, "[builtin:%.*s]", (int)clen, cs);
    if (t->strs[chunk].alias != 0)
        return snprintf(buf, len, "function_alias_%u:%" PRIu64,
                        t->strs[chunk].alias, line);
    return snprintf(buf, len, "%.*s:%" PRIu64, (int)clen, cs, line);
}

static int cfunc_name(const struct lm_state *s, const struct lm_loc *l,
                      char *buf, size_t len)
{
    if (l->addr == 0)
        return snprintf(buf, len, "INTERNAL");
    if (l->sym == LM_NONE)
        return snprintf(buf, len, "CFUNC %#" PRIx64, l->addr);
    const struct lm_cfunc *f = &s->sym.cfuncs[l->sym];
    size_t nlen;
    const char *name = lm_symtab_str(&s->sym, f->name, &nlen);
    return snprintf(buf, len, "%.*s:%#" PRIx64, (int)nlen, name, f->addr);
}

/* Name of trace traceno at epoch sym (LM_NONE: none), with its machine
 * code (trace_addr) if legacy. */
static int trace_name(const struct lm_state *s, uint32_t sym, uint64_t traceno,
                      int legacy, uint64_t trace_addr, char *buf, size_t len)
{
    const struct lm_trace *t = sym != LM_NONE ? &s->sym.traces[sym] : NULL;
    int n;

    if (legacy)
        n = snprintf(buf, len, "TRACE [%" PRIu64 "] %#" PRIx64, traceno,
                     trace_addr);
    else
        n = snprintf(buf, len, "TRACE [%" PRIu64 "]", traceno);
    if (t == NULL || !t->known || (legacy && t->trace_addr != trace_addr))
        return n;
    if (n < 0 || (size_t)n >= len)
        return n;
    int m = snprintf(buf + n, len - (size_t)n, " started at ");
    int k = lfunc_name(s, t->start_proto, t->start_addr, t->start_line,
                       buf + n + m, len - (size_t)(n + m));
    return n + m + k;
}

int lm_state_loc_name(const struct lm_state *s, uint32_t loc, char *buf,
                      size_t len)
{
    const struct lm_loc *l = &s->locs[loc];

    switch (l->source) {
    case LM_SRC_LFUNC:
        return lfunc_name(s, l->sym, l->addr, l->line, buf, len);
    case LM_SRC_CFUNC:
        return cfunc_name(s, l, buf, len);
    case LM_SRC_TRACE:
        /* R2 and R3-seed name traces by their machine code address too. */
        return trace_name(s, l->sym, l->traceno,
                          s->revision == LM_REV_R2 ||
                              s->revision == LM_REV_R3_SEED,
                          l->trace_addr, buf, len);
    default:
        return snprintf(buf, len, "INTERNAL");
    }
}

int lm_state_loc_trace_name(const struct lm_state *s, uint32_t loc, char *buf,
                            size_t len)
{
    const struct lm_loc *l = &s->locs[loc];

    uint32_t trace = l->source == LM_SRC_LFUNC ? loc_trace(s, l) : 0;

    if (trace == 0)
        return lm_state_loc_name(s, loc, buf, len);
    /* The trace context names no machine code: named as in R3. */
    return trace_name(s, l->trace_sym, trace, 0, 0, buf, len);
}

/* The parts of a Lua line of prototype epoch proto, as lfunc_name names
 * it. */
static void lfunc_parts(const struct lm_state *s, uint32_t proto, uint64_t addr,
                        uint64_t line, struct lm_loc_parts *p)
{
    const struct lm_symtab *t = &s->sym;

    p->addr = addr;
    p->line = line;
    if (addr == 0) {
        p->kind = LM_PART_INTERNAL;
        return;
    }
    if (proto == LM_NONE || t->protos[proto].chunk == LM_NONE) {
        p->kind = LM_PART_UNNAMED;
        return;
    }
    uint32_t chunk = t->protos[proto].chunk;
    p->name = lm_symtab_str(t, chunk, &p->name_len);
    p->builtin = lm_proto_builtin(&t->protos[proto]);
    p->first_line = p->builtin ? 0 : t->protos[proto].firstline;
    p->kind = t->protos[proto].census ? LM_PART_CENSUS : LM_PART_LUA;
    p->alias = p->kind == LM_PART_LUA ? t->strs[chunk].alias : 0;
}

void lm_state_loc_parts(const struct lm_state *s, uint32_t loc,
                        struct lm_loc_parts *p)
{
    const struct lm_loc *l = &s->locs[loc];

    memset(p, 0, sizeof(*p));
    switch (l->source) {
    case LM_SRC_LFUNC:
        lfunc_parts(s, l->sym, l->addr, l->line, p);
        p->trace = loc_trace(s, l);
        return;
    case LM_SRC_CFUNC:
        p->kind = l->addr == 0 ? LM_PART_INTERNAL : LM_PART_C;
        p->addr = l->addr;
        if (l->addr != 0 && l->sym != LM_NONE) {
            const struct lm_cfunc *f = &s->sym.cfuncs[l->sym];
            p->name = lm_symtab_str(&s->sym, f->name, &p->name_len);
            p->addr = f->addr;
        }
        return;
    case LM_SRC_TRACE: {
        const struct lm_trace *t =
            l->sym != LM_NONE ? &s->sym.traces[l->sym] : NULL;
        /* R2 and R3-seed tell a trace by its machine code too: a number
         * reused names another trace (as trace_name says). */
        int legacy = s->revision == LM_REV_R2 || s->revision == LM_REV_R3_SEED;
        if (t != NULL && t->known &&
            (!legacy || t->trace_addr == l->trace_addr))
            lfunc_parts(s, t->start_proto, t->start_addr, t->start_line, p);
        p->kind = LM_PART_TRACE;
        p->trace = l->traceno;
        return;
    }
    default:
        p->kind = LM_PART_INTERNAL;
        return;
    }
}

static const char *const marker_names[] = {NULL, "[truncated]", "[tail call]",
                                           "[coroutine]"};

int lm_state_frame_name(const struct lm_state *s, const struct lm_sframe *f,
                        char *buf, size_t len)
{
    const char *name;
    size_t nlen;

    switch (f->kind) {
    case LM_FRAME_LUA:
        return lfunc_name(s, f->sym, f->addr, f->value, buf, len);
    case LM_FRAME_C:
        if (f->sym == LM_NONE)
            return snprintf(buf, len, "CFUNC %#" PRIx64, f->addr);
        name = lm_symtab_str(&s->sym, s->sym.cfuncs[f->sym].name, &nlen);
        return snprintf(buf, len, "%.*s", (int)nlen, name);
    default:
        if (f->value >= LM_MARK_TRUNCATED && f->value <= LM_MARK_COROUTINE)
            return snprintf(buf, len, "%s", marker_names[f->value]);
        return snprintf(buf, len, "[marker %" PRIu64 "]", f->value);
    }
}

void lm_state_frame_parts(const struct lm_state *s, const struct lm_sframe *f,
                          struct lm_loc_parts *p)
{
    memset(p, 0, sizeof(*p));
    switch (f->kind) {
    case LM_FRAME_LUA:
        lfunc_parts(s, f->sym, f->addr, f->value, p);
        return;
    case LM_FRAME_C:
        p->kind = LM_PART_C;
        p->addr = f->addr;
        if (f->sym != LM_NONE)
            p->name = lm_symtab_str(&s->sym, s->sym.cfuncs[f->sym].name,
                                    &p->name_len);
        return;
    default:
        p->kind = LM_PART_MARKER;
        p->line = f->value;
        if (f->value >= LM_MARK_TRUNCATED && f->value <= LM_MARK_COROUTINE) {
            p->name = marker_names[f->value];
            p->name_len = strlen(p->name);
        }
        return;
    }
}

void lm_state_stack_live(const struct lm_state *s, struct lm_stack_est *est)
{
    for (unsigned int k = 0; k < LM_HEAP_SHARDS; k++) {
        const struct lm_heap_shard *sh = &s->heap.shard[k];
        for (uint32_t j = 0; j < sh->cap; j++) {
            if (*lm_heap_ctrl_of(sh, j) >= LM_HEAP_EMPTY)
                continue;
            const struct lm_heap_slot *b = &sh->slots[j];
            if (b->loc >= s->nlocs || s->locs[b->loc].stack == 0)
                continue;
            double w = lm_stacks_weight(&s->stacks, b->size);
            est[b->loc].events += w;
            est[b->loc].bytes += w * (double)b->size;
        }
    }
}

uint64_t lm_state_memory(const struct lm_state *s)
{
    const struct lm_symtab *t = &s->sym;

    return lm_heap_memory(&s->heap) + lm_stacks_memory(&s->stacks) +
           (uint64_t)s->locs_cap * (sizeof(*s->locs) + sizeof(*s->sides)) +
           (uint64_t)s->ovr_cap * sizeof(*s->ovr) +
           LM_SITE_CACHE * sizeof(*s->site_cache) +
           ((uint64_t)s->loc_index.mask + 1 + s->ovr_index.mask + 1 +
            t->str_index.mask + 1 + t->proto_index.mask + 1 +
            t->trace_index.mask + 1) *
               sizeof(struct lm_hindex_slot) +
           t->chars_cap + (uint64_t)t->strs_cap * sizeof(*t->strs) +
           (uint64_t)t->protos_cap * sizeof(*t->protos) +
           (uint64_t)t->traces_cap * sizeof(*t->traces) +
           (uint64_t)t->cfuncs_cap * (sizeof(*t->cfuncs) + sizeof(uint32_t));
}
