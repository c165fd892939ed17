/* Successive pprof exports of one session turned into interval profiles:
 * allocations since the last push, live values as they are. */
#include "pprof_delta.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lm_array.h"
#include "lm_export.h"
#include "lm_hash.h"
#include "lm_hindex.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;

/* pprof's sample types as ljmpctl export orders them. */
enum { ALLOC_OBJECTS, ALLOC_SPACE, INUSE_OBJECTS, INUSE_SPACE, NVALUES };

/* A sample's allocations when the last profile was taken. */
struct seen {
    char *key;
    int64_t alloc[2];
};

struct seen_map {
    struct seen *v;
    uint32_t n, cap;
    struct lm_hindex idx;
};

struct pprof_delta {
    struct seen_map last;
};

static void map_free(struct seen_map *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        free(m->v[i].key);
    free(m->v);
    lm_hindex_free(&m->idx);
    memset(m, 0, sizeof(*m));
}

static const struct seen *map_find(const struct seen_map *m, const char *key)
{
    uint64_t h = lm_hash_bytes(key, strlen(key));
    uint32_t id, slot;

    if (m->idx.slots == NULL)
        return NULL;
    LM_HINDEX_FOREACH(&m->idx, h, id, slot)
    if (strcmp(m->v[id].key, key) == 0)
        return &m->v[id];
    return NULL;
}

/* Adds key (taken) with its allocations; -1 when out of memory. */
static int map_add(struct seen_map *m, char *key, const int64_t *alloc)
{
    if (LM_RESERVE(m->v, m->cap, m->n) != 0 ||
        lm_hindex_insert(&m->idx, lm_hash_bytes(key, strlen(key)), m->n) != 0)
        return -1;
    m->v[m->n++] = (struct seen){key, {alloc[0], alloc[1]}};
    return 0;
}

struct pprof_delta *pprof_delta_new(void)
{
    return calloc(1, sizeof(struct pprof_delta));
}

void pprof_delta_free(struct pprof_delta *d)
{
    if (d != NULL)
        map_free(&d->last);
    free(d);
}

size_t pprof_delta_memory(const struct pprof_delta *d)
{
    size_t n = sizeof(*d) + (size_t)d->last.cap * sizeof(struct seen) +
               ((size_t)d->last.idx.mask + 1) * sizeof(struct lm_hindex_slot);

    for (uint32_t i = 0; i < d->last.n; i++)
        n += strlen(d->last.v[i].key) + 1;
    return n;
}

/* buf[0..len) gzipped, malloc'd; NULL when out of memory. */
static uint8_t *gzip(const uint8_t *buf, size_t len, size_t *out_len)
{
    z_stream z;
    uint8_t *out;

    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    if ((out = malloc(cap)) == NULL) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        deflateEnd(&z);
        free(out);
        return NULL;
    }
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

static const char *str_at(const Profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* p's locations and functions by id (ljmpctl export numbers them 1 to n;
 * another id is named by its number alone). */
struct by_id {
    const Perftools__Profiles__Location **loc;
    const Perftools__Profiles__Function **fn;
};

static int index_ids(const Profile *p, struct by_id *b)
{
    b->loc = calloc(p->n_location + 1, sizeof(*b->loc));
    b->fn = calloc(p->n_function + 1, sizeof(*b->fn));
    if (b->loc == NULL || b->fn == NULL)
        return -1;
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id >= 1 && p->location[i]->id <= p->n_location)
            b->loc[p->location[i]->id] = p->location[i];
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id >= 1 && p->function[i]->id <= p->n_function)
            b->fn[p->function[i]->id] = p->function[i];
    return 0;
}

/* A sample's identity across profiles: its frames (function and line)
 * and labels, as text; malloc'd, NULL when out of memory. */
static char *sample_key(const Profile *p, const struct by_id *b,
                        const Sample *s)
{
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);

    if (f == NULL)
        return NULL;
    for (size_t i = 0; i < s->n_location_id; i++) {
        uint64_t id = s->location_id[i];
        const Perftools__Profiles__Location *l =
            id <= p->n_location ? b->loc[id] : NULL;
        if (l == NULL) {
            fprintf(f, "#%" PRIu64 ";", id);
            continue;
        }
        fprintf(f, "@%" PRIx64, l->address);
        for (size_t n = 0; n < l->n_line; n++) {
            uint64_t fid = l->line[n]->function_id;
            const Perftools__Profiles__Function *fn =
                fid <= p->n_function ? b->fn[fid] : NULL;
            /* Everything that names the function: two places may share
             * a name and line (a trace's start and that line's own). */
            if (fn != NULL)
                fprintf(f, "|%s|%s|%s:%" PRId64 ":%" PRId64,
                        str_at(p, fn->name), str_at(p, fn->system_name),
                        str_at(p, fn->filename), fn->start_line,
                        l->line[n]->line);
            else
                fprintf(f, "|?:%" PRId64, l->line[n]->line);
        }
        fputc(';', f);
    }
    for (size_t i = 0; i < s->n_label; i++)
        fprintf(f, "{%s=%s%" PRId64 "}", str_at(p, s->label[i]->key),
                str_at(p, s->label[i]->str), s->label[i]->num);
    if (fclose(f) != 0) {
        free(key);
        return NULL;
    }
    return key;
}

/* Makes p's allocations the change since d's last profile, and keeps
 * its cumulative values in next. */
static int take_deltas(const struct pprof_delta *d, Profile *p,
                       struct seen_map *next)
{
    struct by_id b = {0};
    int rc = -1;

    if (index_ids(p, &b) != 0)
        goto out;
    for (size_t i = 0; i < p->n_sample; i++) {
        Sample *s = p->sample[i];
        if (s->n_value < NVALUES)
            continue;
        char *key = sample_key(p, &b, s);
        if (key == NULL)
            goto out;
        const struct seen *was = map_find(&d->last, key);
        int64_t now[2] = {s->value[ALLOC_OBJECTS], s->value[ALLOC_SPACE]};
        for (int v = 0; v < 2 && was != NULL; v++)
            s->value[v] = now[v] > was->alloc[v] ? now[v] - was->alloc[v] : 0;
        if (map_find(next, key) == NULL) {
            if (map_add(next, key, now) != 0) {
                free(key);
                goto out;
            }
        } else {
            free(key);
        }
    }
    rc = 0;
out:
    free(b.loc);
    free(b.fn);
    return rc;
}

int pprof_delta_next(struct pprof_delta *d, const uint8_t *gz, size_t len,
                     uint8_t **out, size_t *out_len)
{
    size_t raw_len, packed_len;
    uint8_t *raw = lm_export_gunzip(gz, len, &raw_len), *packed = NULL;
    Profile *p =
        raw ? perftools__profiles__profile__unpack(NULL, raw_len, raw) : NULL;
    struct seen_map next = {0};
    int rc = -1;

    free(raw);
    if (p == NULL || p->n_sample_type != NVALUES ||
        lm_hindex_init(&next.idx) != 0 || take_deltas(d, p, &next) != 0)
        goto out;
    packed_len = perftools__profiles__profile__get_packed_size(p);
    if ((packed = malloc(packed_len ? packed_len : 1)) == NULL)
        goto out;
    perftools__profiles__profile__pack(p, packed);
    if ((*out = gzip(packed, packed_len, out_len)) == NULL)
        goto out;
    map_free(&d->last);
    d->last = next;
    memset(&next, 0, sizeof(next));
    rc = 0;
out:
    free(packed);
    map_free(&next);
    if (p != NULL)
        perftools__profiles__profile__free_unpacked(p, NULL);
    return rc;
}
