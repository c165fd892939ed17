/* `ljmpctl plot PID|FILE -o OUT.svg`: the live heap over time stacked by
 * its biggest sites, as an SVG chart, from ljmpd's history of a session
 * or from a recording replayed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chart.h"
#include "conn.h"
#include "ljmpctl.h"
#include "recseries.h"
#include "svgtext.h"

#define ANSWER_MS     30000
#define READ_CHUNK    (1u << 20)
#define DEFAULT_SITES 8

static const char plot_help[] =
    "usage: ljmpctl plot [PID] [--session ID] [--window SECONDS] [OPTIONS]\n"
    "       ljmpctl plot [OPTIONS] FILE|-\n"
    "\n"
    "Draws the live heap over time as a stacked area chart, an SVG file\n"
    "that needs nothing else (no scripts, no fonts or files but the\n"
    "viewer's): a band for each of the sites that held the most live bytes\n"
    "at any point of the chart (the locations of one name summed, a line\n"
    "in and out of compiled code), the biggest at the bottom, and one band\n"
    "for the rest on top, so that the stack's outline is the whole heap.\n"
    "The legend gives each band's name and the most it held at a point.\n"
    "\n"
    "Given a PID (a number that is not a file's name), or --session ID, or\n"
    "neither (the newest session), the chart comes from ljmpd's history of\n"
    "that session, live or kept: its sites are sampled every second at\n"
    "first, every 10 s as the history fills, over the last SECONDS (all of\n"
    "the history by default, up to ljmpd's --history-span); the x axis is\n"
    "local clock time.  ljmpd samples only the sites it tracks (see\n"
    "`ljmpctl help leaks`): where a site was not tracked, its bytes are in\n"
    "the band of the rest.  A session whose sites have no sample yet is\n"
    "drawn as its heap alone; one with no sample at all, as an empty\n"
    "chart that says so.\n"
    "\n"
    "Given a FILE (a recording, or any memprof stream; - for standard\n"
    "input), the stream is replayed and the heap sampled at regular steps\n"
    "of the bytes allocated, 200 to 400 of them: a recording has no clock,\n"
    "so the x axis is the bytes allocated so far.  A site holding under\n"
    "1/1024 of the heap at a sample counts with the rest there.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE    where to write (default: standard output)\n"
    "      --sites N        bands of sites, 1 to 20 (8)\n"
    "      --peak           mark the peak: a line where the heap's live\n"
    "                       bytes were highest (live: the highest of\n"
    "                       ljmpd's samples, said in a corner when it came\n"
    "                       before the window; a recording: after the event\n"
    "                       that made it highest)\n"
    "      --window SECONDS how far back, live (10 to 604800; default all)\n"
    "      --session ID     one session, by the id `ljmpctl list` shows\n"
    "      --width PIXELS   the chart's width, 320 to 8192 (960)\n"
    "      --height PIXELS  its height, 200 to 8192 (540); more sites need\n"
    "                       more room for the legend\n"
    "      --title TEXT     the chart's title (default: what it is of)\n"
    "      --max-string=N   reject chunk or symbol names longer than N\n"
    "                       bytes (a FILE; default 1 MiB, at most 1 GiB)\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 written, 1 usage or I/O error, 2 truncated stream\n"
    "(drawn up to its end), 3 malformed stream, 4 ljmpd not reachable, 5\n"
    "no such session.\n";

/* What the command line asks for. */
struct plot_opts {
    uint32_t sites, window_s;
    unsigned width, height;
    const char *title, *output;
    int peak;
    struct lm_limits limits;
};

/* A chart and what its strings point into, freed together. */
struct plot {
    struct chart chart;
    struct chart_data data;
    char title[512], subtitle[1024];
};

static void plot_free(struct plot *p)
{
    chart_data_free(&p->data);
}

/* What the bands are, for the subtitle: "the 8 sites that held ...", or
 * nothing when there are none. */
static void bands_said(char *out, size_t len, uint32_t nseries)
{
    if (nseries == 0)
        snprintf(out, len, "%s", "");
    else if (nseries == 1)
        snprintf(out, len, "%s",
                 "the site that held the most at a sample, and the rest; ");
    else
        snprintf(out, len,
                 "the %u sites that held the most at a sample, and the "
                 "rest; ",
                 nseries);
}

/* The chart's settings from the command line, and where it goes. */
static void plot_chart_init(struct plot *p, const struct plot_opts *o)
{
    memset(p, 0, sizeof(*p));
    p->chart.data = &p->data;
    p->chart.width = o->width;
    p->chart.height = o->height;
    p->chart.title = o->title != NULL ? o->title : p->title;
    p->chart.other_name = "other sites";
}

/* -- Live: ljmpd's history of a session ---------------------------------- */

/* A history's frames, each site's series over them, as the chart's data:
 * -1 out of memory. */
static int data_of_frames(const Ljmp__History *h, struct chart_data *d)
{
    uint32_t n = (uint32_t)h->n_frame_ms;

    if (h->n_frame_live_bytes < n)
        n = (uint32_t)h->n_frame_live_bytes;
    if (chart_data_alloc(d, n, (uint32_t)h->n_series) != 0)
        return -1;
    for (uint32_t j = 0; j < n; j++) {
        d->x[j] = h->frame_ms[j];
        d->total[j] = h->frame_live_bytes[j];
    }
    for (uint32_t i = 0; i < d->nseries; i++) {
        const Ljmp__HistorySeries *s = h->series[i];
        for (uint32_t j = 0; j < n && j < s->n_live_bytes; j++)
            d->values[(size_t)i * n + j] = s->live_bytes[j];
        if ((d->names[i] = strdup(s->name != NULL ? s->name : "?")) == NULL)
            return -1;
    }
    return 0;
}

/* A history's totals alone (no frame of its sites yet). */
static int data_of_totals(const Ljmp__History *h, struct chart_data *d)
{
    if (chart_data_alloc(d, (uint32_t)h->n_totals, 0) != 0)
        return -1;
    for (uint32_t j = 0; j < d->npoints; j++) {
        d->x[j] = h->totals[j]->time_ms;
        d->total[j] = h->totals[j]->live_bytes;
    }
    return 0;
}

/* The chart of history h: its sites' series if it has frames, else its
 * heap alone, else nothing but a note. */
static int chart_of_history(const Ljmp__History *h, const struct plot_opts *o,
                            struct plot *p)
{
    const Ljmp__SessionInfo *s = h->session;
    char bands[128];
    int rc;

    p->chart.x_kind = CHART_X_TIME;
    if (h->n_frame_ms > 0) {
        rc = data_of_frames(h, &p->data);
    } else if (h->n_totals > 0) {
        rc = data_of_totals(h, &p->data);
        p->chart.other_name = "the whole heap (no sample of its sites yet)";
    } else {
        rc = chart_data_alloc(&p->data, 0, 0);
        p->chart.note = "no samples yet: ljmpd samples a session every second";
    }
    if (h->peak != NULL && o->peak) {
        p->chart.has_peak = 1;
        p->chart.peak_x = h->peak->time_ms;
        p->chart.peak_bytes = h->peak->live_bytes;
    }
    snprintf(p->title, sizeof(p->title), "Live heap of pid %u (session %llu)",
             s ? s->pid : 0, s ? (unsigned long long)s->id : 0ull);
    bands_said(bands, sizeof(bands), p->data.nseries);
    snprintf(p->subtitle, sizeof(p->subtitle), "%scommand: %s", bands,
             s && s->cmdline && *s->cmdline ? s->cmdline : "?");
    p->chart.subtitle = p->subtitle;
    return rc;
}

/* Asks ljmpd for the target's history and makes its chart; an exit
 * status (said on stderr unless EXIT_OK). */
static int plot_live(const struct view_target *t, const struct plot_opts *o,
                     struct plot *p)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__HistoryRequest hr = LJMP__HISTORY_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    int rc;

    view_target_select(t, &sel);
    hr.session = &sel;
    hr.has_window_s = hr.has_peak_sites = hr.has_series_sites = 1;
    hr.window_s = o->window_s;
    hr.peak_sites = 0;
    hr.series_sites = o->sites;
    req.body_case = LJMP__REQUEST__BODY_HISTORY;
    req.history = &hr;
    Ljmp__Response *resp = conn_ask(&c, "plot", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_HISTORY, &rc);
    conn_close(&c);
    if (resp == NULL)
        return rc;
    if (chart_of_history(resp->history, o, p) != 0) {
        fprintf(stderr, "ljmpctl plot: out of memory\n");
        rc = EXIT_USAGE;
    }
    ljmp__response__free_unpacked(resp, NULL);
    return rc;
}

/* -- A recording replayed ------------------------------------------------ */

/* Feeds everything fd holds to r; 0 and how the stream ended, or -1 after
 * a read error was said. */
static int replay(int fd, const char *path, struct recseries *r,
                  enum lm_status *ended)
{
    uint8_t *buf = malloc(READ_CHUNK);
    enum lm_status st = LM_NEED_MORE;

    if (buf == NULL) {
        fprintf(stderr, "ljmpctl plot: out of memory\n");
        return -1;
    }
    while (st != LM_ERROR) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "ljmpctl plot: %s: %s\n", path, strerror(errno));
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        size_t used;
        st = recseries_feed(r, buf, (size_t)n, &used);
        /* Bytes after the epilogue are the decoder's error to tell. */
        if (st == LM_DONE && used < (size_t)n)
            st = recseries_feed(r, buf + used, (size_t)n - used, &used);
    }
    free(buf);
    *ended = recseries_finish(r);
    return 0;
}

/* The chart of a replayed stream r that allocated something. */
static int chart_of_replay(const struct recseries *r, const char *path,
                           const struct plot_opts *o, struct plot *p)
{
    char bands[128];

    p->chart.x_kind = CHART_X_BYTES;
    if (r->p.state.totals.alloc_bytes == 0) {
        p->chart.note = "the stream allocates nothing";
        if (chart_data_alloc(&p->data, 0, 0) != 0)
            return -1;
    } else if (recseries_chart(r, o->sites, &p->data) != 0) {
        return -1;
    }
    p->chart.has_peak = o->peak && r->peak_bytes > 0;
    p->chart.peak_x = r->peak_x;
    p->chart.peak_bytes = r->peak_bytes;
    snprintf(p->title, sizeof(p->title), "Live heap of %s",
             strcmp(path, "-") ? path : "standard input");
    bands_said(bands, sizeof(bands), p->data.nseries);
    snprintf(p->subtitle, sizeof(p->subtitle),
             "%sa recording replayed, %u samples", bands, p->data.npoints);
    p->chart.subtitle = p->subtitle;
    return 0;
}

/* Replays the stream in path ("-": stdin) and makes its chart; an exit
 * status (said on stderr unless EXIT_OK or EXIT_TRUNCATED). */
static int plot_file(const char *path, const struct plot_opts *o,
                     struct plot *p)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO
                                    : open(path, O_RDONLY | O_CLOEXEC);
    struct recseries r;
    enum lm_status st;
    int rc = EXIT_OK;

    if (fd < 0) {
        fprintf(stderr, "ljmpctl plot: cannot open %s: %s\n", path,
                strerror(errno));
        return EXIT_USAGE;
    }
    if (recseries_init(&r, &o->limits) != 0) {
        fprintf(stderr, "ljmpctl plot: out of memory\n");
        if (fd != STDIN_FILENO)
            close(fd);
        return EXIT_USAGE;
    }
    if (replay(fd, path, &r, &st) != 0) {
        rc = EXIT_USAGE;
    } else if (st == LM_ERROR) {
        fprintf(stderr,
                "ljmpctl plot: %s: malformed stream at offset %llu: %s\n", path,
                (unsigned long long)r.p.dec.err_offset, r.p.dec.errmsg);
        rc = EXIT_MALFORMED;
    } else if (chart_of_replay(&r, path, o, p) != 0) {
        fprintf(stderr, "ljmpctl plot: out of memory\n");
        rc = EXIT_USAGE;
    } else {
        rc = stream_end_status("plot", path, &r.p, st);
    }
    if (fd != STDIN_FILENO)
        close(fd);
    recseries_free(&r);
    return rc;
}

/* -- Output -------------------------------------------------------------- */

static int put_chart(FILE *out, const void *ctx)
{
    const struct plot *p = ctx;

    return chart_write_svg(out, &p->chart);
}

/* -- The command --------------------------------------------------------- */

/* The options; EXIT_USAGE after a message when the chart cannot fit. */
static int plot_opts_of(const struct ctl_args *a, struct plot_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sites = (uint32_t)args_get(a, OPT_SITES, DEFAULT_SITES);
    o->window_s = (uint32_t)args_get(a, OPT_WINDOW, 0);
    o->width = (unsigned)args_get(a, OPT_WIDTH, 960);
    o->height = (unsigned)args_get(a, OPT_HEIGHT, 540);
    o->title = a->text[OPT_TITLE];
    o->output = a->text[OPT_OUTPUT];
    o->peak = args_has(a, OPT_PEAK);
    o->limits.max_string = args_get(a, OPT_MAX_STRING, LM_DEFAULT_MAX_STRING);
    o->limits.max_buffered = args_has(a, OPT_MAX_STRING)
                                 ? o->limits.max_string + 64
                                 : LM_DEFAULT_MAX_BUFFERED;
    unsigned least = chart_min_height(o->width, o->sites);
    if (o->height < least) {
        fprintf(stderr,
                "ljmpctl plot: a chart %u pixels wide with %u sites needs "
                "--height %u at least\n",
                o->width, o->sites, least);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* A FILE's chart takes none of the options of a live session's. */
static int file_options_refused(const struct ctl_args *a)
{
    static const enum ctl_opt live_only[] = {OPT_WINDOW, OPT_SESSION};
    static const char *const names[] = {"--window", "--session"};

    for (size_t i = 0; i < 2; i++)
        if (args_has(a, live_only[i])) {
            fprintf(stderr,
                    "ljmpctl plot: %s is for a live session; a recording "
                    "has no clock and one session\n",
                    names[i]);
            return 1;
        }
    return 0;
}

static int cmd_plot(const struct ctl_args *a)
{
    const char *operand = a->noperands > 0 ? a->operands[0] : NULL;
    struct plot_opts o;
    struct view_target t;
    struct plot p;
    int rc;

    if (plot_opts_of(a, &o) != EXIT_OK)
        return EXIT_USAGE;
    plot_chart_init(&p, &o);
    if (operand == NULL || is_pid_operand(operand)) {
        if (view_target_of("plot", a, &t) != 0)
            return EXIT_USAGE;
        rc = plot_live(&t, &o, &p);
    } else {
        if (file_options_refused(a))
            return EXIT_USAGE;
        rc = plot_file(operand, &o, &p);
    }
    if (rc == EXIT_OK || rc == EXIT_TRUNCATED)
        if (svg_write_file("plot", o.output, put_chart, &p) != 0)
            rc = EXIT_USAGE;
    plot_free(&p);
    return rc;
}

/* clang-format off */
static const struct opt_use plot_options[] = {
    {OPT_OUTPUT, 0, 0, NULL},
    {OPT_SITES, 1, 20, NULL},
    {OPT_PEAK, 0, 0, NULL},
    {OPT_WINDOW, 10, 86400 * 7, "seconds"},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_WIDTH, 320, 8192, "pixels"},
    {OPT_HEIGHT, 200, 8192, "pixels"},
    {OPT_TITLE, 0, 0, NULL},
    {OPT_MAX_STRING, 0, LM_MAX_STRING_LIMIT, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_plot_entry = {
    .name = "plot",
    .synopsis = "PID|FILE [-o OUT.svg]",
    .brief = "chart of the live heap by site over time",
    .help = plot_help,
    .options = plot_options,
    .max_operands = 1,
    .operands = "at most one PID or FILE",
    .exec = cmd_plot,
};
