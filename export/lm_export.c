/* Profile states written for other tools: pprof, folded stacks, speedscope. */
#define _GNU_SOURCE /* qsort_r */
#include "lm_export.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lm_array.h"
#include "lm_hash.h"
#include "lm_hindex.h"
#include "profile.pb-c.h"

static const struct {
    const char *name, *unit;
} value_types[LM_VALUE_COUNT] = {
    [LM_VALUE_ALLOC_OBJECTS] = {"alloc_objects", "count"},
    [LM_VALUE_ALLOC_SPACE] = {"alloc_space", "bytes"},
    [LM_VALUE_INUSE_OBJECTS] = {"inuse_objects", "count"},
    [LM_VALUE_INUSE_SPACE] = {"inuse_space", "bytes"},
};

const char *lm_export_value_name(enum lm_export_value v)
{
    return v < LM_VALUE_COUNT ? value_types[v].name : "?";
}

enum lm_export_value lm_export_value_named(const char *name)
{
    for (int v = 0; v < LM_VALUE_COUNT; v++)
        if (strcmp(name, value_types[v].name) == 0)
            return (enum lm_export_value)v;
    return LM_VALUE_COUNT;
}

/* A function: pprof's, by string ids. */
struct ex_function {
    uint32_t name, sys, file;
    int64_t start_line;
};

/* A named place (pprof's location): a line of a function, or a C
 * function at its address; display is its name in folded stacks and
 * speedscope, as the report prints it. */
struct ex_place {
    uint32_t function, display;
    int64_t line;
    uint64_t addr;
};

/* A sample's frames: places, the site first and then its callers
 * outwards (pprof's order), ppl[first...]. */
struct ex_path {
    uint32_t first, n;
};

/* A path's values in one process, and the trace whose compiled code
 * made them (0: none). */
struct ex_sample {
    uint32_t path, member;
    uint64_t trace;
    uint64_t v[LM_VALUE_COUNT];
};

/* The profile being gathered: strings (pprof's table: entry 0 is ""),
 * functions, places, paths and samples, each kept once through its
 * index; and the comments pprof carries (string ids). */
struct ex {
    char **str;
    uint32_t nstr, str_cap;
    struct lm_hindex str_idx;
    struct ex_function *fn;
    uint32_t nfn, fn_cap;
    struct lm_hindex fn_idx;
    struct ex_place *pl;
    uint32_t npl, pl_cap;
    struct lm_hindex pl_idx;
    uint32_t *ppl;
    uint32_t nppl, ppl_cap;
    struct ex_path *pa;
    uint32_t npa, pa_cap;
    struct lm_hindex pa_idx;
    struct ex_sample *sm;
    uint32_t nsm, sm_cap;
    struct lm_hindex sm_idx;
    uint32_t comments[4];
    uint32_t ncomments;
    int oom;
};

/* Bytes as valid UTF-8 without NULs (other tools' parsers insist): any
 * other byte becomes '?'.  A malloc'd string, or NULL. */
static char *clean_text(const char *s, size_t len)
{
    char *c = malloc(len + 1);

    if (c == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned char b = (unsigned char)s[i];
        size_t n = b < 0x80         ? 1
                   : (b >> 5) == 6  ? 2
                   : (b >> 4) == 14 ? 3
                   : (b >> 3) == 30 ? 4
                                    : 0;
        int ok = n > 0 && i + n <= len && b != 0 && b != 0xc0 && b != 0xc1;
        for (size_t k = 1; ok && k < n; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (!ok)
            n = 1;
        for (size_t k = 0; k < n; k++)
            c[i + k] = ok ? s[i + k] : '?';
        i += n;
    }
    c[len] = '\0';
    return c;
}

/* The id of the string s[0..len) (cleaned), added if new; 0 ("") when out
 * of memory, which x remembers. */
static uint32_t ex_string(struct ex *x, const char *s, size_t len)
{
    char *c = clean_text(s, len);
    uint64_t h;
    uint32_t id, slot;

    if (c == NULL)
        goto oom;
    h = lm_hash_bytes(c, len);
    LM_HINDEX_FOREACH(&x->str_idx, h, id, slot)
    if (strcmp(x->str[id], c) == 0) {
        free(c);
        return id;
    }
    if (LM_RESERVE(x->str, x->str_cap, x->nstr) != 0 ||
        lm_hindex_insert(&x->str_idx, h, x->nstr) != 0)
        goto oom;
    x->str[x->nstr] = c;
    return x->nstr++;
oom:
    free(c);
    x->oom = 1;
    return 0;
}

static uint32_t ex_stringf(struct ex *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static uint32_t ex_stringf(struct ex *x, const char *fmt, ...)
{
    char small[256], *buf = small;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return 0;
    if ((size_t)n >= sizeof(small)) {
        if ((buf = malloc((size_t)n + 1)) == NULL) {
            x->oom = 1;
            return 0;
        }
        va_start(ap, fmt);
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    uint32_t id = ex_string(x, buf, (size_t)n);
    if (buf != small)
        free(buf);
    return id;
}

/* The function of that name, system name, file and start line, added if
 * new (LM_NONE when out of memory). */
static uint32_t ex_function_sys(struct ex *x, uint32_t name, uint32_t sys,
                                uint32_t file, int64_t start_line)
{
    uint64_t h =
        lm_hash_combine(lm_hash_combine(lm_hash_combine(name, sys), file),
                        (uint64_t)start_line);
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&x->fn_idx, h, id, slot)
    if (x->fn[id].name == name && x->fn[id].sys == sys &&
        x->fn[id].file == file && x->fn[id].start_line == start_line)
        return id;
    if (LM_RESERVE(x->fn, x->fn_cap, x->nfn) != 0 ||
        lm_hindex_insert(&x->fn_idx, h, x->nfn) != 0) {
        x->oom = 1;
        return LM_NONE;
    }
    x->fn[x->nfn] = (struct ex_function){name, sys, file, start_line};
    return x->nfn++;
}

/* The function whose system name is its name. */
static uint32_t ex_function(struct ex *x, uint32_t name, uint32_t file,
                            int64_t start_line)
{
    return ex_function_sys(x, name, name, file, start_line);
}

static uint32_t ex_place(struct ex *x, const struct ex_place *p)
{
    uint64_t h = lm_hash_combine(
        lm_hash_combine(lm_hash_combine(p->function, p->display),
                        (uint64_t)p->line),
        p->addr);
    uint32_t id, slot;

    if (p->function == LM_NONE)
        return LM_NONE;
    LM_HINDEX_FOREACH(&x->pl_idx, h, id, slot)
    if (x->pl[id].function == p->function && x->pl[id].display == p->display &&
        x->pl[id].line == p->line && x->pl[id].addr == p->addr)
        return id;
    if (LM_RESERVE(x->pl, x->pl_cap, x->npl) != 0 ||
        lm_hindex_insert(&x->pl_idx, h, x->npl) != 0) {
        x->oom = 1;
        return LM_NONE;
    }
    x->pl[x->npl] = *p;
    return x->npl++;
}

/* The path of places pl[0...n) (the site first), added if new (LM_NONE
 * when out of memory). */
static uint32_t ex_path(struct ex *x, const uint32_t *pl, uint32_t n)
{
    uint64_t h = lm_hash_bytes(pl, n * sizeof(*pl));
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&x->pa_idx, h, id, slot)
    if (x->pa[id].n == n &&
        memcmp(x->ppl + x->pa[id].first, pl, n * sizeof(*pl)) == 0)
        return id;
    if (LM_RESERVE(x->ppl, x->ppl_cap, x->nppl + n) != 0 ||
        LM_RESERVE(x->pa, x->pa_cap, x->npa) != 0 ||
        lm_hindex_insert(&x->pa_idx, h, x->npa) != 0)
        goto oom;
    memcpy(x->ppl + x->nppl, pl, n * sizeof(*pl));
    x->pa[x->npa] = (struct ex_path){x->nppl, n};
    x->nppl += n;
    return x->npa++;
oom:
    x->oom = 1;
    return LM_NONE;
}

static struct ex_sample *ex_sample(struct ex *x, uint32_t path, uint32_t member,
                                   uint64_t trace)
{
    uint64_t h = lm_hash_combine(lm_hash_combine(path, member), trace);
    uint32_t id, slot;

    LM_HINDEX_FOREACH(&x->sm_idx, h, id, slot)
    if (x->sm[id].path == path && x->sm[id].member == member &&
        x->sm[id].trace == trace)
        return &x->sm[id];
    if (LM_RESERVE(x->sm, x->sm_cap, x->nsm) != 0 ||
        lm_hindex_insert(&x->sm_idx, h, x->nsm) != 0) {
        x->oom = 1;
        return NULL;
    }
    x->sm[x->nsm] =
        (struct ex_sample){.path = path, .member = member, .trace = trace};
    return &x->sm[x->nsm++];
}

/* A Lua function's name and file: its chunk ("@" dropped from the file),
 * or function_alias_N for a chunk loaded from a string, as reports name
 * it. */
static void lua_names(struct ex *x, const struct lm_loc_parts *p,
                      uint32_t *chunk, uint32_t *file)
{
    if (p->alias != 0) {
        *chunk = *file = ex_stringf(x, "function_alias_%u", p->alias);
        return;
    }
    *chunk = ex_string(x, p->name, p->name_len);
    *file = p->name_len > 0 && p->name[0] == '@'
                ? ex_string(x, p->name + 1, p->name_len - 1)
                : *chunk;
}

/* A Lua line: its function by chunk and definition line. */
static void lua_place(struct ex *x, const struct lm_loc_parts *p,
                      struct ex_place *pl)
{
    uint32_t chunk, file;

    lua_names(x, p, &chunk, &file);
    if (p->builtin) { /* no line, as LuaJIT names it */
        pl->display = ex_stringf(x, "[builtin:%s]", x->str[chunk]);
        pl->function = ex_function(x, pl->display, 0, 0);
        return;
    }
    pl->function = ex_function(
        x, ex_stringf(x, "%s:%" PRIu64, x->str[chunk], p->first_line), file,
        (int64_t)p->first_line);
    pl->line = (int64_t)p->line;
    pl->display = ex_stringf(x, "%s:%" PRIu64, x->str[chunk], p->line);
}

/* A trace without its line: the line it starts at, its display saying
 * the trace (as reports do). */
static void trace_place(struct ex *x, const struct lm_loc_parts *p,
                        struct ex_place *pl)
{
    if (p->name == NULL) {
        uint32_t name = ex_stringf(x, "TRACE [%" PRIu64 "]", p->trace);
        pl->function = ex_function(x, name, 0, 0);
        pl->display = name;
        return;
    }
    lua_place(x, p, pl);
    pl->display = ex_stringf(x, "TRACE [%" PRIu64 "] started at %s", p->trace,
                             x->str[pl->display]);
    /* The start line's function, told apart from that line's own place
     * by its system name (tools that key places by function keep both). */
    if (pl->function != LM_NONE) {
        struct ex_function f = x->fn[pl->function];
        pl->function =
            ex_function_sys(x, f.name, pl->display, f.file, f.start_line);
    }
}

/* The place a location names (LM_NONE when out of memory). */
static uint32_t place_of(struct ex *x, const struct lm_loc_parts *p)
{
    struct ex_place pl = {0};
    uint32_t name;

    switch (p->kind) {
    case LM_PART_LUA:
        lua_place(x, p, &pl);
        break;
    case LM_PART_TRACE:
        trace_place(x, p, &pl);
        break;
    case LM_PART_MARKER: /* a name alone, as a census's */
    case LM_PART_CENSUS:
        name = p->name != NULL ? ex_string(x, p->name, p->name_len)
                               : ex_stringf(x, "[marker %" PRIu64 "]", p->line);
        pl.function = ex_function(x, name, 0, 0);
        pl.display = name;
        break;
    case LM_PART_C:
        name = p->name != NULL ? ex_string(x, p->name, p->name_len)
                               : ex_stringf(x, "CFUNC %#" PRIx64, p->addr);
        pl.function = ex_function(x, name, 0, 0);
        pl.display = name;
        pl.addr = p->addr;
        break;
    case LM_PART_UNNAMED:
        name = ex_stringf(x, "%#" PRIx64, p->addr);
        pl.function = ex_function(x, name, 0, 0);
        pl.line = (int64_t)p->line;
        pl.display = ex_stringf(x, "%#" PRIx64 ":%" PRIu64, p->addr, p->line);
        break;
    default:
        name = ex_string(x, "INTERNAL", 8);
        pl.function = ex_function(x, name, 0, 0);
        pl.display = name;
        break;
    }
    return ex_place(x, &pl);
}

/* An estimate as a count: pprof's values are integers. */
static uint64_t rounded(double v)
{
    return v <= 0 ? 0 : v >= 0x1p64 ? UINT64_MAX : (uint64_t)(v + 0.5);
}

/*
 * The values of location loc of s: its counts, or with sampling those its
 * stack's events stand for (live: live[loc], of lm_state_stack_live).
 * Whether it has a sample: not when it made and holds nothing (a site of
 * frees alone), nor when the stream sampled stacks and it has none (its
 * events are the ones the estimates of the stacked locations stand for).
 */
static int loc_values(const struct lm_state *s, uint32_t loc,
                      const struct lm_stack_est *live,
                      uint64_t v[LM_VALUE_COUNT])
{
    const struct lm_stacks *k = &s->stacks;
    struct lm_counters c;

    if (k->sample_bytes != 0) {
        if (s->locs[loc].stack == 0)
            return 0;
        int made = (size_t)loc < k->est_room / sizeof(*k->est);
        v[LM_VALUE_ALLOC_OBJECTS] = made ? rounded(k->est[loc].events) : 0;
        v[LM_VALUE_ALLOC_SPACE] = made ? rounded(k->est[loc].bytes) : 0;
        v[LM_VALUE_INUSE_OBJECTS] = rounded(live[loc].events);
        v[LM_VALUE_INUSE_SPACE] = rounded(live[loc].bytes);
    } else {
        lm_state_counters(s, loc, &c);
        v[LM_VALUE_ALLOC_OBJECTS] = c.alloc_events + c.realloc_events;
        v[LM_VALUE_ALLOC_SPACE] = c.alloc_bytes + c.realloc_new_bytes;
        v[LM_VALUE_INUSE_OBJECTS] = c.live_blocks;
        v[LM_VALUE_INUSE_SPACE] = c.live_bytes;
    }
    return (v[0] | v[1] | v[2] | v[3]) != 0;
}

/* The places of location loc's sample into pl: its site, then the
 * callers its stack names, outwards; how many.  The stack's innermost
 * frame is left out when it is the site itself, as reports do. */
static uint32_t loc_places(struct ex *x, const struct lm_state *s, uint32_t loc,
                           const struct lm_loc_parts *site,
                           uint32_t pl[LM_STACK_MAX_DEPTH + 2])
{
    uint32_t n = 0, nframes = 0;
    const struct lm_sframe *f = NULL;
    struct lm_loc_parts p;

    pl[n++] = place_of(x, site);
    if (s->locs[loc].stack != 0)
        f = lm_stacks_frames(&s->stacks, s->locs[loc].stack, &nframes);
    if (nframes > LM_STACK_MAX_DEPTH + 1)
        nframes = LM_STACK_MAX_DEPTH + 1;
    for (uint32_t j = 0; j < nframes; j++) {
        lm_state_frame_parts(s, &f[j], &p);
        uint32_t place = place_of(x, &p);
        if (j > 0 || place != pl[0])
            pl[n++] = place;
    }
    for (uint32_t j = 0; j < n; j++)
        if (pl[j] == LM_NONE)
            return 0;
    return n;
}

/* Adds location loc of s, in process member, if it has a sample. */
static void add_location(struct ex *x, const struct lm_state *s, uint32_t loc,
                         uint32_t member, const struct lm_stack_est *live)
{
    uint64_t v[LM_VALUE_COUNT];
    uint32_t pl[LM_STACK_MAX_DEPTH + 2], n;
    struct lm_loc_parts p;

    if (!loc_values(s, loc, live, v))
        return;
    lm_state_loc_parts(s, loc, &p);
    n = loc_places(x, s, loc, &p, pl);
    uint32_t path = n > 0 ? ex_path(x, pl, n) : LM_NONE;
    struct ex_sample *sm =
        path != LM_NONE ? ex_sample(x, path, member, p.trace) : NULL;
    for (int i = 0; sm != NULL && i < LM_VALUE_COUNT; i++)
        sm->v[i] += v[i];
}

/* Says, once, that s's stacks were sampled every M bytes (pprof's
 * comments). */
static void note_sampling(struct ex *x, const struct lm_state *s)
{
    uint32_t c = ex_stringf(
        x,
        LM_EXPORT_SAMPLED_NOTE
        "%" PRIu64 " bytes on average: samples are estimates from them "
        "(rounded), and the events without a stack are left out, since the "
        "estimates stand for them",
        s->stacks.sample_bytes);

    for (uint32_t i = 0; i < x->ncomments; i++)
        if (x->comments[i] == c)
            return;
    if (x->ncomments < sizeof(x->comments) / sizeof(x->comments[0]))
        x->comments[x->ncomments++] = c;
}

/* Adds state s's samples, in process member. */
static void add_state(struct ex *x, const struct lm_state *s, uint32_t member)
{
    struct lm_stack_est *live = NULL;

    if (s->stacks.sample_bytes != 0) {
        if ((live = calloc((size_t)s->nlocs + 1, sizeof(*live))) == NULL) {
            x->oom = 1;
            return;
        }
        lm_state_stack_live(s, live);
        note_sampling(x, s);
    }
    for (uint32_t loc = 0; loc < s->nlocs && !x->oom; loc++)
        add_location(x, s, loc, member, live);
    free(live);
}

static void ex_free(struct ex *x)
{
    for (uint32_t i = 0; i < x->nstr; i++)
        free(x->str[i]);
    free(x->str);
    free(x->fn);
    free(x->pl);
    free(x->ppl);
    free(x->pa);
    free(x->sm);
    lm_hindex_free(&x->str_idx);
    lm_hindex_free(&x->fn_idx);
    lm_hindex_free(&x->pl_idx);
    lm_hindex_free(&x->pa_idx);
    lm_hindex_free(&x->sm_idx);
}

static int ex_gather(struct ex *x, const struct lm_state *const *states,
                     size_t n)
{
    memset(x, 0, sizeof(*x));
    if (lm_hindex_init(&x->str_idx) != 0 || lm_hindex_init(&x->fn_idx) != 0 ||
        lm_hindex_init(&x->pl_idx) != 0 || lm_hindex_init(&x->pa_idx) != 0 ||
        lm_hindex_init(&x->sm_idx) != 0)
        return -1;
    ex_string(x, "", 0); /* pprof's string 0 */
    for (size_t m = 0; m < n && !x->oom; m++)
        add_state(x, states[m], (uint32_t)m);
    return x->oom ? -1 : 0;
}

/* -- pprof ---------------------------------------------------------------- */

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

/* Writes buf gzipped to out (pprof's files are). */
static int write_gzipped(FILE *out, const uint8_t *buf, size_t len)
{
    z_stream z;
    uint8_t chunk[65536];
    int rc;

    memset(&z, 0, sizeof(z));
    /* 15 bits of window, +16: a gzip header and trailer. */
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    z.next_in = (Bytef *)buf;
    z.avail_in = (uInt)len;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        rc = deflate(&z, Z_FINISH);
        size_t have = sizeof(chunk) - z.avail_out;
        if (rc == Z_STREAM_ERROR || fwrite(chunk, 1, have, out) != have) {
            deflateEnd(&z);
            return -1;
        }
    } while (rc != Z_STREAM_END);
    deflateEnd(&z);
    return 0;
}

/* pprof's parts, allocated together and pointed at by the message. */
struct pp {
    Profile prof;
    ValueType types[LM_VALUE_COUNT], *type_ptrs[LM_VALUE_COUNT];
    Mapping mapping, *mapping_ptr;
    Function *fns, **fn_ptrs;
    Location *locs, **loc_ptrs;
    Line *lines, **line_ptrs;
    Sample *samples, **sample_ptrs;
    uint64_t *loc_ids;
    int64_t *values;
    Label *labels, **label_ptrs;
};

static void pp_free(struct pp *p)
{
    free(p->fns);
    free(p->fn_ptrs);
    free(p->locs);
    free(p->loc_ptrs);
    free(p->lines);
    free(p->line_ptrs);
    free(p->samples);
    free(p->sample_ptrs);
    free(p->loc_ids);
    free(p->values);
    free(p->labels);
    free(p->label_ptrs);
}

static int pp_alloc(struct pp *p, const struct ex *x)
{
    size_t ns = x->nsm ? x->nsm : 1;

    memset(p, 0, sizeof(*p));
    p->fns = calloc(x->nfn + 1, sizeof(*p->fns));
    p->fn_ptrs = calloc(x->nfn + 1, sizeof(*p->fn_ptrs));
    p->locs = calloc(x->npl + 1, sizeof(*p->locs));
    p->loc_ptrs = calloc(x->npl + 1, sizeof(*p->loc_ptrs));
    p->lines = calloc(x->npl + 1, sizeof(*p->lines));
    p->line_ptrs = calloc(x->npl + 1, sizeof(*p->line_ptrs));
    p->samples = calloc(ns, sizeof(*p->samples));
    p->sample_ptrs = calloc(ns, sizeof(*p->sample_ptrs));
    p->loc_ids = calloc(x->nppl ? x->nppl : 1, sizeof(*p->loc_ids));
    p->values = calloc(ns * LM_VALUE_COUNT, sizeof(*p->values));
    /* pid, command and trace at most. */
    p->labels = calloc(ns * 3, sizeof(*p->labels));
    p->label_ptrs = calloc(ns * 3, sizeof(*p->label_ptrs));
    return p->fns && p->fn_ptrs && p->locs && p->loc_ptrs && p->lines &&
                   p->line_ptrs && p->samples && p->sample_ptrs && p->loc_ids &&
                   p->values && p->labels && p->label_ptrs
               ? 0
               : -1;
}

static int64_t as_int64(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static void pp_functions(struct pp *p, const struct ex *x)
{
    for (uint32_t i = 0; i < x->nfn; i++) {
        Function *f = &p->fns[i];
        perftools__profiles__function__init(f);
        f->id = i + 1;
        f->name = x->fn[i].name;
        f->system_name = x->fn[i].sys;
        f->filename = x->fn[i].file;
        f->start_line = x->fn[i].start_line;
        p->fn_ptrs[i] = f;
    }
    p->prof.n_function = x->nfn;
    p->prof.function = p->fn_ptrs;
}

static void pp_locations(struct pp *p, const struct ex *x)
{
    for (uint32_t i = 0; i < x->npl; i++) {
        Location *l = &p->locs[i];
        Line *ln = &p->lines[i];
        perftools__profiles__location__init(l);
        perftools__profiles__line__init(ln);
        ln->function_id = x->pl[i].function + 1;
        ln->line = x->pl[i].line;
        p->line_ptrs[i] = ln;
        l->id = i + 1;
        l->mapping_id = 1;
        l->address = x->pl[i].addr;
        l->n_line = 1;
        l->line = &p->line_ptrs[i];
        p->loc_ptrs[i] = l;
    }
    p->prof.n_location = x->npl;
    p->prof.location = p->loc_ptrs;
}

/* The label keys' string ids. */
struct pp_keys {
    uint32_t pid, command, trace;
};

static void pp_samples(struct pp *p, const struct ex *x,
                       const struct lm_report_member *members,
                       const uint32_t *commands, const struct pp_keys *k)
{
    size_t nl = 0;

    for (uint32_t i = 0; i < x->nsm; i++) {
        const struct ex_sample *s = &x->sm[i];
        Sample *sp = &p->samples[i];
        const struct ex_path *pa = &x->pa[s->path];
        perftools__profiles__sample__init(sp);
        /* Each path's ids once, where its places are: leaf first. */
        for (uint32_t j = 0; j < pa->n; j++)
            p->loc_ids[pa->first + j] = x->ppl[pa->first + j] + 1;
        sp->n_location_id = pa->n;
        sp->location_id = &p->loc_ids[pa->first];
        for (int v = 0; v < LM_VALUE_COUNT; v++)
            p->values[i * LM_VALUE_COUNT + v] = as_int64(s->v[v]);
        sp->n_value = LM_VALUE_COUNT;
        sp->value = &p->values[i * LM_VALUE_COUNT];
        sp->label = &p->label_ptrs[nl];
        if (members != NULL) {
            Label *pid = &p->labels[nl], *cmd = &p->labels[nl + 1];
            perftools__profiles__label__init(pid);
            perftools__profiles__label__init(cmd);
            pid->key = k->pid;
            pid->num = members[s->member].pid;
            cmd->key = k->command;
            cmd->str = commands[s->member];
            p->label_ptrs[nl++] = pid;
            p->label_ptrs[nl++] = cmd;
            sp->n_label += 2;
        }
        if (s->trace != 0) {
            Label *t = &p->labels[nl];
            perftools__profiles__label__init(t);
            t->key = k->trace;
            t->num = as_int64(s->trace);
            p->label_ptrs[nl++] = t;
            sp->n_label++;
        }
        p->sample_ptrs[i] = sp;
    }
    p->prof.n_sample = x->nsm;
    p->prof.sample = p->sample_ptrs;
}

static int write_pprof(FILE *out, struct ex *x,
                       const struct lm_report_member *members, size_t n,
                       const struct lm_export_opts *o)
{
    struct pp p = {0};
    struct pp_keys k;
    uint32_t *commands = calloc(n ? n : 1, sizeof(*commands));
    uint32_t type_names[LM_VALUE_COUNT], units[LM_VALUE_COUNT], program;
    int64_t comments[sizeof(x->comments) / sizeof(x->comments[0])];
    int rc = -1;

    for (uint32_t i = 0; i < x->ncomments; i++)
        comments[i] = x->comments[i];

    /* Every string first: the table may move as it grows. */
    k.pid = ex_string(x, "pid", 3);
    k.command = ex_string(x, "command", 7);
    k.trace = ex_string(x, "trace", 5);
    for (int v = 0; v < LM_VALUE_COUNT; v++) {
        type_names[v] =
            ex_string(x, value_types[v].name, strlen(value_types[v].name));
        units[v] =
            ex_string(x, value_types[v].unit, strlen(value_types[v].unit));
    }
    for (size_t m = 0; members != NULL && commands != NULL && m < n; m++)
        commands[m] =
            ex_string(x, members[m].cmdline ? members[m].cmdline : "",
                      members[m].cmdline ? strlen(members[m].cmdline) : 0);
    program = ex_string(x, "luajit", 6);
    if (commands == NULL || x->oom || pp_alloc(&p, x) != 0)
        goto out;

    perftools__profiles__profile__init(&p.prof);
    for (int v = 0; v < LM_VALUE_COUNT; v++) {
        perftools__profiles__value_type__init(&p.types[v]);
        p.types[v].type = type_names[v];
        p.types[v].unit = units[v];
        p.type_ptrs[v] = &p.types[v];
    }
    p.prof.n_sample_type = LM_VALUE_COUNT;
    p.prof.sample_type = p.type_ptrs;
    p.prof.default_sample_type = type_names[o->value];
    /* One mapping with every name and line given: pprof asks no binary. */
    perftools__profiles__mapping__init(&p.mapping);
    p.mapping.id = 1;
    p.mapping.filename = program;
    p.mapping.has_functions = p.mapping.has_filenames = 1;
    p.mapping.has_line_numbers = 1;
    p.mapping_ptr = &p.mapping;
    p.prof.n_mapping = 1;
    p.prof.mapping = &p.mapping_ptr;
    pp_functions(&p, x);
    pp_locations(&p, x);
    pp_samples(&p, x, members, commands, &k);
    p.prof.n_comment = x->ncomments;
    p.prof.comment = comments;
    p.prof.n_string_table = x->nstr;
    p.prof.string_table = x->str;
    p.prof.time_nanos = as_int64(o->time_ms * 1000000);
    p.prof.duration_nanos = as_int64(o->duration_ms * 1000000);

    size_t len = perftools__profiles__profile__get_packed_size(&p.prof);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf != NULL) {
        perftools__profiles__profile__pack(&p.prof, buf);
        rc = write_gzipped(out, buf, len);
        free(buf);
    }
out:
    pp_free(&p);
    free(commands);
    return rc;
}

/* -- Folded stacks and speedscope ------------------------------------------ */

/* A frame in a folded line: ';' separates frames, a line ends a stack. */
static void put_folded_frame(FILE *out, const char *s)
{
    for (; *s != '\0'; s++)
        fputc(*s == ';' ? ',' : *s == '\n' || *s == '\r' ? ' ' : *s, out);
}

/* A process's root frame in a merged profile: "command (pid)". */
static void put_member(FILE *out, const struct lm_report_member *m)
{
    const char *cmd = m->cmdline != NULL && m->cmdline[0] ? m->cmdline : "?";

    char word[256];

    /* The command's first word, which names the program, cleaned as any
     * frame is. */
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(cmd, " "), cmd);
    put_folded_frame(out, word);
    fprintf(out, " (%" PRIu32 ")", m->pid);
}

/* The display name of path pa's j-th frame from its root. */
static const char *root_frame(const struct ex *x, const struct ex_path *pa,
                              uint32_t j)
{
    return x->str[x->pl[x->ppl[pa->first + pa->n - 1 - j]].display];
}

/* Paths by their frames' names from the root, a path before those it
 * leads to. */
static int cmp_paths(const struct ex *x, uint32_t a, uint32_t b)
{
    const struct ex_path *p = &x->pa[a], *q = &x->pa[b];

    for (uint32_t j = 0; j < p->n && j < q->n; j++) {
        int c = strcmp(root_frame(x, p, j), root_frame(x, q, j));
        if (c != 0)
            return c;
    }
    return p->n < q->n ? -1 : p->n > q->n ? 1 : 0;
}

/* Samples by process, then by their frames' names, so that each stack is
 * one line (qsort_r: exports may be sorted on two threads at once). */
static int cmp_samples(const void *a, const void *b, void *arg)
{
    const struct ex_sample *x = a, *y = b;
    const struct ex *e = arg;

    if (x->member != y->member)
        return x->member < y->member ? -1 : 1;
    return cmp_paths(e, x->path, y->path);
}

static void sort_samples(struct ex *x)
{
    qsort_r(x->sm, x->nsm, sizeof(*x->sm), cmp_samples, x);
}

/* Whether samples i and j are one stack (the same names and process). */
static int same_stack(const struct ex *x, uint32_t i, uint32_t j)
{
    return x->sm[i].member == x->sm[j].member &&
           (x->sm[i].path == x->sm[j].path ||
            cmp_paths(x, x->sm[i].path, x->sm[j].path) == 0);
}

static int write_folded(FILE *out, struct ex *x,
                        const struct lm_report_member *members, size_t n,
                        const struct lm_export_opts *o)
{
    sort_samples(x);
    for (uint32_t i = 0; i < x->nsm;) {
        uint64_t v = 0;
        uint32_t j = i;
        for (; j < x->nsm && same_stack(x, i, j); j++)
            v += x->sm[j].v[o->value];
        if (v > 0) {
            const struct ex_path *pa = &x->pa[x->sm[i].path];
            if (members != NULL && n > 1) {
                put_member(out, &members[x->sm[i].member]);
                fputc(';', out);
            }
            for (uint32_t f = 0; f < pa->n; f++) {
                if (f > 0)
                    fputc(';', out);
                put_folded_frame(out, root_frame(x, pa, f));
            }
            fprintf(out, " %" PRIu64 "\n", v);
        }
        i = j;
    }
    return ferror(out) ? -1 : 0;
}

/* speedscope's frames: one per display name, in x's string order; *frame
 * maps a string id to its frame index (UINT32_MAX: none). */
static uint32_t *speedscope_frames(FILE *out, const struct ex *x)
{
    uint32_t *frame = malloc((x->nstr ? x->nstr : 1) * sizeof(*frame));
    uint32_t nframes = 0;

    if (frame == NULL)
        return NULL;
    memset(frame, 0xff, (x->nstr ? x->nstr : 1) * sizeof(*frame));
    fputs("\"shared\":{\"frames\":[", out);
    for (uint32_t i = 0; i < x->npl; i++) {
        const struct ex_place *p = &x->pl[i];
        const struct ex_function *f = &x->fn[p->function];
        if (frame[p->display] != UINT32_MAX)
            continue;
        frame[p->display] = nframes;
        fputs(nframes++ ? ",{\"name\":" : "{\"name\":", out);
        lm_json_string(out, x->str[p->display], strlen(x->str[p->display]));
        if (f->file != 0) {
            fputs(",\"file\":", out);
            lm_json_string(out, x->str[f->file], strlen(x->str[f->file]));
            fprintf(out, ",\"line\":%" PRId64, p->line);
        }
        fputc('}', out);
    }
    fputs("]}", out);
    return frame;
}

/* One sampled profile: member m's stacks (or every sample's, m < 0). */
static void speedscope_profile(FILE *out, const struct ex *x,
                               const uint32_t *frame, const char *name, long m,
                               const struct lm_export_opts *o)
{
    uint64_t total = 0;
    int first = 1;

    fputs("{\"type\":\"sampled\",\"name\":", out);
    lm_json_string(out, name, strlen(name));
    fprintf(out, ",\"unit\":\"%s\",\"startValue\":0,\"samples\":[",
            strcmp(value_types[o->value].unit, "bytes") == 0 ? "bytes"
                                                             : "none");
    for (uint32_t i = 0; i < x->nsm; i++)
        if ((m < 0 || x->sm[i].member == (uint32_t)m) && x->sm[i].v[o->value]) {
            const struct ex_path *pa = &x->pa[x->sm[i].path];
            fputs(first ? "[" : ",[", out);
            /* speedscope's stacks go from the root. */
            for (uint32_t j = pa->n; j-- > 0;)
                fprintf(out, j + 1 < pa->n ? ",%" PRIu32 : "%" PRIu32,
                        frame[x->pl[x->ppl[pa->first + j]].display]);
            fputc(']', out);
            first = 0;
        }
    fputs("],\"weights\":[", out);
    first = 1;
    for (uint32_t i = 0; i < x->nsm; i++)
        if ((m < 0 || x->sm[i].member == (uint32_t)m) && x->sm[i].v[o->value]) {
            fprintf(out, first ? "%" PRIu64 : ",%" PRIu64,
                    x->sm[i].v[o->value]);
            total += x->sm[i].v[o->value];
            first = 0;
        }
    fprintf(out, "],\"endValue\":%" PRIu64 "}", total);
}

static int write_speedscope(FILE *out, struct ex *x,
                            const struct lm_report_member *members, size_t n,
                            const struct lm_export_opts *o)
{
    const char *what = value_types[o->value].name;
    char name[512];
    uint32_t *frame;

    sort_samples(x);
    /* version: the file format's, as of the members written (name and
     * activeProfileIndex came in 0.6.0). */
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
          "\"version\":\"0.6.0\",\"exporter\":\"ljmpctl export\","
          "\"name\":",
          out);
    lm_json_string(out, what, strlen(what));
    fputc(',', out);
    if ((frame = speedscope_frames(out, x)) == NULL)
        return -1;
    fputs(",\"activeProfileIndex\":0,\"profiles\":[", out);
    if (members == NULL) {
        speedscope_profile(out, x, frame, what, -1, o);
    } else {
        for (size_t m = 0; m < n; m++) {
            const char *cmd = members[m].cmdline ? members[m].cmdline : "";
            snprintf(name, sizeof(name), "%s: %.*s (%" PRIu32 ")", what,
                     (int)strcspn(cmd, " "), cmd, members[m].pid);
            if (m > 0)
                fputc(',', out);
            speedscope_profile(out, x, frame, name, (long)m, o);
        }
    }
    fputs("]}\n", out);
    free(frame);
    return ferror(out) ? -1 : 0;
}

int lm_export_write(FILE *out, const struct lm_state *const *states,
                    const struct lm_report_member *members, size_t n,
                    const struct lm_export_opts *o)
{
    struct ex x;
    int rc = -1;

    if (o->value >= LM_VALUE_COUNT)
        return -1;
    if (ex_gather(&x, states, n) == 0) {
        switch (o->format) {
        case LM_EXPORT_PPROF:
            rc = write_pprof(out, &x, members, n, o);
            break;
        case LM_EXPORT_FOLDED:
            rc = write_folded(out, &x, members, n, o);
            break;
        case LM_EXPORT_SPEEDSCOPE:
            rc = write_speedscope(out, &x, members, n, o);
            break;
        }
    }
    ex_free(&x);
    return rc;
}

int lm_export_samples(const struct lm_state *const *states,
                      const struct lm_report_member *members, size_t n,
                      lm_export_sample_fn fn, void *ctx)
{
    const char *frames[LM_STACK_MAX_DEPTH + 2];
    struct ex x;
    int rc = -1;

    if (ex_gather(&x, states, n) == 0) {
        rc = 0;
        for (uint32_t i = 0; i < x.nsm && rc == 0; i++) {
            const struct ex_sample *sm = &x.sm[i];
            const struct ex_path *pa = &x.pa[sm->path];
            struct lm_export_sample out = {
                .frames = frames,
                .nframes = pa->n,
                .member = sm->member,
                .pid = members != NULL ? members[sm->member].pid : 0,
                .command = members != NULL ? members[sm->member].cmdline : NULL,
                .trace = sm->trace,
                .estimated = states[sm->member]->stacks.sample_bytes != 0,
            };
            for (uint32_t j = 0; j < pa->n; j++)
                frames[j] = root_frame(&x, pa, j);
            memcpy(out.v, sm->v, sizeof(out.v));
            rc = fn(ctx, &out);
        }
    }
    ex_free(&x);
    return rc;
}
