/* The snapshot builder without sockets: sessions made by hand, fed an
 * encoded stream, built into snapshots that are packed and read back. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "history.h"
#include "lm_encoder.h"
#include "lm_profile.h"
#include "recorder.h"
#include "retention.h"
#include "snapshot.h"
#include "test_units.h"

static struct server srv;

/* Users that are not the one running the test, who sees every session. */
#define USER_A ((uid_t)-20)
#define USER_B ((uid_t)-30)

/* A streaming session of pid and uid, as session_accept makes one. */
static struct session *session_new(uint64_t id, pid_t pid, uid_t uid)
{
    struct session *s = calloc(1, sizeof(*s));
    struct lm_limits limits = {1 << 16, (1 << 16) + 64};
    struct lm_state_limits state_limits = {1 << 16, 0};

    CU_ASSERT_FATAL(s != NULL);
    s->srv = &srv;
    s->id = id;
    s->pid = pid;
    s->uid = uid;
    s->fd = s->pipe_fd = -1;
    s->phase = SESSION_STREAM;
    s->state = LJMP__SESSION_STATE__STREAMING;
    s->cmdline = strdup("luajit app.lua");
    CU_ASSERT_FATAL(lm_profile_init(&s->prof, &limits, &state_limits) == 0);
    pthread_mutex_init(&s->mu, NULL);
    TAILQ_INSERT_TAIL(&srv.sessions, s, link);
    return s;
}

static void session_gone(struct session *s)
{
    TAILQ_REMOVE(&srv.sessions, s, link);
    snapshot_observer.freed(s, NULL);
    lm_profile_free(&s->prof);
    pthread_mutex_destroy(&s->mu);
    free(s->cmdline);
    free(s->cgroup);
    free(s);
}

static void feed(struct session *s, struct lm_buf *b)
{
    size_t used = 0;

    CU_ASSERT_FATAL(!b->oom);
    CU_ASSERT_EQUAL(lm_profile_feed(&s->prof, b->data, b->len, &used),
                    LM_NEED_MORE);
    CU_ASSERT_EQUAL(used, b->len);
    s->stream_bytes += used;
    lm_buf_free(b);
}

static struct lm_loc_ref line(uint64_t n)
{
    return (struct lm_loc_ref){
        .source = LM_SRC_LFUNC, .addr = 0x100, .line = n};
}

/* The stream's start: one Lua function, @app.lua defined at line 1. */
static void stream_start(struct session *s)
{
    struct lm_buf b = {0};

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@app.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    feed(s, &b);
}

/* n blocks of size bytes allocated (or freed) at line l, at addresses
 * from base on. */
static void blocks(struct session *s, int freed, uint64_t l, unsigned n,
                   uint64_t size, uint64_t base)
{
    struct lm_buf b = {0};
    struct lm_loc_ref loc = line(l);

    for (unsigned i = 0; i < n; i++)
        (freed ? lm_enc_free : lm_enc_alloc)(&b, LM_REV_R3, &loc,
                                             base + i * 0x1000, size);
    feed(s, &b);
}

#define allocs(s, l, n, size, base) blocks(s, 0, l, n, size, base)
#define frees(s, l, n, size, base)  blocks(s, 1, l, n, size, base)

/* Builds a snapshot in a turn of its own, packs it and reads it back, as
 * a subscriber would. */
static Ljmp__Snapshot *take(struct snapshot_opts *o,
                            struct snapshot_bases *bases)
{
    struct arena a = {0};
    int opened = snapshot_turn_begin(&srv);
    Ljmp__Snapshot *snap = snapshot_build(&a, &srv, o, bases, 1000);

    CU_ASSERT_FATAL(snap != NULL);
    size_t n = protobuf_c_message_get_packed_size(&snap->base);
    uint8_t *buf = malloc(n ? n : 1);
    CU_ASSERT_FATAL(buf != NULL);
    protobuf_c_message_pack(&snap->base, buf);
    if (bases != NULL)
        CU_ASSERT_EQUAL(snapshot_advance_bases(&srv, o, bases), 0);
    arena_free(&a);
    if (opened)
        snapshot_turn_end(&srv);
    Ljmp__Snapshot *back = ljmp__snapshot__unpack(NULL, n, buf);
    free(buf);
    CU_ASSERT_FATAL(back != NULL);
    return back;
}

/* A server with no socket: its sessions, and a recorder with none. */
static void setup(void)
{
    memset(&srv, 0, sizeof(srv));
    TAILQ_INIT(&srv.sessions);
    srv.base = event_base_new();
    CU_ASSERT_FATAL(srv.base != NULL);
    CU_ASSERT_FATAL(event_base_priority_init(srv.base, PRIO_LEVELS) == 0);
    CU_ASSERT_FATAL(recorder_start(&srv) == 0);
    CU_ASSERT_FATAL(snapshot_start(&srv) == 0);
    /* Views are charged to their sessions' budgets. */
    srv.cfg.session_memory = srv.cfg.user_memory = (size_t)256 << 20;
    srv.cfg.total_memory = (size_t)1 << 30;
    /* Who keeps state in sessions that snapshots read. */
    CU_ASSERT_FATAL(session_observe(&srv, &recorder_observer) == 0);
    CU_ASSERT_FATAL(session_observe(&srv, &snapshot_observer) == 0);
    CU_ASSERT_FATAL(session_observe(&srv, &history_observer) == 0);
}

static void teardown(void)
{
    snapshot_free(&srv);
    recorder_free(&srv);
    budget_free(&srv);
    event_base_free(srv.base);
}

/* The top rows by live bytes, with their counters and names; sessions
 * newest last; a user sees only theirs. */
static void test_top_rows(void)
{
    setup();
    struct session *a = session_new(1, 100, USER_A);
    struct session *b = session_new(2, 200, USER_B);
    stream_start(a);
    stream_start(b);
    allocs(a, 5, 3, 100, 0x10000);   /* 300 live at :5 */
    allocs(a, 7, 2, 1000, 0x100000); /* 2000 allocated at :7 */
    frees(a, 9, 1, 1000, 0x100000);  /* 1000 of it freed at :9 */
    allocs(b, 3, 1, 50, 0x10000);

    struct snapshot_opts o = {.top = 2,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES};
    Ljmp__Snapshot *snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 2);
    CU_ASSERT_EQUAL(snap->sessions[0]->info->id, 1);
    CU_ASSERT_EQUAL(snap->sessions[1]->info->id, 2);
    Ljmp__SessionSnapshot *sa = snap->sessions[0];
    CU_ASSERT_EQUAL(sa->totals->alloc_events, 5);
    CU_ASSERT_EQUAL(sa->totals->free_events, 1);
    CU_ASSERT_EQUAL_FATAL(sa->n_top, 2);
    CU_ASSERT_STRING_EQUAL(sa->top[0]->name, "@app.lua:7");
    CU_ASSERT_EQUAL(sa->top[0]->live_bytes, 1000);
    CU_ASSERT_EQUAL(sa->top[0]->live_blocks, 1);
    CU_ASSERT_EQUAL(sa->top[0]->alloc_bytes, 2000);
    CU_ASSERT_STRING_EQUAL(sa->top[1]->name, "@app.lua:5");
    CU_ASSERT_EQUAL(sa->top[1]->live_bytes, 300);
    CU_ASSERT_EQUAL(sa->top[1]->alloc_events, 3);
    ljmp__snapshot__free_unpacked(snap, NULL);

    /* By allocated bytes, top 1; then what USER_B may see. */
    o.top = 1;
    o.sort = LJMP__SORT_KEY__SORT_ALLOC_BYTES;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->sessions[0]->n_top, 1);
    CU_ASSERT_STRING_EQUAL(snap->sessions[0]->top[0]->name, "@app.lua:7");
    ljmp__snapshot__free_unpacked(snap, NULL);
    o.uid = USER_B;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 1);
    CU_ASSERT_EQUAL(snap->sessions[0]->info->pid, 200);
    ljmp__snapshot__free_unpacked(snap, NULL);
    /* A selector by pid. */
    o.uid = 0;
    o.pid = 100;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 1);
    CU_ASSERT_EQUAL(snap->sessions[0]->info->id, 1);
    ljmp__snapshot__free_unpacked(snap, NULL);
    session_gone(a);
    session_gone(b);
    teardown();
}

/* The index of the location at line l in s's state. */
static uint32_t loc_at_line(const struct session *s, uint64_t l)
{
    for (uint32_t i = 0; i < s->prof.state.nlocs; i++)
        if (s->prof.state.locs[i].source == LM_SRC_LFUNC &&
            s->prof.state.locs[i].line == l)
            return i;
    CU_FAIL_FATAL("no location at that line");
    return 0;
}

/*
 * Rows by growth, from the session's history: a steady rise of kept
 * blocks (:5) first, a slower one (:9) next, a saw of garbage (:7) after
 * them though its slope is the steepest, and a row the history does not
 * track last; each tracked row with its growth and live history.  FREED
 * counts the blocks made at a row that are gone, wherever they were
 * freed; free events rank by where they happened.
 */
static void test_rows_by_growth(void)
{
    setup();
    struct session *a = session_new(1, 100, USER_A);
    stream_start(a);
    allocs(a, 5, 3, 100, 0x10000);
    allocs(a, 7, 2, 1000, 0x100000);
    frees(a, 9, 1, 1000, 0x100000); /* one of :7's blocks, freed at :9 */
    allocs(a, 9, 1, 10, 0x200000);
    allocs(a, 11, 1, 10000, 0x300000); /* never tracked */
    uint32_t l5 = loc_at_line(a, 5), l7 = loc_at_line(a, 7),
             l9 = loc_at_line(a, 9);
    struct history_limits lim = {3600000, 1u << 20, 8};
    struct history *h = history_new(&lim);
    CU_ASSERT_FATAL(h != NULL);
    *session_slot(a, &history_observer) = h;
    for (uint64_t k = 1; k <= 10; k++) {
        /* :5 keeps every block it makes, 100 B each, a tenth of a second
         * apart; :9 keeps its blocks at 10 B each; :7 rises fast as it
         * saws, making 100 blocks a tick and keeping them for a tick,
         * every other one. */
        struct history_site v[3] = {
            {l5, 100 * k, k, k, 0},
            {l7, 5000 * k + k % 2 * 20000, k % 2 * 100, 100 * k, 0},
            {l9, 10 * k, k, k, 0}};
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                if (v[j].loc < v[i].loc) {
                    struct history_site x = v[i];
                    v[i] = v[j];
                    v[j] = x;
                }
        CU_ASSERT_EQUAL(history_add_frame(h, 100 * k, v, 3), 0);
    }
    struct snapshot_opts o = {.top = 4,
                              .sort = LJMP__SORT_KEY__SORT_GROWTH,
                              .growth_window_s = 10,
                              .history_points = 4};
    Ljmp__Snapshot *snap = take(&o, NULL);
    Ljmp__SessionSnapshot *ss = snap->sessions[0];
    CU_ASSERT_EQUAL_FATAL(ss->n_top, 4);
    CU_ASSERT_STRING_EQUAL(ss->top[0]->name, "@app.lua:5");
    CU_ASSERT_STRING_EQUAL(ss->top[1]->name, "@app.lua:9");
    CU_ASSERT_STRING_EQUAL(ss->top[2]->name, "@app.lua:7");
    CU_ASSERT_STRING_EQUAL(ss->top[3]->name, "@app.lua:11");
    /* 100 B a tenth of a second: 60000 B a minute. */
    CU_ASSERT(ss->top[0]->has_growth_bytes_per_min);
    CU_ASSERT_DOUBLE_EQUAL(ss->top[0]->growth_bytes_per_min, 60000, 1e-6);
    CU_ASSERT_EQUAL(ss->top[0]->growth_points, 10);
    CU_ASSERT_EQUAL_FATAL(ss->top[0]->n_live_history, 4);
    CU_ASSERT_EQUAL(ss->top[0]->live_history[0], 100);
    CU_ASSERT_EQUAL(ss->top[0]->live_history[3], 1000);
    CU_ASSERT(ss->top[2]->growth_bytes_per_min >
              ss->top[0]->growth_bytes_per_min);
    CU_ASSERT_FALSE(ss->top[3]->has_growth_bytes_per_min);
    CU_ASSERT_EQUAL(ss->top[3]->n_live_history, 0);
    /* :7 made 2 blocks and holds 1; :9's free event was of :7's block. */
    CU_ASSERT_EQUAL(ss->top[2]->freed_blocks, 1);
    CU_ASSERT_EQUAL(ss->top[1]->freed_blocks, 0);
    CU_ASSERT_EQUAL(ss->top[1]->free_events, 1);
    ljmp__snapshot__free_unpacked(snap, NULL);
    /* Free events rank where they happened; no window, no growth. */
    o.sort = LJMP__SORT_KEY__SORT_FREE_EVENTS;
    o.growth_window_s = 0;
    snap = take(&o, NULL);
    CU_ASSERT_STRING_EQUAL(snap->sessions[0]->top[0]->name, "@app.lua:9");
    CU_ASSERT_FALSE(snap->sessions[0]->top[0]->has_growth_bytes_per_min);
    ljmp__snapshot__free_unpacked(snap, NULL);
    history_free(h);
    *session_slot(a, &history_observer) = NULL;
    session_gone(a);
    teardown();
}

/*
 * Retention on a tick whose clock was read before a session ended in it
 * (its end is stamped a little later than the tick's now): the session is
 * kept, not taken for one ended ages ago; one past --retain goes.
 */
static void test_retention_of_a_session_ended_in_the_tick(void)
{
    setup();
    struct session *fresh = session_new(1, 100, USER_A);
    struct session *old = session_new(2, 100, USER_A);
    uint64_t now = 1000000;

    srv.cfg.retain_s = 600;
    srv.cfg.retain_count = 64;
    fresh->phase = old->phase = SESSION_ENDED;
    fresh->end_ms = now + 2;
    old->end_ms = now - 601 * 1000;
    srv.nended = 2;
    retention_evict(&srv, now);
    CU_ASSERT_EQUAL(srv.nended, 1);
    CU_ASSERT_PTR_EQUAL(TAILQ_FIRST(&srv.sessions), fresh);
    CU_ASSERT_PTR_NULL(TAILQ_NEXT(fresh, link));
    session_gone(fresh);
    teardown();
}

/* A trace's allocations at :5 (trace 3 started at :4) and the
 * interpreter's: one row by default, the trace's row apart by trace, in
 * the same turn, each with its own deltas for a subscriber. */
static void test_rows_by_trace(void)
{
    setup();
    struct session *a = session_new(1, 100, USER_A);
    struct lm_buf b = {0};
    struct lm_loc_ref at5 = line(5);

    stream_start(a);
    lm_enc_event_trace(&b, LM_REV_R3, 3, 0, 0x100, 4);
    lm_enc_trace_mark(&b, 3);
    for (unsigned i = 0; i < 3; i++)
        lm_enc_alloc(&b, LM_REV_R3, &at5, 0x10000 + i * 0x1000, 100);
    lm_enc_trace_mark(&b, 0);
    lm_enc_alloc(&b, LM_REV_R3, &at5, 0x20000, 10);
    feed(a, &b);

    struct snapshot_opts o = {.top = 5,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES};
    struct snapshot_opts t = o;
    t.by_trace = 1;
    struct snapshot_bases bases = {0};
    int opened = snapshot_turn_begin(&srv);
    Ljmp__Snapshot *plain = take(&o, NULL), *by = take(&t, &bases);
    if (opened)
        snapshot_turn_end(&srv);
    CU_ASSERT_EQUAL_FATAL(plain->sessions[0]->n_top, 1);
    CU_ASSERT_STRING_EQUAL(plain->sessions[0]->top[0]->name, "@app.lua:5");
    CU_ASSERT_EQUAL(plain->sessions[0]->top[0]->live_bytes, 310);
    Ljmp__SessionSnapshot *sb = by->sessions[0];
    CU_ASSERT_EQUAL_FATAL(sb->n_top, 2);
    CU_ASSERT_STRING_EQUAL(sb->top[0]->name, "TRACE [3] started at @app.lua:4");
    CU_ASSERT_EQUAL(sb->top[0]->live_bytes, 300);
    CU_ASSERT_EQUAL(sb->top[0]->alloc_events, 3);
    CU_ASSERT_STRING_EQUAL(sb->top[1]->name, "@app.lua:5");
    CU_ASSERT_EQUAL(sb->top[1]->live_bytes, 10);
    ljmp__snapshot__free_unpacked(plain, NULL);
    ljmp__snapshot__free_unpacked(by, NULL);

    /* The next snapshot by trace: deltas from the last one's rows. */
    lm_enc_trace_mark(&b, 3);
    lm_enc_alloc(&b, LM_REV_R3, &at5, 0x30000, 100);
    feed(a, &b);
    by = take(&t, &bases);
    CU_ASSERT_EQUAL_FATAL(by->sessions[0]->n_top, 2);
    CU_ASSERT_EQUAL(by->sessions[0]->top[0]->live_bytes, 400);
    CU_ASSERT_EQUAL(by->sessions[0]->top[0]->alloc_events, 4);
    CU_ASSERT_EQUAL(by->sessions[0]->top[0]->delta_alloc_bytes, 100);
    ljmp__snapshot__free_unpacked(by, NULL);
    snapshot_bases_free(&bases);
    session_gone(a);
    teardown();
}

/* A subscriber's deltas run from what its previous snapshot showed. */
static void test_deltas_from_bases(void)
{
    struct snapshot_bases bases = {0};
    struct snapshot_opts o = {.top = 5,
                              .sort = LJMP__SORT_KEY__SORT_ALLOC_BYTES};

    setup();
    struct session *s = session_new(1, 100, 0);
    stream_start(s);
    allocs(s, 5, 4, 10, 0x10000);
    Ljmp__Snapshot *snap = take(&o, &bases);
    Ljmp__SessionSnapshot *ss = snap->sessions[0];
    /* Without a base: since the session began. */
    CU_ASSERT_EQUAL(ss->delta->alloc_events, 4);
    CU_ASSERT_EQUAL(ss->top[0]->delta_alloc_events, 4);
    ljmp__snapshot__free_unpacked(snap, NULL);

    allocs(s, 5, 2, 10, 0x20000);
    allocs(s, 6, 1, 500, 0x30000);
    snap = take(&o, &bases);
    ss = snap->sessions[0];
    CU_ASSERT_EQUAL(ss->totals->alloc_events, 7);
    CU_ASSERT_EQUAL(ss->delta->alloc_events, 3);
    CU_ASSERT_EQUAL(ss->delta->alloc_bytes, 520);
    CU_ASSERT_EQUAL_FATAL(ss->n_top, 2);
    CU_ASSERT_STRING_EQUAL(ss->top[0]->name, "@app.lua:6");
    CU_ASSERT_EQUAL(ss->top[0]->delta_alloc_events, 1);
    CU_ASSERT_EQUAL(ss->top[1]->alloc_events, 6);
    CU_ASSERT_EQUAL(ss->top[1]->delta_alloc_events, 2);
    ljmp__snapshot__free_unpacked(snap, NULL);

    /* Nothing new: deltas of zero. */
    snap = take(&o, &bases);
    CU_ASSERT_EQUAL(snap->sessions[0]->delta->alloc_events, 0);
    CU_ASSERT_EQUAL(snap->sessions[0]->top[1]->delta_alloc_events, 0);
    ljmp__snapshot__free_unpacked(snap, NULL);
    snapshot_bases_free(&bases);
    session_gone(s);
    teardown();
}

/* Snapshots of one turn share each session's view: taken once, and what
 * is fed meanwhile shows in the next turn only. */
static void test_turn_shares_views(void)
{
    struct snapshot_opts o = {.top = 5,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES};

    setup();
    struct session *s = session_new(1, 100, 0);
    stream_start(s);
    allocs(s, 5, 1, 10, 0x10000);
    CU_ASSERT(snapshot_turn_begin(&srv));
    Ljmp__Snapshot *first = take(&o, NULL);
    uint64_t views = snapshot_views_taken(&srv);
    allocs(s, 5, 1, 10, 0x20000);
    Ljmp__Snapshot *second = take(&o, NULL);
    CU_ASSERT_EQUAL(snapshot_views_taken(&srv), views);
    CU_ASSERT_EQUAL(second->sessions[0]->totals->alloc_events, 1);
    snapshot_turn_end(&srv);
    Ljmp__Snapshot *third = take(&o, NULL);
    CU_ASSERT_EQUAL(snapshot_views_taken(&srv), views + 1);
    CU_ASSERT_EQUAL(third->sessions[0]->totals->alloc_events, 2);
    ljmp__snapshot__free_unpacked(first, NULL);
    ljmp__snapshot__free_unpacked(second, NULL);
    ljmp__snapshot__free_unpacked(third, NULL);
    session_gone(s);
    teardown();
}

/* A session of a process that stood under ancestors (nearest first) and
 * in cgroup when it connected. */
static struct session *member_new(uint64_t id, pid_t pid, const pid_t *up,
                                  unsigned nup, const char *cgroup)
{
    struct session *s = session_new(id, pid, 0);

    for (unsigned i = 0; i < nup; i++)
        s->ancestors[s->nancestors++] = up[i];
    s->cgroup = strdup(cgroup);
    stream_start(s);
    return s;
}

static const Ljmp__Location *merged_row(const Ljmp__Snapshot *snap,
                                        const char *name)
{
    for (size_t i = 0; i < snap->merged->n_top; i++)
        if (strcmp(snap->merged->top[i]->name, name) == 0)
            return snap->merged->top[i];
    return NULL;
}

/* A tree's merged view: its streaming members' rows of one name summed,
 * ranked, with each member's share; a member that has ended and a process
 * outside the tree are left out. */
static void test_merged_tree(void)
{
    const pid_t master[] = {100}, grand[] = {101, 100};
    struct snapshot_opts o = {.tree = 1,
                              .pid = 100,
                              .top = 2,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES,
                              .merge = 1,
                              .by_process = 1};

    setup();
    struct session *root = member_new(1, 100, NULL, 0, "/a.service");
    struct session *w1 = member_new(2, 101, master, 1, "/a.service");
    struct session *w2 = member_new(3, 102, grand, 2, "/a.service");
    struct session *other = member_new(4, 300, NULL, 0, "/b.service");
    struct session *gone = member_new(5, 103, master, 1, "/a.service");
    allocs(root, 5, 1, 100, 0x10000);
    allocs(w1, 5, 2, 1000, 0x10000);
    allocs(w2, 5, 3, 10, 0x10000);
    allocs(w2, 8, 1, 1500, 0x90000);
    allocs(w1, 9, 1, 1, 0x90000);
    allocs(other, 5, 1, 99999, 0x10000);
    allocs(gone, 8, 1, 99999, 0x10000);
    gone->state = LJMP__SESSION_STATE__COMPLETE;

    Ljmp__Snapshot *snap = take(&o, NULL);
    CU_ASSERT_FATAL(snap->merged != NULL);
    CU_ASSERT_EQUAL(snap->merged->members, 3);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 3);
    for (size_t i = 0; i < snap->n_sessions; i++) {
        CU_ASSERT_EQUAL(snap->sessions[i]->n_top, 0);
        CU_ASSERT_NOT_EQUAL(snap->sessions[i]->info->pid, 300);
        CU_ASSERT_NOT_EQUAL(snap->sessions[i]->info->pid, 103);
    }
    CU_ASSERT_EQUAL(snap->merged->totals->alloc_events, 8);
    CU_ASSERT_EQUAL(snap->merged->totals->live_bytes, 3631);
    CU_ASSERT_EQUAL(snap->merged->totals->locations, 3);
    /* :5 holds 100 + 2000 + 30 across three processes, :8 1500 in one;
     * :9 (1 byte) is not in the top 2. */
    CU_ASSERT_EQUAL_FATAL(snap->merged->n_top, 2);
    const Ljmp__Location *l5 = snap->merged->top[0];
    CU_ASSERT_STRING_EQUAL(l5->name, "@app.lua:5");
    CU_ASSERT_EQUAL(l5->live_bytes, 2130);
    CU_ASSERT_EQUAL(l5->live_blocks, 6);
    CU_ASSERT_EQUAL(l5->sites, 3);
    CU_ASSERT_EQUAL_FATAL(l5->n_by_process, 3);
    CU_ASSERT_EQUAL(l5->by_process[0]->pid, 101);
    CU_ASSERT_EQUAL(l5->by_process[0]->live_bytes, 2000);
    CU_ASSERT_EQUAL(l5->by_process[1]->pid, 100);
    CU_ASSERT_EQUAL(l5->by_process[2]->pid, 102);
    CU_ASSERT_EQUAL(l5->by_process[2]->alloc_events, 3);
    CU_ASSERT_STRING_EQUAL(snap->merged->top[1]->name, "@app.lua:8");
    CU_ASSERT_EQUAL_FATAL(snap->merged->top[1]->n_by_process, 1);
    CU_ASSERT_EQUAL(snap->merged->top[1]->by_process[0]->pid, 102);
    ljmp__snapshot__free_unpacked(snap, NULL);

    /* Once none streams, the tree's last sessions are its members. */
    root->state = w1->state = w2->state = LJMP__SESSION_STATE__TRUNCATED;
    o.top = 5;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL(snap->merged->members, 4);
    CU_ASSERT_EQUAL(merged_row(snap, "@app.lua:8")->live_bytes, 101499);
    ljmp__snapshot__free_unpacked(snap, NULL);

    /* A root that started after a member's process is another process
     * that has the same pid: that member is not in its tree. */
    root->process_start_ms = 5000;
    w1->process_start_ms = 4000;
    w2->process_start_ms = gone->process_start_ms = 6000;
    o.tree_start_ms = 5000;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL(snap->merged->members, 3);
    CU_ASSERT_PTR_NULL(merged_row(snap, "@app.lua:9"));
    ljmp__snapshot__free_unpacked(snap, NULL);
    session_gone(root);
    session_gone(w1);
    session_gone(w2);
    session_gone(other);
    session_gone(gone);
    teardown();
}

/* A unit's merged view, its deltas running from a subscriber's bases like
 * a session's. */
static void test_merged_unit_deltas(void)
{
    struct snapshot_bases bases = {0};
    struct snapshot_opts o = {
        .top = 5, .merge = 1, .sort = LJMP__SORT_KEY__SORT_ALLOC_BYTES};

    snprintf(o.unit, sizeof(o.unit), "web.service");
    setup();
    struct session *a =
        member_new(1, 100, NULL, 0, "/system.slice/web.service");
    struct session *b =
        member_new(2, 200, NULL, 0, "/system.slice/web.service/worker");
    struct session *c =
        member_new(3, 300, NULL, 0, "/system.slice/web.service2");
    allocs(a, 5, 2, 10, 0x10000);
    allocs(b, 5, 1, 10, 0x10000);
    allocs(c, 5, 1, 10, 0x10000);
    Ljmp__Snapshot *snap = take(&o, &bases);
    CU_ASSERT_EQUAL(snap->merged->members, 2);
    CU_ASSERT_EQUAL(snap->merged->delta->alloc_events, 3);
    CU_ASSERT_EQUAL(snap->merged->top[0]->delta_alloc_events, 3);
    CU_ASSERT_EQUAL(snap->merged->top[0]->n_by_process, 0);
    ljmp__snapshot__free_unpacked(snap, NULL);

    allocs(a, 5, 1, 10, 0x20000);
    allocs(b, 6, 4, 10, 0x20000);
    snap = take(&o, &bases);
    CU_ASSERT_EQUAL(snap->merged->delta->alloc_events, 5);
    CU_ASSERT_EQUAL(snap->merged->delta->alloc_bytes, 50);
    CU_ASSERT_EQUAL(merged_row(snap, "@app.lua:5")->alloc_events, 4);
    CU_ASSERT_EQUAL(merged_row(snap, "@app.lua:5")->delta_alloc_events, 1);
    CU_ASSERT_EQUAL(merged_row(snap, "@app.lua:6")->delta_alloc_events, 4);
    ljmp__snapshot__free_unpacked(snap, NULL);
    snapshot_bases_free(&bases);
    session_gone(a);
    session_gone(b);
    session_gone(c);
    teardown();
}

/* A brief session (a helper that streamed a moment and exited) is left
 * out of views that name no process, but for a subscriber that saw it
 * streaming; its pid still selects it. */
static void test_brief_left_out(void)
{
    struct snapshot_bases bases = {0};
    struct snapshot_opts o = {.top = 1,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES};

    setup();
    srv.cfg.brief_ms = 2000;
    /* No process has this pid; its session lasted 100 ms. */
    struct session *helper = session_new(1, 0x7ffffff0, 0);
    struct session *server = session_new(2, 100, 0);
    stream_start(helper);
    stream_start(server);
    helper->process_start_ms = 1;
    helper->start_ms = 1000;
    Ljmp__Snapshot *snap = take(&o, &bases); /* sees both streaming */
    CU_ASSERT_EQUAL(snap->n_sessions, 2);
    ljmp__snapshot__free_unpacked(snap, NULL);
    helper->phase = SESSION_ENDED;
    helper->state = LJMP__SESSION_STATE__COMPLETE;
    helper->end_ms = 1100;
    snap = take(&o, &bases);
    CU_ASSERT_EQUAL(snap->n_sessions, 2); /* watched it: sees its end */
    ljmp__snapshot__free_unpacked(snap, NULL);
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 1);
    CU_ASSERT_EQUAL(snap->sessions[0]->info->id, 2);
    ljmp__snapshot__free_unpacked(snap, NULL);
    o.pid = 0x7ffffff0;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL(snap->n_sessions, 1);
    ljmp__snapshot__free_unpacked(snap, NULL);
    /* A long session of an exited process is no helper's. */
    o.pid = 0;
    helper->end_ms = 1000 + 2000;
    snap = take(&o, NULL);
    CU_ASSERT_EQUAL(snap->n_sessions, 2);
    ljmp__snapshot__free_unpacked(snap, NULL);
    snapshot_bases_free(&bases);
    session_gone(helper);
    session_gone(server);
    teardown();
}

/* A chunk's name may be long (ljmpd takes up to 1 MiB), and every line of
 * it a name of that length: a view's copies of names stay within what
 * the session may hold, and the session is charged for them. */
static void test_view_names_within_budget(void)
{
    enum { LEN = 60000, LINES = 200 };
    struct snapshot_opts o = {.top = 5,
                              .sort = LJMP__SORT_KEY__SORT_LIVE_BYTES};
    struct lm_buf b = {0};
    char *chunk = malloc(LEN + 1);

    setup();
    srv.cfg.session_memory = 4u << 20;
    struct session *s = session_new(1, 100, USER_A);
    CU_ASSERT_FATAL(chunk != NULL);
    memset(chunk, 'c', LEN);
    chunk[0] = '@';
    chunk[LEN] = '\0';
    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x200, chunk, 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (uint64_t l = 1; l <= LINES; l++) {
        struct lm_loc_ref loc = {
            .source = LM_SRC_LFUNC, .addr = 0x200, .line = l};
        lm_enc_alloc(&b, LM_REV_R3, &loc, 0x10000 + l * 64, 32);
    }
    feed(s, &b);
    free(chunk);
    Ljmp__Snapshot *snap = take(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(snap->n_sessions, 1);
    const Ljmp__SessionInfo *i = snap->sessions[0]->info;
    CU_ASSERT_EQUAL(i->memory_budget, 4u << 20);
    /* Named until the budget: some rows, not all 200 names' 12 MB. */
    CU_ASSERT_TRUE(s->mem_views > LEN);
    CU_ASSERT_TRUE(s->mem_views <= 4u << 20);
    CU_ASSERT_TRUE(snap->sessions[0]->n_top > 0);
    CU_ASSERT_EQUAL(i->memory_bytes, s->mem_charged);
    CU_ASSERT_TRUE(s->mem_charged >= s->mem_views);
    ljmp__snapshot__free_unpacked(snap, NULL);
    session_gone(s);
    teardown();
}

void register_snapshot_tests(void)
{
    CU_pSuite s = CU_add_suite("snapshots", NULL, NULL);

    CU_add_test(s, "top rows, sessions, visibility, selectors", test_top_rows);
    CU_add_test(s, "rows by growth, freed blocks, free events",
                test_rows_by_growth);
    CU_add_test(s, "retention of a session ended in the tick",
                test_retention_of_a_session_ended_in_the_tick);
    CU_add_test(s, "deltas from a subscriber's bases", test_deltas_from_bases);
    CU_add_test(s, "rows by trace", test_rows_by_trace);
    CU_add_test(s, "a turn's snapshots share views", test_turn_shares_views);
    CU_add_test(s, "a tree merged: members, sums, shares", test_merged_tree);
    CU_add_test(s, "a unit merged, with deltas", test_merged_unit_deltas);
    CU_add_test(s, "brief sessions left out", test_brief_left_out);
    CU_add_test(s, "a view's names within its session's budget",
                test_view_names_within_budget);
}
