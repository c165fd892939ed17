/* ljmp-gen: writes realistic synthetic R3 memprof streams for benchmarks. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_encoder.h"

/*
 * The stream imitates a busy LuaJIT server: thousands of allocation sites
 * with a skewed popularity (a few hot lines), Lua, trace, C and internal
 * sources; an allocator that reuses freed addresses by size class; a live
 * heap that grows to a target and then holds steady while blocks churn;
 * frees mostly by the GC (internal), reallocs where tables and buffers grow;
 * and symbols announced while running (new modules, modules reloaded at
 * the same address, new traces).  Addresses stay below 2^28, as a non-GC64
 * VM's low-memory allocator gives, so events are about 12 bytes.
 */

struct opts {
    uint64_t events, live, seed;
    uint32_t sites;
    const char *out;
};

struct block {
    uint64_t addr, size;
    uint32_t site;
};

struct site {
    struct lm_loc_ref loc;
};

/* xorshift64*: deterministic for a seed. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static double unit(void)
{
    return (double)(rnd() >> 11) / 9007199254740992.0;
}

enum { NCLASSES = 12 };
static const uint64_t class_size[NCLASSES] = {16,  24,  32,  48,   64,   96,
                                              128, 256, 512, 1024, 4096, 65536};

/* Free lists per size class (LIFO, like a real allocator's bins). */
static uint64_t *freelist[NCLASSES];
static size_t nfree[NCLASSES], capfree[NCLASSES];
static uint64_t bump = 0x100000;

static unsigned int pick_class(void)
{
    double u = unit();

    /* Mostly small objects: strings, tables, closures. */
    if (u < 0.30)
        return 0;
    if (u < 0.50)
        return 1;
    if (u < 0.65)
        return 2;
    if (u < 0.75)
        return 3;
    if (u < 0.84)
        return 4;
    if (u < 0.90)
        return 5;
    if (u < 0.94)
        return 6;
    if (u < 0.97)
        return 7;
    if (u < 0.985)
        return 8;
    if (u < 0.995)
        return 9;
    return u < 0.9995 ? 10 : 11;
}

static unsigned int class_of(uint64_t size)
{
    for (unsigned int c = 0; c < NCLASSES; c++)
        if (size <= class_size[c])
            return c;
    return NCLASSES - 1;
}

static uint64_t take_addr(unsigned int c)
{
    if (nfree[c] > 0)
        return freelist[c][--nfree[c]];
    uint64_t a = bump;
    bump += class_size[c];
    return a;
}

static void give_addr(uint64_t addr, uint64_t size)
{
    unsigned int c = class_of(size);

    if (nfree[c] == capfree[c]) {
        capfree[c] = capfree[c] ? capfree[c] * 2 : 1024;
        freelist[c] = realloc(freelist[c], capfree[c] * sizeof(uint64_t));
        if (freelist[c] == NULL)
            abort();
    }
    freelist[c][nfree[c]++] = addr;
}

/* Sizes within a class vary: strings are not all 16 bytes. */
static uint64_t pick_size(unsigned int c)
{
    uint64_t lo = c ? class_size[c - 1] + 1 : 8;
    return lo + rnd() % (class_size[c] - lo + 1);
}

enum {
    PROTO_BASE = 0x0e000000,
    PROTO_STRIDE = 0x80,
    LINES_PER_PROTO = 8,
    NTRACES = 300,
    NCFUNCS = 600,
    CFUNC_BASE = 0x0a000000
};

static uint32_t nprotos;

static uint64_t proto_addr(uint32_t i)
{
    return PROTO_BASE + (uint64_t)i * PROTO_STRIDE;
}

static void make_sites(struct site *sites, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct lm_loc_ref *l = &sites[i].loc;
        double u = unit();
        memset(l, 0, sizeof(*l));
        if (i == 0 || u < 0.05) {
            l->source = LM_SRC_INTERNAL;
        } else if (u < 0.13) {
            l->source = LM_SRC_TRACE;
            l->traceno = 1 + rnd() % NTRACES;
        } else if (u < 0.20) {
            l->source = LM_SRC_CFUNC;
            l->addr = CFUNC_BASE + (rnd() % (NCFUNCS * 256));
        } else {
            l->source = LM_SRC_LFUNC;
            uint32_t p = (uint32_t)(rnd() % nprotos);
            l->addr = proto_addr(p);
            l->line = 1 + p % 500 + rnd() % 40;
        }
    }
}

/* Skewed popularity: a few hot sites take most events. */
static uint32_t pick_site(uint32_t n)
{
    double u = unit();
    return (uint32_t)(u * u * u * n);
}

static void write_symtab(struct lm_buf *b)
{
    char name[96];

    lm_enc_begin(b, LM_REV_R3);
    for (uint32_t i = 0; i < nprotos; i++) {
        snprintf(name, sizeof(name), "@/srv/app/lib/module_%u.lua", i / 16);
        lm_enc_sym_lfunc(b, proto_addr(i), name, 1 + (i % 16) * 30);
    }
    for (uint32_t t = 1; t <= NTRACES; t++)
        lm_enc_sym_trace(b, LM_REV_R3, t, 0, proto_addr(rnd() % nprotos),
                         1 + rnd() % 400);
    for (uint32_t i = 0; i < NCFUNCS; i++) {
        snprintf(name, sizeof(name), "/usr/lib/libapp.so.1:fn_%u", i);
        lm_enc_sym_cfunc(b, CFUNC_BASE + (uint64_t)i * 256, name);
    }
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
}

/* Symbols while running: a module loaded, reloaded, a trace recompiled. */
static void announce(struct lm_buf *b, uint64_t i)
{
    char name[96];
    double u = unit();

    if (u < 0.6) {
        snprintf(name, sizeof(name), "@/srv/app/plugins/p%" PRIu64 ".lua", i);
        lm_enc_event_lfunc(b, proto_addr(nprotos + (uint32_t)(i % 4096)), name,
                           1);
    } else if (u < 0.8) {
        uint32_t p = (uint32_t)(rnd() % nprotos);
        snprintf(name, sizeof(name), "@/srv/app/lib/module_%u.lua", p / 16);
        lm_enc_event_lfunc(b, proto_addr(p), name, 1 + (p % 16) * 30);
    } else {
        lm_enc_event_trace(b, LM_REV_R3, 1 + rnd() % NTRACES, 0,
                           proto_addr(rnd() % nprotos), 1 + rnd() % 400);
    }
}

static int flush(struct lm_buf *b, FILE *f)
{
    if (b->oom || fwrite(b->data, 1, b->len, f) != b->len)
        return -1;
    b->len = 0;
    return 0;
}

static int generate(const struct opts *o, FILE *f)
{
    struct lm_buf b = {0};
    struct block *live = malloc((o->live + 1) * 2 * sizeof(*live));
    struct site *sites = malloc(o->sites * sizeof(*sites));
    size_t nlive = 0, cap = (o->live + 1) * 2;

    if (live == NULL || sites == NULL)
        return -1;
    rng_state = o->seed * 0x9e3779b97f4a7c15ULL + 1;
    nprotos = o->sites / LINES_PER_PROTO + 1;
    make_sites(sites, o->sites);
    write_symtab(&b);
    for (uint64_t i = 0; i < o->events; i++) {
        if (i % 20000 == 19999)
            announce(&b, i);
        uint32_t site = pick_site(o->sites);
        const struct lm_loc_ref *loc = &sites[site].loc;
        double u = unit();
        /* Grow to the target, then churn around it. */
        double p_alloc = nlive < o->live ? 0.60 : 0.40;
        if (nlive == 0 || (u < p_alloc && nlive < cap)) {
            unsigned int c = pick_class();
            uint64_t size = pick_size(c), addr = take_addr(c);
            lm_enc_alloc(&b, LM_REV_R3, loc, addr, size);
            live[nlive++] = (struct block){addr, size, site};
        } else if (u < 0.85) {
            /* The GC sweep frees most blocks (an internal source); the rest
             * are freed by the code that made them. */
            size_t k = rnd() % nlive;
            loc = &sites[unit() < 0.9 ? 0 : live[k].site].loc;
            lm_enc_free(&b, LM_REV_R3, loc, live[k].addr, live[k].size);
            give_addr(live[k].addr, live[k].size);
            live[k] = live[--nlive];
        } else {
            /* Tables and buffers grow, near where they were made. */
            size_t k = rnd() % nlive;
            site = (live[k].site + (uint32_t)(rnd() % 3)) % o->sites;
            loc = &sites[site].loc;
            unsigned int c = class_of(live[k].size);
            if (c + 1 < NCLASSES)
                c++;
            uint64_t size = pick_size(c), addr = take_addr(c);
            lm_enc_realloc(&b, LM_REV_R3, loc, live[k].addr, live[k].size, addr,
                           size);
            give_addr(live[k].addr, live[k].size);
            live[k] = (struct block){addr, size, site};
        }
        if (b.len >= (8u << 20) && flush(&b, f) != 0)
            return -1;
    }
    lm_enc_epilogue(&b);
    int rc = flush(&b, f);
    fprintf(stderr,
            "ljmp-gen: %" PRIu64 " events, %zu blocks live at the end, "
            "%u sites, %u protos\n",
            o->events, nlive, o->sites, nprotos);
    lm_buf_free(&b);
    free(live);
    free(sites);
    return rc;
}

static void usage(FILE *out)
{
    fputs("usage: ljmp-gen [--events N] [--live N] [--sites N] [--seed N] "
          "-o FILE\n"
          "Writes a synthetic R3 memprof stream: N events (default 20 M), a\n"
          "live heap held around --live blocks (default 500 k), --sites\n"
          "allocation sites (default 5000).  The same seed gives the same\n"
          "bytes.\n",
          out);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"events", required_argument, NULL, 'e'},
        {"live", required_argument, NULL, 'l'},
        {"sites", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {20000000, 500000, 1, 5000, NULL};
    int c;

    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
            o.events = strtoull(optarg, NULL, 10);
            break;
        case 'l':
            o.live = strtoull(optarg, NULL, 10);
            break;
        case 's':
            o.sites = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'r':
            o.seed = strtoull(optarg, NULL, 10);
            break;
        case 'o':
            o.out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (o.out == NULL || o.sites == 0) {
        usage(stderr);
        return 1;
    }
    FILE *f = fopen(o.out, "wb");
    if (f == NULL) {
        fprintf(stderr, "ljmp-gen: %s: %s\n", o.out, strerror(errno));
        return 1;
    }
    if (generate(&o, f) != 0 || fclose(f) != 0) {
        fprintf(stderr, "ljmp-gen: writing %s failed\n", o.out);
        return 1;
    }
    return 0;
}
