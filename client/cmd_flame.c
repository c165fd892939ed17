/* `ljmpctl flame PID|FILE -o OUT.svg`: the call stacks of allocations as
 * a flame graph, from a recording or from ljmpd's export of a session. */
#define _GNU_SOURCE /* open_memstream */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "ljmpctl.h"
#include "lm_export.h"
#include "lm_par.h"
#include "svgtext.h"

static const char flame_help[] =
    "usage: ljmpctl flame [OPTIONS] FILE|-|PID\n"
    "       ljmpctl flame [OPTIONS] --tree PID | --unit NAME\n"
    "\n"
    "Draws the Lua call stacks of allocations as a flame graph, an SVG file\n"
    "that needs nothing else (no scripts, no fonts or files but the\n"
    "viewer's): the outermost callers at the bottom, each frame above the\n"
    "one that called it, as wide as what the stacks through it hold live\n"
    "(or allocated, --by alloc); frames of one name along one path are\n"
    "merged, as reports name them (@app.lua:12, string.rep, [truncated]).\n"
    "A frame's tooltip gives its live bytes and blocks and what it\n"
    "allocated.\n"
    "\n"
    "The source is export's: a recorded stream (FILE, or standard input\n"
    "for '-'), the newest session of a process in ljmpd (PID: streaming,\n"
    "or finished and kept), or a whole server's sessions merged (--tree,\n"
    "--unit), each process a frame under the root.  The stacks come from a\n"
    "stream that has them (attach --stacks, LJMP_STACKS, or\n"
    "misc.memprof.start{stacks = DEPTH}); when they were sampled\n"
    "(--stack-sample), the figures are estimates, and the events without\n"
    "a stack, which the estimates stand for, are left out.  A stream\n"
    "without stacks is drawn as one frame per site, and says so.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE    where to write (default: standard output)\n"
    "      --by WHAT        what sets a frame's width: live (live bytes,\n"
    "                       the default) or alloc (bytes allocated)\n"
    "      --title TEXT     the graph's title (default: what it shows)\n"
    "      --width PIXELS   its width, 320 to 16384 (1200)\n"
    "      --tree           PID and its descendants, merged (from ljmpd)\n"
    "      --unit NAME      a systemd unit's processes, merged (from ljmpd)\n"
    "      --max-string=N   reject chunk or symbol names longer than N\n"
    "                       bytes (a FILE; default 1 MiB, at most 1 GiB)\n"
    "      --threads=N      1 or 2 threads to read a FILE\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 written, 1 usage or I/O error, 2 truncated stream or\n"
    "session (drawn up to its end), 3 malformed stream, 4 ljmpd not\n"
    "reachable, 5 no session of PID.\n";

/* What the command line asks for. */
struct flame_ask {
    enum flame_by by;
    unsigned width;
    const char *title, *output;
    struct lm_limits limits;
    int threads;
};

/* What a graph is of, for its subtitle. */
struct flame_about {
    char what[512];        /* "pid 1234: luajit app.lua", "app.bin" */
    int stacks;            /* the stream has call stacks */
    uint64_t sample_bytes; /* their sampling mean; 0: every allocation */
};

/* The graph being built: each sample added, its process as a root frame
 * when several are merged. */
struct flame_build {
    struct flame f;
    int merged;
};

static struct flame_figures figures_of(const uint64_t v[LM_VALUE_COUNT])
{
    return (struct flame_figures){
        .live_bytes = v[LM_VALUE_INUSE_SPACE],
        .live_blocks = v[LM_VALUE_INUSE_OBJECTS],
        .alloc_bytes = v[LM_VALUE_ALLOC_SPACE],
        .alloc_count = v[LM_VALUE_ALLOC_OBJECTS],
    };
}

/* Adds sample s (lm_export_sample_fn): -1 out of memory. */
static int add_sample(void *ctx, const struct lm_export_sample *s)
{
    struct flame_build *b = ctx;
    struct flame_figures fig = figures_of(s->v);
    const char *frames[LM_STACK_MAX_DEPTH + 3];
    char process[300];
    const char *cmd = s->command != NULL && s->command[0] ? s->command : "?";
    size_t n = 0;

    if (s->nframes > LM_STACK_MAX_DEPTH + 2)
        return -1; /* no stack of the export is that deep */
    if (b->merged) {
        /* As merged folded stacks name a process: the command's first
         * word, which names the program, and the pid. */
        snprintf(process, sizeof(process), "%.*s (%" PRIu32 ")",
                 (int)strcspn(cmd, " "), cmd, s->pid);
        frames[n++] = process;
    }
    for (uint32_t j = 0; j < s->nframes; j++)
        frames[n++] = s->frames[j];
    b->f.estimated |= s->estimated;
    return flame_add(&b->f, frames, n, &fig) != 0 ? -1 : 0;
}

/* -- A recording --------------------------------------------------------- */

/* The recording in path ("-": stdin) drawn into b; an exit status (said
 * on stderr unless EXIT_OK or EXIT_TRUNCATED). */
static int flame_file(const char *path, const struct flame_ask *a,
                      struct flame_build *b, struct flame_about *about)
{
    struct lm_profile p;
    enum lm_status st;
    int rc = load_stream_file("flame", path, &a->limits, a->threads, &p, &st);

    if (rc != EXIT_OK)
        return rc;
    const struct lm_state *s = &p.state;
    about->stacks = s->stacks.configured && s->stacks.depth > 0;
    about->sample_bytes = s->stacks.sample_bytes;
    snprintf(about->what, sizeof(about->what), "%s",
             strcmp(path, "-") != 0 ? path : "standard input");
    if (lm_export_samples(&s, NULL, 1, add_sample, b) != 0) {
        fprintf(stderr, "ljmpctl flame: out of memory\n");
        rc = EXIT_USAGE;
    } else {
        rc = stream_end_status("flame", path, &p, st);
    }
    lm_profile_free(&p);
    return rc;
}

/* -- A session in ljmpd -------------------------------------------------- */

/* What ljmpd said of the sessions, for the subtitle. */
static void about_live(const struct view_target *t, const struct live_about *l,
                       struct flame_about *about)
{
    char name[256];

    about->stacks = l->stacks > 0;
    about->sample_bytes = l->stack_sample;
    if (view_target_merged(t)) {
        view_target_name(t, name, sizeof(name));
        snprintf(about->what, sizeof(about->what), "%s (%" PRIu32 " %s)", name,
                 l->nmembers, l->nmembers == 1 ? "process" : "processes");
    } else {
        snprintf(about->what, sizeof(about->what), "pid %" PRIu32 ": %s",
                 l->pid, l->command[0] ? l->command : "?");
    }
}

/* The target's pprof export, as `ljmpctl export` asks ljmpd for it,
 * read back and drawn into b; an exit status (said on stderr unless
 * EXIT_OK or EXIT_TRUNCATED). */
static int flame_live(const struct view_target *t, struct flame_build *b,
                      struct flame_about *about)
{
    struct lm_report_opts o = {.export_format = 1 + LM_EXPORT_PPROF,
                               .export_value = LM_VALUE_INUSE_SPACE};
    struct live_about l;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    int rc;

    if (mem == NULL) {
        fprintf(stderr, "ljmpctl flame: out of memory\n");
        return EXIT_USAGE;
    }
    memset(&l, 0, sizeof(l));
    rc = live_report_about("flame", t, &o, mem, &l);
    if (fclose(mem) != 0 && (rc == EXIT_OK || rc == EXIT_TRUNCATED)) {
        fprintf(stderr, "ljmpctl flame: out of memory\n");
        rc = EXIT_USAGE;
    }
    if (rc == EXIT_OK || rc == EXIT_TRUNCATED) {
        about_live(t, &l, about);
        b->merged = l.nmembers > 1;
        if (lm_export_read_pprof((const uint8_t *)buf, len, add_sample, b) !=
            0) {
            fprintf(stderr, "ljmpctl flame: ljmpd's export could not be read "
                            "(or memory ran out)\n");
            rc = EXIT_USAGE;
        }
    }
    free(buf);
    return rc;
}

/* -- Output -------------------------------------------------------------- */

/* The subtitle: what widths are, what the graph is of, and how its
 * stacks came. */
static void subtitle_of(const struct flame_about *about, enum flame_by by,
                        char *out, size_t len)
{
    const char *widths =
        by == FLAME_BY_ALLOC ? "bytes allocated" : "live bytes";

    if (!about->stacks)
        snprintf(out, len,
                 "widths: %s; %s; the stream has no call stacks: one frame "
                 "per site (attach --stacks records them)",
                 widths, about->what);
    else if (about->sample_bytes != 0)
        snprintf(out, len,
                 "widths: %s; %s; estimated from sampled stacks (one per "
                 "%" PRIu64 " bytes)",
                 widths, about->what, about->sample_bytes);
    else
        snprintf(out, len,
                 "widths: %s; %s; exact: every allocation carried its stack",
                 widths, about->what);
}

/* The graph and its options, for svg_write_file. */
struct graph {
    const struct flame *f;
    const struct flame_opts *o;
};

static int put_graph(FILE *out, const void *ctx)
{
    const struct graph *g = ctx;

    return flame_write_svg(out, g->f, g->o);
}

/* -- The command --------------------------------------------------------- */

/* The options; -1 after a message. */
static int flame_ask_of(const struct ctl_args *a, struct flame_ask *k)
{
    const char *by = a->text[OPT_BY];

    memset(k, 0, sizeof(*k));
    k->by = FLAME_BY_LIVE;
    if (by != NULL && strcmp(by, "alloc") == 0) {
        k->by = FLAME_BY_ALLOC;
    } else if (by != NULL && strcmp(by, "live") != 0) {
        fprintf(stderr, "ljmpctl flame: --by %s: live or alloc\n", by);
        return -1;
    }
    k->width = (unsigned)args_get(a, OPT_WIDTH, 1200);
    k->title = a->text[OPT_TITLE];
    k->output = a->text[OPT_OUTPUT];
    k->limits.max_string = args_get(a, OPT_MAX_STRING, LM_DEFAULT_MAX_STRING);
    k->limits.max_buffered = args_has(a, OPT_MAX_STRING)
                                 ? k->limits.max_string + 64
                                 : LM_DEFAULT_MAX_BUFFERED;
    k->threads = (int)args_get(a, OPT_THREADS, lm_par_cpus() >= 2 ? 2 : 1);
    return 0;
}

/* The source of the command line: a live target (1) or a FILE (0); -1
 * after a message. */
static int source_of(const struct ctl_args *a, struct view_target *t)
{
    const char *operand = a->noperands > 0 ? a->operands[0] : NULL;

    memset(t, 0, sizeof(*t));
    if (args_has(a, OPT_TREE) || args_has(a, OPT_UNIT))
        return view_target_of("flame", a, t) != 0 ? -1 : 1;
    if (operand == NULL) {
        fprintf(stderr, "ljmpctl flame: expected one FILE, - or PID\n");
        return -1;
    }
    if (!is_pid_operand(operand))
        return 0;
    return args_parse_pid("flame", operand, &t->pid) != 0 ? -1 : 1;
}

static int cmd_flame(const struct ctl_args *a)
{
    struct flame_ask k;
    struct flame_about about;
    struct flame_build b = {0};
    struct view_target t;
    char subtitle[1024];
    int live, rc;

    if (flame_ask_of(a, &k) != 0 || (live = source_of(a, &t)) < 0)
        return EXIT_USAGE;
    if (flame_init(&b.f) != 0) {
        fprintf(stderr, "ljmpctl flame: out of memory\n");
        return EXIT_USAGE;
    }
    memset(&about, 0, sizeof(about));
    rc = live ? flame_live(&t, &b, &about)
              : flame_file(a->operands[0], &k, &b, &about);
    if (rc == EXIT_OK || rc == EXIT_TRUNCATED) {
        struct flame_opts o = {
            .title = k.title != NULL          ? k.title
                     : k.by == FLAME_BY_ALLOC ? "Allocations by call stack"
                                              : "Live heap by call stack",
            .subtitle = subtitle,
            .by = k.by,
            .width = k.width,
        };
        struct graph g = {&b.f, &o};
        subtitle_of(&about, k.by, subtitle, sizeof(subtitle));
        if (svg_write_file("flame", k.output, put_graph, &g) != 0)
            rc = EXIT_USAGE;
    }
    flame_free(&b.f);
    return rc;
}

/* clang-format off */
static const struct opt_use flame_options[] = {
    {OPT_OUTPUT, 0, 0, NULL},
    {OPT_BY, 0, 0, NULL},
    {OPT_TITLE, 0, 0, NULL},
    {OPT_WIDTH, 320, 16384, "pixels"},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_MAX_STRING, 0, LM_MAX_STRING_LIMIT, NULL},
    {OPT_THREADS, 1, 2, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_flame_entry = {
    .name = "flame",
    .synopsis = "PID|FILE [-o OUT.svg]",
    .brief = "flame graph of allocations' call stacks",
    .help = flame_help,
    .options = flame_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one FILE (- for stdin) or PID",
    .exec = cmd_flame,
};
