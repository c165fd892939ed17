/* ljmpctl's commands against a running ljmpd: list, snapshot, watch,
 * record, and the live form of report. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "callers.h"
#include "census.h"
#include "conn.h"
#include "ljmpctl.h"
#include "lm_export.h"
#include "sortkey.h"
#include "pbjson.h"
#include "target.h"

/* The PID operand of a live command (0 without one); -1 after a message. */
static int operand_pid(const char *cmd, const struct ctl_args *a, uint32_t *pid)
{
    unsigned long long v = 0;

    if (a->noperands > 0 &&
        args_parse_number(cmd, "PID", a->operands[0], UINT32_MAX, &v) != 0)
        return -1;
    *pid = (uint32_t)v;
    return 0;
}

/* How long a one-question command waits for ljmpd. */
#define ANSWER_MS 30000

static void put_time(FILE *out, uint64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char buf[32];

    if (ms == 0) {
        fputs("-", out);
        return;
    }
    localtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
    fputs(buf, out);
}

static const char *state_of(const Ljmp__SessionInfo *i)
{
    return ljmp_wire_state_name(i->state);
}

static void print_daemon(FILE *out, const Ljmp__DaemonCounters *d)
{
    if (d == NULL)
        return;
    if (d->has_of_uid) {
        fprintf(out,
                "ljmpd, your sessions (uid %u): %u streaming, %u finished "
                "kept; %llu events in %llu bytes ingested; malformed %llu, "
                "truncated %llu\n",
                d->of_uid, d->sessions_live, d->sessions_kept,
                (unsigned long long)d->ingest_events,
                (unsigned long long)d->ingest_bytes,
                (unsigned long long)d->sessions_malformed,
                (unsigned long long)d->sessions_truncated);
        return;
    }
    fprintf(out,
            "ljmpd: %u streaming, %u finished kept, %u subscribers; "
            "%llu events in %llu bytes ingested; snapshots dropped %llu, "
            "sessions rejected %llu, malformed %llu, truncated %llu\n",
            d->sessions_live, d->sessions_kept, d->subscribers,
            (unsigned long long)d->ingest_events,
            (unsigned long long)d->ingest_bytes,
            (unsigned long long)d->snapshots_dropped,
            (unsigned long long)d->sessions_rejected,
            (unsigned long long)d->sessions_malformed,
            (unsigned long long)d->sessions_truncated);
}

/* Processes signalled to attach that have not run Lua since. */
static void print_armed(const Ljmp__SessionList *l)
{
    if (l->n_armed == 0)
        return;
    printf("armed (each streams from its next Lua call):\n");
    printf("%-8s %-6s %-6s  %-19s  %s\n", "PID", "UID", "FOLLOW", "SINCE",
           "COMMAND");
    for (size_t i = 0; i < l->n_armed; i++) {
        const Ljmp__ArmedProcess *m = l->armed[i];
        printf("%-8u %-6u ", m->pid, m->uid);
        if (m->follow_id != 0)
            printf("%-6llu  ", (unsigned long long)m->follow_id);
        else
            printf("%-6s  ", "-");
        put_time(stdout, m->since_ms);
        printf("  %s\n", m->cmdline ? m->cmdline : "");
    }
}

static void print_pids(const char *what, const uint32_t *pids, size_t n)
{
    printf(" %zu %s", n, what);
    for (size_t i = 0; i < n; i++)
        printf("%s%u", i ? " " : " (", pids[i]);
    if (n > 0)
        putchar(')');
}

void live_print_follow(const Ljmp__Follow *f)
{
    if (f->has_root_pid && f->root_pid != 0)
        printf("follow %llu: the tree of pid %u:", (unsigned long long)f->id,
               f->root_pid);
    else
        printf("follow %llu: unit %s:", (unsigned long long)f->id,
               f->unit ? f->unit : "?");
    print_pids("streaming", f->streaming, f->n_streaming);
    putchar(',');
    print_pids("armed", f->armed, f->n_armed);
    if (f->n_skipped > 0) {
        putchar(',');
        print_pids("skipped", f->skipped, f->n_skipped);
    }
    putchar('\n');
    for (size_t i = 0; i < f->n_skipped && i < f->n_skip_reasons; i++)
        printf("  skipped %u: %s\n", f->skipped[i], f->skip_reasons[i]);
}

/* What attach --tree and --unit keep following. */
static void print_follows(const Ljmp__SessionList *l)
{
    for (size_t i = 0; i < l->n_follows; i++)
        live_print_follow(l->follows[i]);
}

/* What ljmpd holds for a session and the most it may, in MiB ("-" from
 * a daemon that does not say). */
static void put_memory(const Ljmp__SessionInfo *s)
{
    char cell[32] = "-";

    if (s->has_memory_bytes && s->has_memory_budget)
        snprintf(cell, sizeof(cell), "%.1f/%.0fM",
                 (double)s->memory_bytes / 1048576,
                 (double)s->memory_budget / 1048576);
    printf(" %14s", cell);
}

static void print_list(const Ljmp__SessionList *l)
{
    printf("%-7s %-8s %-6s %-10s %12s %14s %10s %14s  %-19s  %s\n", "SESSION",
           "PID", "UID", "STATE", "EVENTS", "LIVE BYTES", "BLOCKS",
           "MEMORY/BUDGET", "STARTED", "COMMAND");
    for (size_t i = 0; i < l->n_sessions; i++) {
        const Ljmp__SessionInfo *s = l->sessions[i]->info;
        const Ljmp__Totals *t = l->sessions[i]->totals;
        if (s == NULL || t == NULL)
            continue;
        printf("%-7llu %-8u %-6u %-10s %12llu %14llu %10llu",
               (unsigned long long)s->id, s->pid, s->uid, state_of(s),
               (unsigned long long)ljmp_wire_totals_events(t),
               (unsigned long long)t->live_bytes,
               (unsigned long long)t->live_blocks);
        put_memory(s);
        printf("  ");
        put_time(stdout, s->session_start_ms);
        printf("  %s\n", s->cmdline ? s->cmdline : "");
        if (s->reason != NULL && s->state != LJMP__SESSION_STATE__STREAMING)
            printf("        %s\n", s->reason);
        if (s->brief)
            printf("        brief: a short-lived process's\n");
        if (s->census != NULL) {
            printf("        census: ");
            census_put_state(stdout, s->census);
            putchar('\n');
        }
        if (s->stacks != 0 && s->stack_sample != 0)
            printf("        stacks: depth %u, sampled every %llu bytes\n",
                   s->stacks, (unsigned long long)s->stack_sample);
        else if (s->stacks != 0)
            printf("        stacks: depth %u, every allocation\n", s->stacks);
    }
    if (l->brief_hidden > 0)
        printf("(%u brief session%s of short-lived processes left out: "
               "ljmpctl list --all)\n",
               l->brief_hidden, l->brief_hidden == 1 ? "" : "s");
    print_armed(l);
    print_follows(l);
    print_daemon(stdout, l->daemon);
}

static const char list_help[] =
    "usage: ljmpctl list [--all] [--json]\n"
    "\n"
    "Lists the sessions ljmpd knows: streaming ones and finished ones it\n"
    "still keeps, with their state, events, live heap, and the memory\n"
    "ljmpd holds for each against its budget (ljmpd --session-memory); the\n"
    "processes armed by attach that have not run Lua since; what attach\n"
    "--tree and --unit follow; and the daemon's own counters (drops,\n"
    "rejected peers, malformed streams).  A session whose VM announced the\n"
    "heap it held when its stream began (its census) has a line saying\n"
    "where that stands: running (how far, against the heap at its start),\n"
    "complete (the heap at start and at completion, and what no block\n"
    "accounts for: the VM's internals), or partial (the stream ended\n"
    "first).\n"
    "\n"
    "Brief sessions are left out and counted: those of processes that\n"
    "lived a moment (under ljmpd's --brief, 2 s by default) and have\n"
    "exited, such as `nginx -t`, `nginx -s reload` or the start-up process\n"
    "that forks a server and leaves.  `top`, `snapshot` and `watch` leave\n"
    "them out too unless given their PID or --session.\n"
    "\n"
    "Options:\n"
    "      --all          brief sessions too\n"
    "      --json         the list as one JSON object\n";

static int cmd_list(const struct ctl_args *a)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest lr = LJMP__LIST_REQUEST__INIT;
    int rc;

    lr.has_all = 1;
    lr.all = args_has(a, OPT_ALL);
    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &lr;
    Ljmp__Response *resp = conn_ask(&c, "list", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_LIST, &rc);
    if (resp != NULL) {
        if (args_has(a, OPT_JSON)) {
            pbjson_write(stdout, &resp->list->base);
            putchar('\n');
        } else {
            pb_mask_controls(&resp->base);
            print_list(resp->list);
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

/* A snapshot's locations under their titles, each one's shares per
 * process (merged views) under it. */
static void print_locations(Ljmp__Location *const *top, size_t n)
{
    if (n == 0)
        return;
    printf("  %14s %10s %14s %10s %12s %10s %10s  %s\n", "LIVE BYTES", "BLOCKS",
           "ALLOC BYTES", "ALLOCS", "ALLOC B/S", "EVENTS/S", "FREED",
           "LOCATION");
    for (size_t i = 0; i < n; i++) {
        const Ljmp__Location *l = top[i];
        printf("  %14llu %10llu %14llu %10llu %12.0f %10.0f %10llu  %s\n",
               (unsigned long long)l->live_bytes,
               (unsigned long long)l->live_blocks,
               (unsigned long long)(l->alloc_bytes + l->realloc_new_bytes),
               (unsigned long long)l->alloc_events, l->alloc_bytes_per_s,
               l->events_per_s, (unsigned long long)l->freed_blocks, l->name);
        for (size_t k = 0; k < l->n_by_process; k++) {
            const Ljmp__ProcessShare *sh = l->by_process[k];
            printf("  %14llu %10llu %14llu %10llu %12.0f %10s %10s    pid "
                   "%u\n",
                   (unsigned long long)sh->live_bytes,
                   (unsigned long long)sh->live_blocks,
                   (unsigned long long)sh->alloc_bytes,
                   (unsigned long long)sh->alloc_events, sh->alloc_bytes_per_s,
                   "", "", sh->pid);
        }
    }
}

static void print_session_block(const Ljmp__SessionSnapshot *ss)
{
    const Ljmp__SessionInfo *s = ss->info;
    const Ljmp__Totals *t = ss->totals;

    if (s == NULL || t == NULL)
        return;

    printf("session %llu, pid %u (%s): %s%s%s\n", (unsigned long long)s->id,
           s->pid, s->cmdline ? s->cmdline : "", state_of(s),
           s->reason ? ": " : "", s->reason ? s->reason : "");
    printf(
        "  events %llu (alloc %llu, realloc %llu, free %llu); allocated "
        "%llu B, freed %llu B; live %llu B in %llu blocks; %.0f events/s, "
        "%.0f B/s\n",
        (unsigned long long)ljmp_wire_totals_events(t),
        (unsigned long long)t->alloc_events,
        (unsigned long long)t->realloc_events,
        (unsigned long long)t->free_events, (unsigned long long)t->alloc_bytes,
        (unsigned long long)t->freed_bytes, (unsigned long long)t->live_bytes,
        (unsigned long long)t->live_blocks, ss->events_per_s,
        ss->alloc_bytes_per_s);
    print_locations(ss->top, ss->n_top);
}

/* A merged view (--tree, --unit) as a block: its members, totals and
 * rows, each row's shares under it. */
static void print_merged_block(const Ljmp__Snapshot *snap,
                               const struct view_target *t)
{
    const Ljmp__MergedView *m = snap->merged;
    const Ljmp__Totals *tt = m->totals;
    char what[300];

    view_target_name(t, what, sizeof(what));
    printf("%s: %u process%s merged:", what, m->members,
           m->members == 1 ? "" : "es");
    for (size_t i = 0; i < snap->n_sessions; i++)
        if (snap->sessions[i]->info != NULL)
            printf(" %u", snap->sessions[i]->info->pid);
    printf("\n  events %llu; allocated %llu B, freed %llu B; live %llu B in "
           "%llu blocks; %.0f events/s, %.0f B/s\n",
           (unsigned long long)ljmp_wire_totals_events(tt),
           (unsigned long long)tt->alloc_bytes,
           (unsigned long long)tt->freed_bytes,
           (unsigned long long)tt->live_bytes,
           (unsigned long long)tt->live_blocks, m->events_per_s,
           m->alloc_bytes_per_s);
    print_locations(m->top, m->n_top);
}

/* What a snapshot shows: the target's sessions (every one by default),
 * its top sites (20 unless -n) by its sort key (live bytes unless
 * --sort). */
static void fill_options(Ljmp__SnapshotOptions *o, Ljmp__Selector *sel,
                         const struct ctl_args *a, const struct view_target *t)
{
    ljmp__snapshot_options__init(o);
    ljmp__selector__init(sel);
    view_target_fill(t, o, sel);
    o->has_top = o->has_sort = 1;
    o->top = (uint32_t)args_get(a, OPT_TOP, 20);
    o->sort = sortkey_table[args_get(a, OPT_SORT, 0)].value;
    /* Rows' growth over --window: asked for when given, or for its sort. */
    if (args_has(a, OPT_WINDOW) || o->sort == LJMP__SORT_KEY__SORT_GROWTH) {
        o->has_growth_window_s = 1;
        o->growth_window_s = (uint32_t)args_get(a, OPT_WINDOW, 300);
    }
}

static const char snapshot_help[] =
    "usage: ljmpctl snapshot [PID | --tree PID | --unit NAME] [OPTIONS]\n"
    "\n"
    "One snapshot of every session (or of PID's newest, or of --session ID):\n"
    "identity, state, totals, and the top allocation sites.  Rates run from\n"
    "the start of each session.  With --tree or --unit, one merged view of\n"
    "the processes streaming (as `ljmpctl top` shows it).\n"
    "\n"
    "Options:\n"
    "  -n, --top N        sites per session (20; at most 1000)\n"
    "      --sort KEY     live-bytes (default), live-blocks, alloc-bytes,\n"
    "                     alloc-rate, event-rate, free-bytes, growth,\n"
    "                     free-events (see `ljmpctl top --help`)\n"
    "      --window SECONDS  each row's growth over this window, from\n"
    "                     ljmpd's history (300 with --sort growth, else\n"
    "                     none; 10 to 86400)\n"
    "      --session ID   one session, by the id `ljmpctl list` shows\n"
    "      --tree         PID and its descendants, merged\n"
    "      --unit NAME    a systemd unit's processes, merged\n"
    "      --by-process   each merged site's share per process\n"
    "      --by-trace     what compiled code allocated as its trace's rows\n"
    "                     (TRACE [N] started at CHUNK:LINE), not its lines'\n"
    "      --stacks[=N]   under each site, its callers as a tree: live and\n"
    "                     allocated bytes per caller path, from the N\n"
    "                     biggest call stacks (64) of a stream with stacks\n"
    "                     (attach --stacks; estimates when sampled, marked\n"
    "                     ~); with --json, {\"snapshot\": ..., \"callers\":\n"
    "                     [...]}, each site's stacks as ljmpd sends them\n"
    "      --json         the snapshot as one JSON object\n";

static int snap_merged(const Ljmp__Response *resp)
{
    return resp->snapshot->merged != NULL;
}

/* The callers of each top site of each session, asked in turn. */
static int print_with_callers(struct conn *c, const Ljmp__Snapshot *snap,
                              const struct ctl_args *a)
{
    int json = args_has(a, OPT_JSON), rc = 0;
    uint32_t limit = (uint32_t)args_get(a, OPT_STACKS, 0);
    Ljmp__SortKey sort =
        (Ljmp__SortKey)sortkey_table[args_get(a, OPT_SORT, 0)].value;
    int by_live = callers_by_live(sort);
    const char *sep = "";

    if (json) {
        printf("{\"snapshot\": ");
        pbjson_write(stdout, &snap->base);
        printf(", \"callers\": [");
    }
    for (size_t i = 0; i < snap->n_sessions && rc == 0; i++) {
        const Ljmp__SessionSnapshot *ss = snap->sessions[i];
        if (!json)
            print_session_block(ss);
        for (size_t j = 0; j < ss->n_top && rc == 0; j++) {
            if (callers_send(c, ss->info->id, ss->top[j]->name,
                             by_live ? LJMP__SORT_KEY__SORT_LIVE_BYTES
                                     : LJMP__SORT_KEY__SORT_ALLOC_BYTES,
                             limit ? limit : 64) == 0) {
                rc = EXIT_NO_DAEMON;
                break;
            }
            Ljmp__Response *r = conn_recv(c, ANSWER_MS);
            if (r == NULL) {
                fprintf(stderr, "ljmpctl snapshot: %s\n", c->err);
                rc = EXIT_NO_DAEMON;
            } else if (r->error != NULL ||
                       r->body_case != LJMP__RESPONSE__BODY_CALLERS) {
                rc = conn_error("snapshot", r);
            } else if (json) {
                printf("%s", sep);
                pbjson_write(stdout, &r->callers->base);
                sep = ", ";
            } else {
                pb_mask_controls(&r->base);
                callers_print(stdout, r->callers, by_live, 0);
                putchar('\n');
            }
            if (r != NULL)
                ljmp__response__free_unpacked(r, NULL);
        }
    }
    if (json)
        printf("]}\n");
    else
        print_daemon(stdout, snap->daemon);
    return rc;
}

static int cmd_snapshot(const struct ctl_args *a)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__SnapshotRequest sr = LJMP__SNAPSHOT_REQUEST__INIT;
    Ljmp__SnapshotOptions o;
    Ljmp__Selector sel;
    struct view_target t;
    int rc;

    if (view_target_of("snapshot", a, &t) != 0)
        return EXIT_USAGE;
    fill_options(&o, &sel, a, &t);
    sr.options = &o;
    req.body_case = LJMP__REQUEST__BODY_SNAPSHOT;
    req.snapshot = &sr;
    Ljmp__Response *resp = conn_ask(&c, "snapshot", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_SNAPSHOT, &rc);
    if (resp != NULL && args_has(a, OPT_STACKS) && snap_merged(resp)) {
        fprintf(stderr, "ljmpctl snapshot: --stacks is of each session: "
                        "not with --tree or --unit\n");
        rc = EXIT_USAGE;
    } else if (resp != NULL && args_has(a, OPT_STACKS)) {
        rc = print_with_callers(&c, resp->snapshot, a);
    } else if (resp != NULL) {
        const Ljmp__Snapshot *snap = resp->snapshot;
        if (args_has(a, OPT_JSON)) {
            pbjson_write(stdout, &snap->base);
            putchar('\n');
        } else {
            pb_mask_controls(&resp->base);
            if (snap->merged != NULL)
                print_merged_block(snap, &t);
            else
                for (size_t i = 0; i < snap->n_sessions; i++)
                    print_session_block(snap->sessions[i]);
            if (snap->n_sessions == 0)
                printf("no sessions%s\n", view_target_merged(&t)
                                              ? " of that target"
                                          : t.pid ? " of that pid"
                                                  : "");
            print_daemon(stdout, snap->daemon);
        }
        if (rc == 0 &&
            (sel.has_pid || sel.has_session_id || sel.unit != NULL) &&
            snap->n_sessions == 0)
            rc = EXIT_REFUSED;
        ljmp__response__free_unpacked(resp, NULL);
        resp = NULL;
    }
    if (resp != NULL) /* --stacks' answer */
        ljmp__response__free_unpacked(resp, NULL);
    conn_close(&c);
    return rc;
}

/* The keys every watch line ends with: totals, rates, drops, top row. */
static void print_watch_tail(const Ljmp__Totals *t, double events_per_s,
                             double alloc_bytes_per_s, uint64_t dropped,
                             Ljmp__Location *const *top, size_t ntop)
{
    printf(
        " events=%llu alloc_bytes=%llu freed_bytes=%llu live_bytes=%llu "
        "live_blocks=%llu events_per_s=%.0f alloc_bytes_per_s=%.0f "
        "dropped=%llu",
        (unsigned long long)ljmp_wire_totals_events(t),
        (unsigned long long)t->alloc_bytes, (unsigned long long)t->freed_bytes,
        (unsigned long long)t->live_bytes, (unsigned long long)t->live_blocks,
        events_per_s, alloc_bytes_per_s, (unsigned long long)dropped);
    if (ntop > 0)
        printf(" top=\"%s\" top_live_bytes=%llu", top[0]->name,
               (unsigned long long)top[0]->live_bytes);
    putchar('\n');
}

/* A merged view's line: its members, then its totals and top row. */
static void print_merged_line(const Ljmp__Snapshot *snap)
{
    const Ljmp__MergedView *m = snap->merged;

    printf(
        "seq=%llu time_ms=%llu merged=%u pids=", (unsigned long long)snap->seq,
        (unsigned long long)snap->time_ms, m->members);
    for (size_t i = 0; i < snap->n_sessions; i++)
        if (snap->sessions[i]->info != NULL)
            printf("%s%u", i ? "," : "", snap->sessions[i]->info->pid);
    print_watch_tail(m->totals, m->events_per_s, m->alloc_bytes_per_s,
                     snap->dropped, m->top, m->n_top);
}

/* One line per session of a snapshot, key=value, for scripts; one for a
 * merged view. */
static void print_watch_lines(const Ljmp__Snapshot *snap)
{
    if (snap->merged != NULL)
        print_merged_line(snap);
    for (size_t i = 0; snap->merged == NULL && i < snap->n_sessions; i++) {
        const Ljmp__SessionSnapshot *ss = snap->sessions[i];
        if (ss->info == NULL || ss->totals == NULL)
            continue;
        printf("seq=%llu time_ms=%llu session=%llu pid=%u state=%s",
               (unsigned long long)snap->seq, (unsigned long long)snap->time_ms,
               (unsigned long long)ss->info->id, ss->info->pid,
               state_of(ss->info));
        print_watch_tail(ss->totals, ss->events_per_s, ss->alloc_bytes_per_s,
                         snap->dropped, ss->top, ss->n_top);
    }
    fflush(stdout);
}

static const char watch_help[] =
    "usage: ljmpctl watch [PID | --tree PID | --unit NAME] [OPTIONS]\n"
    "       ljmpctl subscribe [PID | --tree PID | --unit NAME] [OPTIONS]\n"
    "\n"
    "Subscribes to snapshots and prints, for every snapshot, one line per\n"
    "session: key=value pairs (seq, time_ms, session, pid, state, events,\n"
    "alloc_bytes, freed_bytes, live_bytes, live_blocks, events_per_s,\n"
    "alloc_bytes_per_s, dropped, top, top_live_bytes); for --tree or --unit,\n"
    "one line of the merged view (merged=N pids=P,Q,... and the same keys);\n"
    "with --json, the whole snapshot as one JSON object per line.  Rates\n"
    "and deltas run from\n"
    "the previous snapshot.  If this client reads too slowly, ljmpd merges\n"
    "snapshots (dropped= counts them); it never slows the profiled VMs.\n"
    "\n"
    "Options:\n"
    "      --interval MS  time between snapshots (1000; 50 to 3600000)\n"
    "      --count N      stop after N snapshots\n"
    "  -n, --top N        sites per session (20; 0 for totals only)\n"
    "      --sort KEY     as for `ljmpctl snapshot`\n"
    "      --window SECONDS  as for `ljmpctl snapshot`\n"
    "      --session ID   one session\n"
    "      --tree         PID and its descendants, merged\n"
    "      --unit NAME    a systemd unit's processes, merged\n"
    "      --by-process   each merged site's share per process\n"
    "      --by-trace     what compiled code allocated as its trace's rows\n"
    "                     (TRACE [N] started at CHUNK:LINE), not its lines'\n"
    "      --json         JSON lines\n";

static int cmd_watch(const struct ctl_args *a)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__SubscribeRequest sr = LJMP__SUBSCRIBE_REQUEST__INIT;
    Ljmp__SnapshotOptions o;
    Ljmp__Selector sel;
    uint64_t seen = 0, count = args_get(a, OPT_COUNT, 0); /* 0: no end */
    struct view_target t;
    int rc = EXIT_OK;

    if (view_target_of("watch", a, &t) != 0)
        return EXIT_USAGE;
    fill_options(&o, &sel, a, &t);
    sr.options = &o;
    sr.has_interval_ms = 1;
    sr.interval_ms = (uint32_t)args_get(a, OPT_INTERVAL, 1000);
    req.body_case = LJMP__REQUEST__BODY_SUBSCRIBE;
    req.subscribe = &sr;
    if (conn_open(&c) != 0)
        return EXIT_NO_DAEMON;
    if (conn_send(&c, &req, -1) == 0) {
        conn_close(&c);
        return EXIT_NO_DAEMON;
    }
    while (count == 0 || seen < count) {
        Ljmp__Response *resp = conn_recv(&c, -1);
        if (resp == NULL) {
            rc = EXIT_NO_DAEMON;
            break;
        }
        if ((rc = conn_error("watch", resp)) != 0) {
            ljmp__response__free_unpacked(resp, NULL);
            break;
        }
        if (resp->body_case == LJMP__RESPONSE__BODY_SNAPSHOT) {
            if (args_has(a, OPT_JSON)) {
                pbjson_write(stdout, &resp->snapshot->base);
                putchar('\n');
                fflush(stdout);
            } else {
                pb_mask_controls(&resp->base);
                print_watch_lines(resp->snapshot);
            }
            seen++;
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

/* Prints the rest of a report that ljmpd sends in parts (request id),
 * each as it comes; the exit status. */
static int report_rest(const char *cmd, struct conn *c, uint64_t id, FILE *out)
{
    for (;;) {
        Ljmp__Response *resp = conn_recv(c, ANSWER_MS);
        if (resp == NULL)
            return EXIT_NO_DAEMON;
        int rc = conn_error(cmd, resp);
        int more = 0;
        if (rc == 0 && resp->id == id) {
            if (resp->body_case != LJMP__RESPONSE__BODY_REPORT) {
                fprintf(stderr, "ljmpctl %s: unexpected answer from ljmpd\n",
                        cmd);
                rc = EXIT_NO_DAEMON;
            } else {
                const Ljmp__ReportText *r = resp->report;
                fwrite(r->text.data, 1, r->text.len, out);
                more = r->more;
            }
        } else if (rc == 0) {
            more = 1; /* not ours */
        }
        ljmp__response__free_unpacked(resp, NULL);
        if (rc != 0 || !more)
            return rc;
    }
}

/* Whether the first part of an answer is the export o asked for (an
 * ljmpd that knows no exports sends the text report instead): pprof is
 * gzip, speedscope JSON; folded lines cannot be told apart. */
static int is_export_of(const Ljmp__ReportText *r,
                        const struct lm_report_opts *o)
{
    const uint8_t *d = r->text.data;
    size_t n = r->text.len;

    if (o->export_format == 1 + LM_EXPORT_PPROF)
        return n >= 2 && d[0] == 0x1f && d[1] == 0x8b;
    if (o->export_format == 1 + LM_EXPORT_SPEEDSCOPE)
        return n >= 2 && d[0] == '{';
    return 1;
}

/* What the first part of an answer says of its sessions. */
static void about_of(const Ljmp__ReportText *r, struct live_about *a)
{
    memset(a, 0, sizeof(*a));
    if (r->session != NULL) {
        a->pid = r->session->pid;
        snprintf(a->command, sizeof(a->command), "%s",
                 r->session->cmdline ? r->session->cmdline : "");
    }
    a->nmembers = (uint32_t)r->n_members;
    for (size_t i = 0; i <= r->n_members; i++) {
        const Ljmp__SessionInfo *s =
            i < r->n_members ? r->members[i] : r->session;
        if (s == NULL || s->stacks == 0)
            continue;
        if (a->stacks == 0)
            a->stack_sample = s->stack_sample;
        if (s->stacks > a->stacks)
            a->stacks = s->stacks;
    }
}

int live_report(const char *cmd, const struct view_target *t,
                const struct lm_report_opts *o, FILE *out)
{
    return live_report_about(cmd, t, o, out, NULL);
}

int live_report_about(const char *cmd, const struct view_target *t,
                      const struct lm_report_opts *o, FILE *out,
                      struct live_about *about)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ReportRequest rr = LJMP__REPORT_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    int rc;

    view_target_select(t, &sel);
    rr.session = &sel;
    rr.has_leak_only = rr.has_human_readable = rr.has_json = 1;
    rr.leak_only = o->leak_only;
    rr.human_readable = o->human_readable;
    rr.json = o->json;
    rr.has_by_process = rr.by_process = t->by_process;
    rr.has_by_trace = rr.by_trace = o->by_trace;
    rr.has_stacks = rr.stacks = o->stacks;
    if (o->export_format) {
        rr.has_export_format = rr.has_export_value = 1;
        rr.export_format = (Ljmp__ExportFormat)o->export_format;
        rr.export_value = (Ljmp__ExportValue)o->export_value;
    }
    req.body_case = LJMP__REQUEST__BODY_REPORT;
    req.report = &rr;
    Ljmp__Response *resp = conn_ask(&c, cmd, &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_REPORT, &rc);
    if (resp != NULL) {
        const Ljmp__ReportText *r = resp->report;
        if (!is_export_of(r, o)) {
            fprintf(stderr,
                    "ljmpctl %s: ljmpd sent a report, not the "
                    "export: it is older than this ljmpctl\n",
                    cmd);
            ljmp__response__free_unpacked(resp, NULL);
            conn_close(&c);
            return EXIT_USAGE;
        }
        if (about != NULL)
            about_of(r, about);
        fwrite(r->text.data, 1, r->text.len, out);
        if (r->more)
            rc = report_rest(cmd, &c, resp->id, out);
        if (fflush(out) != 0 && rc == EXIT_OK)
            rc = EXIT_USAGE;
        const Ljmp__SessionInfo *s = r->session;
        pb_mask_controls(&resp->base); /* the text is bytes: kept whole */
        if (s != NULL && s->state != LJMP__SESSION_STATE__STREAMING &&
            s->state != LJMP__SESSION_STATE__COMPLETE) {
            fprintf(stderr, "ljmpctl %s: session %llu is %s: %s\n", cmd,
                    (unsigned long long)s->id, state_of(s),
                    s->reason ? s->reason : "");
            rc = s->state == LJMP__SESSION_STATE__TRUNCATED ? EXIT_TRUNCATED
                                                            : EXIT_MALFORMED;
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

static const char record_help[] =
    "usage: ljmpctl record PID -o FILE [OPTIONS]\n"
    "\n"
    "Records PID's memprof stream into FILE as ljmpd receives it:\n"
    "`ljmpctl report FILE` and Tarantool's parser read it.  ljmpctl opens\n"
    "FILE (so it is yours) and hands it to ljmpd.\n"
    "\n"
    "A process that is streaming is recorded from now: the file starts with\n"
    "the symbols ljmpd knows, and blocks allocated before are not in it.\n"
    "To record a whole session, byte for byte, ask before it starts: give\n"
    "--wait and start the process's profiling (LJMP_SOCKET,\n"
    "misc.memprof.start{socket=...}, or attach) within that time.\n"
    "\n"
    "A stream with call stacks (R3S: attach --stacks, LJMP_STACKS) is\n"
    "recorded with them; Tarantool's parser reads only R3.  With --r3\n"
    "ljmpd strips the stacks as it writes, as `report --strip-stacks`\n"
    "would; a stream without stacks is R3 already and written as is.\n"
    "\n"
    "Waits until the session ends, then says how it ended; with --no-wait\n"
    "it returns once recording has begun, and ljmpd closes FILE when the\n"
    "session ends.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE   where to record (required)\n"
    "      --wait SECONDS  wait this long for PID to start streaming (0)\n"
    "      --force         overwrite FILE if it exists (never through a\n"
    "                      symbolic link)\n"
    "      --no-wait       return once recording has begun\n"
    "      --r3            write pure R3: the stream without its call stacks\n";

/* What `record` was asked for. */
struct record_ask {
    uint32_t pid, wait_s;
    const char *output;
    int force, no_wait, r3;
};

/* What --r3 did, for the closing line ("" without it). */
static const char *r3_note(const struct record_ask *a,
                           const Ljmp__RecordStatus *st)
{
    if (!a->r3 || !st->r3)
        return "";
    return st->stacks_stripped ? " (R3: call stacks stripped)"
                               : " (R3: the stream had no call stacks)";
}

static int record_wait(struct conn *c, const struct record_ask *a,
                       uint64_t *bytes)
{
    for (;;) {
        Ljmp__Response *resp = conn_recv(c, -1);
        int rc;
        if (resp == NULL)
            return EXIT_NO_DAEMON;
        if ((rc = conn_error("record", resp)) != 0) {
            ljmp__response__free_unpacked(resp, NULL);
            return rc;
        }
        const Ljmp__RecordStatus *st = resp->record;
        if (resp->body_case != LJMP__RESPONSE__BODY_RECORD) {
            ljmp__response__free_unpacked(resp, NULL);
            continue;
        }
        if (!st->done && st->session_id == 0) {
            fprintf(stderr, "ljmpctl record: waiting up to %u s for pid %u\n",
                    a->wait_s, a->pid);
        } else if (!st->done) {
            fprintf(stderr,
                    "ljmpctl record: recording session %llu of pid %u into "
                    "%s, %s\n",
                    (unsigned long long)st->session_id, a->pid, a->output,
                    st->from_start ? "from its start" : "from now on");
            /* An ljmpd older than --r3 ignores it. */
            if (a->r3 && !st->r3)
                fprintf(stderr,
                        "ljmpctl record: this ljmpd does not know --r3: %s "
                        "gets the stream as it comes, call stacks included\n",
                        a->output);
            if (a->no_wait) {
                ljmp__response__free_unpacked(resp, NULL);
                return EXIT_OK;
            }
        } else {
            rc = EXIT_OK;
            *bytes = st->bytes_written;
            if (st->error != NULL) {
                fprintf(stderr, "ljmpctl record: %s\n", st->error);
                rc = st->io_error          ? EXIT_USAGE
                     : st->session_id == 0 ? EXIT_REFUSED
                                           : EXIT_TRUNCATED;
            }
            if (st->session_id != 0) {
                fprintf(stderr,
                        "ljmpctl record: session %llu %s; %llu bytes "
                        "in %s%s\n",
                        (unsigned long long)st->session_id,
                        ljmp_wire_state_name(st->state),
                        (unsigned long long)st->bytes_written, a->output,
                        r3_note(a, st));
                if (rc == EXIT_OK && st->state != LJMP__SESSION_STATE__COMPLETE)
                    rc = st->state == LJMP__SESSION_STATE__TRUNCATED
                             ? EXIT_TRUNCATED
                             : EXIT_MALFORMED;
            }
            ljmp__response__free_unpacked(resp, NULL);
            return rc;
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
}

static int cmd_record(const struct ctl_args *args)
{
    struct record_ask a = {
        .wait_s = (uint32_t)args_get(args, OPT_WAIT, 0),
        .output = args->text[OPT_OUTPUT],
        .force = args_has(args, OPT_FORCE),
        .no_wait = args_has(args, OPT_NO_WAIT),
        .r3 = args_has(args, OPT_R3),
    };
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__RecordRequest rr = LJMP__RECORD_REQUEST__INIT;
    int rc;

    if (operand_pid("record", args, &a.pid) != 0)
        return EXIT_USAGE;
    if (a.pid == 0 || a.output == NULL) {
        fputs("ljmpctl record: needs PID and -o FILE (see ljmpctl help "
              "record)\n",
              stderr);
        return EXIT_USAGE;
    }
    /* Without --force the file must be new; with it, a symbolic link
     * there is not followed: in a shared directory another user may have
     * planted one to a file of ours. */
    int fd = open(a.output,
                  O_WRONLY | O_CREAT | O_CLOEXEC |
                      (a.force ? O_TRUNC | O_NOFOLLOW : O_EXCL),
                  0644);
    if (fd < 0) {
        fprintf(stderr, "ljmpctl record: cannot create %s: %s%s\n", a.output,
                errno == ELOOP ? "it is a symbolic link, not followed"
                               : strerror(errno),
                errno == EEXIST ? " (--force overwrites)" : "");
        return EXIT_USAGE;
    }
    rr.has_pid = rr.has_wait_ms = 1;
    rr.pid = a.pid;
    rr.wait_ms = a.wait_s * 1000;
    rr.has_r3 = rr.r3 = a.r3;
    req.body_case = LJMP__REQUEST__BODY_RECORD;
    req.record = &rr;
    if (conn_open(&c) != 0) {
        close(fd);
        return EXIT_NO_DAEMON;
    }
    uint64_t bytes = 0;
    rc = conn_send(&c, &req, fd) == 0 ? EXIT_NO_DAEMON
                                      : record_wait(&c, &a, &bytes);
    close(fd);
    conn_close(&c);
    /* Refused before anything was written: no empty file left behind. */
    if (rc != EXIT_OK && bytes == 0 && !a.force)
        unlink(a.output);
    return rc;
}

/* Each command's options, and the range of each number: the only ones
 * its command line may give (args_parse). */
static const struct opt_use list_options[] = {
    {OPT_ALL, 0, 0, NULL},
    {OPT_JSON, 0, 0, NULL},
    OPT_USE_END,
};

static const struct opt_use snapshot_options[] = {
    {OPT_TOP, 0, 1000, NULL},
    {OPT_SORT, 0, 0, NULL},
    {OPT_WINDOW, 10, 86400, "s"},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_BY_PROCESS, 0, 0, NULL},
    {OPT_BY_TRACE, 0, 0, NULL},
    {OPT_JSON, 0, 0, NULL},
    {OPT_STACKS, 1, 4096, "stacks"},
    OPT_USE_END,
};

/* ljmpd itself refuses an interval under 50 ms, and says so. */
static const struct opt_use watch_options[] = {
    {OPT_INTERVAL, 0, 3600000, "ms"}, {OPT_COUNT, 0, UINT64_MAX, NULL},
    {OPT_TOP, 0, 1000, NULL},         {OPT_SORT, 0, 0, NULL},
    {OPT_WINDOW, 10, 86400, "s"},     {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_TREE, 0, 0, NULL},           {OPT_UNIT, 0, 0, NULL},
    {OPT_BY_PROCESS, 0, 0, NULL},     {OPT_BY_TRACE, 0, 0, NULL},
    {OPT_JSON, 0, 0, NULL},           OPT_USE_END,
};

static const struct opt_use record_options[] = {
    {OPT_OUTPUT, 0, 0, NULL}, {OPT_WAIT, 0, 86400, "seconds"},
    {OPT_FORCE, 0, 0, NULL},  {OPT_NO_WAIT, 0, 0, NULL},
    {OPT_R3, 0, 0, NULL},     OPT_USE_END,
};

const struct cmd_entry cmd_list_entry = {
    .name = "list",
    .synopsis = "[--all] [--json]",
    .brief = "sessions ljmpd knows, and its counters",
    .help = list_help,
    .options = list_options,
    .operands = "no operand",
    .exec = cmd_list,
};

const struct cmd_entry cmd_snapshot_entry = {
    .name = "snapshot",
    .synopsis = "[PID | --tree PID | --unit NAME] [OPTIONS]",
    .brief = "one snapshot: totals and top sites",
    .help = snapshot_help,
    .options = snapshot_options,
    .max_operands = 1,
    .operands = "at most one PID",
    .exec = cmd_snapshot,
};

const struct cmd_entry cmd_watch_entry = {
    .name = "watch",
    .synopsis = "[PID | --tree PID | --unit NAME] [OPTIONS]",
    .brief = "a line per snapshot, for scripts",
    .help = watch_help,
    .options = watch_options,
    .max_operands = 1,
    .operands = "at most one PID",
    .exec = cmd_watch,
};

const struct cmd_entry cmd_subscribe_entry = {
    .name = "subscribe",
    .synopsis = "[PID | --tree PID | --unit NAME] [OPTIONS]",
    .brief = "the same as watch",
    .help = watch_help,
    .options = watch_options,
    .max_operands = 1,
    .operands = "at most one PID",
    .exec = cmd_watch,
};

const struct cmd_entry cmd_record_entry = {
    .name = "record",
    .synopsis = "PID -o FILE",
    .brief = "record a session's stream to a file",
    .help = record_help,
    .options = record_options,
    .min_operands = 1,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_record,
};
