/* Epoch-versioned symbol table: prototypes, traces, C symbols, aliases. */
#include "lm_symtab.h"

#include <stdlib.h>
#include <string.h>

#include "lm_array.h"
#include "lm_hash.h"

int lm_symtab_init(struct lm_symtab *t)
{
    memset(t, 0, sizeof(*t));
    /* Never NULL, so that an empty string still has an address. */
    t->chars_cap = 4096;
    t->chars = malloc(t->chars_cap);
    if (t->chars == NULL || lm_hindex_init(&t->str_index) != 0 ||
        lm_hindex_init(&t->proto_index) != 0 ||
        lm_hindex_init(&t->trace_index) != 0) {
        lm_symtab_free(t);
        return -1;
    }
    return 0;
}

void lm_symtab_free(struct lm_symtab *t)
{
    lm_hindex_free(&t->str_index);
    lm_hindex_free(&t->proto_index);
    lm_hindex_free(&t->trace_index);
    free(t->chars);
    free(t->strs);
    free(t->aliases);
    free(t->protos);
    free(t->traces);
    free(t->cfuncs);
    free(t->cfunc_sorted);
    memset(t, 0, sizeof(*t));
}

uint32_t lm_symtab_intern(struct lm_symtab *t, const char *s, size_t len)
{
    uint64_t h = lm_hash_bytes(s, len);
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&t->str_index, h, id, slot)
    {
        if (t->strs[id].len == len &&
            memcmp(t->chars + t->strs[id].off, s, len) == 0)
            return id;
    }
    if (len > UINT32_MAX || t->chars_len + len > UINT32_MAX)
        return LM_NONE;
    if (t->chars_len + len > t->chars_cap) {
        size_t cap = t->chars_cap;
        while (cap < t->chars_len + len)
            cap *= 2;
        char *p = realloc(t->chars, cap);
        if (p == NULL)
            return LM_NONE;
        t->chars = p;
        t->chars_cap = cap;
    }
    if (LM_RESERVE(t->strs, t->strs_cap, t->nstrs) != 0)
        return LM_NONE;
    id = t->nstrs;
    if (lm_hindex_insert(&t->str_index, h, id) != 0)
        return LM_NONE;
    if (len > 0)
        memcpy(t->chars + t->chars_len, s, len);
    t->strs[id].off = (uint32_t)t->chars_len;
    t->strs[id].len = (uint32_t)len;
    t->strs[id].alias = 0;
    t->chars_len += len;
    t->nstrs++;
    return id;
}

/* A chunk name holding a newline is source text: it gets an alias. */
static int note_alias(struct lm_symtab *t, uint32_t chunk)
{
    size_t len;
    const char *s = lm_symtab_str(t, chunk, &len);

    if (t->strs[chunk].alias != 0 || memchr(s, '\n', len) == NULL)
        return 0;
    if (LM_RESERVE(t->aliases, t->aliases_cap, t->naliases) != 0)
        return -1;
    t->aliases[t->naliases++] = chunk;
    t->strs[chunk].alias = t->naliases;
    return 0;
}

static uint32_t proto_find(const struct lm_symtab *t, uint64_t addr,
                           uint32_t *slot)
{
    uint32_t id;

    LM_HINDEX_FOREACH(&t->proto_index, lm_mix64(addr), id, *slot)
    {
        if (t->protos[id].addr == addr)
            return id;
    }
    return LM_NONE;
}

static uint32_t trace_find(const struct lm_symtab *t, uint64_t traceno,
                           uint32_t *slot)
{
    uint32_t id;

    LM_HINDEX_FOREACH(&t->trace_index, lm_mix64(traceno), id, *slot)
    {
        if (t->traces[id].traceno == traceno)
            return id;
    }
    return LM_NONE;
}

/* Appends a proto epoch and makes it current; returns the one replaced. */
static uint32_t proto_push(struct lm_symtab *t, const struct lm_proto *p,
                           uint32_t *retired)
{
    uint32_t slot, id, old;

    if (LM_RESERVE(t->protos, t->protos_cap, t->nprotos) != 0)
        return LM_NONE;
    id = t->nprotos;
    old = proto_find(t, p->addr, &slot);
    if (old != LM_NONE)
        t->proto_index.slots[slot].id = id;
    else if (lm_hindex_insert(&t->proto_index, lm_mix64(p->addr), id) != 0)
        return LM_NONE;
    t->protos[id] = *p;
    t->nprotos++;
    if (retired != NULL)
        *retired = old;
    return id;
}

uint32_t lm_symtab_proto_current(struct lm_symtab *t, uint64_t addr)
{
    uint32_t slot, id = proto_find(t, addr, &slot);
    struct lm_proto p = {.addr = addr, .chunk = LM_NONE, .locs = LM_NONE};

    return id != LM_NONE ? id : proto_push(t, &p, NULL);
}

int lm_symtab_add_proto(struct lm_symtab *t, uint64_t addr, const char *chunk,
                        size_t len, uint64_t firstline, int census,
                        uint32_t trace, uint32_t *retired)
{
    struct lm_proto p = {.addr = addr,
                         .firstline = firstline,
                         .locs = LM_NONE,
                         .census = census != 0,
                         .trace = trace};

    p.chunk = lm_symtab_intern(t, chunk, len);
    if (p.chunk == LM_NONE || (!census && note_alias(t, p.chunk) != 0))
        return -1;
    return proto_push(t, &p, retired) == LM_NONE ? -1 : 0;
}

static uint32_t trace_push(struct lm_symtab *t, const struct lm_trace *tr,
                           uint32_t *retired)
{
    uint32_t slot, id, old;

    if (LM_RESERVE(t->traces, t->traces_cap, t->ntraces) != 0)
        return LM_NONE;
    id = t->ntraces;
    old = trace_find(t, tr->traceno, &slot);
    if (old != LM_NONE)
        t->trace_index.slots[slot].id = id;
    else if (lm_hindex_insert(&t->trace_index, lm_mix64(tr->traceno), id) != 0)
        return LM_NONE;
    t->traces[id] = *tr;
    t->ntraces++;
    if (retired != NULL)
        *retired = old;
    return id;
}

uint32_t lm_symtab_trace_current(struct lm_symtab *t, uint64_t traceno)
{
    uint32_t slot, id = trace_find(t, traceno, &slot);
    struct lm_trace tr = {0};

    if (id != LM_NONE)
        return id;
    tr.traceno = traceno;
    tr.start_proto = LM_NONE;
    tr.locs = tr.ctx_locs = LM_NONE;
    return trace_push(t, &tr, NULL);
}

/* The current epoch of addr if a symbol announced it, else LM_NONE. */
static uint32_t announced_proto(const struct lm_symtab *t, uint64_t addr)
{
    uint32_t slot, id = proto_find(t, addr, &slot);

    return id != LM_NONE && t->protos[id].chunk != LM_NONE ? id : LM_NONE;
}

uint32_t lm_symtab_proto_announced(const struct lm_symtab *t, uint64_t addr)
{
    return announced_proto(t, addr);
}

void lm_symtab_resolve_trace_starts(struct lm_symtab *t)
{
    for (uint32_t i = 0; i < t->ntraces; i++)
        if (t->traces[i].known && t->traces[i].start_proto == LM_NONE)
            t->traces[i].start_proto =
                announced_proto(t, t->traces[i].start_addr);
}

int lm_symtab_add_trace(struct lm_symtab *t, uint64_t traceno,
                        uint64_t trace_addr, uint64_t start_addr,
                        uint64_t start_line, uint32_t *retired)
{
    struct lm_trace tr = {0};

    tr.traceno = traceno;
    tr.trace_addr = trace_addr;
    tr.start_addr = start_addr;
    tr.start_line = start_line;
    /* The start prototype may come later in the initial dump (newest
     * first): lm_symtab_resolve_trace_starts() fills it in then. */
    tr.start_proto = announced_proto(t, start_addr);
    tr.known = 1;
    tr.locs = tr.ctx_locs = LM_NONE;
    return trace_push(t, &tr, retired) == LM_NONE ? -1 : 0;
}

struct cfunc_key {
    uint64_t addr;
    uint32_t id;
};

static int cmp_cfunc_keys(const void *a, const void *b)
{
    const struct cfunc_key *x = a, *y = b;

    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/*
 * Symbols arrive in bursts (the start dump, a library loaded later) and in
 * any order: they are appended, and the next look-up sorts the new ones
 * and merges them in.  At one address the newest symbol wins.
 */
static int cfuncs_sort(struct lm_symtab *t)
{
    uint32_t nnew = t->ncfuncs - t->nmerged, nold = t->nsorted, k = 0;
    struct cfunc_key *keys = malloc((size_t)nnew * sizeof(*keys));
    uint32_t *merged = malloc(((size_t)nold + nnew) * sizeof(*merged));

    if (keys == NULL || merged == NULL) {
        free(keys);
        free(merged);
        return -1;
    }
    for (uint32_t i = 0; i < nnew; i++) {
        keys[i].id = t->nmerged + i;
        keys[i].addr = t->cfuncs[keys[i].id].addr;
    }
    qsort(keys, nnew, sizeof(*keys), cmp_cfunc_keys);
    uint32_t i = 0, j = 0;
    while (i < nold || j < nnew) {
        uint32_t id;
        if (j == nnew ||
            (i < nold && t->cfuncs[t->cfunc_sorted[i]].addr <= keys[j].addr))
            id = t->cfunc_sorted[i++];
        else
            id = keys[j++].id;
        if (k > 0 && t->cfuncs[merged[k - 1]].addr == t->cfuncs[id].addr) {
            if (id > merged[k - 1])
                merged[k - 1] = id;
            continue;
        }
        merged[k++] = id;
    }
    memcpy(t->cfunc_sorted, merged, (size_t)k * sizeof(*merged));
    free(merged);
    free(keys);
    t->nsorted = k;
    t->nmerged = t->ncfuncs;
    return 0;
}

uint32_t lm_symtab_cfunc_floor(struct lm_symtab *t, uint64_t addr)
{
    if (t->nmerged < t->ncfuncs && cfuncs_sort(t) != 0)
        return LM_NONE;
    uint32_t lo = 0, hi = t->nsorted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->cfuncs[t->cfunc_sorted[mid]].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? LM_NONE : t->cfunc_sorted[lo - 1];
}

int lm_symtab_add_cfunc(struct lm_symtab *t, uint64_t addr, const char *name,
                        size_t len)
{
    uint32_t name_id = lm_symtab_intern(t, name, len);

    /* The sorted index grows first: it must hold every record. */
    if (name_id == LM_NONE ||
        LM_RESERVE(t->cfunc_sorted, t->sorted_cap, t->ncfuncs) != 0 ||
        LM_RESERVE(t->cfuncs, t->cfuncs_cap, t->ncfuncs) != 0)
        return -1;
    t->cfuncs[t->ncfuncs].addr = addr;
    t->cfuncs[t->ncfuncs].name = name_id;
    t->ncfuncs++;
    return 0;
}
