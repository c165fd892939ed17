/* `ljmpctl leaks [PID]`: the sites of a session whose live bytes grew
 * steadily over a window, from ljmpd's history, with their evidence. */
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "ljmpctl.h"
#include "pbjson.h"

#define ANSWER_MS 30000

static const char leaks_help[] =
    "usage: ljmpctl leaks [PID] [--session ID] [--window SECONDS] [-n N]\n"
    "                     [--json]\n"
    "\n"
    "Leak suspects of PID's newest session (or of --session ID; without\n"
    "either, of the newest session): the allocation sites whose live\n"
    "bytes grew steadily over the last SECONDS (300 by default, 10 to\n"
    "ljmpd's --history-span), biggest growth first.\n"
    "\n"
    "ljmpd samples each session's tracked sites (half of them the sites\n"
    "holding the most live bytes, half those holding the most among the\n"
    "sites that keep at least half of what they allocate) every second at\n"
    "first, coarsening to every 10 s as its history fills.  A site is a\n"
    "suspect when its samples in the window are:\n"
    "  - at least 5,\n"
    "  - on a least-squares line of live bytes over time that rises\n"
    "    (slope above 0) and fits them (R^2 at least 0.8),\n"
    "  - not decreasing in at least 80% of the steps between samples,\n"
    "  - the last above the first,\n"
    "  - and gaining live blocks for at least a quarter of its allocations\n"
    "    from the first to the last (a site that allocated nothing there,\n"
    "    growing by reallocs, passes).\n"
    "A site whose live bytes rise and fall with the collector's cycles\n"
    "fails these, even while its uncollected garbage grows with the heap;\n"
    "one that only grows is a suspect however small.  The locations of one\n"
    "name (a line in and out of compiled code) are summed as one site.\n"
    "\n"
    "Columns: GROWTH/MIN the slope in bytes a minute; LIVE NOW its live\n"
    "bytes at the newest sample; FIT the R^2; RISING the steps not\n"
    "decreasing; KEPT the live blocks gained per allocation; ALLOCS the\n"
    "allocations at the site and FREED the blocks made there that were\n"
    "freed (wherever that happened: the collector's frees are events at\n"
    "the place it runs, but they count here for the site that allocated),\n"
    "between the first and last samples used.\n"
    "\n"
    "Options:\n"
    "      --window SECONDS  how far back (300)\n"
    "      --session ID   one session, by the id `ljmpctl list` shows\n"
    "  -n, --top N        suspects at most (20; at most 1000)\n"
    "      --json         the answer as one JSON object\n"
    "\n"
    "Exit status: 0 (suspects or none), 4 ljmpd not reachable, 5 no such\n"
    "session.\n";

/* A byte count for a column: B, KiB, MiB or GiB. */
static void put_size(char *out, size_t len, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = bytes < 0 ? -bytes : bytes;
    unsigned u = 0;

    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(out, len, u == 0 ? "%s%.0f %s" : "%s%.1f %s", bytes < 0 ? "-" : "",
             v, units[u]);
}

static void print_leaks(const Ljmp__LeakSuspects *l)
{
    const Ljmp__SessionInfo *s = l->session;

    if (s != NULL)
        printf("session %llu, pid %u: %zu suspect%s over the last %u s (%u "
               "samples of %u sites; a suspect needs %u)\n",
               (unsigned long long)s->id, s->pid, l->n_suspects,
               l->n_suspects == 1 ? "" : "s", l->window_s, l->samples,
               l->sites_tracked, l->min_points);
    if (l->n_suspects == 0)
        return;
    printf("%4s %12s %12s %5s %6s %5s %10s %10s  %s\n", "RANK", "GROWTH/MIN",
           "LIVE NOW", "FIT", "RISING", "KEPT", "ALLOCS", "FREED", "SITE");
    for (size_t i = 0; i < l->n_suspects; i++) {
        const Ljmp__LeakSuspect *x = l->suspects[i];
        const Ljmp__Location *site = x->site;
        char growth[32], live[32];
        put_size(growth, sizeof(growth), x->growth_per_min);
        put_size(live, sizeof(live), site ? (double)site->live_bytes : 0);
        printf("%4zu %12s %12s %5.2f %5.0f%% %4.0f%% %10llu %10llu  %s\n",
               i + 1, growth, live, x->fit_r2, x->rising * 100, x->kept * 100,
               (unsigned long long)x->window_allocs,
               (unsigned long long)x->window_frees,
               site && site->name ? site->name : "?");
    }
}

static int cmd_leaks(const struct ctl_args *a)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__LeaksRequest lr = LJMP__LEAKS_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    struct view_target t;
    int rc;

    if (view_target_of("leaks", a, &t) != 0)
        return EXIT_USAGE;
    view_target_select(&t, &sel);
    lr.session = &sel;
    lr.has_window_s = lr.has_limit = 1;
    lr.window_s = (uint32_t)args_get(a, OPT_WINDOW, 300);
    lr.limit = (uint32_t)args_get(a, OPT_TOP, 20);
    req.body_case = LJMP__REQUEST__BODY_LEAKS;
    req.leaks = &lr;
    Ljmp__Response *resp = conn_ask(&c, "leaks", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_LEAKS, &rc);
    if (resp != NULL) {
        if (args_has(a, OPT_JSON)) {
            pbjson_write(stdout, &resp->leaks->base);
            putchar('\n');
        } else {
            pb_mask_controls(&resp->base);
            print_leaks(resp->leaks);
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

/* clang-format off */
static const struct opt_use leaks_options[] = {
    {OPT_WINDOW, 10, 86400 * 7, "seconds"},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_TOP, 1, 1000, NULL},
    {OPT_JSON, 0, 0, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_leaks_entry = {
    .name = "leaks",
    .synopsis = "[PID] [--window SECONDS] [--json]",
    .brief = "sites whose live bytes grow steadily",
    .help = leaks_help,
    .options = leaks_options,
    .max_operands = 1,
    .operands = "at most one PID",
    .exec = cmd_leaks,
};
