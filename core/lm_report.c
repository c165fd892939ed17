/* Text and JSON reports of a profile state, or of several merged, in
 * Tarantool's parser layout. */
#include "lm_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lm_calltree.h"
#include "lm_hash.h"

/*
 * The report's unit is a name, as a reader sees it: locations that print
 * the same name (a module loaded twice, an address reused by a prototype
 * of the same chunk and line) are one line, with their counters summed.
 * Locations whose names differ stay apart, which is what symbol epochs
 * are for.  Groups are numbered in name order, so ties broken by group
 * number are broken by name.
 */
struct group {
    const char *name;
    struct lm_counters c;
    /* Tarantool's heap delta (see write_heap_summary), kept as what was
     * credited and debited, each saturating, so no sum can overflow. */
    uint64_t credit, debit;
    uint64_t nalloc, nfree;
};

/* An override between groups (summed over their locations). */
struct gpair {
    uint8_t kind;
    uint32_t site, primary;
    uint64_t count, allocated, freed;
};

/*
 * Locations are numbered across the states: state k's location i is
 * first[k] + i, owned by state k (owner).
 */
struct report {
    const struct lm_state *const *states;
    const struct lm_report_member *members; /* NULL: one state, no member */
    size_t nstates;
    const struct lm_report_opts *o;
    FILE *out;
    uint32_t *first;    /* per state: its first location's number */
    uint32_t nlocs;     /* of every state */
    uint32_t *owner;    /* per location: its state */
    char **names;       /* per location */
    uint32_t *group_of; /* per location */
    struct group *groups;
    uint32_t ngroups;
    struct gpair *pairs; /* by kind, site group, primary group */
    uint32_t npairs;
    uint32_t *pair_first; /* per group and kind: first pair, or LM_NONE */
    /* Per location, the one that stands for it in the stream stripped of
     * its stacks (see make_bases); NULL when no location has a stack. */
    uint32_t *base;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t sum;

    return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

/* Bytes a name holds: what it was credited beyond what it was debited. */
static uint64_t held(const struct group *g)
{
    return g->credit > g->debit ? g->credit - g->debit : 0;
}

/* What a name is written by: snprintf's contract, into buf of len. */
struct namer {
    const struct lm_state *s;
    uint32_t loc;
    int by_trace;
    const struct lm_sframe *frame; /* a frame's name, if set */
};

static int write_name(const struct namer *k, char *buf, size_t len)
{
    return k->frame != NULL
               ? lm_state_frame_name(k->s, k->frame, buf, len)
               : lm_state_loc_name_by(k->s, k->loc, k->by_trace, buf, len);
}

/* k's name, malloc'd as long as it takes (NULL when out of memory). */
static char *grown_name(const struct namer *k)
{
    size_t len = 128;
    char *buf = malloc(len);

    while (buf != NULL) {
        int n = write_name(k, buf, len);
        if (n < 0) {
            free(buf);
            return NULL;
        }
        if ((size_t)n < len)
            return buf;
        len = (size_t)n + 1;
        char *p = realloc(buf, len);
        if (p == NULL)
            free(buf);
        buf = p;
    }
    return NULL;
}

static char *format_name(const struct lm_state *s, uint32_t loc, int by_trace)
{
    return grown_name(&(struct namer){s, loc, by_trace, NULL});
}

struct named {
    const char *name;
    uint32_t loc;
};

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    return c ? c : (x->loc > y->loc) - (x->loc < y->loc);
}

/* Numbers the states' locations one after the other: 0, or -1 when out
 * of memory or past 2^32 - 1 locations. */
static int number_locations(struct report *r)
{
    uint64_t n = 0;

    if ((r->first =
             malloc((r->nstates ? r->nstates : 1) * sizeof(*r->first))) == NULL)
        return -1;
    for (size_t k = 0; k < r->nstates; k++) {
        r->first[k] = (uint32_t)n;
        n += r->states[k]->nlocs;
    }
    if (n >= LM_NONE ||
        (r->owner = malloc((n ? n : 1) * sizeof(*r->owner))) == NULL)
        return -1;
    r->nlocs = (uint32_t)n;
    for (size_t k = 0; k < r->nstates; k++)
        for (uint32_t i = 0; i < r->states[k]->nlocs; i++)
            r->owner[r->first[k] + i] = (uint32_t)k;
    return 0;
}

/* The counters of location loc (a number across the states). */
static void loc_counters(const struct report *r, uint32_t loc,
                         struct lm_counters *c)
{
    uint32_t k = r->owner[loc];

    lm_state_counters(r->states[k], loc - r->first[k], c);
}

/*
 * Stacks split a site's events into locations of their own, which the
 * stream stripped of its stacks (docs/format.md, "Stripping") has as one;
 * Tarantool's heap delta tests what a location allocated, and what each
 * pair of locations released, before it sums them by name.  So that a
 * report without stacks is that of the stripped stream, each location is
 * taken as its base, the first of those that differ only by their stack:
 * the same key, epoch and trace.
 */
static uint64_t stripped_hash(const struct lm_loc *l)
{
    uint64_t h = lm_hash_combine(l->source, l->addr);

    h = lm_hash_combine(h, l->line);
    h = lm_hash_combine(h, (uint64_t)l->trace << 32 | l->sym);
    return lm_hash_combine(h, l->trace_sym);
}

static int same_stripped(const struct lm_loc *a, const struct lm_loc *b)
{
    return a->source == b->source && a->addr == b->addr && a->line == b->line &&
           a->trace == b->trace && a->sym == b->sym &&
           a->trace_sym == b->trace_sym;
}

/* The bases of state k's locations (numbered across the states). */
static int bases_of(struct report *r, size_t k)
{
    const struct lm_state *s = r->states[k];
    struct lm_hindex x;
    uint32_t id, slot;

    if (lm_hindex_init(&x) != 0)
        return -1;
    for (uint32_t i = 0; i < s->nlocs; i++) {
        uint64_t h = stripped_hash(&s->locs[i]);
        uint32_t found = LM_NONE;
        LM_HINDEX_FOREACH(&x, h, id, slot)
        {
            if (same_stripped(&s->locs[id], &s->locs[i])) {
                found = id;
                break;
            }
        }
        if (found == LM_NONE && lm_hindex_insert(&x, h, found = i) != 0) {
            lm_hindex_free(&x);
            return -1;
        }
        r->base[r->first[k] + i] = r->first[k] + found;
    }
    lm_hindex_free(&x);
    return 0;
}

static int make_bases(struct report *r)
{
    int stacks = 0;

    for (size_t k = 0; k < r->nstates; k++)
        stacks |= r->states[k]->stacks.nlocs != 0;
    if (!stacks)
        return 0;
    if ((r->base = malloc((r->nlocs ? r->nlocs : 1) * sizeof(*r->base))) ==
        NULL)
        return -1;
    for (size_t k = 0; k < r->nstates; k++)
        if (bases_of(r, k) != 0)
            return -1;
    return 0;
}

/* Credits a group with what a location (or a base's locations)
 * allocated, as Tarantool's heap delta does. */
static void credit_alloc(struct group *g, uint64_t bytes, uint64_t events)
{
    if (bytes > 0) {
        g->credit = sat_add(g->credit, bytes);
        g->nalloc += events;
    }
}

/* The credits of each base (see make_bases): what its locations
 * allocated, summed, then tested. */
static int credit_bases(struct report *r)
{
    uint64_t *bytes = calloc((size_t)r->nlocs + 1, sizeof(*bytes));
    uint64_t *events = calloc((size_t)r->nlocs + 1, sizeof(*events));

    if (bytes == NULL || events == NULL) {
        free(bytes);
        free(events);
        return -1;
    }
    for (uint32_t i = 0; i < r->nlocs; i++) {
        struct lm_counters c;
        loc_counters(r, i, &c);
        bytes[r->base[i]] = sat_add(bytes[r->base[i]], c.alloc_bytes);
        events[r->base[i]] += c.alloc_events;
    }
    for (uint32_t i = 0; i < r->nlocs; i++)
        if (r->base[i] == i)
            credit_alloc(&r->groups[r->group_of[i]], bytes[i], events[i]);
    free(bytes);
    free(events);
    return 0;
}

/* Names every location and gathers equal names into groups. */
static int make_groups(struct report *r)
{
    uint32_t n = r->nlocs;
    struct named *byname = malloc((n ? n : 1) * sizeof(*byname));

    r->names = calloc(n ? n : 1, sizeof(*r->names));
    r->group_of = malloc((n ? n : 1) * sizeof(*r->group_of));
    r->groups = calloc(n ? n : 1, sizeof(*r->groups));
    if (byname == NULL || r->names == NULL || r->group_of == NULL ||
        r->groups == NULL) {
        free(byname);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = r->owner[i];
        if ((r->names[i] = format_name(r->states[k], i - r->first[k],
                                       r->o->by_trace)) == NULL) {
            free(byname);
            return -1;
        }
        byname[i] = (struct named){r->names[i], i};
    }
    qsort(byname, n, sizeof(*byname), cmp_named);
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(byname[i].name, byname[i - 1].name) != 0)
            r->groups[r->ngroups++].name = byname[i].name;
        uint32_t g = r->ngroups - 1;
        struct lm_counters counters, *c = &counters;
        loc_counters(r, byname[i].loc, c);
        r->group_of[byname[i].loc] = g;
        lm_counters_add(&r->groups[g].c, c);
        if (r->base == NULL)
            credit_alloc(&r->groups[g], c->alloc_bytes, c->alloc_events);
    }
    free(byname);
    return r->base != NULL ? credit_bases(r) : 0;
}

static int cmp_overrides(const void *a, const void *b)
{
    const struct lm_override *x = a, *y = b;

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return (x->primary > y->primary) - (x->primary < y->primary);
}

/* The overrides between bases (see make_bases): each record's locations
 * taken as their bases, and the records of a pair summed, in place. */
static void merge_base_overrides(const struct report *r, struct lm_override *o,
                                 uint32_t *n)
{
    uint32_t k = 0;

    if (r->base == NULL)
        return;
    for (uint32_t i = 0; i < *n; i++) {
        o[i].site = r->base[o[i].site];
        o[i].primary = r->base[o[i].primary] & ((1u << 30) - 1);
    }
    qsort(o, *n, sizeof(*o), cmp_overrides);
    for (uint32_t i = 0; i < *n; i++) {
        if (k > 0 && cmp_overrides(&o[k - 1], &o[i]) == 0) {
            o[k - 1].count += o[i].count;
            o[k - 1].allocated += o[i].allocated;
            o[k - 1].freed += o[i].freed;
            continue;
        }
        o[k++] = o[i];
    }
    *n = k;
}

static int cmp_gpairs(const void *a, const void *b)
{
    const struct gpair *x = a, *y = b;

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return (x->primary > y->primary) - (x->primary < y->primary);
}

/* Index of a (group, kind) pair in pair_first: FREE 0, REALLOC 1. */
static size_t pair_slot(uint32_t group, uint8_t kind)
{
    return (size_t)group * 2 + (kind == LM_EV_REALLOC);
}

/*
 * Folds overrides into groups, and credits each primary with Tarantool's
 * heap delta, whose conditions hold per pair of locations.
 */
static int make_pairs(struct report *r, const struct lm_override *ovr,
                      uint32_t novr)
{
    size_t nslots = (size_t)r->ngroups * 2 + 1;
    uint32_t k = 0;

    r->pairs = malloc((novr ? novr : 1) * sizeof(*r->pairs));
    r->pair_first = malloc(nslots * sizeof(*r->pair_first));
    if (r->pairs == NULL || r->pair_first == NULL)
        return -1;
    for (uint32_t i = 0; i < novr; i++) {
        const struct lm_override *o = &ovr[i];
        struct group *p = &r->groups[r->group_of[o->primary]];
        if (o->allocated > 0) {
            p->credit = sat_add(p->credit, o->allocated);
            p->nalloc += o->count;
        }
        if (o->freed > 0) {
            p->debit = sat_add(p->debit, o->freed);
            p->nfree += o->count;
        }
        r->pairs[i] = (struct gpair){
            o->kind,  r->group_of[o->site], r->group_of[o->primary],
            o->count, o->allocated,         o->freed};
    }
    qsort(r->pairs, novr, sizeof(*r->pairs), cmp_gpairs);
    memset(r->pair_first, 0xff, nslots * sizeof(*r->pair_first));
    for (uint32_t i = 0; i < novr; i++) {
        struct gpair *q = &r->pairs[i];
        if (k > 0 && cmp_gpairs(&r->pairs[k - 1], q) == 0) {
            r->pairs[k - 1].count += q->count;
            r->pairs[k - 1].allocated += q->allocated;
            r->pairs[k - 1].freed += q->freed;
            continue;
        }
        r->pairs[k] = *q;
        if (r->pair_first[pair_slot(q->site, q->kind)] == LM_NONE)
            r->pair_first[pair_slot(q->site, q->kind)] = k;
        k++;
    }
    r->npairs = k;
    return 0;
}

static void put_bytes(struct report *r, uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    double v = (double)bytes;
    unsigned int u = 0;

    if (!r->o->human_readable) {
        fprintf(r->out, "%" PRIu64 "B", bytes);
        return;
    }
    /* The same arithmetic as Tarantool's humanizer (doubles). */
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    if (v == (double)(uint64_t)v)
        fprintf(r->out, "%" PRIu64 "%s", (uint64_t)v, units[u]);
    else
        fprintf(r->out, "%.2f%s", v, units[u]);
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629), or 0. */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (len < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/*
 * A JSON string.  Chunk names are bytes: valid UTF-8 passes through, and
 * any other byte is written as the code point of the same value (as if
 * Latin-1), so that the output is always valid JSON.
 */
void lm_json_string(FILE *out, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;

    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        size_t n;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, out);
        else if ((n = utf8_sequence(s + i, len - i)) != 0) {
            fwrite(s + i, 1, n, out);
            i += n - 1;
        } else
            fprintf(out, "\\u%04x", c);
    }
    fputc('"', out);
}

static void put_json_name(FILE *out, const char *s)
{
    lm_json_string(out, s, strlen(s));
}

/* A line of a section: a group, with the events of that kind. */
struct row {
    uint64_t events;
    uint32_t group;
};

/* By events, descending; then by name (group order). */
static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->events != y->events)
        return x->events > y->events ? -1 : 1;
    return (x->group > y->group) - (x->group < y->group);
}

static uint64_t events_of(const struct lm_counters *c, uint8_t kind)
{
    return kind == LM_EV_ALLOC     ? c->alloc_events
           : kind == LM_EV_REALLOC ? c->realloc_events
                                   : c->free_events;
}

static struct row *section_rows(struct report *r, uint8_t kind, uint32_t *n)
{
    struct row *rows = malloc((r->ngroups ? r->ngroups : 1) * sizeof(*rows));

    *n = 0;
    if (rows == NULL)
        return NULL;
    for (uint32_t g = 0; g < r->ngroups; g++) {
        uint64_t events = events_of(&r->groups[g].c, kind);
        if (events > 0)
            rows[(*n)++] = (struct row){events, g};
    }
    qsort(rows, *n, sizeof(*rows), cmp_rows);
    return rows;
}

static void section_bytes(const struct lm_counters *c, uint8_t kind,
                          uint64_t *plus, uint64_t *minus)
{
    switch (kind) {
    case LM_EV_ALLOC:
        *plus = c->alloc_bytes;
        *minus = 0;
        break;
    case LM_EV_REALLOC:
        *plus = c->realloc_new_bytes;
        *minus = c->realloc_old_bytes;
        break;
    default:
        *plus = 0;
        *minus = c->free_bytes;
        break;
    }
}

/* The pairs of one site group and kind: [*first, end). */
static uint32_t pairs_of(const struct report *r, uint32_t group, uint8_t kind,
                         uint32_t *first)
{
    uint32_t i =
        kind == LM_EV_ALLOC ? LM_NONE : r->pair_first[pair_slot(group, kind)];

    *first = i;
    if (i == LM_NONE)
        return i;
    while (i < r->npairs && r->pairs[i].site == group &&
           r->pairs[i].kind == kind)
        i++;
    return i;
}

static void text_overrides(struct report *r, uint32_t group, uint8_t kind)
{
    uint32_t i, end = pairs_of(r, group, kind, &i);

    if (i == LM_NONE)
        return;
    fputs("\tOverrides:\n", r->out);
    for (; i < end; i++)
        fprintf(r->out, "\t\t%s\n", r->groups[r->pairs[i].primary].name);
    fputs("\n", r->out);
}

static void json_overrides(struct report *r, uint32_t group, uint8_t kind)
{
    uint32_t i, end = pairs_of(r, group, kind, &i);

    if (kind == LM_EV_ALLOC)
        return;
    fputs(",\"overrides\":[", r->out);
    for (uint32_t first = i; i != LM_NONE && i < end; i++) {
        const struct gpair *q = &r->pairs[i];
        fprintf(r->out, "%s{\"location\":", i == first ? "" : ",");
        put_json_name(r->out, r->groups[q->primary].name);
        fprintf(r->out,
                ",\"count\":%" PRIu64 ",\"allocated\":%" PRIu64
                ",\"freed\":%" PRIu64 "}",
                q->count, q->allocated, q->freed);
    }
    fputs("]", r->out);
}

static int section(struct report *r, uint8_t kind, const char *title)
{
    uint32_t n;
    struct row *rows = section_rows(r, kind, &n);

    if (rows == NULL)
        return -1;
    if (r->o->json)
        fprintf(r->out, "\"%s\":[", title);
    else
        fprintf(r->out, "%s\n", title);
    for (uint32_t i = 0; i < n; i++) {
        const struct group *g = &r->groups[rows[i].group];
        uint64_t plus, minus;
        section_bytes(&g->c, kind, &plus, &minus);
        if (r->o->json) {
            fprintf(r->out, "%s{\"location\":", i ? "," : "");
            put_json_name(r->out, g->name);
            fprintf(r->out,
                    ",\"events\":%" PRIu64 ",\"alloc_bytes\":%" PRIu64
                    ",\"free_bytes\":%" PRIu64 ",\"live_bytes\":%" PRIu64
                    ",\"live_blocks\":%" PRIu64,
                    rows[i].events, plus, minus, g->c.live_bytes,
                    g->c.live_blocks);
            json_overrides(r, rows[i].group, kind);
            fputs("}", r->out);
            continue;
        }
        fprintf(r->out, "%s: %" PRIu64 " events\t+", g->name, rows[i].events);
        put_bytes(r, plus);
        fputs("\t-", r->out);
        put_bytes(r, minus);
        fputs("\n", r->out);
        text_overrides(r, rows[i].group, kind);
    }
    fputs(r->o->json ? "]," : "\n", r->out);
    free(rows);
    return 0;
}

/* -- The STACKS section (docs/report.md): each site's callers. */

/* A frame's name, malloc'd (NULL when out of memory). */
static char *format_frame(const struct lm_state *s, const struct lm_sframe *f)
{
    return grown_name(&(struct namer){s, 0, 0, f});
}

/* Locations listed by group: those of group g are at[first[g]] up to
 * at[first[g + 1]]. */
struct by_group {
    uint32_t *first, *at;
};

static int locations_by_group(const struct report *r, struct by_group *b)
{
    b->first = calloc((size_t)r->ngroups + 2, sizeof(*b->first));
    b->at = malloc((r->nlocs ? r->nlocs : 1) * sizeof(*b->at));
    if (b->first == NULL || b->at == NULL)
        return -1;
    for (uint32_t i = 0; i < r->nlocs; i++)
        b->first[r->group_of[i] + 2]++;
    for (uint32_t g = 0; g < r->ngroups; g++)
        b->first[g + 2] += b->first[g + 1];
    for (uint32_t i = 0; i < r->nlocs; i++)
        b->at[b->first[r->group_of[i] + 1]++] = i;
    return 0;
}

/* Per state: what its stacked locations' live blocks weigh when it was
 * sampled (lm_state_stack_live), else NULL. */
static struct lm_stack_est **live_estimates(const struct report *r)
{
    struct lm_stack_est **est = calloc(r->nstates + 1, sizeof(*est));

    for (size_t k = 0; est != NULL && k < r->nstates; k++) {
        const struct lm_state *s = r->states[k];
        if (s->stacks.sample_bytes == 0)
            continue;
        if ((est[k] = calloc((size_t)s->nlocs + 1, sizeof(**est))) == NULL)
            return est; /* the caller sees the hole */
        lm_state_stack_live(s, est[k]);
    }
    return est;
}

/* What location loc (of state k, its number there i) adds to a tree:
 * exact counts, or estimates when its state sampled (1 returned). */
static int loc_figures(const struct report *r, uint32_t loc,
                       struct lm_stack_est *const *live,
                       struct lm_ct_figures *f)
{
    uint32_t k = r->owner[loc], i = loc - r->first[k];
    const struct lm_state *s = r->states[k];
    struct lm_counters c;

    if (s->stacks.sample_bytes != 0 && s->locs[i].stack != 0) {
        int made = (size_t)i < s->stacks.est_room / sizeof(*s->stacks.est);
        f->allocs = made ? s->stacks.est[i].events : 0;
        f->alloc_bytes = made ? s->stacks.est[i].bytes : 0;
        f->live_bytes = live[k] != NULL ? live[k][i].bytes : 0;
        f->live_blocks = live[k] != NULL ? live[k][i].events : 0;
        return 1;
    }
    loc_counters(r, loc, &c);
    f->allocs = (double)(c.alloc_events + c.realloc_events);
    f->alloc_bytes = (double)(c.alloc_bytes + c.realloc_new_bytes);
    f->live_bytes = (double)c.live_bytes;
    f->live_blocks = (double)c.live_blocks;
    return 0;
}

/* Whether a stack's innermost frame is the site itself (a Lua line the
 * site's name says, a C function at the site's address): the tree's
 * root says it already. */
static int frame_is_site(const struct lm_state *s, uint32_t i,
                         const struct lm_sframe *f, const char *fname)
{
    const struct lm_loc *l = &s->locs[i];
    char *site;
    int same;

    if (f->kind == LM_FRAME_C)
        return l->source == LM_SRC_CFUNC && l->addr == f->addr;
    if (f->kind != LM_FRAME_LUA || l->source != LM_SRC_LFUNC)
        return 0;
    if ((site = format_name(s, i, 0)) == NULL)
        return 0;
    same = strcmp(site, fname) == 0;
    free(site);
    return same;
}

static void free_names(char **names, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++)
        free(names[j]);
}

/* Adds a stacked location (loc, of state k, i there) to its site's tree
 * along its callers: 0, or -1 when out of memory. */
static int add_stacked(const struct report *r, struct lm_calltree *t,
                       uint32_t loc, const struct lm_ct_figures *f, int est)
{
    uint32_t k = r->owner[loc], i = loc - r->first[k], n, skip = 0;
    const struct lm_state *s = r->states[k];
    const struct lm_sframe *fr =
        lm_stacks_frames(&s->stacks, s->locs[i].stack, &n);
    char *names[LM_STACK_MAX_DEPTH + 1];
    int rc = -1;

    for (uint32_t j = 0; j < n; j++)
        if ((names[j] = format_frame(s, &fr[j])) == NULL) {
            free_names(names, j);
            return -1;
        }
    if (n > 0 && frame_is_site(s, i, &fr[0], names[0]))
        skip = 1;
    rc =
        lm_calltree_add(t, (const char *const *)names + skip, n - skip, f, est);
    free_names(names, n);
    return rc;
}

/* The tree of group g's callers: 0, or -1 when out of memory.  Events
 * without a stack make a path of their own when the stream gave every
 * event one (folded ones, the census's); a sampled stream's estimates
 * stand for them. */
static int site_tree(const struct report *r, const struct by_group *b,
                     struct lm_stack_est *const *live, uint32_t g,
                     struct lm_calltree *t)
{
    static const char *const none[] = {"[no stack]"};

    for (uint32_t j = b->first[g]; j < b->first[g + 1]; j++) {
        uint32_t loc = b->at[j], k = r->owner[loc];
        const struct lm_state *s = r->states[k];
        struct lm_ct_figures f;
        int est = loc_figures(r, loc, live, &f);
        if (s->locs[loc - r->first[k]].stack != 0) {
            if (add_stacked(r, t, loc, &f, est) != 0)
                return -1;
        } else if (s->stacks.sample_bytes == 0 &&
                   (f.allocs != 0 || f.live_blocks != 0)) {
            if (lm_calltree_add(t, none, 1, &f, 0) != 0)
                return -1;
        }
    }
    /* The site's own figures: exact, whatever its stacks say. */
    struct lm_counters c = r->groups[g].c;
    t->v[0].f =
        (struct lm_ct_figures){(double)(c.alloc_events + c.realloc_events),
                               (double)(c.alloc_bytes + c.realloc_new_bytes),
                               (double)c.live_bytes, (double)c.live_blocks};
    t->v[0].estimated = 0;
    return lm_calltree_sort(t);
}

/* Whether group g has a location with a stack. */
static int has_stacks(const struct report *r, const struct by_group *b,
                      uint32_t g)
{
    for (uint32_t j = b->first[g]; j < b->first[g + 1]; j++) {
        uint32_t loc = b->at[j], k = r->owner[loc];
        if (r->states[k]->locs[loc - r->first[k]].stack != 0)
            return 1;
    }
    return 0;
}

static uint64_t rounded(double v)
{
    return v <= 0 ? 0 : (uint64_t)llround(v);
}

static void text_ct_node(struct report *r, const struct lm_ct_node *n)
{
    const char *e = n->estimated ? "~" : "";

    for (uint32_t d = 0; d < n->depth; d++)
        fputc('\t', r->out);
    fprintf(r->out, "%s: %s%" PRIu64 " allocs\t+%s", n->name, e,
            rounded(n->f.allocs), e);
    put_bytes(r, rounded(n->f.alloc_bytes));
    fprintf(r->out, "\tlive %s", e);
    put_bytes(r, rounded(n->f.live_bytes));
    fprintf(r->out, " in %s%" PRIu64 " blocks\n", e, rounded(n->f.live_blocks));
}

static void json_ct_node(struct report *r, const struct lm_calltree *t,
                         uint32_t i)
{
    const struct lm_ct_node *n = &t->v[i];

    fputs(i == 0 ? "{\"location\":" : "{\"frame\":", r->out);
    put_json_name(r->out, n->name);
    fprintf(r->out,
            ",\"allocs\":%" PRIu64 ",\"alloc_bytes\":%" PRIu64
            ",\"live_bytes\":%" PRIu64 ",\"live_blocks\":%" PRIu64
            ",\"estimated\":%s,\"callers\":[",
            rounded(n->f.allocs), rounded(n->f.alloc_bytes),
            rounded(n->f.live_bytes), rounded(n->f.live_blocks),
            n->estimated ? "true" : "false");
    for (uint32_t c = n->child; c != LM_NONE; c = t->v[c].sibling) {
        if (c != n->child)
            fputs(",", r->out);
        json_ct_node(r, t, c);
    }
    fputs("]}", r->out);
}

/* A tree, depth first, each node's callers biggest first. */
static void write_tree(struct report *r, const struct lm_calltree *t,
                       uint32_t i)
{
    text_ct_node(r, &t->v[i]);
    for (uint32_t c = t->v[i].child; c != LM_NONE; c = t->v[c].sibling)
        write_tree(r, t, c);
}

/* The section's header: the depth and sampling of the first state that
 * has stacks (the processes of a merged report run one program). */
static void stacks_header(struct report *r)
{
    const struct lm_stacks *k = NULL;
    uint64_t folded = 0;

    for (size_t i = 0; i < r->nstates; i++) {
        folded += r->states[i]->stacks.folded;
        if (k == NULL && r->states[i]->stacks.configured)
            k = &r->states[i]->stacks;
    }
    if (r->o->json) {
        fprintf(r->out,
                "\"stacks\":{\"depth\":%u,\"sample_bytes\":%" PRIu64
                ",\"folded\":%" PRIu64 ",\"sites\":[",
                k ? k->depth : 0, k ? k->sample_bytes : 0, folded);
        return;
    }
    if (k == NULL)
        fputs("STACKS (none: the stream has no call stacks)", r->out);
    else if (k->sample_bytes == 0)
        fprintf(r->out, "STACKS (depth %u, every allocation)", k->depth);
    else
        fprintf(r->out,
                "STACKS (depth %u, sampled every %" PRIu64
                " bytes on average: ~ marks estimates)",
                k->depth, k->sample_bytes);
    if (folded != 0)
        fprintf(r->out, "; %" PRIu64 " events past the bound without theirs",
                folded);
    fputs(":\n", r->out);
}

/* The sites in the report's order: ALLOCATIONS', then REALLOCATIONS'
 * that are not there, then the rest by name.  NULL when out of memory. */
static uint32_t *site_order(struct report *r, uint32_t *n)
{
    uint32_t *order = malloc(((size_t)r->ngroups + 1) * sizeof(*order));
    uint8_t *seen = calloc((size_t)r->ngroups + 1, 1);
    static const uint8_t kinds[] = {LM_EV_ALLOC, LM_EV_REALLOC};

    *n = 0;
    for (size_t k = 0; order != NULL && seen != NULL && k < 2; k++) {
        uint32_t m;
        struct row *rows = section_rows(r, kinds[k], &m);
        if (rows == NULL) {
            free(order);
            order = NULL;
            break;
        }
        for (uint32_t i = 0; i < m; i++)
            if (!seen[rows[i].group]++)
                order[(*n)++] = rows[i].group;
        free(rows);
    }
    for (uint32_t g = 0; order != NULL && seen != NULL && g < r->ngroups; g++)
        if (!seen[g])
            order[(*n)++] = g;
    if (seen == NULL) {
        free(order);
        return NULL;
    }
    free(seen);
    return order;
}

/* Each site that has stacks, with its tree, in *written. */
static int write_site_trees(struct report *r, const struct by_group *b,
                            struct lm_stack_est *const *live,
                            const uint32_t *order, uint32_t n,
                            uint32_t *written)
{

    for (uint32_t i = 0; i < n; i++) {
        struct lm_calltree t;
        uint32_t g = order[i];
        if (!has_stacks(r, b, g))
            continue;
        if (lm_calltree_init(&t, r->groups[g].name) != 0)
            return -1;
        if (site_tree(r, b, live, g, &t) != 0) {
            lm_calltree_free(&t);
            return -1;
        }
        if (r->o->json) {
            fputs(*written ? "," : "", r->out);
            json_ct_node(r, &t, 0);
        } else {
            write_tree(r, &t, 0);
            fputs("\n", r->out); /* a blank line after each, as sections */
        }
        ++*written;
        lm_calltree_free(&t);
    }
    return 0;
}

static int write_stacks(struct report *r)
{
    struct by_group b = {NULL, NULL};
    struct lm_stack_est **live = live_estimates(r);
    uint32_t n = 0, *order = site_order(r, &n), written = 0;
    int rc = -1;

    if (live == NULL || order == NULL || locations_by_group(r, &b) != 0)
        goto out;
    for (size_t k = 0; k < r->nstates; k++)
        if (r->states[k]->stacks.sample_bytes != 0 && live[k] == NULL)
            goto out;
    stacks_header(r);
    rc = write_site_trees(r, &b, live, order, n, &written);
    if (r->o->json || written == 0)
        fputs(r->o->json ? "]}," : "\n", r->out);
out:
    for (size_t k = 0; live != NULL && k < r->nstates; k++)
        free(live[k]);
    free(live);
    free(order);
    free(b.first);
    free(b.at);
    return rc;
}

/* By held bytes, descending; then by name (group order). */
static int cmp_held(const void *a, const void *b)
{
    const struct group *x = *(const struct group *const *)a;
    const struct group *y = *(const struct group *const *)b;

    uint64_t hx = held(x), hy = held(y);

    if (hx != hy)
        return hx > hy ? -1 : 1;
    return (x > y) - (x < y);
}

/* What each state holds live of each group: shares[g * nstates + k];
 * NULL when out of memory. */
struct share {
    uint64_t bytes, blocks;
};

static struct share *live_shares(const struct report *r)
{
    struct share *sh = calloc((size_t)r->ngroups * r->nstates + 1, sizeof(*sh));

    if (sh == NULL)
        return NULL;
    for (uint32_t loc = 0; loc < r->nlocs; loc++) {
        struct lm_counters c;
        loc_counters(r, loc, &c);
        struct share *s =
            &sh[(size_t)r->group_of[loc] * r->nstates + r->owner[loc]];
        s->bytes += c.live_bytes;
        s->blocks += c.live_blocks;
    }
    return sh;
}

/* Under a heap summary line: what each process holds live of it. */
static void write_shares(struct report *r, const struct share *sh)
{
    size_t count = 0;

    if (r->o->json)
        fputs(",\"by_process\":[", r->out);
    for (size_t k = 0; k < r->nstates; k++) {
        if (sh[k].bytes == 0 && sh[k].blocks == 0)
            continue;
        if (r->o->json) {
            fprintf(r->out,
                    "%s{\"pid\":%" PRIu32 ",\"live_bytes\":%" PRIu64
                    ",\"live_blocks\":%" PRIu64 "}",
                    count++ ? "," : "", r->members[k].pid, sh[k].bytes,
                    sh[k].blocks);
            continue;
        }
        fprintf(r->out, "\tpid %" PRIu32 ": ", r->members[k].pid);
        put_bytes(r, sh[k].bytes);
        fprintf(r->out, " live in %" PRIu64 " blocks\n", sh[k].blocks);
    }
    if (r->o->json)
        fputs("]", r->out);
}

/*
 * Tarantool's heap delta, per name: a site is credited with what it
 * allocated, and with what realloc sites allocated in place of its blocks;
 * it is debited with the blocks of its that realloc and free sites
 * released (see make_pairs).  Sites holding a positive amount are listed.
 */
static int write_heap_summary(struct report *r)
{
    const struct group **list =
        malloc((r->ngroups ? r->ngroups : 1) * sizeof(*list));
    struct share *sh = NULL;
    uint32_t n = 0;

    if (list == NULL)
        return -1;
    if (r->o->by_process && r->members != NULL &&
        (sh = live_shares(r)) == NULL) {
        free(list);
        return -1;
    }
    for (uint32_t g = 0; g < r->ngroups; g++)
        if (held(&r->groups[g]) > 0)
            list[n++] = &r->groups[g];
    qsort(list, n, sizeof(*list), cmp_held);
    fputs(r->o->json ? "\"heap_summary\":[" : "HEAP SUMMARY:\n", r->out);
    for (uint32_t i = 0; i < n; i++) {
        const struct group *g = list[i];
        if (r->o->json) {
            fprintf(r->out, "%s{\"location\":", i ? "," : "");
            put_json_name(r->out, g->name);
            fprintf(r->out,
                    ",\"holds\":%" PRIu64 ",\"allocs\":%" PRIu64
                    ",\"frees\":%" PRIu64,
                    held(g), g->nalloc, g->nfree);
        } else {
            fprintf(r->out, "%s holds ", g->name);
            put_bytes(r, held(g));
            fprintf(r->out, ": %" PRIu64 " allocs, %" PRIu64 " frees\n",
                    g->nalloc, g->nfree);
        }
        if (sh != NULL)
            write_shares(r, &sh[(size_t)(g - r->groups) * r->nstates]);
        if (r->o->json)
            fputs("}", r->out);
    }
    fputs(r->o->json ? "]," : "\n", r->out);
    free(list);
    free(sh);
    return 0;
}

/*
 * Source lines numbered from 1.  Unlike Tarantool's parser, empty lines
 * are numbered (so numbers match the lines events name) and the last line
 * is printed without a trailing newline too.
 */
static void text_alias_source(FILE *out, const char *src, size_t len)
{
    unsigned long lineno = 1;
    size_t start = 0;

    while (start < len) {
        const char *nl = memchr(src + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - src) : len;
        fprintf(out, "%lu\t| %.*s\n", lineno++, (int)(end - start),
                src + start);
        start = end + 1;
    }
}

/* Whether alias i of state k was written already: an earlier state has
 * the same source under the same number (processes that run the same code
 * load the same chunks in the same order). */
static int alias_written(const struct report *r, size_t k, uint32_t i,
                         const char *src, size_t len)
{
    for (size_t j = 0; j < k; j++) {
        const struct lm_symtab *t = &r->states[j]->sym;
        size_t jlen;
        if (i >= t->naliases)
            continue;
        const char *jsrc = lm_symtab_str(t, t->aliases[i], &jlen);
        if (jlen == len && memcmp(jsrc, src, len) == 0)
            return 1;
    }
    return 0;
}

/*
 * Chunks loaded from strings, named function_alias_N by order of first
 * use in each process.  A merged report writes each number's source once
 * when its processes agree, else each process's (JSON says whose).
 */
static void write_aliases(struct report *r)
{
    size_t count = 0;

    if (r->o->json)
        fputs("\"aliases\":[", r->out);
    for (size_t k = 0; k < r->nstates; k++) {
        const struct lm_symtab *t = &r->states[k]->sym;
        for (uint32_t i = 0; i < t->naliases; i++) {
            size_t len;
            const char *src = lm_symtab_str(t, t->aliases[i], &len);
            if (alias_written(r, k, i, src, len))
                continue;
            if (r->o->json) {
                fprintf(r->out, "%s{\"name\":\"function_alias_%u\",\"source\":",
                        count++ ? "," : "", i + 1);
                lm_json_string(r->out, src, len);
                if (r->members != NULL)
                    fprintf(r->out, ",\"pid\":%" PRIu32, r->members[k].pid);
                fputs("}", r->out);
                continue;
            }
            if (count++ == 0)
                fputs("ALIASES:\n", r->out);
            fprintf(r->out, "function_alias_%u:\n", i + 1);
            if (r->members != NULL && k > 0)
                fprintf(r->out, "(in pid %" PRIu32 ")\n", r->members[k].pid);
            text_alias_source(r->out, src, len);
            fputs("\n\n", r->out);
        }
    }
    if (r->o->json)
        fputs("]", r->out);
}

static void json_totals(struct report *r)
{
    struct lm_totals t = {0};
    const char *sep = "";

    for (size_t k = 0; k < r->nstates; k++)
        lm_totals_add(&t, &r->states[k]->totals);
    fprintf(r->out, "\"revision\":\"%s\",\"totals\":{",
            lm_revision_name(r->nstates > 0
                                 ? (enum lm_revision)r->states[0]->revision
                                 : LM_REV_R3));
#define LM_JSON_TOTAL(name)                                                    \
    fprintf(r->out, "%s\"" #name "\":%" PRIu64, sep, t.name);                  \
    sep = ",";
    LM_TOTALS(LM_JSON_TOTAL)
#undef LM_JSON_TOTAL
    fputs("},", r->out);
}

const char *lm_census_state_name(const struct lm_census *c, int streaming)
{
    switch (c->state) {
    case LM_CENSUS_RUNNING:
        return streaming ? "running" : "partial";
    case LM_CENSUS_DONE:
        return "complete";
    default:
        return "none";
    }
}

void lm_report_put_size(FILE *out, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes / 1024;
    unsigned int u = 0;

    if (bytes < 1024) {
        fprintf(out, "%" PRIu64 " B", bytes);
        return;
    }
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    fprintf(out, "%.1f %s", v, units[u]);
}

/* The census line of state k (text), when its stream had one. */
static void text_census(struct report *r, size_t k)
{
    const struct lm_census *c = &r->states[k]->census;
    const struct lm_totals *t = &r->states[k]->totals;

    if (c->state == LM_CENSUS_NONE)
        return;
    fputs("Census", r->out);
    if (r->members != NULL)
        fprintf(r->out, " (pid %" PRIu32 ")", r->members[k].pid);
    fprintf(r->out, ": %s, ", lm_census_state_name(c, r->o->streaming));
    lm_report_put_size(r->out, c->begin_total);
    fputs(" at start", r->out);
    if (c->state == LM_CENSUS_DONE) {
        fputs(", ", r->out);
        lm_report_put_size(r->out, c->complete_total);
        fputs(" at completion, VM internals ", r->out);
        lm_report_put_size(r->out, c->remainder);
        if (c->over != 0) {
            fputs(" (the blocks known exceed the VM's heap by ", r->out);
            lm_report_put_size(r->out, c->over);
            fputs(")", r->out);
        }
    } else if (!r->o->streaming) {
        fputs("; the stream ended before it completed", r->out);
    }
    fprintf(r->out,
            "; %" PRIu64 " duplicates, %" PRIu64 " frees of older blocks\n",
            t->census_duplicates, t->census_preceding_frees);
}

static void json_census_of(struct report *r, size_t k)
{
    const struct lm_census *c = &r->states[k]->census;

    fputs("{", r->out);
    if (r->members != NULL)
        fprintf(r->out, "\"pid\":%" PRIu32 ",", r->members[k].pid);
    fprintf(r->out,
            "\"state\":\"%s\",\"begin_total\":%" PRIu64
            ",\"complete_total\":%" PRIu64 ",\"remainder\":%" PRIu64
            ",\"over\":%" PRIu64 ",\"begin_offset\":%" PRIu64
            ",\"complete_offset\":%" PRIu64 "}",
            lm_census_state_name(c, r->o->streaming), c->begin_total,
            c->complete_total, c->remainder, c->over, c->begin_offset,
            c->complete_offset);
}

/* The census of each state that had one: lines before the sections, or
 * JSON's "census" (an object, an array for a merged report). */
static void write_census(struct report *r)
{
    size_t count = 0;

    for (size_t k = 0; k < r->nstates; k++) {
        if (r->states[k]->census.state == LM_CENSUS_NONE)
            continue;
        count++;
        if (!r->o->json) {
            text_census(r, k);
            continue;
        }
        if (count == 1)
            fputs(r->members != NULL ? "\"census\":[" : "\"census\":", r->out);
        else
            fputs(",", r->out);
        json_census_of(r, k);
    }
    if (count == 0)
        return;
    if (r->o->json)
        fputs(r->members != NULL ? "]," : ",", r->out);
    else
        fputs("\n", r->out);
}

/* A merged report's processes: pid, session and command. */
static void write_members(struct report *r)
{
    if (r->members == NULL)
        return;
    fputs(r->o->json ? "\"members\":[" : "PROCESSES:\n", r->out);
    for (size_t k = 0; k < r->nstates; k++) {
        const struct lm_report_member *m = &r->members[k];
        const char *cmd = m->cmdline ? m->cmdline : "";
        if (r->o->json) {
            fprintf(r->out,
                    "%s{\"pid\":%" PRIu32 ",\"session\":%" PRIu64
                    ",\"command\":",
                    k ? "," : "", m->pid, m->session_id);
            put_json_name(r->out, cmd);
            fputs("}", r->out);
        } else {
            fprintf(r->out, "pid %" PRIu32 " (session %" PRIu64 "): %s\n",
                    m->pid, m->session_id, cmd);
        }
    }
    fputs(r->o->json ? "]," : "\n", r->out);
}

static void report_free(struct report *r)
{
    if (r->names != NULL)
        for (uint32_t i = 0; i < r->nlocs; i++)
            free(r->names[i]);
    free(r->names);
    free(r->first);
    free(r->owner);
    free(r->group_of);
    free(r->groups);
    free(r->pairs);
    free(r->pair_first);
    free(r->base);
}

/* Every state's overrides, their locations numbered across the states;
 * NULL when out of memory. */
static struct lm_override *all_overrides(const struct report *r, uint32_t *n)
{
    struct lm_override *all = NULL;
    uint64_t total = 0;

    *n = 0;
    for (size_t k = 0; k < r->nstates; k++) {
        uint32_t m = 0;
        struct lm_override *o = lm_state_overrides(r->states[k], &m);
        struct lm_override *grown =
            o == NULL || total + m >= LM_NONE
                ? NULL
                : realloc(all,
                          (size_t)(total + m ? total + m : 1) * sizeof(*all));
        if (grown == NULL) {
            free(o);
            free(all);
            return NULL;
        }
        all = grown;
        for (uint32_t i = 0; i < m; i++) {
            all[total + i] = o[i];
            all[total + i].site += r->first[k];
            all[total + i].primary += r->first[k];
        }
        total += m;
        free(o);
    }
    if (all == NULL)
        all = malloc(sizeof(*all));
    *n = (uint32_t)total;
    return all;
}

int lm_report_write(FILE *out, const struct lm_state *s,
                    const struct lm_report_opts *opts)
{
    return lm_report_write_merged(out, &s, NULL, 1, opts);
}

int lm_report_write_merged(FILE *out, const struct lm_state *const *states,
                           const struct lm_report_member *members, size_t n,
                           const struct lm_report_opts *opts)
{
    struct lm_report_opts defaults = {0};
    struct report r = {.states = states,
                       .members = members,
                       .nstates = n,
                       .o = opts ? opts : &defaults,
                       .out = out};
    uint32_t novr = 0;
    struct lm_override *ovr = NULL;
    int rc = -1;

    if (number_locations(&r) != 0 || (ovr = all_overrides(&r, &novr)) == NULL ||
        make_bases(&r) != 0 || make_groups(&r) != 0)
        goto out;
    merge_base_overrides(&r, ovr, &novr);
    if (make_pairs(&r, ovr, novr) != 0)
        goto out;
    if (r.o->json) {
        fputs("{", out);
        json_totals(&r);
    }
    write_census(&r);
    write_members(&r);
    if (!r.o->leak_only &&
        (section(&r, LM_EV_ALLOC, r.o->json ? "allocations" : "ALLOCATIONS") ||
         section(&r, LM_EV_REALLOC,
                 r.o->json ? "reallocations" : "REALLOCATIONS") ||
         section(&r, LM_EV_FREE,
                 r.o->json ? "deallocations" : "DEALLOCATIONS")))
        goto out;
    if (r.o->stacks && write_stacks(&r) != 0)
        goto out;
    if (write_heap_summary(&r) != 0)
        goto out;
    write_aliases(&r);
    if (r.o->json)
        fputs("}\n", out);
    rc = ferror(out) ? -1 : 0;
out:
    free(ovr);
    report_free(&r);
    return rc;
}
