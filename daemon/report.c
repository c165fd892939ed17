/* Reports of sessions: built on a thread of their own from sessions held
 * still, and sent to their clients a part at a time, as they read. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "arena.h"
#include "bell.h"
#include "clock.h"
#include "helper.h"
#include "lm_export.h"
#include "log.h"
#include "peer.h"
#include "report.h"
#include "session.h"
#include "snapshot.h"

/* A piece of a report's text, in order. */
struct part {
    struct part *next;
    size_t len;
    int last; /* the text ends with it */
    char text[REPORT_PART];
};

/* A client waiting for a build's text. */
struct reader {
    struct peer *p;    /* NULL once it has it all, went, or was refused */
    uint64_t id;       /* its request's */
    uint64_t next;     /* the part it is sent next */
    uint64_t since_ms; /* when it was last sent a part, or asked */
};

/*
 * One report being built, for the clients that asked for it.  Its
 * sessions are kept (readers) from the request on, and held (session_hold)
 * from the time it is next in line: the thread reads their state without
 * their locks once they stand still, while the loop goes on serving
 * others.  The thread makes parts of the text; the loop takes them and
 * sends each client the next as it reads its output down.
 */
struct build {
    TAILQ_ENTRY(build) link;
    struct reports *r;
    struct session **m;
    size_t n;
    int merged;
    struct lm_report_opts opts;
    struct reader *rd;
    size_t nrd, rdcap;
    int held;    /* its sessions are held */
    int started; /* handed to the thread, or built on the loop */
    int on_loop; /* small: built on the loop, under the sessions' locks */
    int sent;    /* a part went out: no request may join it now */
    uint64_t time_ms, duration_ms; /* an export's span (stamp_time) */
    /* The loop's: the parts taken from the thread and not yet sent to
     * every reader, numbered from first; taken in all. */
    struct part *head, *tail;
    uint64_t first, taken;
    int over;   /* finished, and every part it made taken */
    int failed; /* ... without its end: readers are told why */
    /* Shared, under the reports' mu: parts made and not taken. */
    struct part *ready, *ready_tail;
    uint64_t made;   /* parts made */
    uint64_t passed; /* parts every reader was sent */
    int finished, build_failed;
    int cancel; /* no one waits for it any more */
    /* The thread's: the part being filled. */
    struct part *cur;
};

TAILQ_HEAD(build_list, build);

/* The reports' state: one thread, its bell, the builds. */
struct reports {
    struct server *srv;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* work for the thread, or a reader caught up */
    struct bell bell;
    struct build_list builds; /* the loop's, oldest first */
    struct build *running;    /* the loop's: the one the thread has */
    struct build *job;        /* under mu: handed, not taken yet */
    int stop;                 /* under mu */
    struct event *tick;       /* looks for clients that stopped reading */
};

static struct part *new_part(void)
{
    struct part *pt = malloc(sizeof(*pt));

    if (pt != NULL) {
        pt->next = NULL;
        pt->len = 0;
        pt->last = 0;
    }
    return pt;
}

static void free_parts(struct part *pt)
{
    while (pt != NULL) {
        struct part *next = pt->next;
        free(pt);
        pt = next;
    }
}

/* Hands the part being filled to the loop (last: the text's end); on the
 * thread, waits while the slowest reader is REPORT_AHEAD parts behind.
 * -1 when out of memory or when no one waits for the text any more. */
static int publish(struct build *b, int last)
{
    struct reports *r = b->r;

    if (b->cur == NULL && (b->cur = new_part()) == NULL)
        return -1;
    struct part *pt = b->cur;
    b->cur = NULL;
    pt->last = last;
    pthread_mutex_lock(&r->mu);
    if (b->ready_tail != NULL)
        b->ready_tail->next = pt;
    else
        b->ready = pt;
    b->ready_tail = pt;
    b->made++;
    if (!b->on_loop) {
        bell_ring(&r->bell);
        while (!b->cancel && !last && b->made - b->passed > REPORT_AHEAD)
            pthread_cond_wait(&r->cv, &r->mu);
    }
    int cancel = b->cancel;
    pthread_mutex_unlock(&r->mu);
    return cancel ? -1 : 0;
}

/* The report's stdio stream writes here: into parts. */
static ssize_t part_write(void *cookie, const char *buf, size_t size)
{
    struct build *b = cookie;
    size_t done = 0;

    while (done < size) {
        if (b->cur == NULL && (b->cur = new_part()) == NULL) {
            errno = ENOMEM;
            return -1;
        }
        size_t take = REPORT_PART - b->cur->len;
        take = take < size - done ? take : size - done;
        memcpy(b->cur->text + b->cur->len, buf + done, take);
        b->cur->len += take;
        done += take;
        if (b->cur->len == REPORT_PART && publish(b, 0) != 0) {
            errno = ECANCELED;
            return -1;
        }
    }
    return (ssize_t)size;
}

/* The time an export covers, read on the loop as it starts: from its
 * sessions' first start to now, or to their last end if none streams any
 * more (Unix ms). */
static void stamp_time(struct build *b)
{
    uint64_t from = UINT64_MAX, to = 0, now = clock_now_ms();

    for (size_t i = 0; i < b->n; i++) {
        const struct session *s = b->m[i];
        uint64_t end = s->phase == SESSION_ENDED ? s->end_ms : now;
        from = s->start_ms < from ? s->start_ms : from;
        to = end > to ? end : to;
    }
    b->time_ms = clock_wall_ms(from);
    b->duration_ms = to > from ? to - from : 0;
}

/* The sessions' states written as one export (lm_export.h). */
static int write_export(FILE *f, const struct build *b,
                        const struct lm_state **states,
                        const struct lm_report_member *members)
{
    struct lm_export_opts e = {
        .format = (enum lm_export_format)(b->opts.export_format - 1),
        .value = (enum lm_export_value)b->opts.export_value,
    };

    e.time_ms = b->time_ms;
    e.duration_ms = b->duration_ms;
    return lm_export_write(f, states, members, b->n, &e);
}

/* One report of several sessions merged, or any export. */
static int write_merged(FILE *f, const struct build *b)
{
    const struct lm_state **states = malloc(b->n * sizeof(*states));
    struct lm_report_member *members = malloc(b->n * sizeof(*members));
    int rc = -1;

    if (states != NULL && members != NULL) {
        for (size_t i = 0; i < b->n; i++) {
            states[i] = &b->m[i]->prof.state;
            members[i] = (struct lm_report_member){
                (uint32_t)b->m[i]->pid, b->m[i]->id, b->m[i]->cmdline};
        }
        rc = b->opts.export_format
                 ? write_export(f, b, states, members)
                 : lm_report_write_merged(f, states, members, b->n, &b->opts);
    }
    free(states);
    free(members);
    return rc;
}

/* Writes b's text into parts: on the thread, from sessions standing
 * still; on the loop, under their locks (a feed thread may change them).
 * Each member's lock is taken in list order, as one feed thread holds one
 * session at a time: no wait in a circle. */
static int write_report(struct build *b)
{
    cookie_io_functions_t io = {.write = part_write};
    FILE *f = fopencookie(b, "w", io);
    int failed;

    if (f == NULL)
        return -1;
    for (size_t i = 0; b->on_loop && i < b->n; i++)
        session_lock(b->m[i]);
    failed = (b->merged || b->opts.export_format
                  ? write_merged(f, b)
                  : lm_report_write(f, &b->m[0]->prof.state, &b->opts)) != 0;
    for (size_t i = 0; b->on_loop && i < b->n; i++)
        session_unlock(b->m[i]);
    failed |= fclose(f) != 0;
    if (!failed)
        failed = publish(b, 1) != 0;
    free(b->cur);
    b->cur = NULL;
    return failed ? -1 : 0;
}

static void *report_thread(void *arg)
{
    struct reports *r = arg;

    helper_lower_priority();
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->job == NULL)
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->stop)
            break;
        struct build *b = r->job;
        r->job = NULL;
        pthread_mutex_unlock(&r->mu);
        int failed = write_report(b) != 0;
        pthread_mutex_lock(&r->mu);
        b->finished = 1;
        b->build_failed = failed;
        bell_ring(&r->bell);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Moves the parts the thread made to the loop's list. */
static void take_parts(struct build *b)
{
    struct reports *r = b->r;

    pthread_mutex_lock(&r->mu);
    struct part *pt = b->ready;
    b->ready = b->ready_tail = NULL;
    int finished = b->finished, failed = b->build_failed;
    pthread_mutex_unlock(&r->mu);
    for (; pt != NULL; pt = pt->next) {
        if (b->tail != NULL)
            b->tail->next = pt;
        else
            b->head = pt;
        b->tail = pt;
        b->taken++;
    }
    if (finished) {
        b->over = 1;
        b->failed = failed;
    }
}

/* The part numbered seq, taken and not yet freed. */
static struct part *part_at(const struct build *b, uint64_t seq)
{
    struct part *pt = b->head;

    for (uint64_t i = b->first; i < seq; i++)
        pt = pt->next;
    return pt;
}

/* Whether p waits for a report besides the one it is done with. */
static int reads_another(const struct reports *r, const struct peer *p)
{
    const struct build *b;

    TAILQ_FOREACH(b, &r->builds, link)
    for (size_t i = 0; i < b->nrd; i++)
        if (b->rd[i].p == p)
            return 1;
    return 0;
}

/* The reader is done with b: it no longer keeps its client waiting.  The
 * client may go at once (peer_idle_check): report_peer_gone then finds
 * nothing of it here. */
static void drop_reader(struct build *b, struct reader *rd)
{
    struct peer *p = rd->p;

    rd->p = NULL;
    if (!reads_another(b->r, p))
        peer_set_bulk(p, 0);
    peer_wait_end(p);
    peer_idle_check(p);
}

/* Sends rd its next part: the first with the sessions' info, a part of a
 * longer text counted against the memory budget.  -1 when it cannot (the
 * client told why). */
static int send_part(struct build *b, struct reader *rd, const struct part *pt)
{
    Ljmp__ReportText rt = LJMP__REPORT_TEXT__INIT;
    Ljmp__Response resp;
    struct arena a = {0};
    int oom = 0, rc;

    rt.has_text = 1;
    rt.text.data = (uint8_t *)pt->text;
    rt.text.len = pt->len;
    rt.has_more = rt.more = !pt->last;
    if (rd->next == 0 && b->merged) {
        rt.members = arena_alloc(&a, b->n * sizeof(*rt.members));
        oom = rt.members == NULL;
        for (size_t i = 0; !oom && i < b->n; i++)
            oom = (rt.members[rt.n_members++] = snapshot_info(&a, b->m[i])) ==
                  NULL;
    } else if (rd->next == 0) {
        oom = (rt.session = snapshot_info(&a, b->m[0])) == NULL;
    }
    peer_response_init(&resp, rd->id);
    resp.body_case = LJMP__RESPONSE__BODY_REPORT;
    resp.report = &rt;
    if (oom) {
        peer_send_error(rd->p, rd->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
        rc = -1;
    } else if (rd->next == 0 && pt->last) {
        rc = peer_send(rd->p, &resp); /* the whole report in one frame */
    } else {
        rc = peer_send_part(rd->p, &resp);
    }
    arena_free(&a);
    return rc;
}

/* Sends rd the parts it may take now; at the end, the last or why the
 * build failed. */
static void serve(struct build *b, struct reader *rd)
{
    while (rd->p != NULL && rd->next < b->taken && peer_may_take(rd->p)) {
        const struct part *pt = part_at(b, rd->next);
        if (send_part(b, rd, pt) != 0) {
            drop_reader(b, rd);
            return;
        }
        b->sent = 1;
        rd->next++;
        rd->since_ms = clock_now_ms();
        if (pt->last)
            drop_reader(b, rd);
    }
    if (rd->p != NULL && b->over && b->failed && rd->next == b->taken) {
        peer_send_error(rd->p, rd->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory writing the report");
        drop_reader(b, rd);
    }
}

/* The first part a reader still waits for (taken when none does). */
static uint64_t slowest(const struct build *b, size_t *waiting)
{
    uint64_t least = b->taken;

    *waiting = 0;
    for (size_t i = 0; i < b->nrd; i++) {
        if (b->rd[i].p == NULL)
            continue;
        (*waiting)++;
        least = b->rd[i].next < least ? b->rd[i].next : least;
    }
    return least;
}

/* Frees the parts every reader was sent, and lets the thread make more. */
static void pass_parts(struct build *b, uint64_t upto)
{
    struct reports *r = b->r;

    while (b->first < upto) {
        struct part *pt = b->head;
        b->head = pt->next;
        if (b->head == NULL)
            b->tail = NULL;
        free(pt);
        b->first++;
    }
    pthread_mutex_lock(&r->mu);
    b->passed = b->first;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* The thread is done with b's sessions: their streams go on while b's
 * last parts are read. */
static void release_sessions(struct build *b)
{
    for (size_t i = 0; b->held && i < b->n; i++)
        session_release(b->m[i]);
    b->held = 0;
}

static void free_build(struct build *b)
{
    TAILQ_REMOVE(&b->r->builds, b, link);
    release_sessions(b);
    for (size_t i = 0; i < b->n; i++)
        b->m[i]->readers--;
    for (size_t i = 0; i < b->nrd; i++)
        if (b->rd[i].p != NULL)
            drop_reader(b, &b->rd[i]);
    free_parts(b->head);
    free_parts(b->ready);
    free(b->rd);
    free(b->m);
    free(b);
}

/* No one waits for b's text: the thread stops making it. */
static void cancel_build(struct build *b)
{
    struct reports *r = b->r;

    pthread_mutex_lock(&r->mu);
    b->cancel = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Sends b's readers what they may take; frees b once no reader waits
 * and the thread is done with it (b may be gone after). */
static void pump(struct build *b)
{
    size_t waiting;

    for (size_t i = 0; i < b->nrd; i++)
        serve(b, &b->rd[i]);
    pass_parts(b, slowest(b, &waiting));
    if (waiting > 0)
        return;
    if (!b->started || b->over) {
        struct reports *r = b->r;
        free_build(b);
        bell_ring(&r->bell); /* the next may start */
    } else {
        cancel_build(b); /* freed when the thread is done with it */
    }
}

/* Hands the first build in line to the thread once its sessions stand
 * still: they are held from then on, so that their feed stops. */
static void dispatch(struct reports *r)
{
    struct build *b;

    if (r->running != NULL)
        return;
    TAILQ_FOREACH(b, &r->builds, link)
    if (!b->started)
        break;
    if (b == NULL)
        return;
    /* A member whose C symbols are still read gets them in its state
     * (session_adopt_symbols) once they are: the thread must not read it
     * before.  It is held only then (report_observer's fed comes back). */
    for (size_t i = 0; !b->held && i < b->n; i++)
        if (b->m[i]->phase == SESSION_STREAM && !b->m[i]->acked)
            return;
    if (!b->held) {
        b->held = 1;
        for (size_t i = 0; i < b->n; i++)
            session_hold(b->m[i]);
    }
    for (size_t i = 0; i < b->n; i++)
        if (!session_still(b->m[i]))
            return; /* report_observer comes back */
    for (size_t i = 0; i < b->n; i++)
        b->opts.streaming |= b->m[i]->phase == SESSION_STREAM;
    stamp_time(b);
    b->started = 1;
    r->running = b;
    pthread_mutex_lock(&r->mu);
    r->job = b;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* The thread made parts, finished, or a client went: every build sends
 * what it can, and the next starts when the thread is free. */
static void on_bell(evutil_socket_t fd, short what, void *arg)
{
    struct reports *r = arg;
    struct build *b, *next;

    (void)fd;
    (void)what;
    bell_answer(&r->bell);
    if (r->running != NULL) {
        take_parts(r->running);
        if (r->running->over) {
            release_sessions(r->running);
            r->running = NULL;
        }
    }
    for (b = TAILQ_FIRST(&r->builds); b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        pump(b);
    }
    dispatch(r);
}

/*
 * Drops the readers that left parts unread for --client-idle: the thread
 * makes a report only as fast as its slowest reader, and makes one at a
 * time, so a client that asks and never reads would hold up every report
 * after its own.
 */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct reports *r = arg;
    uint64_t now = clock_now_ms();
    uint64_t idle = (uint64_t)r->srv->cfg.client_idle_s * 1000;
    struct build *b, *next;

    (void)fd;
    (void)what;
    for (b = TAILQ_FIRST(&r->builds); b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        int dropped = 0;
        for (size_t i = 0; i < b->nrd; i++) {
            struct reader *rd = &b->rd[i];
            if (rd->p == NULL || rd->next == b->taken ||
                clock_elapsed_ms(now, rd->since_ms) < idle)
                continue;
            peer_send_error(rd->p, rd->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                            "the report was not read for %u s",
                            r->srv->cfg.client_idle_s);
            drop_reader(b, rd);
            dropped = 1;
        }
        if (dropped)
            pump(b);
    }
}

static void on_still(struct session *s, void *arg)
{
    (void)arg;
    dispatch(s->srv->reports);
}

/* A session decoded bytes: one whose C symbols were read may be held. */
static void on_fed(struct session *s, uint64_t at, const uint8_t *p, size_t n,
                   void *arg)
{
    (void)at;
    (void)p;
    (void)n;
    (void)arg;
    dispatch(s->srv->reports);
}

const struct session_observer report_observer = {
    .fed = on_fed,
    .still = on_still,
};

/* Whether a new request for these sessions and options may join b: the
 * same report, which no client was sent any of yet (and which is still
 * wanted: cancel is the loop's to set). */
static int may_join(const struct build *b, struct session **m, size_t n,
                    int merged, const struct lm_report_opts *o)
{
    if (b->sent || b->on_loop || b->cancel || b->n != n ||
        b->merged != merged || b->opts.leak_only != o->leak_only ||
        b->opts.human_readable != o->human_readable ||
        b->opts.json != o->json || b->opts.by_process != o->by_process ||
        b->opts.by_trace != o->by_trace || b->opts.stacks != o->stacks ||
        b->opts.export_format != o->export_format ||
        b->opts.export_value != o->export_value)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (b->m[i] != m[i])
            return 0;
    return 1;
}

static int add_reader(struct build *b, struct peer *p, uint64_t id)
{
    if (b->nrd == b->rdcap) {
        size_t cap = b->rdcap ? 2 * b->rdcap : 4;
        struct reader *rd = realloc(b->rd, cap * sizeof(*rd));
        if (rd == NULL)
            return -1;
        b->rd = rd;
        b->rdcap = cap;
    }
    b->rd[b->nrd++] = (struct reader){p, id, 0, clock_now_ms()};
    peer_wait_begin(p);
    peer_set_bulk(p, 1);
    return 0;
}

static struct build *new_build(struct reports *r, struct session **m, size_t n,
                               int merged, const struct lm_report_opts *o)
{
    struct build *b = calloc(1, sizeof(*b));

    if (b == NULL || (b->m = malloc(n * sizeof(*b->m))) == NULL) {
        free(b);
        return NULL;
    }
    b->r = r;
    memcpy(b->m, m, n * sizeof(*m));
    b->n = n;
    b->merged = merged;
    b->opts = *o;
    b->opts.streaming = 0; /* as the sessions stand when it starts */
    for (size_t i = 0; i < n; i++)
        m[i]->readers++;
    TAILQ_INSERT_TAIL(&r->builds, b, link);
    return b;
}

/* The locations of the sessions in all, read under their locks. */
static uint64_t locations_of(struct session **m, size_t n)
{
    uint64_t locs = 0;

    for (size_t i = 0; i < n; i++) {
        session_lock(m[i]);
        locs += m[i]->prof.state.nlocs;
        session_unlock(m[i]);
    }
    return locs;
}

/* A small report, built at once on the loop. */
static void build_on_loop(struct build *b)
{
    b->on_loop = b->started = 1;
    for (size_t i = 0; i < b->n; i++)
        b->opts.streaming |= b->m[i]->phase == SESSION_STREAM;
    stamp_time(b);
    int failed = write_report(b) != 0;
    pthread_mutex_lock(&b->r->mu);
    b->finished = 1;
    b->build_failed = failed;
    pthread_mutex_unlock(&b->r->mu);
    take_parts(b);
}

void report_request(struct peer *p, uint64_t id, struct session **m, size_t n,
                    int merged, const struct lm_report_opts *o)
{
    struct reports *r = p->srv->reports;
    struct build *b;

    TAILQ_FOREACH(b, &r->builds, link)
    if (may_join(b, m, n, merged, o))
        break;
    if (b == NULL && (b = new_build(r, m, n, merged, o)) == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory for a report");
        return;
    }
    if (add_reader(b, p, id) != 0) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory for a report");
        if (b->nrd == 0)
            free_build(b);
        return;
    }
    if (b->nrd == 1 && locations_of(m, n) < REPORT_ON_LOOP_LOCS)
        build_on_loop(b);
    if (b->started)
        pump(b);
    else
        dispatch(r);
}

void report_peer_drained(struct peer *p)
{
    struct build *b, *next;

    for (b = TAILQ_FIRST(&p->srv->reports->builds); b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        for (size_t i = 0; i < b->nrd; i++) {
            if (b->rd[i].p == p) {
                pump(b);
                break;
            }
        }
    }
}

void report_peer_gone(struct peer *p)
{
    struct reports *r = p->srv->reports;
    struct build *b;
    int any = 0;

    if (r == NULL)
        return;
    TAILQ_FOREACH(b, &r->builds, link)
    for (size_t i = 0; i < b->nrd; i++) {
        if (b->rd[i].p == p) {
            b->rd[i].p = NULL;
            any = 1;
        }
    }
    /* Builds no one waits for go on the bell's turn: this may run inside
     * one of their sends (a client that goes once answered). */
    if (any)
        bell_ring(&r->bell);
}

int report_start(struct server *srv)
{
    struct reports *r = calloc(1, sizeof(*r));
    int err;

    if (r == NULL)
        return -1;
    r->srv = srv;
    r->bell = BELL_NONE;
    TAILQ_INIT(&r->builds);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    srv->reports = r;
    /* Reports are bulk work: they take turns with ingest. */
    if (bell_init(&r->bell, srv->base, PRIO_INGEST, on_bell, r, "reports") != 0)
        return -1;
    if ((err = helper_start(&r->thread, report_thread, r)) != 0) {
        log_error("reports: cannot start their thread: %s", strerror(err));
        return -1;
    }
    r->thread_started = 1;
    struct timeval second = {1, 0};
    if ((r->tick = event_new(srv->base, -1, EV_PERSIST, on_tick, r)) == NULL ||
        event_add(r->tick, &second) != 0) {
        log_error("reports: out of memory for their timer");
        return -1;
    }
    return 0;
}

void report_stop(struct server *srv)
{
    struct reports *r = srv->reports;
    struct build *b;

    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    TAILQ_FOREACH(b, &r->builds, link)
    b->cancel = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->thread_started)
        pthread_join(r->thread, NULL);
    while ((b = TAILQ_FIRST(&r->builds)) != NULL)
        free_build(b);
    if (r->tick != NULL)
        event_free(r->tick);
    bell_free(&r->bell);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
    srv->reports = NULL;
}
