/* Control requests: list, snapshot, subscribe, report, record, leaks,
 * history, marks and diffs (marks.c, diff.c); and the subscriptions' timers
 * with their bounded, coalescing queues. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"
#include "follow.h"
#include "history.h"
#include "callers.h"
#include "diff.h"
#include "marks.h"
#include "series.h"
#include "clock.h"
#include "control.h"
#include "peer.h"
#include "procinfo.h"
#include "recorder.h"
#include "report.h"
#include "session.h"
#include "log.h"
#include "mounts.h"
#include "snapshot.h"
#include "subscription.h"

#define MIN_INTERVAL_MS 50
#define MAX_INTERVAL_MS (3600u * 1000)
/* Record requests waiting for their process: each holds a descriptor. */
#define MAX_PENDING_PER_PEER 4
#define MAX_PENDING          64
#define MAX_RECORD_WAIT_MS   (3600u * 1000)

/* A record request for a process that has not streamed yet. */
struct pending_record {
    TAILQ_ENTRY(pending_record) link;
    pid_t pid;
    uid_t uid; /* who asked: checked again when the session comes */
    uint64_t deadline_ms;
    struct recording *rec;
};

/* The control module's own state. */
struct control {
    struct subscription_set subs;
    TAILQ_HEAD(, pending_record) pending; /* record requests waiting */
    unsigned npending;
};

/* p's record requests waiting for their process. */
static unsigned pending_of(const struct control *c, const struct peer *p)
{
    const struct pending_record *pr;
    unsigned n = 0;

    TAILQ_FOREACH(pr, &c->pending, link)
    n += pr->rec->waiter == p;
    return n;
}

/* Reads which sessions a snapshot is of into o; -1 (and the peer told) if
 * the selector names no possible target. */
static int read_selector(struct peer *p, uint64_t id, const Ljmp__Selector *in,
                         struct snapshot_opts *o)
{
    o->pid = in->has_pid ? in->pid : 0;
    o->session_id = in->has_session_id ? in->session_id : 0;
    o->tree = in->has_tree && in->tree;
    if (o->tree && in->unit != NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a tree or a unit, not both");
        return -1;
    }
    if (o->tree && (o->pid == 0 || o->pid > INT32_MAX)) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a tree needs its root's pid");
        return -1;
    }
    if (o->tree)
        o->tree_start_ms = procinfo_start_ms((pid_t)o->pid);
    if (in->unit != NULL)
        return follow_unit_name(p, id, in->unit, o->unit, sizeof(o->unit));
    return 0;
}

/* Reads the options of a snapshot or subscription; -1 (and the peer told)
 * if they are out of range. */
static int read_opts(struct peer *p, uint64_t id,
                     const Ljmp__SnapshotOptions *in, struct snapshot_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->top = 20;
    o->sort = LJMP__SORT_KEY__SORT_LIVE_BYTES;
    o->uid = p->uid;
    if (in == NULL)
        return 0;
    if (in->sessions != NULL && read_selector(p, id, in->sessions, o) != 0)
        return -1;
    o->top = in->top;
    o->sort = in->sort;
    o->merge = in->merge;
    o->by_process = in->by_process;
    o->by_trace = in->by_trace;
    o->growth_window_s = in->growth_window_s;
    o->history_points = in->history_points;
    if (o->growth_window_s != 0 &&
        (o->growth_window_s < SNAPSHOT_MIN_GROWTH_WINDOW_S ||
         o->growth_window_s > SNAPSHOT_MAX_GROWTH_WINDOW_S)) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a growth window of %u s is out of range (0, or %u "
                        "to %u)",
                        o->growth_window_s, SNAPSHOT_MIN_GROWTH_WINDOW_S,
                        SNAPSHOT_MAX_GROWTH_WINDOW_S);
        return -1;
    }
    if (o->sort == LJMP__SORT_KEY__SORT_GROWTH && o->growth_window_s == 0) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "sorting by growth needs a growth window");
        return -1;
    }
    if (o->history_points > SNAPSHOT_MAX_HISTORY_POINTS) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "%u history points is over the limit of %u",
                        o->history_points, SNAPSHOT_MAX_HISTORY_POINTS);
        return -1;
    }
    if (o->by_process && !o->merge) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a breakdown by process is of a merged view");
        return -1;
    }
    if (o->top > SNAPSHOT_MAX_TOP) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "top %u is over the limit of %u locations", o->top,
                        SNAPSHOT_MAX_TOP);
        return -1;
    }
    if (protobuf_c_enum_descriptor_get_value(&ljmp__sort_key__descriptor,
                                             (int)o->sort) == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "unknown sort key %d", (int)o->sort);
        return -1;
    }
    return 0;
}

/* Sends a snapshot built for opts (and bases), or an error. */
/*
 * Sends a snapshot built for o (and bases), or an error.  One too large
 * for a frame (many sessions, each with many rows) is built again with
 * half the rows per session, and o->top stays lowered (a subscription's
 * next ones fit at once); the response says so.
 */
static int send_snapshot_in_turn(struct peer *p, uint64_t id,
                                 struct snapshot_opts *o,
                                 struct snapshot_bases *bases, uint64_t seq,
                                 double interval_s, uint64_t dropped)
{
    uint64_t now = clock_now_ms();
    char note[96] = "";

    for (;;) {
        struct arena a = {0};
        Ljmp__Snapshot *snap = snapshot_build(&a, p->srv, o, bases, now);
        Ljmp__Response resp;
        if (snap == NULL) {
            arena_free(&a);
            peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                            "out of memory building a snapshot");
            return -1;
        }
        snap->has_seq = snap->has_interval_s = snap->has_dropped = 1;
        snap->seq = seq;
        snap->interval_s = interval_s;
        snap->dropped = dropped;
        peer_response_init(&resp, id);
        resp.body_case = LJMP__RESPONSE__BODY_SNAPSHOT;
        resp.snapshot = snap;
        if (note[0] != '\0')
            resp.note = note;
        size_t size = protobuf_c_message_get_packed_size(&resp.base);
        if (size <= LJMP_WIRE_MAX_FRAME || o->top <= 1) {
            int rc = peer_send_sized(p, &resp, size);
            arena_free(&a);
            if (rc == 0)
                p->srv->counters.snapshots_sent++;
            /* The next deltas run from what this one showed. */
            if (rc == 0 && bases != NULL &&
                snapshot_advance_bases(p->srv, o, bases) != 0)
                log_error("control %llu: out of memory keeping what a "
                          "snapshot showed; some of the next deltas run "
                          "from an earlier one",
                          (unsigned long long)p->id);
            return rc;
        }
        arena_free(&a);
        o->top /= 2;
        snprintf(note, sizeof(note),
                 "top lowered to %u rows per session to fit a frame", o->top);
        log_warn("control %llu: %s", (unsigned long long)p->id, note);
    }
}

/* The same in a turn of its own, unless one is open (see snapshot.h). */
static int send_snapshot(struct peer *p, uint64_t id, struct snapshot_opts *o,
                         struct snapshot_bases *bases, uint64_t seq,
                         double interval_s, uint64_t dropped)
{
    int opened = snapshot_turn_begin(p->srv);
    int rc = send_snapshot_in_turn(p, id, o, bases, seq, interval_s, dropped);

    if (opened)
        snapshot_turn_end(p->srv);
    return rc;
}

static void do_list(struct peer *p, const Ljmp__Request *req)
{
    struct arena a = {0};
    Ljmp__SessionList list = LJMP__SESSION_LIST__INIT;
    Ljmp__Response resp;
    struct session *s;
    size_t n = 0;

    TAILQ_FOREACH(s, &p->srv->sessions, link)
    n++;
    list.sessions = arena_alloc(&a, (n ? n : 1) * sizeof(*list.sessions));
    if (list.sessions == NULL)
        goto oom;
    TAILQ_FOREACH(s, &p->srv->sessions, link)
    {
        if (!session_readable(s, p->uid))
            continue;
        int brief = session_brief(s);
        if (brief && !req->list->all) {
            list.brief_hidden++;
            continue;
        }
        Ljmp__SessionSnapshot *ss = arena_alloc(&a, sizeof(*ss));
        if (ss == NULL)
            goto oom;
        ljmp__session_snapshot__init(ss);
        session_lock(s);
        ss->totals = snapshot_totals(&a, s);
        session_unlock(s);
        if ((ss->info = snapshot_info(&a, s)) == NULL || ss->totals == NULL)
            goto oom;
        ss->info->has_brief = 1;
        ss->info->brief = brief;
        list.sessions[list.n_sessions++] = ss;
    }
    list.has_brief_hidden = 1;
    if ((list.daemon = snapshot_daemon(&a, p->srv, p->uid)) == NULL ||
        attach_list_armed(p->srv, &a, p->uid, &list) != 0 ||
        follow_list(p->srv, &a, p->uid, &list) != 0)
        goto oom;
    peer_response_init(&resp, req->id);
    resp.body_case = LJMP__RESPONSE__BODY_LIST;
    resp.list = &list;
    peer_send(p, &resp);
    arena_free(&a);
    return;
oom:
    arena_free(&a);
    peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                    "out of memory listing sessions");
}

static void do_snapshot(struct peer *p, const Ljmp__Request *req)
{
    struct snapshot_opts o;

    if (read_opts(p, req->id, req->snapshot->options, &o) != 0)
        return;
    send_snapshot(p, req->id, &o, NULL, 1, 0, 0);
}

/* The subscription's peer has it no more. */
static void unsubscribe(struct peer *p)
{
    struct server *srv = p->srv;

    if (p->sub == NULL)
        return;
    subscription_free(p->sub);
    p->sub = NULL;
    peer_wait_end(p);
    srv->nsubscribers = srv->ctl->subs.n;
}

static size_t subscriber_backlog(const struct subscription *sub)
{
    const struct peer *p = sub->owner;

    return evbuffer_get_length(p->out);
}

static void send_subscribed(struct subscription *sub, double interval_s)
{
    send_snapshot(sub->owner, sub->request_id, &sub->opts, &sub->bases,
                  sub->seq, interval_s, sub->dropped);
}

static void snapshots_begin(void *arg)
{
    snapshot_turn_begin(arg);
}

static void snapshots_end(void *arg)
{
    snapshot_turn_end(arg);
}

static const struct subscription_ops subscription_ops = {
    .backlog = subscriber_backlog,
    .send = send_subscribed,
    .batch_begin = snapshots_begin,
    .batch_end = snapshots_end,
};

static void do_subscribe(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__SubscribeRequest *r = req->subscribe;
    struct subscription *sub;
    struct snapshot_opts opts;

    if (r->interval_ms < MIN_INTERVAL_MS || r->interval_ms > MAX_INTERVAL_MS) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "interval %u ms is outside [%u, %u] ms", r->interval_ms,
                        MIN_INTERVAL_MS, MAX_INTERVAL_MS);
        return;
    }
    if (read_opts(p, req->id, r->options, &opts) != 0)
        return;
    sub = subscription_new(&p->srv->ctl->subs, p, req->id, &opts,
                           r->interval_ms, clock_now_ms());
    if (sub == NULL) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory subscribing");
        return;
    }
    unsubscribe(p);
    p->sub = sub;
    peer_wait_begin(p);
    p->srv->nsubscribers = p->srv->ctl->subs.n;
    /* The first snapshot at once: deltas since each session began. */
    send_snapshot(p, req->id, &sub->opts, &sub->bases, sub->seq, 0, 0);
    log_debug("control %llu: subscribed every %u ms", (unsigned long long)p->id,
              r->interval_ms);
}

static void do_unsubscribe(struct peer *p, const Ljmp__Request *req)
{
    Ljmp__Response resp;

    unsubscribe(p);
    peer_response_init(&resp, req->id);
    peer_send(p, &resp);
}

/* The session a selector names, of those p may read (to_read) or act on:
 * one by id, else the newest of a pid (a streaming one first), else the
 * newest of all. */
static struct session *select_session(struct peer *p, const Ljmp__Selector *sel,
                                      int to_read)
{
    struct session *s, *best = NULL;

    TAILQ_FOREACH(s, &p->srv->sessions, link)
    {
        if (to_read ? !session_readable(s, p->uid)
                    : !session_visible(s, p->uid))
            continue;
        if (sel != NULL && sel->has_session_id && sel->session_id != 0) {
            if (s->id == sel->session_id)
                return s;
            continue;
        }
        if (sel != NULL && sel->has_pid && sel->pid != 0 &&
            (uint32_t)s->pid != sel->pid)
            continue;
        if (best == NULL || best->phase == SESSION_ENDED ||
            s->phase != SESSION_ENDED)
            best = s;
    }
    return best;
}

static void no_session(struct peer *p, uint64_t id, const Ljmp__Selector *sel)
{
    if (sel != NULL && sel->has_session_id && sel->session_id != 0)
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "no session %llu (it may have been forgotten: see "
                        "ljmpd --retain)",
                        (unsigned long long)sel->session_id);
    else if (sel != NULL && sel->has_pid && sel->pid != 0)
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "no session of pid %u: the process has not streamed "
                        "to this ljmpd (run it with LJMP_SOCKET, or attach)",
                        sel->pid);
    else
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "no sessions yet");
}

/* The report's options from its request; -1 after an error answer for
 * an export this ljmpd does not know. */
static int report_opts_of(struct peer *p, const Ljmp__Request *req,
                          struct lm_report_opts *opts)
{
    const Ljmp__ReportRequest *r = req->report;

    if ((unsigned)r->export_format > LJMP__EXPORT_FORMAT__SPEEDSCOPE ||
        (unsigned)r->export_value > LJMP__EXPORT_VALUE__INUSE_SPACE) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "unknown export format %d or value %d",
                        (int)r->export_format, (int)r->export_value);
        return -1;
    }
    *opts = (struct lm_report_opts){
        .leak_only = r->leak_only,
        .human_readable = r->human_readable,
        .json = r->json,
        .by_process = r->by_process,
        .by_trace = r->by_trace,
        .stacks = r->stacks,
        .export_format = (int)r->export_format,
        .export_value = (int)r->export_value,
    };
    return 0;
}

/* One report of the sessions of a tree or a unit, merged. */
static void do_merged_report(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__ReportRequest *r = req->report;
    struct lm_report_opts opts;
    struct snapshot_opts o = {.merge = 1, .uid = p->uid};
    struct arena a = {0};
    struct session **m;
    long n;

    if (report_opts_of(p, req, &opts) != 0 ||
        read_selector(p, req->id, r->session, &o) != 0)
        return;
    if ((n = snapshot_members(&a, p->srv, &o, NULL, &m)) < 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
    else if (n == 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "no session of that %s: its processes have not "
                        "streamed to this ljmpd",
                        o.tree ? "tree" : "unit");
    else
        report_request(p, req->id, m, (size_t)n, 1, &opts);
    arena_free(&a);
}

/* A report is built off the loop when it is big, and sent in parts
 * (report.c). */
static void do_report(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__ReportRequest *r = req->report;
    const Ljmp__Selector *sel = r->session;
    struct lm_report_opts opts;

    if (sel != NULL && ((sel->has_tree && sel->tree) || sel->unit != NULL)) {
        do_merged_report(p, req);
        return;
    }
    if (report_opts_of(p, req, &opts) != 0)
        return;
    opts.by_process = 0; /* one process */
    struct session *s = select_session(p, sel, 1);
    if (s == NULL) {
        no_session(p, req->id, r->session);
        return;
    }
    report_request(p, req->id, &s, 1, 0, &opts);
}

/* -- Leak suspects -------------------------------------------------------- */

#define LEAKS_MIN_WINDOW_S 10
#define LEAKS_MAX_LIMIT    1000
/* Longer site names are cut: a thousand suspects stay within a frame. */
#define LEAKS_NAME_MAX (16u << 10)

/* loc's name in s's state (under its lock), in a's memory. */
static char *site_name(struct arena *a, const struct session *s, uint32_t loc)
{
    char small[256];
    int n = lm_state_loc_name(&s->prof.state, loc, small, sizeof(small));

    if (n < 0)
        return arena_strdup(a, "?");
    if ((size_t)n < sizeof(small))
        return arena_strdup(a, small);
    size_t len = (size_t)n < LEAKS_NAME_MAX ? (size_t)n + 1 : LEAKS_NAME_MAX;
    char *name = arena_alloc(a, len);
    if (name != NULL)
        lm_state_loc_name(&s->prof.state, loc, name, len);
    return name;
}

/* One suspect's message, its site named name. */
static Ljmp__LeakSuspect *suspect_msg(struct arena *a, char *name,
                                      const struct history_suspect *x)
{
    Ljmp__LeakSuspect *m = arena_alloc(a, sizeof(*m));
    Ljmp__Location *l = arena_alloc(a, sizeof(*l));

    if (m == NULL || l == NULL)
        return NULL;
    ljmp__leak_suspect__init(m);
    ljmp__location__init(l);
    l->name = name;
    l->has_live_bytes = l->has_live_blocks = 1;
    l->has_alloc_events = l->has_freed_blocks = l->has_sites = 1;
    l->live_bytes = x->now.live_bytes;
    l->live_blocks = x->now.live_blocks;
    l->alloc_events = x->now.alloc_events;
    l->freed_blocks = x->now.freed_blocks;
    l->sites = x->sites;
    m->site = l;
    m->has_growth_per_min = m->has_fit_r2 = m->has_rising = 1;
    m->has_window_allocs = m->has_window_frees = m->has_points = 1;
    m->has_span_s = 1;
    m->growth_per_min = x->fit.slope_per_s * 60;
    m->fit_r2 = x->fit.r2;
    m->rising = x->fit.rising;
    m->window_allocs = x->window_allocs;
    m->window_frees = x->window_frees;
    m->points = x->fit.points;
    m->span_s = (double)(x->last_ms - x->first_ms) / 1000.0;
    m->has_kept = 1;
    m->kept = x->kept;
    return m;
}

/* The newest frame's sites named, and grouped by name (one group for a
 * line's locations in and out of compiled code). */
struct named_sites {
    char **names;    /* by the frame's index */
    uint32_t *group; /* by the frame's index */
};

static const char *const *sort_names; /* for by_name, on the loop only */

static int by_name(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return strcmp(sort_names[x], sort_names[y]);
}

/* Names f's sites from s's state (under its lock) and groups them; -1 out
 * of memory. */
static int name_sites(struct arena *a, struct session *s,
                      const struct history_frame *f, struct named_sites *out)
{
    uint32_t *order = arena_alloc(a, (f->n + 1) * sizeof(*order));

    out->names = arena_alloc(a, (f->n + 1) * sizeof(*out->names));
    out->group = arena_alloc(a, (f->n + 1) * sizeof(*out->group));
    if (order == NULL || out->names == NULL || out->group == NULL)
        return -1;
    session_lock(s); /* a feed thread may be adding symbols */
    for (uint32_t i = 0; i < f->n; i++)
        if ((out->names[i] = site_name(a, s, f->sites[i].loc)) == NULL)
            break;
    session_unlock(s);
    for (uint32_t i = 0; i < f->n; i++) {
        if (out->names[i] == NULL)
            return -1;
        order[i] = i;
    }
    sort_names = (const char *const *)out->names;
    qsort(order, f->n, sizeof(*order), by_name);
    for (uint32_t i = 0, g = 0; i < f->n; i++) {
        if (i > 0 && strcmp(out->names[order[i]], out->names[order[i - 1]]))
            g++;
        out->group[order[i]] = g;
    }
    return 0;
}

/* The name of loc, one of f's sites. */
static char *name_of(const struct history_frame *f,
                     const struct named_sites *ns, uint32_t loc)
{
    for (uint32_t i = 0; i < f->n; i++)
        if (f->sites[i].loc == loc)
            return ns->names[i];
    return (char *)"?";
}

/* The suspects of s's history into out (in a's memory): -1 out of memory.
 * Costs a name for each tracked site and the fit of each over the
 * window's samples: bounded by the history's bound, done on the loop. */
/* Where a window of s's history ends: now, or when s ended (its history
 * stops there; the window of a session kept after its end is its last). */
static uint64_t window_end_ms(const struct session *s)
{
    return s->end_ms != 0 ? s->end_ms : clock_now_ms();
}

static int fill_leaks(struct arena *a, struct session *s,
                      const struct history *h, uint32_t window_s,
                      uint32_t limit, Ljmp__LeakSuspects *out)
{
    struct history_suspect *v = arena_alloc(a, limit * sizeof(*v));
    const struct history_frame *newest = history_newest(h);
    struct named_sites ns = {0};
    uint32_t samples = 0;
    long n = 0;

    if (v == NULL || (newest != NULL && name_sites(a, s, newest, &ns) != 0) ||
        (n = history_leaks(h, window_end_ms(s), (uint64_t)window_s * 1000,
                           ns.group, v, limit, &samples)) < 0)
        return -1;
    out->has_window_s = out->has_samples = out->has_sites_tracked = 1;
    out->has_min_points = out->has_peak_live_bytes = out->has_peak_ms = 1;
    out->has_history_bytes = 1;
    out->window_s = window_s;
    out->samples = samples;
    out->sites_tracked = h->ntracked;
    out->min_points = HISTORY_MIN_POINTS;
    out->peak_live_bytes = h->peak_totals.live_bytes;
    out->peak_ms = clock_wall_ms(h->peak.t_ms);
    out->history_bytes = history_memory(h);
    out->suspects =
        arena_alloc(a, (size_t)(n ? n : 1) * sizeof(*out->suspects));
    if (out->suspects == NULL)
        return -1;
    for (long i = 0; i < n; i++)
        if ((out->suspects[out->n_suspects++] =
                 suspect_msg(a, name_of(newest, &ns, v[i].loc), &v[i])) == NULL)
            return -1;
    return 0;
}

/* The session a history request names, with its history; NULL (and the
 * peer told) if there is none. */
static struct session *history_target(struct peer *p, uint64_t id,
                                      const Ljmp__Selector *sel,
                                      const struct history **h)
{
    if (sel != NULL && ((sel->has_tree && sel->tree) || sel->unit != NULL)) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a history is of one session: a pid or a session id");
        return NULL;
    }
    struct session *s = select_session(p, sel, 1);
    if (s == NULL) {
        no_session(p, id, sel);
        return NULL;
    }
    if ((*h = history_of(s)) == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "session %llu has no history (out of memory)",
                        (unsigned long long)s->id);
        return NULL;
    }
    return s;
}

static void do_leaks(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__LeaksRequest *r = req->leaks;
    uint32_t span_s = p->srv->cfg.history_span_s;
    const struct history *h;

    if (r->window_s < LEAKS_MIN_WINDOW_S || r->window_s > span_s ||
        r->limit < 1 || r->limit > LEAKS_MAX_LIMIT) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a window of %u to %u seconds (ljmpd's "
                        "--history-span) and a limit of 1 to %u",
                        LEAKS_MIN_WINDOW_S, span_s, LEAKS_MAX_LIMIT);
        return;
    }
    struct session *s = history_target(p, req->id, r->session, &h);
    if (s == NULL)
        return;
    struct arena a = {0};
    Ljmp__LeakSuspects out = LJMP__LEAK_SUSPECTS__INIT;
    Ljmp__Response resp;
    if ((out.session = snapshot_info(&a, s)) == NULL ||
        fill_leaks(&a, s, h, r->window_s, r->limit, &out) != 0) {
        arena_free(&a);
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory finding leak suspects");
        return;
    }
    peer_response_init(&resp, req->id);
    resp.body_case = LJMP__RESPONSE__BODY_LEAKS;
    resp.leaks = &out;
    peer_send(p, &resp);
    arena_free(&a);
}

static Ljmp__HistoryPoint *point_msg(struct arena *a,
                                     const struct history_totals *t)
{
    Ljmp__HistoryPoint *m = arena_alloc(a, sizeof(*m));

    if (m == NULL)
        return NULL;
    ljmp__history_point__init(m);
    m->has_time_ms = m->has_live_bytes = m->has_live_blocks = 1;
    m->has_alloc_bytes = m->has_alloc_events = 1;
    m->has_freed_bytes = m->has_free_events = 1;
    m->time_ms = clock_wall_ms(t->t_ms);
    m->live_bytes = t->live_bytes;
    m->live_blocks = t->live_blocks;
    m->alloc_bytes = t->alloc_bytes;
    m->alloc_events = t->alloc_events;
    m->freed_bytes = t->freed_bytes;
    m->free_events = t->free_events;
    return m;
}

static int by_live_bytes(const void *a, const void *b)
{
    const Ljmp__Location *x = *(Ljmp__Location *const *)a,
                         *y = *(Ljmp__Location *const *)b;

    if (x->live_bytes != y->live_bytes)
        return x->live_bytes > y->live_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The peak's sites, the locations of one name summed, most live bytes
 * first, at most most of them. */
static int fill_peak_sites(struct arena *a, struct session *s,
                           const struct history_frame *f, uint32_t most,
                           Ljmp__History *out)
{
    struct named_sites ns;
    Ljmp__Location **rows = arena_alloc(a, (f->n + 1) * sizeof(*rows));
    uint32_t nrows = 0;

    if (rows == NULL || name_sites(a, s, f, &ns) != 0)
        return -1;
    for (uint32_t i = 0; i < f->n; i++) {
        uint32_t g = ns.group[i];
        const struct history_site *x = &f->sites[i];
        if (g >= nrows) { /* groups are numbered from 0 without gaps */
            while (nrows <= g) {
                if ((rows[nrows] = arena_alloc(a, sizeof(**rows))) == NULL)
                    return -1;
                ljmp__location__init(rows[nrows]);
                rows[nrows]->has_live_bytes = rows[nrows]->has_live_blocks = 1;
                rows[nrows]->has_alloc_events = 1;
                rows[nrows]->has_freed_blocks = rows[nrows]->has_sites = 1;
                nrows++;
            }
        }
        Ljmp__Location *l = rows[g];
        l->name = ns.names[i];
        l->live_bytes += x->live_bytes;
        l->live_blocks += x->live_blocks;
        l->alloc_events += x->alloc_events;
        l->freed_blocks += x->freed_blocks;
        l->sites++;
    }
    qsort(rows, nrows, sizeof(*rows), by_live_bytes);
    out->peak_sites = rows;
    out->n_peak_sites = nrows < most ? nrows : most;
    return 0;
}

/* The frames from `from` on, with the series of set, into out (in a's
 * memory, the names ns's): -1 out of memory. */
static int series_msgs(struct arena *a, const struct history *h, uint32_t from,
                       const struct named_sites *ns,
                       const struct series_set *set, Ljmp__History *out)
{
    uint32_t nf = set->nframes;

    out->frame_ms = arena_alloc(a, (nf + 1) * sizeof(*out->frame_ms));
    out->frame_live_bytes =
        arena_alloc(a, (nf + 1) * sizeof(*out->frame_live_bytes));
    out->series = arena_alloc(a, (set->n + 1) * sizeof(*out->series));
    if (out->frame_ms == NULL || out->frame_live_bytes == NULL ||
        out->series == NULL)
        return -1;
    for (uint32_t j = 0; j < nf; j++) {
        out->frame_ms[j] = clock_wall_ms(h->frames[from + j].t_ms);
        out->frame_live_bytes[j] = h->frames[from + j].live_bytes;
    }
    out->n_frame_ms = out->n_frame_live_bytes = nf;
    for (uint32_t i = 0; i < set->n; i++) {
        Ljmp__HistorySeries *m = arena_alloc(a, sizeof(*m));
        uint64_t *bytes = arena_alloc(a, (nf + 1) * sizeof(*bytes));
        if (m == NULL || bytes == NULL)
            return -1;
        ljmp__history_series__init(m);
        memcpy(bytes, &set->bytes[(size_t)i * nf], nf * sizeof(*bytes));
        m->name = ns->names[set->member[i]];
        m->live_bytes = bytes;
        m->n_live_bytes = nf;
        m->has_sites = 1;
        m->sites = set->sites[i];
        out->series[out->n_series++] = m;
    }
    return 0;
}

/* The sites over time (HistoryRequest.series_sites): the frames taken
 * from start_ms on, and the series of the most sites (the locations of
 * one name summed) that were biggest at any of them.  Costs a name for
 * each location the frames hold and a search for each of their sites:
 * within the history's bound, on the loop. */
static int fill_series(struct arena *a, struct session *s,
                       const struct history *h, uint64_t start_ms,
                       uint32_t most, Ljmp__History *out)
{
    uint32_t from = history_first_frame(h, start_ms), ngroups = 0;
    struct history_frame u;
    struct named_sites ns;
    struct series_set set = {0};
    int rc = -1;

    if (series_union(h, from, &u) != 0)
        return -1;
    if (name_sites(a, s, &u, &ns) != 0)
        goto out;
    for (uint32_t i = 0; i < u.n; i++)
        if (ns.group[i] >= ngroups)
            ngroups = ns.group[i] + 1;
    if (series_build(h, from, &u, ns.group, ngroups, most, &set) == 0)
        rc = series_msgs(a, h, from, &ns, &set, out);
out:
    free(u.sites);
    series_set_free(&set);
    return rc;
}

/* s's history into out (in a's memory): -1 out of memory.  Costs its
 * totals in the window and a name for each site at the peak.  The window
 * ends now, or at the session's end. */
static int fill_history(struct arena *a, struct session *s,
                        const struct history *h, const Ljmp__HistoryRequest *r,
                        Ljmp__History *out)
{
    uint64_t now = window_end_ms(s), window = (uint64_t)r->window_s * 1000;
    uint32_t from = 0;

    while (r->window_s > 0 && from < h->ntotals &&
           h->totals[from].t_ms + window < now)
        from++;
    out->totals =
        arena_alloc(a, (h->ntotals - from + 1) * sizeof(*out->totals));
    if (out->totals == NULL)
        return -1;
    for (uint32_t i = from; i < h->ntotals; i++)
        if ((out->totals[out->n_totals++] = point_msg(a, &h->totals[i])) ==
            NULL)
            return -1;
    out->has_site_step_ms = out->has_sites_tracked = 1;
    out->has_history_bytes = out->has_thinnings = 1;
    out->site_step_ms = (uint32_t)h->step_ms;
    out->sites_tracked = h->ntracked;
    out->history_bytes = history_memory(h);
    out->thinnings = h->thinnings;
    if (r->series_sites > 0 &&
        fill_series(a, s, h, r->window_s > 0 && now > window ? now - window : 0,
                    r->series_sites, out) != 0)
        return -1;
    if (h->peak.t_ms == 0)
        return 0;
    if ((out->peak = point_msg(a, &h->peak_totals)) == NULL)
        return -1;
    return r->peak_sites > 0
               ? fill_peak_sites(a, s, &h->peak, r->peak_sites, out)
               : 0;
}

static void do_history(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__HistoryRequest *r = req->history;
    const struct history *h;

    if (r->peak_sites > LEAKS_MAX_LIMIT || r->series_sites > LEAKS_MAX_LIMIT) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "at most %u sites at the peak and %u over time",
                        LEAKS_MAX_LIMIT, LEAKS_MAX_LIMIT);
        return;
    }
    struct session *s = history_target(p, req->id, r->session, &h);
    if (s == NULL)
        return;
    struct arena a = {0};
    Ljmp__History out = LJMP__HISTORY__INIT;
    Ljmp__Response resp;
    if ((out.session = snapshot_info(&a, s)) == NULL ||
        fill_history(&a, s, h, r, &out) != 0) {
        arena_free(&a);
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory sending a history");
        return;
    }
    peer_response_init(&resp, req->id);
    resp.body_case = LJMP__RESPONSE__BODY_HISTORY;
    resp.history = &out;
    peer_send(p, &resp);
    arena_free(&a);
}

/* -- Marks and diffs ------------------------------------------------------ */

/* The one session a mark or diff request names, of those p may read
 * (to_read) or act on; NULL (and the peer told) for a tree, a unit, or no
 * session. */
static struct session *one_session(struct peer *p, uint64_t id,
                                   const Ljmp__Selector *sel, const char *what,
                                   int to_read)
{
    if (sel != NULL && ((sel->has_tree && sel->tree) || sel->unit != NULL)) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a %s is of one session: a pid or a session id", what);
        return NULL;
    }
    struct session *s = select_session(p, sel, to_read);
    if (s == NULL)
        no_session(p, id, sel);
    return s;
}

static void do_mark(struct peer *p, const Ljmp__Request *req)
{
    /* Marks are kept in the session's budget: its owner's to spend, not
     * a --reader's (who may still diff between start, peak and now). */
    struct session *s = one_session(p, req->id, req->mark->session, "mark", 0);

    if (s != NULL)
        marks_request(p, req->id, s, req->mark);
}

static void do_callers(struct peer *p, const Ljmp__Request *req)
{
    struct session *s =
        one_session(p, req->id, req->callers->session, "callers list", 1);

    if (s != NULL)
        callers_request(p, req->id, s, req->callers);
}

static void do_diff(struct peer *p, const Ljmp__Request *req)
{
    struct session *s = one_session(p, req->id, req->diff->session, "diff", 1);

    if (s != NULL)
        diff_request(p, req->id, s, req->diff);
}

/* Whether uid may record a process not yet seen: its owner, or root. */
static int may_watch_pid(uid_t uid, uint32_t pid, char *why, size_t len)
{
    long owner = pid <= INT32_MAX ? procinfo_owner((pid_t)pid) : -1;

    if (owner < 0) {
        snprintf(why, len, "no process %u", pid);
        return LJMP__ERROR_CODE__ERR_NO_SESSION;
    }
    if (uid != 0 && uid != getuid() && uid != (uid_t)owner) {
        snprintf(why, len, "process %u belongs to uid %u, not to you", pid,
                 (unsigned)owner);
        return LJMP__ERROR_CODE__ERR_PERMISSION;
    }
    return 0;
}

/*
 * The mount of fd (passed by pid), asked of /proc only: its mount id
 * (fdinfo), then that mount in ljmpd's mount namespace or the client's
 * (mount ids are the system's).  fstatfs would ask a FUSE daemon itself,
 * which may never answer.  0 if it is listed in neither (a pipe's or a
 * socket's mount is listed nowhere).
 */
static int mount_of(int fd, pid_t pid, struct mount_desc *m)
{
    char path[64], line[256];
    int mnt = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    while (mnt < 0 && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "mnt_id: %d", &mnt) != 1)
            mnt = -1;
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
    return mnt >= 0 && (mounts_by_id("/proc/self/mountinfo", mnt, m) ||
                        mounts_by_id(path, mnt, m));
}

/*
 * The record descriptor: a regular file open for writing.  Its writes
 * and close are a thread's (recorder.c), off the loop, and its type is
 * read from the kernel's inode without asking a FUSE daemon or a file
 * server (AT_STATX_DONT_SYNC).  But a FUSE request its daemon has taken
 * waits for the answer even when the process is killed: a user's FUSE
 * mount that never answers would keep ljmpd from exiting, so only root's
 * are written to (as for C symbols, see csyms.c).  A file on a mount
 * that neither side lists (detached) may be on one.
 */
static int check_record_fd(int fd, pid_t pid, char *why, size_t len)
{
    struct mount_desc m;
    struct statx stx;
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
        snprintf(why, len, "the record file is not open for writing");
        return -1;
    }
    if (!mount_of(fd, pid, &m)) {
        snprintf(why, len,
                 "record writes only to a regular file on a mount "
                 "that ljmpd or the client can see");
        return -1;
    }
    if (m.fuse && m.owner != 0) {
        snprintf(why, len,
                 "record does not write to FUSE mounts of users other "
                 "than root (this one is uid %ld's): their daemon may "
                 "never answer, and ljmpd could not exit",
                 m.owner);
        return -1;
    }
    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) !=
        0) {
        snprintf(why, len, "record cannot check the file: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(stx.stx_mode)) {
        snprintf(why, len, "record writes only to a regular file");
        return -1;
    }
    return 0;
}

/* Queues rec for pid's next session; an error code, or 0. */
static int wait_for_pid(struct peer *p, const Ljmp__RecordRequest *r,
                        struct recording *rec, char *why, size_t len)
{
    struct server *srv = p->srv;
    int code;

    if (r->wait_ms == 0) {
        snprintf(why, len,
                 "pid %u is not starting a stream to this ljmpd; give a "
                 "wait time to record its next session",
                 r->pid);
        return LJMP__ERROR_CODE__ERR_NO_SESSION;
    }
    unsigned mine = pending_of(srv->ctl, p);
    if (mine >= MAX_PENDING_PER_PEER || srv->ctl->npending >= MAX_PENDING) {
        snprintf(why, len,
                 "too many record requests waiting (%u here, %u in "
                 "all)",
                 mine, srv->ctl->npending);
        return LJMP__ERROR_CODE__ERR_BAD_REQUEST;
    }
    if ((code = may_watch_pid(p->uid, r->pid, why, len)) != 0)
        return code;
    struct pending_record *pr = calloc(1, sizeof(*pr));
    if (pr == NULL) {
        snprintf(why, len, "out of memory");
        return LJMP__ERROR_CODE__ERR_INTERNAL;
    }
    pr->pid = (pid_t)r->pid;
    pr->uid = p->uid;
    pr->deadline_ms =
        clock_now_ms() +
        (r->wait_ms < MAX_RECORD_WAIT_MS ? r->wait_ms : MAX_RECORD_WAIT_MS);
    pr->rec = rec;
    TAILQ_INSERT_TAIL(&srv->ctl->pending, pr, link);
    peer_wait_begin(p);
    srv->ctl->npending++;
    return 0;
}

static void do_record(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__RecordRequest *r = req->record;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    struct recording *rec;
    char why[192];
    int code;

    if (p->passed_fd < 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "record needs the output file's descriptor passed "
                        "with the request (SCM_RIGHTS)");
        return;
    }
    if (!r->has_pid || r->pid == 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "record needs a pid");
        return;
    }
    if (check_record_fd(p->passed_fd, p->pid, why, sizeof(why)) != 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s",
                        why);
        return;
    }
    if ((rec = calloc(1, sizeof(*rec))) == NULL) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
        return;
    }
    rec->waiter = p;
    rec->request_id = req->id;
    rec->r3 = r->has_r3 && r->r3;
    if (recorder_open(p->srv, rec, p->passed_fd, p->uid, why, sizeof(why)) !=
        0) {
        free(rec);
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s",
                        why);
        return;
    }
    p->passed_fd = -1; /* the writer's */
    sel.has_pid = 1;
    sel.pid = r->pid;
    struct session *s = select_session(p, &sel, 0);
    if (s != NULL &&
        (s->phase == SESSION_HELLO || s->phase == SESSION_STREAM)) {
        if (recorder_attach(s, rec) != 0) {
            peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_UNSUPPORTED, "%s",
                            rec->error);
            recorder_drop(rec);
            return;
        }
        recorder_begun(rec, s->id);
        log_info("session %llu: recording %s%s for pid %d",
                 (unsigned long long)s->id,
                 rec->from_start ? "from the start" : "from now",
                 rec->r3 ? " in R3" : "", (int)p->pid);
        return;
    }
    if ((code = wait_for_pid(p, r, rec, why, sizeof(why))) != 0) {
        peer_send_error(p, req->id, (Ljmp__ErrorCode)code, "%s", why);
        recorder_drop(rec);
        return;
    }
    recorder_begun(rec, 0);
}

/* Unlinks a waiting record request; the caller answers its client, then
 * lets the client go if it has nothing else waiting (peer_idle_check). */
static void drop_pending(struct server *srv, struct pending_record *pr)
{
    TAILQ_REMOVE(&srv->ctl->pending, pr, link);
    srv->ctl->npending--;
    if (pr->rec->waiter != NULL)
        peer_wait_end(pr->rec->waiter);
    free(pr);
}

/* Record requests of p that wait for their process go with it. */
static void drop_peer_records(struct peer *p)
{
    struct server *srv = p->srv;
    struct pending_record *pr, *next;

    for (pr = TAILQ_FIRST(&srv->ctl->pending); pr != NULL; pr = next) {
        next = TAILQ_NEXT(pr, link);
        if (pr->rec->waiter != p)
            continue;
        struct recording *rec = pr->rec;
        rec->waiter = NULL;
        drop_pending(srv, pr);
        recorder_finish(rec, NULL);
    }
}

/* Record requests that waited for s's process begin. */
static void session_started(struct session *s, void *arg)
{
    struct server *srv = s->srv;
    struct pending_record *pr, *next;

    (void)arg;
    for (pr = TAILQ_FIRST(&srv->ctl->pending); pr != NULL; pr = next) {
        next = TAILQ_NEXT(pr, link);
        /* The pid may have been reused by someone else's process. */
        if (pr->pid != s->pid || !session_visible(s, pr->uid))
            continue;
        struct recording *rec = pr->rec;
        struct peer *waiter = rec->waiter;
        drop_pending(srv, pr);
        if (recorder_attach(s, rec) == 0) {
            recorder_begun(rec, s->id);
            log_info("session %llu: recording from the start%s",
                     (unsigned long long)s->id, rec->r3 ? " in R3" : "");
        } else {
            recorder_finish(rec, s);
        }
        if (waiter != NULL)
            peer_idle_check(waiter);
    }
}

const struct session_observer control_observer = {
    .started = session_started,
};

void control_expire_records(struct server *srv, uint64_t now)
{
    struct pending_record *pr, *next;

    for (pr = TAILQ_FIRST(&srv->ctl->pending); pr != NULL; pr = next) {
        next = TAILQ_NEXT(pr, link);
        if (now < pr->deadline_ms && !srv->stopping)
            continue;
        struct recording *rec = pr->rec;
        struct peer *waiter = rec->waiter;
        snprintf(rec->error, sizeof(rec->error), "pid %d did not stream %s",
                 (int)pr->pid,
                 srv->stopping ? "before ljmpd stopped"
                               : "within the wait time");
        drop_pending(srv, pr);
        recorder_finish(rec, NULL);
        if (waiter != NULL)
            peer_idle_check(waiter);
    }
}

static void control_dispatch(struct peer *p, const Ljmp__Request *req)
{
    if (req->has_version && req->version != LJMP_WIRE_VERSION) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_VERSION,
                        "protocol version %u; this ljmpd speaks %u",
                        req->version, LJMP_WIRE_VERSION);
        return;
    }
    if (p->srv->stopping) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_SHUTTING_DOWN,
                        "ljmpd is shutting down");
        return;
    }
    switch (req->body_case) {
    case LJMP__REQUEST__BODY_LIST:
        do_list(p, req);
        break;
    case LJMP__REQUEST__BODY_SNAPSHOT:
        do_snapshot(p, req);
        break;
    case LJMP__REQUEST__BODY_SUBSCRIBE:
        do_subscribe(p, req);
        break;
    case LJMP__REQUEST__BODY_UNSUBSCRIBE:
        do_unsubscribe(p, req);
        break;
    case LJMP__REQUEST__BODY_REPORT:
        do_report(p, req);
        break;
    case LJMP__REQUEST__BODY_RECORD:
        do_record(p, req);
        break;
    case LJMP__REQUEST__BODY_LEAKS:
        do_leaks(p, req);
        break;
    case LJMP__REQUEST__BODY_HISTORY:
        do_history(p, req);
        break;
    case LJMP__REQUEST__BODY_MARK:
        do_mark(p, req);
        break;
    case LJMP__REQUEST__BODY_DIFF:
        do_diff(p, req);
        break;
    case LJMP__REQUEST__BODY_CALLERS:
        do_callers(p, req);
        break;
    case LJMP__REQUEST__BODY_ATTACH:
        if (req->attach->tree || req->attach->unit != NULL)
            follow_request(p, req);
        else
            attach_request(p, req);
        break;
    case LJMP__REQUEST__BODY_DETACH:
        if (req->detach->tree || req->detach->unit != NULL)
            follow_detach_request(p, req);
        else
            attach_detach_request(p, req);
        break;
    default:
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a request without a known body (field %d)",
                        (int)req->body_case);
        break;
    }
}

/* Stops p's snapshots and reports. */
static void peer_closing(struct peer *p)
{
    unsubscribe(p);
    report_peer_gone(p);
}

/* Recordings under way outlive the client that asked for them; the
 * ones still waiting for their process go with it, and so do its
 * attach and detach requests and its subscription. */
static void peer_gone(struct peer *p)
{
    drop_peer_records(p);
    recorder_forget_peer(p->srv, p);
    attach_peer_gone(p);
    peer_closing(p);
}

const struct peer_handler control_handler = {
    .request = control_dispatch,
    .closing = peer_closing,
    .gone = peer_gone,
    .drained = report_peer_drained,
};

int control_start(struct server *srv)
{
    struct control *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return -1;
    srv->ctl = c;
    TAILQ_INIT(&c->pending);
    return subscription_set_init(
        &c->subs, srv->base, PRIO_CONTROL, srv->cfg.peer_queue,
        &srv->counters.snapshots_dropped, &subscription_ops, srv);
}

void control_free(struct server *srv)
{
    if (srv->ctl == NULL)
        return;
    subscription_set_free(&srv->ctl->subs);
    free(srv->ctl);
    srv->ctl = NULL;
}
