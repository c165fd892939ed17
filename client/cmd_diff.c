/* `ljmpctl diff`: the change of each site between two marks of a session
 * (or its start, peak, now), from ljmpd; or between two recordings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "filediff.h"
#include "ljmpctl.h"
#include "pbjson.h"

#define ANSWER_MS 30000

static const char diff_help[] =
    "usage: ljmpctl diff [PID] FROM [TO] [--session ID] [--sort KEY] [-n N]\n"
    "                    [--json]\n"
    "       ljmpctl diff OLD.bin NEW.bin [--sort KEY] [-n N] [--json]\n"
    "\n"
    "The change of each allocation site between two moments of PID's\n"
    "newest session (or of --session ID; without either, of the newest\n"
    "session), from ljmpd.  FROM and TO are each:\n"
    "  NAME   a mark stored by `ljmpctl mark`\n"
    "  start  the session's start (every counter 0)\n"
    "  peak   the tick of its highest live bytes, from its history: only\n"
    "         the sites the history tracked then (ljmpd's --history-sites,\n"
    "         the ones holding the most); both ends are compared on them\n"
    "  now    the session as it is (TO's default)\n"
    "\n"
    "Given two recordings (memprof files), the same between the state at\n"
    "the end of OLD and at the end of NEW, read here without ljmpd: sites\n"
    "are matched by name, so two runs of a program compare.  An operand\n"
    "that names an existing file, or holds a '/' or a '.', is a recording;\n"
    "a number is a PID; anything else is FROM, of the newest session.\n"
    "\n"
    "The locations of one name (a line in and out of compiled code) are\n"
    "summed as one site.  A site on one end only counts with zeros on the\n"
    "other; sites that did not change are left out.  Columns: LIVE and\n"
    "BLOCKS the live bytes and blocks gained (- lost); ALLOCS the\n"
    "allocations (allocs and reallocs) made between the ends and ALLOC'D\n"
    "their bytes; FREES the free events at the site (the collector's are\n"
    "counted where it runs, not at the site that allocated); LIVE AT TO\n"
    "its live bytes at TO.  TOTAL sums every site, listed or not.\n"
    "\n"
    "Options:\n"
    "      --sort KEY     growth: live bytes gained, losses last (default);\n"
    "                     change: live bytes gained or lost, biggest first;\n"
    "                     blocks: live blocks gained; allocs: allocations;\n"
    "                     alloc-bytes: bytes allocated\n"
    "  -n, --top N        sites at most (20; at most 1000)\n"
    "      --session ID   one session, by the id `ljmpctl list` shows\n"
    "      --max-string=N, --threads=N  reading recordings, as report's\n"
    "      --json         the answer as one JSON object\n"
    "\n"
    "Exit status: 0, 1 usage or I/O error, 2 a recording truncated (the\n"
    "diff covers what it holds), 3 a recording malformed, 4 ljmpd not\n"
    "reachable, 5 no such session or mark.\n";

/* The keys, in the order of the wire's DiffKey and lm_diff_key. */
static const char *const diff_keys[] = {"growth", "change", "blocks", "allocs",
                                        "alloc-bytes"};

#define NKEYS (sizeof(diff_keys) / sizeof(diff_keys[0]))
_Static_assert(NKEYS == LJMP__DIFF_KEY__DIFF_ALLOC_BYTES + 1,
               "a name for every DiffKey");
_Static_assert((int)LM_DIFF_ALLOC_BYTES == LJMP__DIFF_KEY__DIFF_ALLOC_BYTES,
               "the core's keys in the wire's order");

/* --sort's key; -1 after a message. */
static int diff_key_of(const struct ctl_args *a)
{
    const char *text = a->text[OPT_DIFF_SORT];

    if (!args_has(a, OPT_DIFF_SORT))
        return LJMP__DIFF_KEY__DIFF_GROWTH;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(text, diff_keys[i]) == 0)
            return (int)i;
    fprintf(stderr,
            "ljmpctl diff: unknown sort key '%s' (growth, change, blocks, "
            "allocs, alloc-bytes)\n",
            text);
    return -1;
}

/* A signed byte count for a column: +1.5 MiB, -300 B. */
static void put_delta_size(char *out, size_t len, int64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = bytes < 0 ? -(double)bytes : (double)bytes;
    unsigned u = 0;

    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(out, len, u == 0 ? "%s%.0f %s" : "%s%.1f %s",
             bytes < 0   ? "-"
             : bytes > 0 ? "+"
                         : "",
             v, units[u]);
}

static void put_size(char *out, size_t len, uint64_t bytes)
{
    put_delta_size(out, len, bytes > INT64_MAX ? INT64_MAX : (int64_t)bytes);
    if (out[0] == '+')
        memmove(out, out + 1, strlen(out));
}

/* One end as printed: its name, and its time of day when it has one. */
static void put_end(char *out, size_t len, const Ljmp__DiffEnd *e)
{
    time_t t;
    struct tm tm;
    char when[16];

    if (e == NULL) {
        snprintf(out, len, "?");
        return;
    }
    t = (time_t)(e->time_ms / 1000);
    if (!e->has_time_ms || localtime_r(&t, &tm) == NULL ||
        strftime(when, sizeof(when), "%H:%M:%S", &tm) == 0) {
        snprintf(out, len, "%s", e->name ? e->name : "?");
        return;
    }
    snprintf(out, len, "%s (%s)", e->name ? e->name : "?", when);
}

static void print_site(const char *rank, const Ljmp__DiffSite *x,
                       const char *name)
{
    char live[32], bytes[32], to[32];

    put_delta_size(live, sizeof(live), x->live_bytes);
    put_delta_size(bytes, sizeof(bytes), x->alloc_bytes);
    put_size(to, sizeof(to), x->live_bytes_to);
    printf("%5s %12s %+10lld %+10lld %12s %+9lld %12s  %s\n", rank, live,
           (long long)x->live_blocks, (long long)x->alloc_events, bytes,
           (long long)x->free_events, to, name);
}

static void print_diff(const Ljmp__Diff *d)
{
    const Ljmp__SessionInfo *s = d->session;
    char from[300], to[300];

    put_end(from, sizeof(from), d->from);
    put_end(to, sizeof(to), d->to);
    if (s != NULL)
        printf("session %llu, pid %u: ", (unsigned long long)s->id, s->pid);
    printf("from %s to %s: %u site%s changed, by %s%s\n", from, to, d->changed,
           d->changed == 1 ? "" : "s", diff_keys[d->sort],
           d->tracked_only ? " (the sites tracked at the peak alone)" : "");
    if (d->unnamed > 0)
        printf("%u locations left out: naming them would pass the "
               "session's memory budget\n",
               d->unnamed);
    printf("%5s %12s %10s %10s %12s %9s %12s  %s\n", "RANK", "LIVE", "BLOCKS",
           "ALLOCS", "ALLOC'D", "FREES", "LIVE AT TO", "SITE");
    for (size_t i = 0; i < d->n_sites; i++) {
        char rank[24];
        snprintf(rank, sizeof(rank), "%zu", i + 1);
        print_site(rank, d->sites[i],
                   d->sites[i]->name ? d->sites[i]->name : "?");
    }
    if (d->total != NULL)
        print_site("", d->total, "TOTAL");
}

/* Prints d as asked. */
static void show_diff(const struct ctl_args *a, Ljmp__Diff *d)
{
    if (args_has(a, OPT_JSON)) {
        pbjson_write(stdout, &d->base);
        putchar('\n');
    } else {
        pb_mask_controls(&d->base);
        print_diff(d);
    }
}

/* Whether an operand is a recording rather than a PID or an end. */
static int is_file_operand(const char *arg)
{
    return access(arg, F_OK) == 0 || strchr(arg, '/') != NULL ||
           strchr(arg, '.') != NULL;
}

static int diff_files(const struct ctl_args *a, int key)
{
    struct filediff_opts o = {
        .key = key,
        .limit = (uint32_t)args_get(a, OPT_TOP, 20),
        .max_string = args_get(a, OPT_MAX_STRING, 0),
        .threads = (int)args_get(a, OPT_THREADS, 0),
    };
    struct filediff fd;

    if (a->noperands != 2 || !is_file_operand(a->operands[1])) {
        fprintf(stderr, "ljmpctl diff: a diff of recordings needs two "
                        "files: OLD.bin NEW.bin\n");
        return EXIT_USAGE;
    }
    if (args_has(a, OPT_SESSION)) {
        fprintf(stderr, "ljmpctl diff: --session is for a diff of a "
                        "session, not of recordings\n");
        return EXIT_USAGE;
    }
    int rc = filediff_run(a->operands[0], a->operands[1], &o, &fd);
    if (rc == EXIT_OK || rc == EXIT_TRUNCATED)
        show_diff(a, &fd.msg);
    filediff_free(&fd);
    return rc;
}

static int diff_live(const struct ctl_args *a, int key)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__DiffRequest dr = LJMP__DIFF_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    struct conn c;
    int i = 0, rc;

    if (is_pid_operand(a->operands[0]) &&
        args_parse_pid("diff", a->operands[i++], &sel.pid) != 0)
        return EXIT_USAGE;
    if (i == a->noperands || a->noperands - i > 2) {
        fprintf(stderr, "ljmpctl diff: expected [PID] FROM [TO] (see ljmpctl "
                        "help diff)\n");
        return EXIT_USAGE;
    }
    sel.has_pid = sel.pid != 0;
    sel.has_session_id = args_has(a, OPT_SESSION);
    sel.session_id = args_get(a, OPT_SESSION, 0);
    dr.session = &sel;
    dr.from = a->operands[i];
    dr.to = i + 1 < a->noperands ? a->operands[i + 1] : NULL;
    dr.has_sort = dr.has_limit = 1;
    dr.sort = (Ljmp__DiffKey)key;
    dr.limit = (uint32_t)args_get(a, OPT_TOP, 20);
    req.body_case = LJMP__REQUEST__BODY_DIFF;
    req.diff = &dr;
    Ljmp__Response *resp = conn_ask(&c, "diff", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_DIFF, &rc);
    if (resp != NULL) {
        show_diff(a, resp->diff);
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

static int cmd_diff(const struct ctl_args *a)
{
    int key = diff_key_of(a);

    if (key < 0)
        return EXIT_USAGE;
    if (is_file_operand(a->operands[0]))
        return diff_files(a, key);
    return diff_live(a, key);
}

/* clang-format off */
static const struct opt_use diff_options[] = {
    {OPT_DIFF_SORT, 0, 0, NULL},
    {OPT_TOP, 1, 1000, NULL},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_MAX_STRING, 0, LM_MAX_STRING_LIMIT, NULL},
    {OPT_THREADS, 1, 2, NULL},
    {OPT_JSON, 0, 0, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_diff_entry = {
    .name = "diff",
    .synopsis = "[PID] FROM [TO] | OLD NEW",
    .brief = "sites' change between marks or recordings",
    .help = diff_help,
    .options = diff_options,
    .min_operands = 1,
    .max_operands = 3,
    .operands = "[PID] FROM [TO], or two recordings",
    .exec = cmd_diff,
};
