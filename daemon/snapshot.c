/* Builds snapshot messages from sessions' live state: top locations by a
 * key, with deltas and rates against a subscriber's previous view. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "clock.h"
#include "history.h"
#include "lm_groups.h"
#include "lm_hash.h"
#include "procinfo.h"
#include "recorder.h"
#include "log.h"
#include "snapshot.h"

void snapshot_bases_free(struct snapshot_bases *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->v[i].locs);
    free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* How far a running census has come: the live bytes known over the VM's
 * heap at its start, short of 1 until it completes (the heap changes
 * meanwhile, so the ratio is an estimate). */
static double census_progress(const struct session_census *k)
{
    if (k->c.state == LM_CENSUS_DONE)
        return 1;
    if (k->c.begin_total == 0)
        return 0;
    double p = (double)k->live_bytes / (double)k->c.begin_total;
    return p < 0.99 ? p : 0.99;
}

static Ljmp__CensusState census_state(const struct session_census *k)
{
    switch (k->c.state) {
    case LM_CENSUS_RUNNING:
        return k->streaming ? LJMP__CENSUS_STATE__CENSUS_RUNNING
                            : LJMP__CENSUS_STATE__CENSUS_PARTIAL;
    case LM_CENSUS_DONE:
        return LJMP__CENSUS_STATE__CENSUS_COMPLETE;
    default:
        return LJMP__CENSUS_STATE__CENSUS_NONE;
    }
}

/* s's census, or NULL when its stream had none: 0, or -1 out of memory. */
static int make_census(struct arena *a, const struct session *s,
                       Ljmp__Census **out)
{
    struct session_census k;
    Ljmp__Census *c;

    *out = NULL;
    session_census(s, &k);
    if (k.c.state == LM_CENSUS_NONE)
        return 0;
    if ((c = arena_alloc(a, sizeof(*c))) == NULL)
        return -1;
    ljmp__census__init(c);
    c->has_state = c->has_begin_total = c->has_progress = 1;
    c->has_duplicates = c->has_preceding_frees = c->has_live_bytes = 1;
    c->has_begin_ms = 1;
    c->state = census_state(&k);
    c->begin_total = k.c.begin_total;
    c->begin_ms = clock_wall_ms(k.begin_ms);
    c->progress = census_progress(&k);
    c->duplicates = k.duplicates;
    c->preceding_frees = k.preceding_frees;
    c->live_bytes = k.live_bytes;
    if (k.c.state == LM_CENSUS_DONE) {
        c->has_complete_total = c->has_remainder = c->has_over = 1;
        c->has_complete_ms = c->has_complete_blocks = 1;
        c->complete_total = k.c.complete_total;
        c->remainder = k.c.remainder;
        c->over = k.c.over;
        c->complete_ms = clock_wall_ms(k.complete_ms);
        c->complete_blocks = k.c.complete_blocks;
    }
    *out = c;
    return 0;
}

Ljmp__SessionInfo *snapshot_info(struct arena *a, const struct session *s)
{
    Ljmp__SessionInfo *i = arena_alloc(a, sizeof(*i));

    if (i == NULL)
        return NULL;
    ljmp__session_info__init(i);
    i->has_id = i->has_pid = i->has_uid = i->has_gid = 1;
    i->id = s->id;
    i->pid = (uint32_t)s->pid;
    i->uid = (uint32_t)s->uid;
    i->gid = (uint32_t)s->gid;
    i->cmdline = s->cmdline;
    i->has_process_start_ms = i->has_session_start_ms = 1;
    i->process_start_ms = s->process_start_ms;
    i->session_start_ms = clock_wall_ms(s->start_ms);
    i->has_session_end_ms = s->end_ms != 0;
    i->session_end_ms = clock_wall_ms(s->end_ms);
    i->has_state = 1;
    i->state = s->state;
    if (s->reason[0] != '\0')
        i->reason = (char *)s->reason;
    i->has_error_offset = s->error_offset != 0;
    i->error_offset = s->error_offset;
    i->vm_version = (char *)s->vm_version;
    i->has_vm_flavour = 1;
    i->vm_flavour = s->vm_flavour;
    i->has_stacks = i->has_stack_sample = 1;
    i->stacks = s->stacks;
    i->stack_sample = s->stack_sample;
    i->has_trailer_seen = 1;
    i->trailer_seen = s->trailer_len == LJMP_TRAILER_SIZE;
    if (i->trailer_seen) {
        i->has_trailer_events = i->has_trailer_stream_bytes = 1;
        i->trailer_events = s->trailer_events;
        i->trailer_stream_bytes = s->trailer_bytes;
    }
    i->has_recording = 1;
    i->recording = recorder_of(s) != NULL;
    if (make_census(a, s, &i->census) != 0)
        return NULL;
    i->has_memory_bytes = i->has_memory_budget = 1;
    i->memory_bytes = s->mem_charged;
    i->memory_budget = budget_of_session(s->srv, s->uid);
    i->has_history_bytes = 1;
    i->history_bytes = s->mem_history;
    i->has_marks_bytes = i->has_marks = s->nmarks > 0;
    i->marks_bytes = s->mem_marks;
    i->marks = s->nmarks;
    return i;
}

static void fill_totals(Ljmp__Totals *t, const struct lm_totals *c,
                        uint64_t stream_bytes)
{
    ljmp__totals__init(t);
    t->has_alloc_events = t->has_realloc_events = t->has_free_events = 1;
    t->has_symtab_events = t->has_alloc_bytes = t->has_freed_bytes = 1;
    t->has_live_bytes = t->has_live_blocks = t->has_stream_bytes = 1;
    t->alloc_events = c->alloc_events;
    t->realloc_events = c->realloc_events;
    t->free_events = c->free_events;
    t->symtab_events = c->symtab_events;
    t->alloc_bytes = c->alloc_bytes;
    t->freed_bytes = c->freed_bytes;
    t->live_bytes = c->live_bytes;
    t->live_blocks = c->live_blocks;
    t->stream_bytes = stream_bytes;
}

/* A session's totals message, from its counters or from its view. */
static Ljmp__Totals *make_totals(struct arena *a, const struct lm_totals *c,
                                 uint64_t stream_bytes, uint32_t nlocs,
                                 uint64_t memory_bytes)
{
    Ljmp__Totals *t = arena_alloc(a, sizeof(*t));

    if (t == NULL)
        return NULL;
    fill_totals(t, c, stream_bytes);
    t->has_locations = t->has_memory_bytes = 1;
    t->locations = nlocs;
    t->memory_bytes = memory_bytes;
    return t;
}

Ljmp__Totals *snapshot_totals(struct arena *a, const struct session *s)
{
    return make_totals(a, &s->prof.state.totals, s->stream_bytes,
                       s->prof.state.nlocs, lm_state_memory(&s->prof.state));
}

/* The counters of caller's own sessions, those ljmpd keeps. */
static void own_counters(Ljmp__DaemonCounters *d, const struct server *srv,
                         uid_t caller)
{
    struct session *s;

    d->has_of_uid = d->has_sessions_live = d->has_sessions_kept = 1;
    d->has_sessions_complete = d->has_sessions_truncated = 1;
    d->has_sessions_malformed = d->has_ingest_bytes = d->has_ingest_events = 1;
    d->of_uid = (uint32_t)caller;
    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!session_readable(s, caller))
            continue;
        /* A feed thread may be changing them. */
        session_lock(s);
        d->ingest_bytes += s->stream_bytes;
        d->ingest_events += lm_totals_events(&s->prof.state.totals);
        session_unlock(s);
        if (s->phase != SESSION_ENDED) {
            d->sessions_live++;
            continue;
        }
        d->sessions_kept++;
        d->sessions_complete += s->state == LJMP__SESSION_STATE__COMPLETE;
        d->sessions_truncated += s->state == LJMP__SESSION_STATE__TRUNCATED;
        d->sessions_malformed += s->state == LJMP__SESSION_STATE__FAILED;
    }
}

Ljmp__DaemonCounters *snapshot_daemon(struct arena *a, const struct server *srv,
                                      uid_t caller)
{
    Ljmp__DaemonCounters *d = arena_alloc(a, sizeof(*d));

    if (d == NULL)
        return NULL;
    ljmp__daemon_counters__init(d);
    d->has_uptime_ms = 1;
    d->uptime_ms = clock_now_ms() - srv->start_ms;
    /* Another user's sessions are none of caller's business, nor what
     * other peers did. */
    if (caller != 0 && caller != getuid()) {
        own_counters(d, srv, caller);
        return d;
    }
#define PUT_COUNTER(name)                                                      \
    d->has_##name = 1;                                                         \
    d->name = srv->counters.name;
    SERVER_COUNTERS(PUT_COUNTER)
#undef PUT_COUNTER
    d->has_subscribers = d->has_sessions_live = d->has_sessions_kept = 1;
    d->subscribers = srv->nsubscribers;
    d->sessions_live = srv->nlive;
    d->sessions_kept = srv->nended;
    return d;
}

/* Whether s's process was the tree's root or its descendant when s began.
 * A process that started before the root cannot be: its pid was an older
 * process's. */
static int in_tree(const struct session *s, const struct snapshot_opts *o)
{
    if (o->tree_start_ms != 0 && s->process_start_ms != 0 &&
        s->process_start_ms < o->tree_start_ms)
        return 0;
    if ((uint32_t)s->pid == o->pid)
        return 1;
    for (unsigned i = 0; i < s->nancestors; i++)
        if ((uint32_t)s->ancestors[i] == o->pid)
            return 1;
    return 0;
}

int snapshot_matches(const struct session *s, const struct snapshot_opts *o)
{
    if (!session_readable(s, o->uid))
        return 0;
    if (o->session_id != 0)
        return s->id == o->session_id;
    if (o->unit[0] != '\0')
        return s->cgroup != NULL && procinfo_cgroup_names(s->cgroup, o->unit);
    if (o->tree)
        return in_tree(s, o);
    return o->pid == 0 || (uint32_t)s->pid == o->pid;
}

/* The rows of a session's view: its locations gathered by name, with
 * their summed counters. */
struct rows {
    const struct lm_group *g; /* per row: its name and locations */
    struct lm_counters *c;
    uint32_t n;
    /* The rows' trends in the session's history, sorted by row (NULL:
     * none), and the live history's points asked; merged views have no
     * trends, and rank by live bytes when asked for growth. */
    const struct history_trend *trends;
    long ntrends;
    uint32_t history_points;
    int merged;
};

/* A row's counters as the wire and the sort keys see them. */
static struct loc_base row_now(const struct lm_counters *c)
{
    return (struct loc_base){
        .alloc_events = c->alloc_events,
        .alloc_bytes = c->alloc_bytes + c->realloc_new_bytes,
        .realloc_events = c->realloc_events,
        .free_events = c->free_events,
        .free_bytes = c->free_bytes + c->realloc_old_bytes,
    };
}

/* Counters only grow, but a row may lose a location when names change
 * (a symbol announced late): then its delta is taken as zero. */
static uint64_t grown(uint64_t now, uint64_t before)
{
    return now > before ? now - before : 0;
}

static struct loc_base row_delta(const struct loc_base *now,
                                 const struct session_base *b, uint32_t id)
{
    struct loc_base d = *now;

    if (b != NULL && id < b->nlocs) {
        d.alloc_events = grown(now->alloc_events, b->locs[id].alloc_events);
        d.alloc_bytes = grown(now->alloc_bytes, b->locs[id].alloc_bytes);
        d.realloc_events =
            grown(now->realloc_events, b->locs[id].realloc_events);
        d.free_events = grown(now->free_events, b->locs[id].free_events);
        d.free_bytes = grown(now->free_bytes, b->locs[id].free_bytes);
    }
    return d;
}

/*
 * A row's growth for ranking: its slope, weighed by how well the line fits
 * (a site whose garbage the collector sweeps in cycles saws around it) and
 * by the share of its allocations it kept (garbage that piles up between
 * two cycles of a growing heap rises too, but its blocks go).
 */
static double steady_growth(const struct history_trend *t)
{
    double kept = t->kept < 1 ? t->kept : 1;

    return t->fit.slope_per_s * t->fit.r2 * kept;
}

/* A slope as a key that sorts as the slopes do, above 0 (no trend). */
static uint64_t slope_key(double slope)
{
    uint64_t bits;

    memcpy(&bits, &slope, sizeof(bits));
    bits = bits >> 63 ? ~bits : bits | (1ull << 63);
    return bits > 0 ? bits : 1;
}

static uint64_t sort_value(const struct rows *rows, uint32_t id,
                           const struct loc_base *now,
                           const struct loc_base *delta, Ljmp__SortKey key)
{
    const struct lm_counters *c = &rows->c[id];

    switch (key) {
    case LJMP__SORT_KEY__SORT_GROWTH: {
        if (rows->merged)
            return c->live_bytes;
        const struct history_trend *t =
            rows->trends ? history_trend_of(rows->trends, rows->ntrends, id)
                         : NULL;
        return t != NULL ? slope_key(steady_growth(t)) : 0;
    }
    case LJMP__SORT_KEY__SORT_FREE_EVENTS:
        return c->free_events;
    case LJMP__SORT_KEY__SORT_LIVE_BLOCKS:
        return c->live_blocks;
    case LJMP__SORT_KEY__SORT_ALLOC_BYTES:
        return now->alloc_bytes;
    case LJMP__SORT_KEY__SORT_ALLOC_RATE:
        return delta->alloc_bytes;
    case LJMP__SORT_KEY__SORT_EVENT_RATE:
        return delta->alloc_events + delta->realloc_events + delta->free_events;
    case LJMP__SORT_KEY__SORT_FREE_BYTES:
        return now->free_bytes;
    default:
        return c->live_bytes;
    }
}

struct ranked {
    uint64_t key, tie;
    uint32_t id;
};

/* x ranks below y: smaller key, then less allocated, then newer. */
static int ranks_below(const struct ranked *x, const struct ranked *y)
{
    if (x->key != y->key)
        return x->key < y->key;
    if (x->tie != y->tie)
        return x->tie < y->tie;
    return x->id > y->id;
}

static void sift_down(struct ranked *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && ranks_below(&h[l], &h[m]))
            m = l;
        if (r < n && ranks_below(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        struct ranked t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static int cmp_ranked_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;

    return ranks_below(x, y) ? 1 : ranks_below(y, x) ? -1 : 0;
}

/* The top rows: a min-heap of `top` entries over every row. */
static size_t select_top(const struct rows *rows, const struct session_base *b,
                         Ljmp__SortKey key, struct ranked *heap, size_t top)
{
    size_t n = 0;

    for (uint32_t id = 0; id < rows->n; id++) {
        if (rows->g[id].nlocs == 0)
            continue;
        struct loc_base now = row_now(&rows->c[id]);
        struct loc_base d = row_delta(&now, b, id);
        struct ranked r = {sort_value(rows, id, &now, &d, key), now.alloc_bytes,
                           id};
        if (n < top) {
            heap[n++] = r;
            if (n == top)
                for (size_t i = top / 2; i-- > 0;)
                    sift_down(heap, n, i);
        } else if (ranks_below(&heap[0], &r)) {
            heap[0] = r;
            sift_down(heap, n, 0);
        }
    }
    qsort(heap, n, sizeof(*heap), cmp_ranked_desc);
    return n;
}

static double per_second(uint64_t delta, double seconds)
{
    return seconds > 0 ? (double)delta / seconds : 0;
}

/* Blocks made at a row (allocations, reallocs' new blocks) gone since. */
static uint64_t freed_blocks(const struct lm_counters *c)
{
    uint64_t made = c->alloc_events + c->realloc_events;

    return made > c->live_blocks ? made - c->live_blocks : 0;
}

/* A row's trend into m: its growth, and its live history when asked; -1
 * when out of memory. */
static int put_trend(struct arena *a, Ljmp__Location *m,
                     const struct rows *rows, uint32_t id)
{
    const struct history_trend *t =
        rows->trends ? history_trend_of(rows->trends, rows->ntrends, id) : NULL;

    if (t == NULL)
        return 0;
    m->has_growth_bytes_per_min = m->has_growth_points = 1;
    m->growth_bytes_per_min = t->fit.slope_per_s * 60;
    m->growth_points = t->fit.points;
    uint32_t n =
        t->nspark < rows->history_points ? t->nspark : rows->history_points;
    if (n == 0)
        return 0;
    if ((m->live_history = arena_alloc(a, n * sizeof(*m->live_history))) ==
        NULL)
        return -1;
    /* The trend's points are spread for its own count: take n of them
     * the same way, the newest last. */
    for (uint32_t k = 0; k < n; k++)
        m->live_history[k] =
            t->spark[n == 1 ? t->nspark - 1
                            : (uint64_t)k * (t->nspark - 1) / (n - 1)];
    m->n_live_history = n;
    return 0;
}

static Ljmp__Location *make_location(struct arena *a, const struct rows *rows,
                                     const struct session_base *b, uint32_t id,
                                     double seconds)
{
    const struct lm_counters *c = &rows->c[id];
    struct loc_base now = row_now(c), d = row_delta(&now, b, id);
    Ljmp__Location *m = arena_alloc(a, sizeof(*m));

    if (m == NULL)
        return NULL;
    ljmp__location__init(m);
    m->name = rows->g[id].name;
#define PUT(field, value)                                                      \
    m->has_##field = 1;                                                        \
    m->field = (value);
    PUT(id, id)
    PUT(sites, rows->g[id].nlocs)
    PUT(live_bytes, c->live_bytes)
    PUT(live_blocks, c->live_blocks)
    PUT(alloc_events, c->alloc_events)
    PUT(alloc_bytes, c->alloc_bytes)
    PUT(realloc_events, c->realloc_events)
    PUT(realloc_new_bytes, c->realloc_new_bytes)
    PUT(realloc_old_bytes, c->realloc_old_bytes)
    PUT(free_events, c->free_events)
    PUT(free_bytes, c->free_bytes)
    PUT(delta_alloc_events, d.alloc_events)
    PUT(delta_alloc_bytes, d.alloc_bytes)
    PUT(delta_realloc_events, d.realloc_events)
    PUT(delta_free_events, d.free_events)
    PUT(delta_free_bytes, d.free_bytes)
    PUT(alloc_bytes_per_s, per_second(d.alloc_bytes, seconds))
    PUT(events_per_s,
        per_second(d.alloc_events + d.realloc_events + d.free_events, seconds))
    PUT(freed_blocks, freed_blocks(c))
#undef PUT
    return put_trend(a, m, rows, id) == 0 ? m : NULL;
}

static struct session_base *find_base(const struct snapshot_bases *bases,
                                      uint64_t session_id)
{
    for (size_t i = 0; i < bases->n; i++)
        if (bases->v[i].session_id == session_id)
            return &bases->v[i];
    return NULL;
}

/*
 * A session as the snapshots of one turn see it (see snapshot.h), and the
 * parts they were made of.  The first snapshot of a turn takes the
 * session's counters under its lock; the others share them, and a part
 * already packed for the same options and the same base: subscribers who
 * subscribed together tick together, and each of their snapshots would
 * otherwise build and pack the same sessions again.  Views go at the end
 * of their turn.
 */
#define VIEW_PARTS 8 /* parts kept a turn; more are packed for one use */

struct view_part {
    uint32_t top;
    Ljmp__SortKey sort;
    uint32_t growth_window_s, history_points;
    uint64_t base_view; /* the view the subscriber's base came from; 0: none */
    /* The part as a Snapshot's sessions field: the field's tag byte, then
     * the length and the packed SessionSnapshot. */
    uint8_t *field;
    size_t len;
};

struct session_view {
    struct lm_groups groups;  /* the session's locations by name, kept */
    uint64_t turn;            /* the loop's turn it was taken in, or 0 */
    uint64_t id;              /* unique among the server's views */
    uint64_t at_ms;           /* when (monotonic) */
    struct lm_counters *rows; /* per name group, this turn's */
    uint32_t nrows, rows_cap;
    struct lm_totals totals;
    uint64_t stream_bytes, memory_bytes;
    uint32_t nlocs;
    struct view_part parts[VIEW_PARTS];
    unsigned nparts;
    /* The same session's rows named by trace (SnapshotOptions.by_trace),
     * made at the first snapshot that asks, or NULL. */
    struct session_view *by_trace;
};

/* The tag byte of Snapshot.sessions (field 4, length-delimited). */
#define SESSIONS_FIELD_TAG (4 << 3 | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)

static void view_drop_parts(struct session_view *v)
{
    for (unsigned i = 0; i < v->nparts; i++)
        free(v->parts[i].field);
    v->nparts = 0;
}

/* The snapshots' own state: their turns, and the views taken so far. */
struct snapshots {
    uint64_t turn; /* the open one, or the last */
    int open;
    uint64_t views_taken; /* a view's id: the count when it was taken */
};

int snapshot_start(struct server *srv)
{
    return (srv->snapshots = calloc(1, sizeof(*srv->snapshots))) ? 0 : -1;
}

void snapshot_free(struct server *srv)
{
    free(srv->snapshots);
    srv->snapshots = NULL;
}

uint64_t snapshot_views_taken(const struct server *srv)
{
    return srv->snapshots->views_taken;
}

/* The view of s the snapshots keep in its slot (by_trace: the one by
 * trace, hung off it), or NULL. */
static struct session_view *view_of(struct session *s, int by_trace)
{
    struct session_view *v = *session_slot(s, &snapshot_observer);

    return by_trace && v != NULL ? v->by_trace : v;
}

/* The turn is over: what the view took for it goes, its groups stay (they
 * are kept up to date, not made anew). */
static void view_end_turn(struct session_view *v)
{
    if (v->by_trace != NULL)
        view_end_turn(v->by_trace);
    view_drop_parts(v);
    free(v->rows);
    v->rows = NULL;
    v->rows_cap = v->nrows = 0;
    v->turn = 0;
}

static void session_freed(struct session *s, void *arg)
{
    void **slot = session_slot(s, &snapshot_observer);
    struct session_view *v = *slot;

    (void)arg;
    if (v == NULL)
        return;
    view_end_turn(v);
    if (v->by_trace != NULL) {
        lm_groups_free(&v->by_trace->groups);
        free(v->by_trace);
    }
    lm_groups_free(&v->groups);
    free(v);
    *slot = NULL;
}

const struct session_observer snapshot_observer = {
    .freed = session_freed,
};

int snapshot_turn_begin(struct server *srv)
{
    struct snapshots *t = srv->snapshots;

    if (t->open)
        return 0;
    t->open = 1;
    t->turn++;
    return 1;
}

void snapshot_turn_end(struct server *srv)
{
    struct session *s;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        struct session_view *v = view_of(s, 0);
        if (v != NULL)
            view_end_turn(v);
    }
    srv->snapshots->open = 0;
}

static int view_is_current(struct session *s, uint64_t turn, int by_trace)
{
    const struct session_view *v = view_of(s, by_trace);

    return v != NULL && v->turn == turn;
}

/* A new view, its groups named by trace if by_trace; NULL when out of
 * memory. */
static struct session_view *view_new(int by_trace)
{
    struct session_view *v = calloc(1, sizeof(*v));

    if (v == NULL)
        return NULL;
    if (lm_groups_init(&v->groups) != 0) {
        free(v);
        return NULL;
    }
    v->groups.by_trace = by_trace;
    return v;
}

/* The view of s (by_trace: the one by trace), made at its first snapshot;
 * NULL when out of memory. */
static struct session_view *view_made(struct session *s, int by_trace)
{
    void **slot = session_slot(s, &snapshot_observer);
    struct session_view *v = *slot;

    if (v == NULL && (v = *slot = view_new(0)) == NULL)
        return NULL;
    if (!by_trace)
        return v;
    if (v->by_trace == NULL)
        v->by_trace = view_new(1);
    return v->by_trace;
}

/* The bytes of the names the views of s copied. */
static uint64_t views_memory(struct session *s)
{
    const struct session_view *v = view_of(s, 0), *t = view_of(s, 1);

    return lm_groups_memory(&v->groups) +
           (t != NULL ? lm_groups_memory(&t->groups) : 0);
}

/* Names the locations s made since v's last update (lm_groups_update's
 * answer); under its lock.  The names are copies: within what the session
 * may still hold. */
static int name_new_locations(struct server *srv, struct session *s,
                              struct session_view *v)
{
    uint64_t held = session_memory(s), most = budget_of_session(srv, s->uid);

    v->groups.max_bytes = s->mem_views + (held < most ? most - held : 0) + 1;
    return lm_groups_update(&v->groups, &s->prof.state);
}

const struct lm_groups *snapshot_names(struct session *s)
{
    struct session_view *v = view_made(s, 0);

    if (v == NULL || name_new_locations(s->srv, s, v) < 0)
        return NULL;
    s->mem_views = views_memory(s);
    budget_charge(s);
    return &v->groups;
}

/* Takes the session's view for this turn; under its lock.  -1 when out of
 * memory. */
static int view_take(struct server *srv, struct session *s, uint64_t turn,
                     uint64_t now, int by_trace)
{
    struct session_view *v = view_made(s, by_trace);

    if (v == NULL)
        return -1;
    view_drop_parts(v);
    v->turn = 0; /* not current until whole */
    if (name_new_locations(srv, s, v) < 0)
        return -1;
    if (v->rows_cap < v->groups.n) {
        uint32_t cap = v->groups.n;
        struct lm_counters *rows = realloc(v->rows, cap * sizeof(*rows));
        if (rows == NULL)
            return -1;
        v->rows = rows;
        v->rows_cap = cap;
    }
    v->nrows = v->groups.n;
    if (v->nrows > 0)
        lm_groups_sum(&v->groups, &s->prof.state, v->rows);
    v->totals = s->prof.state.totals;
    v->stream_bytes = s->stream_bytes;
    v->nlocs = s->prof.state.nlocs;
    s->mem_views = views_memory(s);
    budget_charge(s);
    v->memory_bytes = session_memory(s);
    v->at_ms = now;
    v->id = ++srv->snapshots->views_taken;
    v->turn = turn;
    return 0;
}

/* Moves the subscriber's view of s to s's view; -1 when out of memory. */
static int update_base(struct snapshot_bases *bases, struct session_base *b,
                       struct session *s, int by_trace)
{
    const struct session_view *v = view_of(s, by_trace);

    if (b == NULL) {
        if (bases->n == bases->cap) {
            size_t cap = bases->cap ? 2 * bases->cap : 4;
            struct session_base *nv = realloc(bases->v, cap * sizeof(*nv));
            if (nv == NULL)
                return -1;
            bases->v = nv;
            bases->cap = cap;
        }
        /* Counted once whole: a half-made base would pass for one. */
        b = &bases->v[bases->n];
        memset(b, 0, sizeof(*b));
        b->session_id = s->id;
        if (v->nrows > 0 &&
            (b->locs = malloc(v->nrows * sizeof(*b->locs))) == NULL)
            return -1;
        bases->n++;
    } else if (b->nlocs < v->nrows) {
        struct loc_base *locs = realloc(b->locs, v->nrows * sizeof(*locs));
        if (locs == NULL)
            return -1;
        b->locs = locs;
    }
    for (uint32_t id = 0; id < v->nrows; id++)
        b->locs[id] = row_now(&v->rows[id]);
    b->nlocs = v->nrows;
    b->totals = v->totals;
    b->stream_bytes = v->stream_bytes;
    b->time_ms = v->at_ms;
    b->view_id = v->id;
    b->seen = 1;
    return 0;
}

/* Counters now minus a base's (none: since the start), for a delta. */
static Ljmp__Totals *make_delta(struct arena *a, const struct lm_totals *now,
                                uint64_t stream_now,
                                const struct lm_totals *base,
                                uint64_t stream_base)
{
    Ljmp__Totals *t = arena_alloc(a, sizeof(*t));
    struct lm_totals d = *now;

    if (t == NULL)
        return NULL;
    if (base != NULL) {
        d.alloc_events -= base->alloc_events;
        d.realloc_events -= base->realloc_events;
        d.free_events -= base->free_events;
        d.symtab_events -= base->symtab_events;
        d.alloc_bytes -= base->alloc_bytes;
        d.freed_bytes -= base->freed_bytes;
        stream_now -= stream_base;
    }
    fill_totals(t, &d, stream_now);
    /* Live counters are levels, not flows: a delta leaves them out. */
    t->has_live_bytes = t->has_live_blocks = 0;
    return t;
}

/* The time a view's rates run over: from the base (or the session's
 * start) to the view (or the session's end). */
static void view_span(const struct session *s, const struct session_base *b,
                      int by_trace, uint64_t *from, uint64_t *end)
{
    const struct session_view *v = view_of((struct session *)s, by_trace);

    *end = s->end_ms != 0 && s->end_ms < v->at_ms ? s->end_ms : v->at_ms;
    *from = b != NULL ? b->time_ms : s->start_ms;
}

static double span_seconds(uint64_t from, uint64_t end)
{
    return end > from ? (double)(end - from) / 1000.0 : 0;
}

/* The top rows by sort as Location messages (*n of them, ranked in
 * heap); NULL when out of memory. */
static Ljmp__Location **top_locations(struct arena *a, const struct rows *rows,
                                      const struct session_base *b,
                                      uint32_t top, Ljmp__SortKey sort,
                                      double seconds, struct ranked **heap,
                                      size_t *n)
{
    Ljmp__Location **out;

    if ((*heap = arena_alloc(a, top * sizeof(**heap))) == NULL)
        return NULL;
    *n = select_top(rows, b, sort, *heap, top);
    if ((out = arena_alloc(a, (*n ? *n : 1) * sizeof(*out))) == NULL)
        return NULL;
    for (size_t i = 0; i < *n; i++)
        if ((out[i] = make_location(a, rows, b, (*heap)[i].id, seconds)) ==
            NULL)
            return NULL;
    return out;
}

/* The trends of the view's rows over o's growth window, into rows; -1
 * when out of memory.  The window ends at the view, or at the session's
 * end. */
static int take_trends(struct arena *a, struct session *s,
                       const struct session_view *v,
                       const struct snapshot_opts *o, struct rows *rows)
{
    const struct history *h = history_of(s);
    struct history_trend *t;

    rows->history_points = o->history_points;
    if (h == NULL || o->growth_window_s == 0)
        return 0;
    uint64_t end =
        s->end_ms != 0 && s->end_ms < v->at_ms ? s->end_ms : v->at_ms;
    long n = history_trends(h, end, (uint64_t)o->growth_window_s * 1000,
                            v->groups.group_of, v->groups.nlocs,
                            o->history_points, &t);
    if (n < 0)
        return -1;
    /* In the arena, which the snapshot's messages live in too. */
    struct history_trend *copy = arena_alloc(a, (n ? n : 1) * sizeof(*copy));
    if (copy != NULL && n > 0)
        memcpy(copy, t, (size_t)n * sizeof(*copy));
    free(t);
    rows->trends = copy;
    rows->ntrends = n;
    return copy != NULL ? 0 : -1;
}

static Ljmp__SessionSnapshot *make_session(struct arena *a, struct session *s,
                                           const struct snapshot_opts *o,
                                           uint32_t top,
                                           const struct session_base *b)
{
    const struct session_view *v = view_of(s, o->by_trace);
    Ljmp__SessionSnapshot *ss = arena_alloc(a, sizeof(*ss));
    struct rows rows = {v->groups.v, v->rows, v->nrows, NULL, 0, 0, 0};
    uint64_t from, end;
    struct ranked *heap;
    size_t n;

    if (ss == NULL)
        return NULL;
    view_span(s, b, o->by_trace, &from, &end);
    double seconds = span_seconds(from, end);
    ljmp__session_snapshot__init(ss);
    if ((ss->info = snapshot_info(a, s)) == NULL ||
        (ss->totals = make_totals(a, &v->totals, v->stream_bytes, v->nlocs,
                                  v->memory_bytes)) == NULL ||
        (ss->delta =
             make_delta(a, &v->totals, v->stream_bytes, b ? &b->totals : NULL,
                        b ? b->stream_bytes : 0)) == NULL)
        return NULL;
    ss->has_alloc_bytes_per_s = ss->has_events_per_s = 1;
    ss->alloc_bytes_per_s = per_second(ss->delta->alloc_bytes, seconds);
    ss->events_per_s = per_second(ljmp_wire_totals_events(ss->delta), seconds);
    if (top == 0)
        return ss;
    if (take_trends(a, s, v, o, &rows) != 0 ||
        (ss->top = top_locations(a, &rows, b, top, o->sort, seconds, &heap,
                                 &n)) == NULL)
        return NULL;
    ss->n_top = n;
    return ss;
}

/*
 * A session's part of a snapshot, from its view of this turn, as a packed
 * sessions field (*field, *len): kept in the view for the next snapshot
 * of the turn with the same options and base, or in the arena if the view
 * keeps enough.  -1 when out of memory.
 */
static int view_part(struct arena *a, struct session *s,
                     const struct snapshot_opts *o,
                     const struct session_base *b, const uint8_t **field,
                     size_t *len)
{
    struct session_view *v = view_of(s, o->by_trace);
    uint32_t top = o->top < SNAPSHOT_MAX_TOP ? o->top : SNAPSHOT_MAX_TOP;
    uint64_t base_view = b != NULL ? b->view_id : 0;

    for (unsigned i = 0; i < v->nparts; i++) {
        const struct view_part *p = &v->parts[i];
        if (p->top == top && p->sort == o->sort &&
            p->growth_window_s == o->growth_window_s &&
            p->history_points == o->history_points &&
            p->base_view == base_view) {
            *field = p->field;
            *len = p->len;
            return 0;
        }
    }
    /* Packed as a Snapshot of this one session: its bytes are the
     * sessions field, tag and length included, which protobuf-c writes. */
    struct arena tmp = {0};
    Ljmp__SessionSnapshot *ss = make_session(&tmp, s, o, top, b);
    Ljmp__Snapshot one = LJMP__SNAPSHOT__INIT;
    uint8_t *buf = NULL;
    size_t n = 0;
    int keep = v->nparts < VIEW_PARTS;
    if (ss != NULL) {
        one.n_sessions = 1;
        one.sessions = &ss;
        n = ljmp__snapshot__get_packed_size(&one);
        buf = keep ? malloc(n) : arena_alloc(a, n);
    }
    if (buf != NULL)
        ljmp__snapshot__pack(&one, buf);
    arena_free(&tmp);
    /* Snapshot has no field below 4, so the sessions field comes first. */
    if (buf != NULL && (n < 2 || buf[0] != SESSIONS_FIELD_TAG)) {
        log_error("a snapshot's session packed as %zu bytes from %#x", n,
                  buf[0]);
        if (keep)
            free(buf);
        buf = NULL;
    }
    if (buf == NULL)
        return -1;
    if (keep)
        v->parts[v->nparts++] = (struct view_part){
            top, o->sort, o->growth_window_s, o->history_points, base_view,
            buf, n};
    *field = buf;
    *len = n;
    return 0;
}

/*
 * Brings the views of the sessions m to this turn.  Sessions a
 * feed thread holds come last, in a second pass: by then their jobs (a
 * few hundred microseconds each) are usually done, and the loop waits at
 * most for the slowest, not for each in turn (a thread may have been
 * preempted mid-job).
 */
static int take_views(struct server *srv, struct session **m, size_t n,
                      uint64_t turn, uint64_t now, int by_trace)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            struct session *s = m[i];
            if (view_is_current(s, turn, by_trace))
                continue;
            if (pass == 0 && session_trylock(s) != 0)
                continue;
            if (pass == 1)
                session_lock(s);
            int rc = view_take(srv, s, turn, now, by_trace);
            session_unlock(s);
            if (rc != 0)
                return -1;
        }
    }
    return 0;
}

/* -- Merged views --------------------------------------------------------- */

/*
 * A merged view's rows: the members' rows of one name summed, and their
 * bases summed too, so that deltas and ranks come out as for one session.
 * Everything but the name index lives in the snapshot's arena; names are
 * the members' views', which outlive the snapshot's build.
 */
struct merge {
    struct rows rows;
    struct lm_group *g;
    struct loc_base *base;
    struct lm_totals totals, base_totals;
    uint64_t stream_bytes, base_stream, memory_bytes, from, end;
    struct lm_hindex index; /* a name's hash -> its row */
    uint32_t **row_of;      /* per member, per its row: the merged row */
    int based;              /* some member had a base */
};

/* The merged row named name, made if new; LM_NONE when out of memory. */
static uint32_t merge_row(struct merge *mg, const char *name)
{
    uint64_t h = lm_hash_bytes(name, strlen(name));
    uint32_t slot, r;

    for (r = lm_hindex_first(&mg->index, h, &slot); r != LM_NONE;
         r = lm_hindex_next(&mg->index, h, &slot))
        if (strcmp(mg->g[r].name, name) == 0)
            return r;
    r = mg->rows.n;
    if (lm_hindex_insert(&mg->index, h, r) != 0)
        return LM_NONE;
    mg->g[r].name = (char *)name;
    mg->rows.n++;
    return r;
}

static void add_base(struct loc_base *to, const struct loc_base *b)
{
    to->alloc_events += b->alloc_events;
    to->alloc_bytes += b->alloc_bytes;
    to->realloc_events += b->realloc_events;
    to->free_events += b->free_events;
    to->free_bytes += b->free_bytes;
}

/* Adds member k's view (and its base, if any) to mg: 0, or -1 out of
 * memory. */
static int merge_member(struct arena *a, struct merge *mg, size_t k,
                        struct session *s, const struct session_base *b,
                        int by_trace)
{
    const struct session_view *v = view_of(s, by_trace);
    uint64_t from, end;

    if (mg->row_of != NULL &&
        (mg->row_of[k] = arena_alloc(a, (v->nrows ? v->nrows : 1) *
                                            sizeof(uint32_t))) == NULL)
        return -1;
    for (uint32_t id = 0; id < v->nrows; id++) {
        uint32_t r = LM_NONE;
        if (v->groups.v[id].nlocs != 0) {
            if ((r = merge_row(mg, v->groups.v[id].name)) == LM_NONE)
                return -1;
            mg->g[r].nlocs += v->groups.v[id].nlocs;
            lm_counters_add(&mg->rows.c[r], &v->rows[id]);
            if (b != NULL && id < b->nlocs)
                add_base(&mg->base[r], &b->locs[id]);
        }
        if (mg->row_of != NULL)
            mg->row_of[k][id] = r;
    }
    lm_totals_add(&mg->totals, &v->totals);
    mg->stream_bytes += v->stream_bytes;
    mg->memory_bytes += v->memory_bytes;
    if (b != NULL) {
        lm_totals_add(&mg->base_totals, &b->totals);
        mg->base_stream += b->stream_bytes;
        mg->based = 1;
    }
    view_span(s, b, by_trace, &from, &end);
    if (k == 0 || from < mg->from)
        mg->from = from;
    if (end > mg->end)
        mg->end = end;
    return 0;
}

/* What member s holds and did of its row id. */
static Ljmp__ProcessShare *make_share(struct arena *a, struct session *s,
                                      const struct session_base *b, uint32_t id,
                                      int by_trace)
{
    const struct session_view *v = view_of(s, by_trace);
    const struct lm_counters *c = &v->rows[id];
    struct loc_base now = row_now(c), d = row_delta(&now, b, id);
    Ljmp__ProcessShare *sh = arena_alloc(a, sizeof(*sh));
    uint64_t from, end;

    if (sh == NULL)
        return NULL;
    view_span(s, b, by_trace, &from, &end);
    ljmp__process_share__init(sh);
    sh->has_session_id = sh->has_pid = sh->has_live_bytes = 1;
    sh->has_live_blocks = sh->has_alloc_bytes = sh->has_alloc_events = 1;
    sh->has_free_events = sh->has_alloc_bytes_per_s = 1;
    sh->session_id = s->id;
    sh->pid = (uint32_t)s->pid;
    sh->live_bytes = c->live_bytes;
    sh->live_blocks = c->live_blocks;
    sh->alloc_bytes = now.alloc_bytes;
    sh->alloc_events = c->alloc_events;
    sh->free_events = c->free_events;
    sh->alloc_bytes_per_s = per_second(d.alloc_bytes, span_seconds(from, end));
    return sh;
}

static int cmp_share_desc(const void *x, const void *y)
{
    const Ljmp__ProcessShare *a = *(Ljmp__ProcessShare *const *)x;
    const Ljmp__ProcessShare *b = *(Ljmp__ProcessShare *const *)y;

    if (a->live_bytes != b->live_bytes)
        return a->live_bytes < b->live_bytes ? 1 : -1;
    return a->alloc_bytes < b->alloc_bytes ? 1
                                           : a->alloc_bytes > b->alloc_bytes;
}

/* Each top location's shares, one per member that has its name, most
 * held first: 0, or -1 out of memory. */
static int add_shares(struct arena *a, const struct merge *mg,
                      struct session **m, size_t nm,
                      const struct snapshot_bases *bases, Ljmp__Location **top,
                      const struct ranked *heap, size_t ntop, int by_trace)
{
    int32_t *slot =
        arena_alloc(a, (mg->rows.n ? mg->rows.n : 1) * sizeof(*slot));

    if (slot == NULL)
        return -1;
    memset(slot, 0xff, (mg->rows.n ? mg->rows.n : 1) * sizeof(*slot));
    for (size_t i = 0; i < ntop; i++) {
        slot[heap[i].id] = (int32_t)i;
        if ((top[i]->by_process =
                 arena_alloc(a, nm * sizeof(*top[i]->by_process))) == NULL)
            return -1;
    }
    for (size_t k = 0; k < nm; k++) {
        const struct session_view *v = view_of(m[k], by_trace);
        const struct session_base *b =
            bases ? find_base(bases, m[k]->id) : NULL;
        for (uint32_t id = 0; id < v->nrows; id++) {
            uint32_t r = mg->row_of[k][id];
            if (r == LM_NONE || slot[r] < 0)
                continue;
            Ljmp__Location *l = top[slot[r]];
            if ((l->by_process[l->n_by_process++] =
                     make_share(a, m[k], b, id, by_trace)) == NULL)
                return -1;
        }
    }
    for (size_t i = 0; i < ntop; i++)
        qsort(top[i]->by_process, top[i]->n_by_process,
              sizeof(*top[i]->by_process), cmp_share_desc);
    return 0;
}

/* The merged view of the members m; NULL when out of memory. */
static Ljmp__MergedView *make_merged(struct arena *a, struct session **m,
                                     size_t nm,
                                     const struct snapshot_bases *bases,
                                     const struct snapshot_opts *o)
{
    Ljmp__MergedView *mv = arena_alloc(a, sizeof(*mv));
    struct merge mg = {0};
    size_t cap = 0, ntop = 0;
    struct ranked *heap;
    int ok = 0;

    for (size_t k = 0; k < nm; k++)
        cap += view_of(m[k], o->by_trace)->nrows;
    if (mv == NULL || lm_hindex_init(&mg.index) != 0)
        return NULL;
    mg.rows.merged = 1;
    mg.rows.g = mg.g = arena_alloc(a, (cap ? cap : 1) * sizeof(*mg.g));
    mg.rows.c = arena_alloc(a, (cap ? cap : 1) * sizeof(*mg.rows.c));
    mg.base = arena_alloc(a, (cap ? cap : 1) * sizeof(*mg.base));
    if (o->by_process)
        mg.row_of = arena_alloc(a, (nm ? nm : 1) * sizeof(*mg.row_of));
    if (mg.g == NULL || mg.rows.c == NULL || mg.base == NULL ||
        (o->by_process && mg.row_of == NULL))
        goto out;
    for (size_t k = 0; k < nm; k++)
        if (merge_member(a, &mg, k, m[k],
                         bases ? find_base(bases, m[k]->id) : NULL,
                         o->by_trace) != 0)
            goto out;
    ljmp__merged_view__init(mv);
    struct session_base mb = {.locs = mg.base, .nlocs = mg.rows.n};
    const struct session_base *b = mg.based ? &mb : NULL;
    double seconds = span_seconds(mg.from, mg.end);
    if ((mv->totals = make_totals(a, &mg.totals, mg.stream_bytes, mg.rows.n,
                                  mg.memory_bytes)) == NULL ||
        (mv->delta = make_delta(a, &mg.totals, mg.stream_bytes,
                                b ? &mg.base_totals : NULL, mg.base_stream)) ==
            NULL)
        goto out;
    mv->has_alloc_bytes_per_s = mv->has_events_per_s = mv->has_members = 1;
    mv->alloc_bytes_per_s = per_second(mv->delta->alloc_bytes, seconds);
    mv->events_per_s = per_second(ljmp_wire_totals_events(mv->delta), seconds);
    mv->members = (uint32_t)nm;
    if (o->top > 0) {
        uint32_t top = o->top < SNAPSHOT_MAX_TOP ? o->top : SNAPSHOT_MAX_TOP;
        if ((mv->top = top_locations(a, &mg.rows, b, top, o->sort, seconds,
                                     &heap, &ntop)) == NULL)
            goto out;
        mv->n_top = ntop;
        if (o->by_process && add_shares(a, &mg, m, nm, bases, mv->top, heap,
                                        ntop, o->by_trace) != 0)
            goto out;
    }
    ok = 1;
out:
    lm_hindex_free(&mg.index);
    return ok ? mv : NULL;
}

/* Whether a snapshot for o shows s: a view that names no process leaves
 * brief sessions out (session_brief), but for a subscriber who saw the
 * session before its end (its base). */
static int shows(struct session *s, const struct snapshot_opts *o,
                 const struct snapshot_bases *bases)
{
    if (!snapshot_matches(s, o))
        return 0;
    return o->session_id != 0 || (o->pid != 0 && !o->tree) ||
           (bases != NULL && find_base(bases, s->id) != NULL) ||
           !session_brief(s);
}

long snapshot_members(struct arena *a, struct server *srv,
                      const struct snapshot_opts *opts,
                      const struct snapshot_bases *bases, struct session ***out)
{
    struct session *s, **m;
    size_t n = 0, streaming = 0;

    TAILQ_FOREACH(s, &srv->sessions, link)
    n++;
    if ((*out = m = arena_alloc(a, (n ? n : 1) * sizeof(*m))) == NULL)
        return -1;
    n = 0;
    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!shows(s, opts, bases))
            continue;
        m[n++] = s;
        streaming += s->state == LJMP__SESSION_STATE__STREAMING;
    }
    if (!opts->merge || streaming == 0)
        return (long)n;
    /* A merged view of streaming processes only. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i]->state == LJMP__SESSION_STATE__STREAMING)
            m[kept++] = m[i];
    return (long)kept;
}

Ljmp__Snapshot *snapshot_build(struct arena *a, struct server *srv,
                               const struct snapshot_opts *opts,
                               const struct snapshot_bases *bases, uint64_t now)
{
    Ljmp__Snapshot *snap = arena_alloc(a, sizeof(*snap));
    uint64_t turn = srv->snapshots->turn, oldest = now;
    struct snapshot_opts part = *opts;
    struct session **m;
    long n;

    if (snap == NULL)
        return NULL;
    ljmp__snapshot__init(snap);
    if ((n = snapshot_members(a, srv, opts, bases, &m)) < 0 ||
        take_views(srv, m, (size_t)n, turn, now, opts->by_trace) != 0)
        return NULL;
    /* A merged view's members come with their totals only. */
    if (opts->merge)
        part.top = 0;
    /* The parts go out as sessions fields that protobuf-c does not know
     * it has: unknown fields, which it packs as they are. */
    ProtobufCMessageUnknownField *parts =
        arena_alloc(a, (n ? (size_t)n : 1) * sizeof(*parts));
    if (parts == NULL)
        return NULL;
    for (long i = 0; i < n; i++) {
        const struct session_base *b =
            bases ? find_base(bases, m[i]->id) : NULL;
        const uint8_t *field;
        size_t len;
        if (view_part(a, m[i], &part, b, &field, &len) != 0)
            return NULL;
        parts[i].tag = 4;
        parts[i].wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
        parts[i].data = (uint8_t *)field + 1;
        parts[i].len = len - 1;
        uint64_t at = view_of(m[i], opts->by_trace)->at_ms;
        if (at < oldest)
            oldest = at;
    }
    snap->base.n_unknown_fields = (unsigned)n;
    snap->base.unknown_fields = parts;
    if (opts->merge &&
        (snap->merged = make_merged(a, m, (size_t)n, bases, opts)) == NULL)
        return NULL;
    snap->has_time_ms = 1;
    snap->time_ms = clock_wall_ms(oldest);
    if ((snap->daemon = snapshot_daemon(a, srv, opts->uid)) == NULL)
        return NULL;
    return snap;
}

int snapshot_advance_bases(struct server *srv, const struct snapshot_opts *opts,
                           struct snapshot_bases *bases)
{
    struct session *s;

    for (size_t i = 0; i < bases->n; i++)
        bases->v[i].seen = 0;
    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!snapshot_matches(s, opts) ||
            !view_is_current(s, srv->snapshots->turn, opts->by_trace))
            continue;
        if (update_base(bases, find_base(bases, s->id), s, opts->by_trace) != 0)
            return -1;
    }
    /* Forget sessions that are gone. */
    for (size_t i = 0; i < bases->n;) {
        if (bases->v[i].seen) {
            i++;
            continue;
        }
        free(bases->v[i].locs);
        bases->v[i] = bases->v[--bases->n];
    }
    return 0;
}
