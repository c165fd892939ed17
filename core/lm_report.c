/* Text and JSON reports of a profile state, in Tarantool's parser layout. */
#include "lm_report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A line of a section: sorted by key (descending), then name, then id. */
struct row {
    const char *name;
    uint64_t key;
    uint32_t id;
};

/* The heap summary is per name, as Tarantool's parser keys it. */
struct holding {
    const char *name;
    int64_t dbytes;
    uint64_t nalloc, nfree;
};

struct report {
    const struct lm_state *s;
    const struct lm_report_opts *o;
    FILE *out;
    char **names;            /* per location */
    struct lm_override *ovr; /* with pending counts folded in */
    uint32_t *ovr_sorted;    /* overrides by (kind, site, primary name) */
    uint32_t *ovr_first;     /* per location and kind: first index, or NONE */
};

static int cmp_rows(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int c;

    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    if ((c = strcmp(x->name, y->name)) != 0)
        return c;
    return x->id < y->id ? -1 : (x->id > y->id);
}

static char *format_name(const struct lm_state *s, uint32_t loc)
{
    size_t len = 128;
    char *buf = malloc(len);

    while (buf != NULL) {
        int n = lm_state_loc_name(s, loc, buf, len);
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

static int make_names(struct report *r)
{
    uint32_t n = r->s->nlocs;

    r->names = calloc(n ? n : 1, sizeof(*r->names));
    if (r->names == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if ((r->names[i] = format_name(r->s, i)) == NULL)
            return -1;
    return 0;
}

/* Context-free comparison of overrides: decorated with what they need. */
struct ovr_row {
    uint8_t kind;
    uint32_t site;
    const char *primary_name;
    uint32_t primary, id;
};

static int cmp_ovr_rows(const void *a, const void *b)
{
    const struct ovr_row *x = a, *y = b;
    int c;

    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    if ((c = strcmp(x->primary_name, y->primary_name)) != 0)
        return c;
    return x->primary < y->primary ? -1 : (x->primary > y->primary);
}

/* Index of a (location, kind) pair in ovr_first: FREE 0, REALLOC 1. */
static size_t ovr_slot(uint32_t loc, uint8_t kind)
{
    return (size_t)loc * 2 + (kind == LM_EV_REALLOC);
}

static int sort_overrides(struct report *r)
{
    const struct lm_state *s = r->s;
    struct ovr_row *rows = malloc((s->novr ? s->novr : 1) * sizeof(*rows));

    r->ovr_sorted = malloc((s->novr ? s->novr : 1) * sizeof(uint32_t));
    r->ovr_first = malloc(((size_t)s->nlocs * 2 + 1) * sizeof(uint32_t));
    if (rows == NULL || r->ovr_sorted == NULL || r->ovr_first == NULL) {
        free(rows);
        return -1;
    }
    memset(r->ovr_first, 0xff, ((size_t)s->nlocs * 2 + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < s->novr; i++) {
        const struct lm_override *o = &r->ovr[i];
        rows[i] = (struct ovr_row){o->kind, o->site, r->names[o->primary],
                                   o->primary, i};
    }
    qsort(rows, s->novr, sizeof(*rows), cmp_ovr_rows);
    for (uint32_t i = 0; i < s->novr; i++) {
        r->ovr_sorted[i] = rows[i].id;
        size_t slot = ovr_slot(rows[i].site, rows[i].kind);
        if (r->ovr_first[slot] == LM_NONE)
            r->ovr_first[slot] = i;
    }
    free(rows);
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

/* JSON string: control bytes, quotes and non-ASCII bytes are escaped. */
static void put_json_string(FILE *out, const char *s, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void put_json_name(FILE *out, const char *s)
{
    put_json_string(out, s, strlen(s));
}

/* Rows of the locations having events of one kind. */
static struct row *section_rows(struct report *r, uint8_t kind, uint32_t *n)
{
    const struct lm_state *s = r->s;
    struct row *rows = malloc((s->nlocs ? s->nlocs : 1) * sizeof(*rows));

    *n = 0;
    if (rows == NULL)
        return NULL;
    for (uint32_t i = 0; i < s->nlocs; i++) {
        const struct lm_counters *c = &s->locs[i].c;
        uint64_t events = kind == LM_EV_ALLOC     ? c->alloc_events
                          : kind == LM_EV_REALLOC ? c->realloc_events
                                                  : c->free_events;
        if (events > 0)
            rows[(*n)++] = (struct row){r->names[i], events, i};
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

static void text_overrides(struct report *r, uint32_t site, uint8_t kind)
{
    const struct lm_state *s = r->s;
    uint32_t i =
        kind == LM_EV_ALLOC ? LM_NONE : r->ovr_first[ovr_slot(site, kind)];

    if (i == LM_NONE)
        return;
    fputs("\tOverrides:\n", r->out);
    for (; i < s->novr; i++) {
        const struct lm_override *o = &r->ovr[r->ovr_sorted[i]];
        if (o->site != site || o->kind != kind)
            break;
        fprintf(r->out, "\t\t%s\n", r->names[o->primary]);
    }
    fputs("\n", r->out);
}

static void json_overrides(struct report *r, uint32_t site, uint8_t kind)
{
    const struct lm_state *s = r->s;
    uint32_t i =
        kind == LM_EV_ALLOC ? LM_NONE : r->ovr_first[ovr_slot(site, kind)];
    const char *sep = "";

    if (kind == LM_EV_ALLOC)
        return;
    fputs(",\"overrides\":[", r->out);
    for (; i != LM_NONE && i < s->novr; i++) {
        const struct lm_override *o = &r->ovr[r->ovr_sorted[i]];
        if (o->site != site || o->kind != kind)
            break;
        fprintf(r->out, "%s{\"location\":", sep);
        put_json_name(r->out, r->names[o->primary]);
        fprintf(r->out,
                ",\"count\":%" PRIu64 ",\"allocated\":%" PRIu64
                ",\"freed\":%" PRIu64 "}",
                o->count, o->allocated, o->freed);
        sep = ",";
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
        const struct lm_counters *c = &r->s->locs[rows[i].id].c;
        uint64_t plus, minus;
        section_bytes(c, kind, &plus, &minus);
        if (r->o->json) {
            fprintf(r->out, "%s{\"location\":", i ? "," : "");
            put_json_name(r->out, rows[i].name);
            fprintf(r->out,
                    ",\"events\":%" PRIu64 ",\"alloc_bytes\":%" PRIu64
                    ",\"free_bytes\":%" PRIu64 ",\"live_bytes\":%" PRIu64
                    ",\"live_blocks\":%" PRIu64,
                    rows[i].key, plus, minus, c->live_bytes, c->live_blocks);
            json_overrides(r, rows[i].id, kind);
            fputs("}", r->out);
            continue;
        }
        fprintf(r->out, "%s: %" PRIu64 " events\t+", rows[i].name, rows[i].key);
        put_bytes(r, plus);
        fputs("\t-", r->out);
        put_bytes(r, minus);
        fputs("\n", r->out);
        text_overrides(r, rows[i].id, kind);
    }
    fputs(r->o->json ? "]," : "\n", r->out);
    free(rows);
    return 0;
}

static int cmp_holdings_by_name(const void *a, const void *b)
{
    return strcmp(((const struct holding *)a)->name,
                  ((const struct holding *)b)->name);
}

static int cmp_holdings(const void *a, const void *b)
{
    const struct holding *x = a, *y = b;

    if (x->dbytes != y->dbytes)
        return x->dbytes > y->dbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/*
 * Tarantool's heap delta: an allocation site is credited with what it
 * allocated, and with what realloc sites allocated in place of its blocks;
 * it is debited with the blocks of its that realloc and free sites
 * released.  Summed per name.
 */
static struct holding *heap_summary(struct report *r, uint32_t *n)
{
    const struct lm_state *s = r->s;
    struct holding *h = calloc(s->nlocs ? s->nlocs : 1, sizeof(*h));
    uint32_t k = 0;

    if (h == NULL)
        return NULL;
    for (uint32_t i = 0; i < s->nlocs; i++) {
        const struct lm_counters *c = &s->locs[i].c;
        h[i].name = r->names[i];
        if (c->alloc_bytes > 0) {
            h[i].dbytes += (int64_t)c->alloc_bytes;
            h[i].nalloc += c->alloc_events;
        }
    }
    for (uint32_t i = 0; i < s->novr; i++) {
        const struct lm_override *o = &r->ovr[i];
        if (o->allocated > 0) {
            h[o->primary].dbytes += (int64_t)o->allocated;
            h[o->primary].nalloc += o->count;
        }
        if (o->freed > 0) {
            h[o->primary].dbytes -= (int64_t)o->freed;
            h[o->primary].nfree += o->count;
        }
    }
    qsort(h, s->nlocs, sizeof(*h), cmp_holdings_by_name);
    for (uint32_t i = 0; i < s->nlocs; i++) {
        if (k > 0 && strcmp(h[k - 1].name, h[i].name) == 0) {
            h[k - 1].dbytes += h[i].dbytes;
            h[k - 1].nalloc += h[i].nalloc;
            h[k - 1].nfree += h[i].nfree;
            continue;
        }
        h[k++] = h[i];
    }
    uint32_t held = 0;
    for (uint32_t i = 0; i < k; i++)
        if (h[i].dbytes > 0)
            h[held++] = h[i];
    qsort(h, held, sizeof(*h), cmp_holdings);
    *n = held;
    return h;
}

static int write_heap_summary(struct report *r)
{
    uint32_t n;
    struct holding *h = heap_summary(r, &n);

    if (h == NULL)
        return -1;
    fputs(r->o->json ? "\"heap_summary\":[" : "HEAP SUMMARY:\n", r->out);
    for (uint32_t i = 0; i < n; i++) {
        if (r->o->json) {
            fprintf(r->out, "%s{\"location\":", i ? "," : "");
            put_json_name(r->out, h[i].name);
            fprintf(r->out,
                    ",\"holds\":%" PRId64 ",\"allocs\":%" PRIu64
                    ",\"frees\":%" PRIu64 "}",
                    h[i].dbytes, h[i].nalloc, h[i].nfree);
            continue;
        }
        fprintf(r->out, "%s holds ", h[i].name);
        put_bytes(r, (uint64_t)h[i].dbytes);
        fprintf(r->out, ": %" PRIu64 " allocs, %" PRIu64 " frees\n",
                h[i].nalloc, h[i].nfree);
    }
    fputs(r->o->json ? "]," : "\n", r->out);
    free(h);
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

static void write_aliases(struct report *r)
{
    const struct lm_symtab *t = &r->s->sym;

    if (r->o->json)
        fputs("\"aliases\":[", r->out);
    else if (t->naliases > 0)
        fputs("ALIASES:\n", r->out);
    for (uint32_t i = 0; i < t->naliases; i++) {
        size_t len;
        const char *src = lm_symtab_str(t, t->aliases[i], &len);
        if (r->o->json) {
            fprintf(r->out, "%s{\"name\":\"function_alias_%u\",\"source\":",
                    i ? "," : "", i + 1);
            put_json_string(r->out, src, len);
            fputs("}", r->out);
            continue;
        }
        fprintf(r->out, "function_alias_%u:\n", i + 1);
        text_alias_source(r->out, src, len);
        fputs("\n\n", r->out);
    }
    if (r->o->json)
        fputs("]", r->out);
}

static void json_totals(struct report *r)
{
    const struct lm_totals *t = &r->s->totals;
    const char *sep = "";

    fprintf(r->out, "\"revision\":\"%s\",\"totals\":{",
            lm_revision_name((enum lm_revision)r->s->revision));
#define LM_JSON_TOTAL(name)                                                    \
    fprintf(r->out, "%s\"" #name "\":%" PRIu64, sep, t->name);                 \
    sep = ",";
    LM_TOTALS(LM_JSON_TOTAL)
#undef LM_JSON_TOTAL
    fputs("},", r->out);
}

static void report_free(struct report *r)
{
    if (r->names != NULL)
        for (uint32_t i = 0; i < r->s->nlocs; i++)
            free(r->names[i]);
    free(r->names);
    free(r->ovr);
    free(r->ovr_sorted);
    free(r->ovr_first);
}

int lm_report_write(FILE *out, const struct lm_state *s,
                    const struct lm_report_opts *opts)
{
    struct lm_report_opts defaults = {0};
    struct report r = {s, opts ? opts : &defaults, out, NULL, NULL, NULL, NULL};
    int rc = -1;

    r.ovr = lm_state_overrides(s);
    if (r.ovr == NULL || make_names(&r) != 0 || sort_overrides(&r) != 0)
        goto out;
    if (r.o->json) {
        fputs("{", out);
        json_totals(&r);
    }
    if (!r.o->leak_only &&
        (section(&r, LM_EV_ALLOC, r.o->json ? "allocations" : "ALLOCATIONS") ||
         section(&r, LM_EV_REALLOC,
                 r.o->json ? "reallocations" : "REALLOCATIONS") ||
         section(&r, LM_EV_FREE,
                 r.o->json ? "deallocations" : "DEALLOCATIONS")))
        goto out;
    if (write_heap_summary(&r) != 0)
        goto out;
    write_aliases(&r);
    if (r.o->json)
        fputs("}\n", out);
    rc = ferror(out) ? -1 : 0;
out:
    report_free(&r);
    return rc;
}
