/* `ljmpctl top [PID]`: a live, top-like view of allocation hotspots, full
 * screen (ncurses) on a terminal, plain blocks otherwise. */
#define _GNU_SOURCE
#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <wchar.h>
#include <unistd.h>

#include "callers.h"
#include "conn.h"
#include "ljmpctl.h"
#include "pbjson.h"
#include "sortkey.h"
#include "target.h"

static const char top_help[] =
    "usage: ljmpctl top [PID] [OPTIONS]\n"
    "       ljmpctl top --tree PID | --unit NAME [OPTIONS]\n"
    "\n"
    "Shows, live, where programs allocate and hold memory: for each session\n"
    "(or PID's newest), its totals and rates, then its allocation sites by\n"
    "the sort key: live bytes and blocks held now, bytes allocated per\n"
    "second and events per second over the last interval, frees, growth.\n"
    "\n"
    "Columns: LIVE and BLOCKS held now; ALLOCATED in all; ALLOC/S and\n"
    "EVENTS/S over the last interval; FREED the blocks made at the site\n"
    "that are gone since, wherever they were freed (the report's \"frees\");\n"
    "GROWTH/MIN the slope of the site's live bytes over the --window, in\n"
    "bytes a minute, for the sites ljmpd's history tracks (`ljmpctl leaks\n"
    "--help` says which), \"-\" for the others and in merged views; on a\n"
    "terminal of 150 columns or more, HISTORY, a sparkline of those live\n"
    "bytes over the window.\n"
    "\n"
    "With --tree (PID and its descendants, e.g. nginx's master and workers)\n"
    "or --unit (the processes of a systemd unit), one merged view: the\n"
    "processes that stream now (or, when none does, the last sessions of\n"
    "that tree or unit), sites of the same name summed across them;\n"
    "--by-process shows under each site what each process holds of it.\n"
    "\n"
    "On a terminal, a full-screen table refreshed every interval.  Keys:\n"
    "  l live bytes   b live blocks   a allocated bytes   r alloc rate\n"
    "  e event rate   f freed bytes   g growth            F free events\n"
    "  s next key     q quit\n"
    "  up, down       move the cursor over the sites\n"
    "  c              the cursor's site's callers, from a stream with call\n"
    "                 stacks (attach --stacks): a tree of caller paths with\n"
    "                 live and allocated bytes, in the lower half; c again\n"
    "                 hides it\n"
    "Otherwise (or with --once), one plain block per snapshot.\n"
    "\n"
    "Options:\n"
    "      --once         one snapshot, then exit\n"
    "      --count N      N snapshots, then exit\n"
    "  -n, --top N        sites per session (default: what fits, or 20)\n"
    "      --interval MS  refresh interval (1000; 50 to 3600000)\n"
    "      --sort KEY     live-bytes (default), live-blocks, alloc-bytes,\n"
    "                     alloc-rate, event-rate, free-bytes, growth (live\n"
    "                     bytes gained a minute, times the R^2 of the line\n"
    "                     through them and the share of allocations kept:\n"
    "                     a steady rise of kept blocks before garbage that\n"
    "                     saws; untracked sites last),\n"
    "                     free-events (free events at the location: where\n"
    "                     frees happen, the collector's at INTERNAL)\n"
    "      --window SECONDS  GROWTH/MIN's and HISTORY's window (300; 10 to\n"
    "                     86400)\n"
    "      --session ID   one session, by the id `ljmpctl list` shows\n"
    "      --tree         PID and its descendants, merged\n"
    "      --unit NAME    a systemd unit's processes (NAME.service when NAME\n"
    "                     has no type), merged\n"
    "      --by-process   each merged site's share per process\n"
    "      --by-trace     what compiled code allocated as its trace's rows\n"
    "                     (TRACE [N] started at CHUNK:LINE), not its lines'\n";

/* A row's HISTORY column: its points, and the width it needs. */
#define SPARK_POINTS 16
#define SPARK_WIDTH  150

struct top_args {
    struct view_target target;
    uint32_t top, interval_ms, window_s;
    size_t sort; /* index in sortkey_table */
    int once;
    int spark;      /* the HISTORY column: on a terminal wide enough */
    int utf8;       /* the locale draws block characters */
    uint64_t count; /* snapshots to show, 0: until q or the end */
    /* The cursor: its row among those drawn, and that row's session
     * and site once drawn; the callers pane (c) and ljmpd's last answer
     * for it, and the request it waits for (0: none). */
    size_t cursor;
    uint64_t cursor_session;
    char cursor_site[1024];
    int callers;
    Ljmp__Response *callers_resp;
    uint64_t callers_asked;
};

/* The view's settings from its command line; -1 after a message. */
static int top_args_of(const struct ctl_args *args, struct top_args *a)
{
    memset(a, 0, sizeof(*a));
    a->once = args_has(args, OPT_ONCE);
    a->count = args_get(args, OPT_COUNT, 0);
    /* More sites than ljmpd sends are as many as it sends. */
    unsigned long long top = args_get(args, OPT_TOP, 0);
    a->top = top > 1000 ? 1000 : (uint32_t)top;
    a->interval_ms = (uint32_t)args_get(args, OPT_INTERVAL, 1000);
    a->sort = (size_t)args_get(args, OPT_SORT, 0);
    a->window_s = (uint32_t)args_get(args, OPT_WINDOW, 300);
    return view_target_of("top", args, &a->target) != 0 ? -1 : 0;
}

static uint64_t subscribe(struct conn *c, const struct top_args *a,
                          uint32_t top)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__SubscribeRequest sr = LJMP__SUBSCRIBE_REQUEST__INIT;
    Ljmp__SnapshotOptions o = LJMP__SNAPSHOT_OPTIONS__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;

    view_target_fill(&a->target, &o, &sel);
    o.has_top = o.has_sort = 1;
    o.top = top;
    o.sort = sortkey_table[a->sort].value;
    o.has_growth_window_s = o.has_history_points = 1;
    o.growth_window_s = a->window_s;
    o.history_points = a->spark ? SPARK_POINTS : 0;
    sr.options = &o;
    sr.has_interval_ms = 1;
    sr.interval_ms = a->interval_ms;
    req.body_case = LJMP__REQUEST__BODY_SUBSCRIBE;
    req.subscribe = &sr;
    return conn_send(c, &req, -1);
}

/* Bytes with a binary unit, in 7 columns or fewer. */
static const char *human(char *buf, size_t len, double v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", v);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* The totals line of a header, the same for a session and a merged view. */
static void totals_line(char *out, size_t len, const Ljmp__Totals *t,
                        double events_per_s, double alloc_bytes_per_s)
{
    char a[16], f[16], lv[16], rate[16];

    snprintf(out, len,
             "events %llu (%.0f/s)  allocated %s (%s/s)  freed %s  live %s "
             "in %llu blocks",
             (unsigned long long)ljmp_wire_totals_events(t), events_per_s,
             human(a, sizeof(a), (double)t->alloc_bytes),
             human(rate, sizeof(rate), alloc_bytes_per_s),
             human(f, sizeof(f), (double)t->freed_bytes),
             human(lv, sizeof(lv), (double)t->live_bytes),
             (unsigned long long)t->live_blocks);
}

/* A census not complete, in a header: its rows are not the whole heap
 * yet, or never will be ("" otherwise). */
static const char *census_tag(char *buf, size_t len, const Ljmp__Census *c)
{
    buf[0] = '\0';
    if (c != NULL && c->state == LJMP__CENSUS_STATE__CENSUS_RUNNING)
        snprintf(buf, len, "  census %.0f%%", c->progress * 100);
    else if (c != NULL && c->state == LJMP__CENSUS_STATE__CENSUS_PARTIAL)
        snprintf(buf, len, "  census partial");
    return buf;
}

/* The lines of a session's header, the same on a screen and in a block. */
static void session_header(char *l1, char *l2, size_t len,
                           const Ljmp__SessionSnapshot *ss)
{
    const Ljmp__SessionInfo *s = ss->info;
    char census[32];

    snprintf(l1, len, "pid %u  session %llu  %s%s%s%s  %s", s->pid,
             (unsigned long long)s->id, ljmp_wire_state_name(s->state),
             s->reason && s->state != LJMP__SESSION_STATE__STREAMING ? ": "
                                                                     : "",
             s->reason && s->state != LJMP__SESSION_STATE__STREAMING ? s->reason
                                                                     : "",
             census_tag(census, sizeof(census), s->census),
             s->cmdline ? s->cmdline : "");
    totals_line(l2, len, ss->totals, ss->events_per_s, ss->alloc_bytes_per_s);
}

/* A merged view's header: what it is of, its members' pids, its totals. */
static void merged_header(char *l1, char *l2, size_t len,
                          const Ljmp__Snapshot *snap, const struct top_args *a)
{
    const Ljmp__MergedView *m = snap->merged;
    char what[300];
    size_t n;

    view_target_name(&a->target, what, sizeof(what));
    n = (size_t)snprintf(l1, len, "%s: %u process%s", what, m->members,
                         m->members == 1 ? "" : "es");
    for (size_t i = 0; i < snap->n_sessions && n < len; i++) {
        const Ljmp__SessionInfo *s = snap->sessions[i]->info;
        if (s != NULL)
            n += (size_t)snprintf(l1 + n, len - n, "%s%u%s", i ? " " : " (",
                                  s->pid, i + 1 == snap->n_sessions ? ")" : "");
    }
    totals_line(l2, len, m->totals, m->events_per_s, m->alloc_bytes_per_s);
}

static void daemon_line(char *out, size_t len, const Ljmp__Snapshot *snap)
{
    const Ljmp__DaemonCounters *d = snap->daemon;

    if (d == NULL) {
        out[0] = '\0';
        return;
    }
    if (d->has_of_uid) {
        snprintf(out, len,
                 "ljmpd, your sessions: %u streaming, %u kept; snapshots "
                 "dropped in this view %llu; malformed %llu",
                 d->sessions_live, d->sessions_kept,
                 (unsigned long long)snap->dropped,
                 (unsigned long long)d->sessions_malformed);
        return;
    }
    snprintf(out, len,
             "ljmpd: %u streaming, %u kept, %u subscribers; snapshots "
             "dropped %llu (this view %llu); rejected %llu, malformed %llu",
             d->sessions_live, d->sessions_kept, d->subscribers,
             (unsigned long long)d->snapshots_dropped,
             (unsigned long long)snap->dropped,
             (unsigned long long)d->sessions_rejected,
             (unsigned long long)d->sessions_malformed);
}

#define ROW_FORMAT "%10s %9s %10s %10s %9s %9s %11s %s %s"

/* A signed rate of bytes for GROWTH/MIN: "+1.5 MiB", "-300 B", or "-"
 * for a site without a trend. */
static const char *growth_text(char *buf, size_t len, const Ljmp__Location *l)
{
    char h[16];

    if (!l->has_growth_bytes_per_min) {
        snprintf(buf, len, "-");
        return buf;
    }
    double g = l->growth_bytes_per_min;
    if (g > -0.5 && g < 0.5)
        snprintf(buf, len, "0 B");
    else
        snprintf(buf, len, "%c%s", g < 0 ? '-' : '+',
                 human(h, sizeof(h), g < 0 ? -g : g));
    return buf;
}

/*
 * A row's live bytes over the window as a sparkline of SPARK_POINTS
 * cells, scaled from its lowest to its highest point (a flat line sits on
 * the floor); blank cells stand for the points not sampled yet.  Block
 * characters in a UTF-8 locale, ASCII otherwise.
 */
static const char *spark_text(char *buf, size_t len, const Ljmp__Location *l,
                              int utf8)
{
    static const char *const blocks[] = {"\u2581", "\u2582", "\u2583",
                                         "\u2584", "\u2585", "\u2586",
                                         "\u2587", "\u2588"};
    static const char ascii[] = "_.-:=+*#";
    size_t n = l->n_live_history, at = 0;
    uint64_t lo = UINT64_MAX, hi = 0;

    for (size_t i = 0; i < n; i++) {
        lo = l->live_history[i] < lo ? l->live_history[i] : lo;
        hi = l->live_history[i] > hi ? l->live_history[i] : hi;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < SPARK_POINTS && at + 3 < len; i++) {
        size_t k = i + n >= SPARK_POINTS ? i + n - SPARK_POINTS : SIZE_MAX;
        if (k == SIZE_MAX) {
            buf[at++] = ' ';
            continue;
        }
        unsigned level =
            hi > lo ? (unsigned)((l->live_history[k] - lo) * 7 / (hi - lo)) : 0;
        if (utf8) {
            memcpy(buf + at, blocks[level], 3);
            at += 3;
        } else {
            buf[at++] = ascii[level];
        }
    }
    buf[at] = '\0';
    return buf;
}

/* The HISTORY cell of a row, or the blank it takes under a share. */
static const char *history_cell(char *buf, size_t len, const Ljmp__Location *l,
                                const struct top_args *a)
{
    if (!a->spark)
        return "";
    if (l == NULL)
        snprintf(buf, len, "%*s", SPARK_POINTS, "");
    else
        spark_text(buf, len, l, a->utf8);
    return buf;
}

static void row_text(char *out, size_t len, const Ljmp__Location *l,
                     const struct top_args *a)
{
    char lb[16], ab[16], rate[16], blocks[24], ev[24], freed[24], grow[24];
    char spark[SPARK_POINTS * 3 + 1];

    snprintf(blocks, sizeof(blocks), "%llu",
             (unsigned long long)l->live_blocks);
    snprintf(ev, sizeof(ev), "%.0f", l->events_per_s);
    snprintf(freed, sizeof(freed), "%llu", (unsigned long long)l->freed_blocks);
    snprintf(
        out, len, ROW_FORMAT, human(lb, sizeof(lb), (double)l->live_bytes),
        blocks,
        human(ab, sizeof(ab), (double)(l->alloc_bytes + l->realloc_new_bytes)),
        human(rate, sizeof(rate), l->alloc_bytes_per_s), ev, freed,
        growth_text(grow, sizeof(grow), l),
        history_cell(spark, sizeof(spark), l, a), l->name);
}

/* What one process holds and did of the row above it. */
static void share_text(char *out, size_t len, const Ljmp__ProcessShare *sh,
                       const struct top_args *a)
{
    char lb[16], ab[16], rate[16], blocks[24], who[48];
    char spark[SPARK_POINTS * 3 + 1];

    snprintf(blocks, sizeof(blocks), "%llu",
             (unsigned long long)sh->live_blocks);
    snprintf(who, sizeof(who), "  pid %u", sh->pid);
    snprintf(out, len, ROW_FORMAT,
             human(lb, sizeof(lb), (double)sh->live_bytes), blocks,
             human(ab, sizeof(ab), (double)sh->alloc_bytes),
             human(rate, sizeof(rate), sh->alloc_bytes_per_s), "", "", "",
             history_cell(spark, sizeof(spark), NULL, a), who);
}

static void row_title(char *out, size_t len, const struct top_args *a)
{
    char history[SPARK_POINTS + 1];

    snprintf(history, sizeof(history), "%-*s", SPARK_POINTS, "HISTORY");
    snprintf(out, len, ROW_FORMAT, "LIVE", "BLOCKS", "ALLOCATED", "ALLOC/S",
             "EVENTS/S", "FREED", "GROWTH/MIN", a->spark ? history : "",
             "LOCATION");
}

/* Why a view shows no session yet. */
static const char *no_sessions_yet(const struct top_args *a)
{
    if (view_target_merged(&a->target))
        return " of that target yet";
    return a->target.pid ? " of that pid yet" : " yet";
}

/* A merged view as plain text: its header, rows and shares. */
static void print_merged(const Ljmp__Snapshot *snap, const struct top_args *a)
{
    const Ljmp__MergedView *m = snap->merged;
    char l1[1024], l2[1024];

    merged_header(l1, l2, sizeof(l1), snap, a);
    printf("\n%s\n%s\n", l1, l2);
    row_title(l1, sizeof(l1), a);
    printf("%s\n", l1);
    for (size_t j = 0; j < m->n_top; j++) {
        row_text(l1, sizeof(l1), m->top[j], a);
        printf("%s\n", l1);
        for (size_t k = 0; k < m->top[j]->n_by_process; k++) {
            share_text(l1, sizeof(l1), m->top[j]->by_process[k], a);
            printf("%s\n", l1);
        }
    }
}

/* One snapshot as plain text: for pipes, files and --once. */
static void print_block(const Ljmp__Snapshot *snap, const struct top_args *a)
{
    char l1[1024], l2[1024];
    time_t now = (time_t)(snap->time_ms / 1000);
    struct tm tm;
    char when[32];

    localtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    printf("ljmpctl top  %s  sort: %s\n", when, sortkey_table[a->sort].title);
    if (snap->merged != NULL) {
        print_merged(snap, a);
    } else {
        for (size_t i = 0; i < snap->n_sessions; i++) {
            const Ljmp__SessionSnapshot *ss = snap->sessions[i];
            if (ss->info == NULL || ss->totals == NULL)
                continue;
            session_header(l1, l2, sizeof(l1), ss);
            printf("\n%s\n%s\n", l1, l2);
            row_title(l1, sizeof(l1), a);
            printf("%s\n", l1);
            for (size_t j = 0; j < ss->n_top; j++) {
                row_text(l1, sizeof(l1), ss->top[j], a);
                printf("%s\n", l1);
            }
        }
    }
    if (snap->n_sessions == 0)
        printf("\nno sessions%s\n", no_sessions_yet(a));
    daemon_line(l1, sizeof(l1), snap);
    printf("\n%s\n\n", l1);
    fflush(stdout);
}

/* A line of text on the screen at line y, cut at its width in characters
 * (a sparkline's cells and names may take several bytes each). */
static void draw_row(int y, const char *line)
{
    wchar_t w[1024];
    size_t n = mbstowcs(w, line, sizeof(w) / sizeof(w[0]) - 1);

    if (n == (size_t)-1) {
        mvaddnstr(y, 0, line, COLS);
        return;
    }
    w[n] = L'\0';
    mvaddnwstr(y, 0, w, COLS);
}

/* A header's two lines (l1 bold) and the rows' titles on the screen,
 * after a blank line, from line y; returns the line after them. */
static int draw_header(int y, const char *l1, const char *l2,
                       const struct top_args *a)
{
    char title[1024];

    y++;
    attron(A_BOLD);
    mvaddnstr(y++, 0, l1, COLS);
    attroff(A_BOLD);
    mvaddnstr(y++, 0, l2, COLS);
    row_title(title, sizeof(title), a);
    attron(A_REVERSE);
    mvaddnstr(y++, 0, title, COLS);
    attroff(A_REVERSE);
    return y;
}

/* A merged view on the screen from line y: its header, then its rows
 * (and shares) as many as fit. */
static void draw_merged(const Ljmp__Snapshot *snap, const struct top_args *a,
                        int y)
{
    const Ljmp__MergedView *m = snap->merged;
    char line[1024], l2[1024];

    merged_header(line, l2, sizeof(line), snap, a);
    y = draw_header(y, line, l2, a);
    for (size_t j = 0; j < m->n_top && y < LINES; j++) {
        row_text(line, sizeof(line), m->top[j], a);
        mvaddnstr(y++, 0, line, COLS);
        for (size_t k = 0; k < m->top[j]->n_by_process && y < LINES; k++) {
            share_text(line, sizeof(line), m->top[j]->by_process[k], a);
            mvaddnstr(y++, 0, line, COLS);
        }
    }
}

/* One snapshot on the screen: each session's header and as many of its
 * rows as fit. */
/* The callers pane from line y to the screen's end: the cursor's site's
 * tree, as `snapshot --stacks` prints it. */
static void draw_callers(int y, const struct top_args *a)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *f;

    attron(A_REVERSE);
    mvprintw(y++, 0, "%-*s", COLS, " callers (c hides)");
    attroff(A_REVERSE);
    if (a->callers_resp != NULL && a->callers_resp->error != NULL) {
        mvprintw(y, 0, "  %s",
                 a->callers_resp->error->message
                     ? a->callers_resp->error->message
                     : "ljmpd could not list the callers");
        return;
    }
    if (a->callers_resp == NULL || a->callers_resp->callers == NULL) {
        mvprintw(y, 0, "  asking ljmpd for the callers of %s...",
                 a->cursor_site);
        return;
    }
    if ((f = open_memstream(&text, &len)) == NULL)
        return;
    int by_live = callers_by_live(sortkey_table[a->sort].value);
    callers_print(f, a->callers_resp->callers, by_live,
                  (unsigned)(LINES - y > 0 ? LINES - y : 0));
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line != NULL && y < LINES;
         line = strtok_r(NULL, "\n", &save))
        draw_row(y++, line);
    free(text);
}

static void draw(const Ljmp__Snapshot *snap, struct top_args *a)
{
    char line[1024], l2[1024];
    int rows = a->callers ? LINES / 2 : LINES, y = 0;
    size_t k = 0;

    erase();
    time_t now = (time_t)(snap->time_ms / 1000);
    struct tm tm;
    char when[32];
    localtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    attron(A_BOLD);
    mvprintw(y++, 0,
             "ljmpctl top  %s  sort: %-16s keys: l b a r e f g F s, c callers, "
             "q quits",
             when, sortkey_table[a->sort].title);
    attroff(A_BOLD);
    daemon_line(line, sizeof(line), snap);
    mvaddnstr(y++, 0, line, COLS);
    if (snap->n_sessions == 0)
        mvprintw(y + 1, 0, "no sessions%s", no_sessions_yet(a));
    if (snap->merged != NULL) {
        draw_merged(snap, a, y);
        refresh();
        return;
    }
    size_t left = snap->n_sessions;
    for (size_t i = 0; i < snap->n_sessions && y < rows - 3; i++, left--) {
        const Ljmp__SessionSnapshot *ss = snap->sessions[i];
        if (ss->info == NULL || ss->totals == NULL)
            continue;
        session_header(line, l2, sizeof(line), ss);
        y = draw_header(y, line, l2, a);
        /* Share what is left of the screen among the sessions left. */
        int room = (rows - y) / (int)left - (left > 1 ? 4 : 0);
        for (size_t j = 0; j < ss->n_top && room-- > 0 && y < rows; j++) {
            row_text(line, sizeof(line), ss->top[j], a);
            if (k == a->cursor) {
                a->cursor_session = ss->info->id;
                snprintf(a->cursor_site, sizeof(a->cursor_site), "%s",
                         ss->top[j]->name ? ss->top[j]->name : "");
                attron(A_BOLD | A_UNDERLINE);
            }
            draw_row(y++, line);
            attroff(A_BOLD | A_UNDERLINE);
            k++;
        }
    }
    if (k > 0 && a->cursor >= k)
        a->cursor = k - 1;
    if (a->callers)
        draw_callers(rows, a);
    refresh();
}

/* The callers pane's answer, asked for the cursor's site if none is on
 * its way. */
static int ask_callers(struct conn *c, struct top_args *a)
{
    if (!a->callers || a->callers_asked != 0 || a->cursor_site[0] == '\0')
        return 0;
    int by_live = callers_by_live(sortkey_table[a->sort].value);
    a->callers_asked = callers_send(c, a->cursor_session, a->cursor_site,
                                    by_live ? LJMP__SORT_KEY__SORT_LIVE_BYTES
                                            : LJMP__SORT_KEY__SORT_ALLOC_BYTES,
                                    256);
    return a->callers_asked != 0 ? 0 : -1;
}

static void forget_callers(struct top_args *a)
{
    if (a->callers_resp != NULL)
        ljmp__response__free_unpacked(a->callers_resp, NULL);
    a->callers_resp = NULL;
}

static int key_to_sort(int ch, size_t current)
{
    if (ch == 's')
        return (int)((current + 1) % SORTKEY_COUNT);
    for (size_t i = 0; i < SORTKEY_COUNT; i++)
        if (sortkey_table[i].key == ch)
            return (int)i;
    return -1;
}

static int run_plain(struct conn *c, struct top_args *a);

static int run_screen(struct conn *c, struct top_args *a)
{
    uint32_t top = a->top ? a->top : 200;
    int rc = EXIT_OK;

    /* A terminal curses cannot drive: the plain form instead. */
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (screen == NULL) {
        fprintf(stderr,
                "ljmpctl top: cannot use this terminal (TERM=%s); "
                "printing plain snapshots\n",
                getenv("TERM") ? getenv("TERM") : "");
        return run_plain(c, a);
    }
    a->spark = COLS >= SPARK_WIDTH && !view_target_merged(&a->target);
    if (subscribe(c, a, top) == 0) {
        endwin();
        delscreen(screen);
        return EXIT_NO_DAEMON;
    }
    /* Errors are said after the screen is put back, or they are lost. */
    c->quiet = 1;
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    Ljmp__Response *shown = NULL; /* the snapshot on the screen */
    for (;;) {
        struct pollfd p[2] = {{c->fd, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents & POLLIN) {
            int ch, quit = 0;
            while ((ch = getch()) != ERR) {
                int s = key_to_sort(ch, a->sort);
                if (ch == 'q' || ch == 'Q') {
                    quit = 1;
                    break;
                }
                if (ch == KEY_UP || ch == KEY_DOWN || ch == 'c') {
                    if (ch == KEY_UP && a->cursor > 0)
                        a->cursor--;
                    else if (ch == KEY_DOWN)
                        a->cursor++;
                    else if (ch == 'c')
                        a->callers = !a->callers;
                    forget_callers(a);
                    if (shown != NULL) {
                        draw(shown->snapshot, a);
                        if (ask_callers(c, a) != 0)
                            quit = 1;
                    }
                    continue;
                }
                if (s >= 0 && (size_t)s != a->sort) {
                    /* A new subscription replaces the old: the next
                     * snapshot comes at once, sorted anew. */
                    a->sort = (size_t)s;
                    if (subscribe(c, a, top) == 0) {
                        quit = 1;
                        rc = EXIT_NO_DAEMON;
                    }
                }
            }
            if (quit)
                break;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP)))
            continue;
        /* Every whole snapshot read: only the newest is worth drawing. */
        Ljmp__Response *last = NULL;
        do {
            Ljmp__Response *resp = conn_recv(c, 5000);
            if (resp != NULL && resp->error != NULL && resp->id != 0 &&
                resp->id == a->callers_asked) {
                /* The pane's question failed (a site gone): said there,
                 * and top goes on. */
                forget_callers(a);
                a->callers_resp = resp;
                a->callers_asked = 0;
                continue;
            }
            if (resp == NULL || resp->goodbye || resp->error != NULL) {
                if (last != NULL)
                    ljmp__response__free_unpacked(last, NULL);
                if (shown != NULL)
                    ljmp__response__free_unpacked(shown, NULL);
                forget_callers(a);
                endwin();
                delscreen(screen);
                if (resp == NULL) {
                    fprintf(stderr, "ljmpctl top: %s\n", c->err);
                    return EXIT_NO_DAEMON;
                }
                rc = conn_error("top", resp);
                ljmp__response__free_unpacked(resp, NULL);
                return rc;
            }
            if (resp->body_case == LJMP__RESPONSE__BODY_SNAPSHOT) {
                if (last != NULL)
                    ljmp__response__free_unpacked(last, NULL);
                last = resp;
            } else if (resp->body_case == LJMP__RESPONSE__BODY_CALLERS &&
                       resp->id == a->callers_asked) {
                /* Drawn with the last snapshot shown, now or next. */
                forget_callers(a);
                pb_mask_controls(&resp->base);
                a->callers_resp = resp;
                a->callers_asked = 0;
                if (last == NULL && shown != NULL)
                    draw(shown->snapshot, a);
            } else {
                ljmp__response__free_unpacked(resp, NULL);
            }
        } while (conn_has_frame(c));
        if (last != NULL) {
            pb_mask_controls(&last->base);
            draw(last->snapshot, a);
            if (shown != NULL)
                ljmp__response__free_unpacked(shown, NULL);
            shown = last;
            if (ask_callers(c, a) != 0)
                break;
            if (a->count != 0 && --a->count == 0)
                break;
        }
    }
    if (shown != NULL)
        ljmp__response__free_unpacked(shown, NULL);
    forget_callers(a);
    endwin();
    delscreen(screen);
    return rc;
}

static int run_plain(struct conn *c, struct top_args *a)
{
    a->spark = a->spark && !view_target_merged(&a->target);
    if (subscribe(c, a, a->top ? a->top : 20) == 0)
        return EXIT_NO_DAEMON;
    for (;;) {
        Ljmp__Response *resp = conn_recv(c, -1);
        int rc;
        if (resp == NULL)
            return EXIT_NO_DAEMON;
        if ((rc = conn_error("top", resp)) != 0) {
            ljmp__response__free_unpacked(resp, NULL);
            return rc;
        }
        int shown = resp->body_case == LJMP__RESPONSE__BODY_SNAPSHOT;
        if (shown) {
            /* Names come from the programs: no terminal controls. */
            pb_mask_controls(&resp->base);
            print_block(resp->snapshot, a);
        }
        ljmp__response__free_unpacked(resp, NULL);
        if (shown && (a->once || (a->count != 0 && --a->count == 0)))
            return EXIT_OK;
    }
}

/* The width plain blocks are printed for: the terminal's, else $COLUMNS
 * (as other tools take it), else 0. */
static int plain_width(void)
{
    struct winsize ws;
    const char *columns = getenv("COLUMNS");

    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        return ws.ws_col;
    return columns != NULL ? atoi(columns) : 0;
}

static int cmd_top(const struct ctl_args *args)
{
    struct top_args a;
    struct conn c;
    int rc;

    if (top_args_of(args, &a) != 0)
        return EXIT_USAGE;
    /* Only the characters' class: numbers keep the C locale's point. */
    setlocale(LC_CTYPE, "");
    a.utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    if (conn_open(&c) != 0)
        return EXIT_NO_DAEMON;
    if (!a.once && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO)) {
        rc = run_screen(&c, &a);
    } else {
        a.spark = plain_width() >= SPARK_WIDTH;
        rc = run_plain(&c, &a);
    }
    conn_close(&c);
    return rc;
}

/* -n takes any number (ljmpd sends at most 1000 sites); an interval is
 * within what ljmpd takes for a subscription, 50 ms to an hour. */
static const struct opt_use top_options[] = {
    {OPT_ONCE, 0, 0, NULL},
    {OPT_COUNT, 0, UINT64_MAX, NULL},
    {OPT_TOP, 0, UINT64_MAX, NULL},
    {OPT_INTERVAL, 50, 3600000, "ms"},
    {OPT_SORT, 0, 0, NULL},
    {OPT_WINDOW, 10, 86400, "s"},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_BY_PROCESS, 0, 0, NULL},
    {OPT_BY_TRACE, 0, 0, NULL},
    OPT_USE_END,
};

const struct cmd_entry cmd_top_entry = {
    .name = "top",
    .synopsis = "[PID | --tree PID | --unit NAME] [OPTIONS]",
    .brief = "live view of allocation hotspots",
    .help = top_help,
    .options = top_options,
    .max_operands = 1,
    .operands = "at most one PID",
    .exec = cmd_top,
};
