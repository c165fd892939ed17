/* ljmp's own pprof exports read back: samples with their frames named. */
#define _GNU_SOURCE /* asprintf */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lm_export.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Function Function;

uint8_t *lm_export_gunzip(const uint8_t *gz, size_t len, size_t *out_len)
{
    size_t cap = len * 4 + 4096;
    uint8_t *out = malloc(cap);
    z_stream z;
    int rc = Z_OK;

    memset(&z, 0, sizeof(z));
    if (out == NULL || inflateInit2(&z, 15 + 16) != Z_OK) {
        free(out);
        return NULL;
    }
    z.next_in = (Bytef *)gz;
    z.avail_in = (uInt)len;
    while (rc == Z_OK) {
        if (z.total_out == cap) {
            uint8_t *more = realloc(out, cap * 2);
            if (more == NULL)
                break;
            out = more;
            cap *= 2;
        }
        z.next_out = out + z.total_out;
        z.avail_out = (uInt)(cap - z.total_out);
        rc = inflate(&z, Z_NO_FLUSH);
        /* No progress with room left: the input ended too early. */
        if (rc == Z_BUF_ERROR && z.avail_out == 0)
            rc = Z_OK;
    }
    *out_len = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* String i of p's table, or NULL when there is none. */
static const char *str_at(const Profile *p, int64_t i)
{
    return i >= 0 && (uint64_t)i < p->n_string_table ? p->string_table[i]
                                                     : NULL;
}

/* Whether name ends with ":N" for N the start line (as the export writes
 * a Lua function's name, CHUNK:DEFLINE); its length without it in *keep. */
static int ends_with_start(const char *name, int64_t start, size_t *keep)
{
    char suffix[32];
    size_t n = strlen(name);
    int k = snprintf(suffix, sizeof(suffix), ":%" PRIu64, (uint64_t)start);

    if ((size_t)k > n || strcmp(name + n - (size_t)k, suffix) != 0)
        return 0;
    *keep = n - (size_t)k;
    return 1;
}

/*
 * A location's frame name, as the export's display name of its place
 * (lm_export.c, place_of): a trace's is its function's system name; a
 * Lua line's its function's name with the line for the definition line;
 * a line of a prototype never named, "0xADDR:LINE"; any other, its
 * function's name.  Malloc'd, or NULL.
 */
static char *frame_name(const Profile *p, const Location *l)
{
    if (l->n_line != 1 || l->line[0]->function_id == 0 ||
        l->line[0]->function_id > p->n_function)
        return NULL;
    const Function *f = p->function[l->line[0]->function_id - 1];
    const char *name = str_at(p, f->name), *sys = str_at(p, f->system_name);
    uint64_t line = (uint64_t)l->line[0]->line;
    char *out = NULL;
    size_t keep;

    if (name == NULL || sys == NULL || f->id != l->line[0]->function_id)
        return NULL;
    if (strcmp(name, sys) != 0)
        return strdup(sys);
    if (f->filename != 0 && ends_with_start(name, f->start_line, &keep)) {
        if (asprintf(&out, "%.*s:%" PRIu64, (int)keep, name, line) < 0)
            return NULL;
        return out;
    }
    if (f->filename == 0 && strncmp(name, "0x", 2) == 0) {
        if (asprintf(&out, "%s:%" PRIu64, name, line) < 0)
            return NULL;
        return out;
    }
    return strdup(name);
}

/* Each location's frame name, by index (its id less one, as the export
 * numbers them); NULL when one cannot be named. */
static char **frame_names(const Profile *p)
{
    char **names = calloc(p->n_location + 1, sizeof(*names));

    for (size_t i = 0; names != NULL && i < p->n_location; i++)
        if (p->location[i]->id != i + 1 ||
            (names[i] = frame_name(p, p->location[i])) == NULL) {
            while (i-- > 0)
                free(names[i]);
            free(names);
            return NULL;
        }
    return names;
}

/* The processes seen so far, by their first sample. */
struct members {
    int64_t *pids;
    size_t n;
};

/* Sample s's process: its pid and command labels, and its number. */
static int label_process(const Profile *p, const Sample *s,
                         struct lm_export_sample *out, struct members *m)
{
    int64_t pid = 0;

    for (size_t k = 0; k < s->n_label; k++) {
        const char *key = str_at(p, s->label[k]->key);
        if (key != NULL && strcmp(key, "pid") == 0)
            pid = s->label[k]->num;
        else if (key != NULL && strcmp(key, "command") == 0)
            out->command = str_at(p, s->label[k]->str);
        else if (key != NULL && strcmp(key, "trace") == 0)
            out->trace = (uint64_t)s->label[k]->num;
    }
    out->pid = pid > 0 && pid <= UINT32_MAX ? (uint32_t)pid : 0;
    for (out->member = 0; out->member < m->n; out->member++)
        if (m->pids[out->member] == pid)
            return 0;
    if (m->n == p->n_sample) /* one per sample at most */
        return -1;
    m->pids[m->n++] = pid;
    return 0;
}

/* Sample s as lm_export_samples hands it, its frames root first into
 * frames (room for s's locations); -1 when it is not the export's. */
static int sample_of(const Profile *p, char *const *names, const Sample *s,
                     const char **frames, struct lm_export_sample *out,
                     struct members *m)
{
    memset(out, 0, sizeof(*out));
    if (s->n_value != LM_VALUE_COUNT || s->n_location_id == 0)
        return -1;
    for (size_t j = 0; j < s->n_location_id; j++) {
        uint64_t id = s->location_id[s->n_location_id - 1 - j];
        if (id == 0 || id > p->n_location)
            return -1;
        frames[j] = names[id - 1];
    }
    out->frames = frames;
    out->nframes = (uint32_t)s->n_location_id;
    for (int v = 0; v < LM_VALUE_COUNT; v++)
        out->v[v] = s->value[v] > 0 ? (uint64_t)s->value[v] : 0;
    return label_process(p, s, out, m);
}

/* Whether p says its samples are estimates from sampled stacks. */
static int sampled(const Profile *p)
{
    size_t n = strlen(LM_EXPORT_SAMPLED_NOTE);

    for (size_t i = 0; i < p->n_comment; i++) {
        const char *c = str_at(p, p->comment[i]);
        if (c != NULL && strncmp(c, LM_EXPORT_SAMPLED_NOTE, n) == 0)
            return 1;
    }
    return 0;
}

/* Hands fn each sample of p, its locations named by names. */
static int each_sample(const Profile *p, char *const *names,
                       lm_export_sample_fn fn, void *ctx)
{
    size_t most = 1;
    struct members m = {calloc(p->n_sample + 1, sizeof(*m.pids)), 0};
    int estimated = sampled(p), rc = m.pids != NULL ? 0 : -1;

    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i]->n_location_id > most)
            most = p->sample[i]->n_location_id;
    const char **frames = calloc(most, sizeof(*frames));
    if (frames == NULL)
        rc = -1;
    for (size_t i = 0; i < p->n_sample && rc == 0; i++) {
        struct lm_export_sample s;
        rc = sample_of(p, names, p->sample[i], frames, &s, &m);
        s.estimated = estimated;
        if (rc == 0)
            rc = fn(ctx, &s);
    }
    free(frames);
    free(m.pids);
    return rc;
}

int lm_export_read_pprof(const uint8_t *data, size_t len,
                         lm_export_sample_fn fn, void *ctx)
{
    size_t raw_len;
    uint8_t *raw = lm_export_gunzip(data, len, &raw_len);
    Profile *p = raw != NULL
                     ? perftools__profiles__profile__unpack(NULL, raw_len, raw)
                     : NULL;
    char **names = p != NULL ? frame_names(p) : NULL;
    int rc = names != NULL ? each_sample(p, names, fn, ctx) : -1;

    for (size_t i = 0; names != NULL && i < p->n_location; i++)
        free(names[i]);
    free(names);
    if (p != NULL)
        perftools__profiles__profile__free_unpacked(p, NULL);
    free(raw);
    return rc;
}
