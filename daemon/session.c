/* Ingest sessions: one per VM connection, from hello to trailer, fed to the
 * core's decoder and state as bytes arrive. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "peerfd.h"
#include "procinfo.h"
#include "quota.h"
#include "session.h"
#include "log.h"

static void session_read(evutil_socket_t fd, short what, void *arg);
static void start_streaming(struct session *s);
static void session_stop(struct session *s, const char *why, int failed);

int session_observe(struct server *srv, const struct session_observer *o)
{
    if (srv->nobservers == SESSION_OBSERVERS)
        return -1;
    srv->observers[srv->nobservers++] = o;
    return 0;
}

enum session_news { STARTED, ENDED, FREED, STILL };

void **session_slot(const struct session *s, const struct session_observer *o)
{
    for (unsigned i = 0; i < s->srv->nobservers; i++)
        if (s->srv->observers[i] == o)
            return (void **)&s->slots[i];
    log_error("session %llu: an observer that is not registered asks for "
              "its slot; a bug",
              (unsigned long long)s->id);
    abort();
}

/* Tells the observers; a session that ends while it starts tells no more
 * of them that it started. */
static void notify(struct session *s, enum session_news news)
{
    for (unsigned i = 0; i < s->srv->nobservers; i++) {
        const struct session_observer *o = s->srv->observers[i];
        void (*cb)(struct session *, void *) = news == STARTED ? o->started
                                               : news == ENDED ? o->ended
                                               : news == STILL ? o->still
                                                               : o->freed;
        if (cb != NULL)
            cb(s, o->arg);
        if (news == STARTED && s->phase != SESSION_STREAM)
            return;
    }
}

/* Tells the observers that n stream bytes from offset at were decoded
 * (in stream order, on the loop). */
static void notify_fed(struct session *s, uint64_t at, const uint8_t *p,
                       size_t n)
{
    for (unsigned i = 0; i < s->srv->nobservers; i++) {
        const struct session_observer *o = s->srv->observers[i];
        if (o->fed != NULL && s->phase != SESSION_ENDED)
            o->fed(s, at, p, n, o->arg);
    }
}

void session_set_phase(struct session *s, enum session_phase to)
{
    static const unsigned allowed[] = {
        [SESSION_HELLO] = 1u << SESSION_STREAM | 1u << SESSION_ENDED,
        [SESSION_STREAM] = 1u << SESSION_TRAILER | 1u << SESSION_ENDED,
        [SESSION_TRAILER] = 1u << SESSION_CLOSING | 1u << SESSION_ENDED,
        [SESSION_CLOSING] = 1u << SESSION_ENDED,
        [SESSION_ENDED] = 0,
    };

    if (!(allowed[s->phase] & 1u << to)) {
        log_error("session %llu: phase %d to %d is not a transition; a bug",
                  (unsigned long long)s->id, (int)s->phase, (int)to);
        abort();
    }
    s->phase = to;
}

static void release_buffers(struct session *s)
{
    for (int i = 0; i < FEED_JOBS; i++) {
        free(s->feed.jobs[i].buf);
        s->feed.jobs[i].buf = NULL;
    }
    while (s->nspare > 0)
        free(s->spare[--s->nspare]);
    s->nbufs = 0;
}

/* The buffer the next read goes into: the one given back last (still in
 * the cache), or a new one, so that a session touches only as many as
 * it has had out at once.  A connection that sends nothing holds none. */
static uint8_t *next_buffer(struct session *s)
{
    struct feed_job *j = feed_next_job(&s->feed);

    if (j->buf == NULL && s->nspare > 0) {
        j->buf = s->spare[--s->nspare];
    } else if (j->buf == NULL) {
        j->buf = malloc(s->srv->cfg.read_budget);
        s->nbufs += j->buf != NULL;
    }
    return j->buf;
}

/* A job's buffer, back from its job: kept while the session may have as
 * many out, else freed (the limit fell). */
static void give_back_buffer(struct session *s, struct feed_job *j)
{
    if (j->buf == NULL)
        return;
    if (s->feed.out + s->nspare < session_jobs_max(s->srv)) {
        s->spare[s->nspare++] = j->buf;
    } else {
        free(j->buf);
        s->nbufs--;
    }
    j->buf = NULL;
}

/* Whether uid may open one more session: those of uid not ended yet, and
 * those of every user with a quota (see quota_may_take_slot). */
static int may_take_session(const struct server *srv, uid_t uid)
{
    const struct session *s;
    unsigned mine = 0, users = 0;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (s->phase == SESSION_ENDED)
            continue;
        mine += s->uid == uid;
        users += quota_applies(s->uid);
    }
    return quota_may_take_slot(uid, mine, users, srv->cfg.max_sessions);
}

/* Stamps the census's beginning and completion when a job decoded them
 * (under the session's lock): a job is a few milliseconds of stream. */
static void note_census(struct session *s)
{
    uint8_t state = s->prof.state.census.state;

    if (state == LM_CENSUS_NONE)
        return;
    if (s->census_begin_ms == 0)
        s->census_begin_ms = clock_now_ms();
    if (state == LM_CENSUS_DONE && s->census_complete_ms == 0)
        s->census_complete_ms = clock_now_ms();
}

void session_census(const struct session *s, struct session_census *out)
{
    /* The lock and the copy are the loop's to take and keep, whoever
     * only reads the session; the loop never waits for a feed thread's
     * job here (a snapshot turn reads every session). */
    struct session *w = (struct session *)s;
    struct session_census *k = &w->census_seen;

    if (session_trylock(w) == 0) {
        k->c = s->prof.state.census;
        k->duplicates = s->prof.state.totals.census_duplicates;
        k->preceding_frees = s->prof.state.totals.census_preceding_frees;
        k->live_bytes = s->prof.state.totals.live_bytes;
        k->begin_ms = s->census_begin_ms;
        k->complete_ms = s->census_complete_ms;
        session_unlock(w);
    }
    k->streaming = s->phase == SESSION_HELLO || s->phase == SESSION_STREAM;
    *out = *k;
}

/* The bytes s's state and decoder hold: its tables' sizes summed, a few
 * dozen loads, once a job (not once an event).  Names count by what they
 * fill, not by their buffer's room: it doubles, and its room beyond is
 * never touched (so never resident) unless names fill it. */
static uint64_t fed_memory(const struct session *s)
{
    const struct lm_symtab *t = &s->prof.state.sym;

    return lm_state_memory(&s->prof.state) - t->chars_cap + t->chars_len +
           s->prof.dec.pend_cap;
}

/* Under s's lock, after a job: the state's memory, for the loop's budget,
 * and past the budget's limit the stream fails (the jobs queued after are
 * not run), with what grew in s->over. */
static enum lm_status check_memory(struct session *s, enum lm_status st)
{
    uint64_t mem = fed_memory(s);
    uint64_t limit = __atomic_load_n(&s->mem_limit, __ATOMIC_RELAXED);
    struct session_memory m;
    uint64_t biggest;

    __atomic_store_n(&s->mem_fed, mem, __ATOMIC_RELAXED);
    if (st != LM_NEED_MORE || mem <= limit)
        return st;
    session_memory_parts(s, &m);
    const char *what = session_memory_biggest(&m, &biggest);
    snprintf(s->over, sizeof(s->over),
             "over its memory budget of %llu bytes: %llu bytes held, %llu of "
             "them %s",
             (unsigned long long)s->mem_budget,
             (unsigned long long)(mem + s->mem_views + s->mem_history +
                                  s->mem_marks),
             (unsigned long long)biggest, what);
    return LM_ERROR;
}

/* Decodes and applies a job's bytes, on a feed thread; the loop reads the
 * state meanwhile only under the session's lock. */
static void session_feed_run(struct feed_job *j, void *owner)
{
    struct session *s = owner;

    session_lock(s);
    s->prof.state.direct_bytes = j->direct_bytes;
    uint64_t before = lm_totals_events(&s->prof.state.totals);
    j->used = 0;
    j->st = lm_profile_feed(&s->prof, j->p, j->n, &j->used);
    s->stream_bytes += j->used;
    j->events = lm_totals_events(&s->prof.state.totals) - before;
    note_census(s);
    j->st = check_memory(s, j->st);
    session_unlock(s);
}

static void session_fed(struct feed_job *j, void *owner);

static const struct feed_ops session_feed_ops = {
    .run = session_feed_run,
    .done = session_fed,
};

/* Lines about ingest peers turned away, which any local user can cause as
 * often as it connects. */
static struct log_limit refusals = LOG_LIMIT("refused ingest connections");
static struct log_limit rejections = LOG_LIMIT("rejected ingest peers");

/* Whether the peer on fd may stream, by its credentials (*cred): when it
 * may not, it is told nothing, counted and closed, and -1 returned. */
static int admit(struct server *srv, int fd, struct ucred *cred)
{
    socklen_t len = sizeof(*cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0) {
        log_limited(&refusals, LOG_WARN,
                    "ingest: no peer credentials: %s; connection closed",
                    strerror(errno));
    } else if (srv->nlive >= srv->cfg.max_sessions) {
        log_limited(&refusals, LOG_WARN,
                    "ingest: pid %d refused: %u sessions streaming already "
                    "(--max-sessions)",
                    (int)cred->pid, srv->nlive);
    } else if (!may_take_session(srv, cred->uid)) {
        log_limited(&refusals, LOG_WARN,
                    "ingest: pid %d refused: uid %u streams its share of the "
                    "%u sessions already (--max-sessions)",
                    (int)cred->pid, (unsigned)cred->uid, srv->cfg.max_sessions);
    } else {
        return 0;
    }
    srv->counters.sessions_rejected++;
    peerfd_close_socket(fd);
    return -1;
}

/* A session for the peer on fd, waiting for its hello; NULL when out of
 * memory (fd is left open). */
/* Reads the process's ancestors into s and returns its cgroup's path
 * ("" if unknown; NULL only when out of memory). */
static char *where_from(struct session *s)
{
    char cgroup[512];
    pid_t p = s->pid;

    while (s->nancestors < SESSION_MAX_ANCESTORS && (p = procinfo_ppid(p)) > 0)
        s->ancestors[s->nancestors++] = p;
    procinfo_cgroup(s->pid, cgroup, sizeof(cgroup));
    return strdup(cgroup);
}

static struct session *session_new(struct server *srv, int fd,
                                   const struct ucred *cred)
{
    struct lm_limits limits = {srv->cfg.max_string, srv->cfg.max_string + 64};
    struct lm_state_limits state_limits = {srv->cfg.max_locations, 0};
    struct timeval hello_tv = {srv->cfg.hello_timeout_ms / 1000,
                               (srv->cfg.hello_timeout_ms % 1000) * 1000};
    struct session *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->srv = srv;
    s->fd = fd;
    s->pipe_fd = -1;
    s->pid = cred->pid;
    s->uid = cred->uid;
    s->gid = cred->gid;
    s->start_ms = clock_now_ms();
    s->state = LJMP__SESSION_STATE__STREAMING;
    if (lm_profile_init(&s->prof, &limits, &state_limits) != 0) {
        free(s);
        return NULL;
    }
    s->mem_fed = fed_memory(s);
    s->mem_limit = s->mem_budget = UINT64_MAX; /* set when it starts */
    pthread_mutex_init(&s->mu, NULL);
    s->cmdline = procinfo_cmdline(s->pid);
    s->process_start_ms = procinfo_start_ms(s->pid);
    s->cgroup = where_from(s);
    s->ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, session_read, s);
    if (s->ev != NULL)
        event_priority_set(s->ev, PRIO_INGEST);
    feed_queue_init(&s->feed, srv->feed, &session_feed_ops, s);
    if (s->cmdline == NULL || s->cgroup == NULL || s->ev == NULL ||
        event_add(s->ev, &hello_tv) != 0) {
        s->fd = -1; /* the caller's to close */
        session_free(s);
        return NULL;
    }
    return s;
}

void session_accept(struct server *srv, int fd)
{
    struct ucred cred;
    struct session *s;

    peerfd_socket_options(fd);
    if (admit(srv, fd, &cred) != 0)
        return;
    if ((s = session_new(srv, fd, &cred)) == NULL) {
        log_error("ingest: out of memory for pid %d; connection closed",
                  (int)cred.pid);
        srv->counters.sessions_rejected++;
        peerfd_close_socket(fd);
        return;
    }
    s->id = ++srv->next_session_id;
    TAILQ_INSERT_TAIL(&srv->sessions, s, link);
    srv->nlive++;
    srv->counters.sessions_accepted++;
    log_info("session %llu: pid %d uid %d connected (%s)",
             (unsigned long long)s->id, (int)s->pid, (int)s->uid, s->cmdline);
}

/* The pipe's read end: the peer's choice until take_pipe took it (then
 * an anonymous pipe, whose close never waits). */
static void close_pipe(struct session *s)
{
    if (s->pipe_taken)
        close(s->pipe_fd);
    else
        peerfd_close(s->pipe_fd);
    s->pipe_fd = -1;
    s->pipe_taken = 0;
}

void session_free(struct session *s)
{
    notify(s, FREED);
    if (s->ev != NULL)
        event_free(s->ev);
    if (s->wake_ev != NULL)
        event_free(s->wake_ev);
    peerfd_close_socket(s->fd);
    close_pipe(s);
    lm_profile_free(&s->prof);
    csyms_free(&s->csyms);
    free(s->cmdline);
    free(s->cgroup);
    release_buffers(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/*
 * A peer that never became a session (no hello, or a bad one): logged,
 * counted and forgotten, so that it cannot push real sessions out of the
 * retained ones.  s is freed.
 */
__attribute__((format(printf, 2, 3))) static void
session_reject(struct session *s, const char *fmt, ...)
{
    struct server *srv = s->srv;
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    log_limited(&rejections, LOG_WARN, "ingest: pid %d uid %d rejected: %s",
                (int)s->pid, (int)s->uid, why);
    snprintf(s->reason, sizeof(s->reason), "%s", why);
    s->rejected = 1;
    srv->counters.sessions_rejected++;
    srv->nlive--;
    TAILQ_REMOVE(&srv->sessions, s, link);
    session_free(s);
}

uint64_t session_memory(const struct session *s)
{
    return __atomic_load_n(&s->mem_fed, __ATOMIC_RELAXED) + s->mem_views +
           s->mem_history + s->mem_marks +
           (uint64_t)s->nbufs * s->srv->cfg.read_budget;
}

static uint64_t index_bytes(const struct lm_hindex *x)
{
    return ((uint64_t)x->mask + 1) * sizeof(struct lm_hindex_slot);
}

void session_memory_parts(const struct session *s, struct session_memory *m)
{
    const struct lm_state *st = &s->prof.state;
    const struct lm_symtab *t = &st->sym;
    uint64_t state = lm_state_memory(st) - t->chars_cap + t->chars_len;

    m->names =
        t->chars_len + (uint64_t)t->strs_cap * sizeof(*t->strs) +
        index_bytes(&t->str_index) + index_bytes(&t->proto_index) +
        index_bytes(&t->trace_index) +
        (uint64_t)t->protos_cap * sizeof(*t->protos) +
        (uint64_t)t->traces_cap * sizeof(*t->traces) +
        (uint64_t)t->cfuncs_cap * (sizeof(*t->cfuncs) + sizeof(uint32_t));
    m->blocks = lm_heap_memory(&st->heap);
    m->locations = state - m->names - m->blocks;
    m->buffered = s->prof.dec.pend_cap;
    m->views = s->mem_views;
    m->history = s->mem_history;
    m->marks = s->mem_marks;
}

const char *session_memory_biggest(const struct session_memory *m,
                                   uint64_t *bytes)
{
    const struct {
        const char *name;
        uint64_t bytes;
    } parts[] = {
        {"names", m->names},          {"allocation sites", m->locations},
        {"live blocks", m->blocks},   {"buffered stream", m->buffered},
        {"names in views", m->views}, {"history", m->history},
        {"marks", m->marks},
    };
    size_t best = 0;

    for (size_t i = 1; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (parts[i].bytes > parts[best].bytes)
            best = i;
    *bytes = parts[best].bytes;
    return parts[best].name;
}

void session_over_budget(struct session *s, const char *why)
{
    /* Its jobs out fail at their next check (check_memory). */
    __atomic_store_n(&s->mem_limit, 0, __ATOMIC_RELAXED);
    session_stop(s, why, 1);
}

int session_visible(const struct session *s, uid_t uid)
{
    return uid == 0 || uid == getuid() || uid == s->uid;
}

int session_readable(const struct session *s, uid_t uid)
{
    return session_visible(s, uid) ||
           (uid == s->srv->cfg.reader_uid && uid != (uid_t)-1);
}

int session_brief(struct session *s)
{
    unsigned brief_ms = s->srv->cfg.brief_ms;

    if (s->phase != SESSION_ENDED || brief_ms == 0 || s->attached ||
        s->relayed || s->end_ms - s->start_ms >= brief_ms)
        return 0;
    /* Read once gone: a pid reused later is another process. */
    if (!s->process_gone)
        s->process_gone = procinfo_start_ms(s->pid) != s->process_start_ms;
    return s->process_gone;
}

/* A truncated session whose VM said it gave up where its stream ends
 * takes that as its reason, before what ljmpd saw of the end. */
static int note_gave_up(struct session *s)
{
    char seen[sizeof(s->reason)];

    if (!s->gave_up || s->gave_up_at != s->stream_bytes ||
        strncmp(s->reason, "VM gave up", 10) == 0)
        return 0;
    snprintf(seen, sizeof(seen), "%s", s->reason);
    snprintf(s->reason, sizeof(s->reason),
             "VM gave up: daemon stalled past the VM's bound "
             "(LJMP_MAX_STALL_MS)%s%.160s",
             seen[0] ? "; " : "", seen);
    return 1;
}

void session_end(struct session *s, Ljmp__SessionState state, const char *fmt,
                 ...)
{
    struct server *srv = s->srv;
    va_list ap;

    if (s->phase == SESSION_ENDED)
        return;
    session_set_phase(s, SESSION_ENDED);
    s->state = state;
    s->held_len = 0;
    s->end_ms = clock_now_ms();
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
    va_end(ap);
    if (state == LJMP__SESSION_STATE__TRUNCATED)
        note_gave_up(s);
    event_free(s->ev);
    s->ev = NULL;
    if (s->wake_ev != NULL)
        event_free(s->wake_ev);
    s->wake_ev = NULL;
    peerfd_close_socket(s->fd);
    s->fd = -1;
    close_pipe(s);
    /* The decoder's and the reads' buffers go (those of jobs still out,
     * which an earlier job's end left unfed, when they come back); the
     * state stays for queries. */
    lm_decoder_free(&s->prof.dec);
    if (s->feed.out == 0)
        release_buffers(s);
    __atomic_store_n(&s->mem_fed, fed_memory(s), __ATOMIC_RELAXED);
    srv->nlive--;
    srv->nended++;
    switch (state) {
    case LJMP__SESSION_STATE__COMPLETE:
        srv->counters.sessions_complete++;
        break;
    case LJMP__SESSION_STATE__TRUNCATED:
        srv->counters.sessions_truncated++;
        break;
    default:
        srv->counters.sessions_malformed++;
        break;
    }
    log_msg(state == LJMP__SESSION_STATE__COMPLETE ? LOG_INFO : LOG_WARN,
            "session %llu: pid %d %s%s%s (%llu events, %llu stream bytes)",
            (unsigned long long)s->id, (int)s->pid, ljmp_wire_state_name(state),
            s->reason[0] ? ": " : "", s->reason,
            (unsigned long long)lm_totals_events(&s->prof.state.totals),
            (unsigned long long)s->stream_bytes);
    notify(s, ENDED);
}

/* Tells a version 2 VM that it may stream: what ljmpd needed from the
 * live process is read.  One byte into an empty socket buffer does not
 * block; if the VM is gone already, its reads will say so. */
static void ack_hello(struct session *s)
{
    /* Through a pipe, with word that wake-asks are answered. */
    uint8_t ack[2] = {LJMP_HELLO_ACK, LJMP_WAKE};
    size_t n = s->pipe_taken ? 2 : 1;

    if (send(s->fd, ack, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
        log_debug("session %llu: hello not acknowledged: %s",
                  (unsigned long long)s->id, strerror(errno));
}

/*
 * Whether fd is an anonymous pipe, by its name in /proc (which asks no
 * file system, as fstat of a file on a stuck mount would): a named FIFO
 * is refused, since its reads cannot be told not to wait (RWF_NOWAIT).
 */
static int is_anonymous_pipe(int fd)
{
    char path[64], name[32];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, name, sizeof(name) - 1);
    if (n <= 0)
        return 0;
    name[n] = '\0';
    return strncmp(name, "pipe:[", 6) == 0;
}

static ssize_t read_socket(struct session *s, uint8_t *buf, size_t n);
static void session_fail_on_socket(struct session *s, const char *why);

/* Answers the VM's wake-ask once the pipe is as empty as it asked.  One
 * byte for each ask of five: it fits, unless the VM flooded its socket
 * with asks, and then it is the VM that waits. */
static void wake_if_due(struct session *s)
{
    (void)ljmp_wake_answer(&s->wake, s->pipe_fd, s->fd);
}

/* The VM's socket, beside its pipe: wake-asks, then its close (the
 * pipe's end says how the session ended). */
static void session_wake_asked(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    uint8_t buf[64], bad = 0;
    ssize_t n = read_socket(s, buf, sizeof(buf));

    (void)fd;
    (void)what;
    if (s->phase == SESSION_ENDED || s->hangup[0] != '\0' ||
        (n < 0 && (errno == EINTR || errno == EAGAIN)))
        return;
    if (n <= 0) {
        event_del(s->wake_ev);
        return;
    }
    if (ljmp_wake_take(&s->wake, buf, (size_t)n, &bad) != 0) {
        char why[96];
        snprintf(why, sizeof(why),
                 "byte 0x%02x on the socket beside the pipe (only "
                 "wake-asks go there)",
                 bad);
        session_fail_on_socket(s, why);
        return;
    }
    wake_if_due(s);
}

/*
 * After a whole hello: a version 3 VM streams through the pipe whose read
 * end came with it (see ljmp_ingest.h), so the stream is read from there,
 * and nothing may follow the hello on the socket (`after`: the bytes that
 * came with it).  The descriptor is the peer's to choose: it must be a pipe's
 * read end, and is read without blocking whatever the peer does with its
 * flags (read_stream).  0, or -1 once the session is refused.
 */
static int take_pipe(struct session *s, size_t after)
{
    int fl;

    if (s->bad_fds) {
        session_reject(s, "file descriptors other than one pipe came with "
                          "the hello");
        return -1;
    }
    if (s->hello[4] >= LJMP_INGEST_STACKS_VERSION && s->pipe_fd < 0)
        return 0; /* since version 4, a pipe is the VM's choice */
    if (s->hello[4] < LJMP_INGEST_PIPE_VERSION) {
        if (s->pipe_fd < 0)
            return 0;
        session_reject(s,
                       "a version %u hello came with a file descriptor "
                       "(only version %u's brings its pipe)",
                       s->hello[4], LJMP_INGEST_PIPE_VERSION);
        return -1;
    }
    if (s->pipe_fd < 0) {
        session_reject(s, "a version %u hello came without its pipe",
                       s->hello[4]);
        return -1;
    }
    if (!is_anonymous_pipe(s->pipe_fd) ||
        (fl = fcntl(s->pipe_fd, F_GETFL)) < 0 || (fl & O_ACCMODE) != O_RDONLY) {
        session_reject(s, "the file descriptor sent with the hello is not a "
                          "pipe's read end");
        return -1;
    }
    if (after > 0) {
        session_reject(s,
                       "%zu bytes on the socket after a version %u "
                       "hello (its stream comes through the pipe)",
                       after, s->hello[4]);
        return -1;
    }
    fcntl(s->pipe_fd, F_SETFL, fl | O_NONBLOCK);
    s->pipe_taken = 1;
    s->wake_ev = event_new(s->srv->base, s->fd, EV_READ | EV_PERSIST,
                           session_wake_asked, s);
    if (s->wake_ev == NULL) {
        session_reject(s, "ljmpd is out of memory for the session's events");
        return -1;
    }
    event_priority_set(s->wake_ev, PRIO_INGEST);
    event_add(s->wake_ev, NULL);
    event_del(s->ev);
    event_assign(s->ev, s->srv->base, s->pipe_fd, EV_READ | EV_PERSIST,
                 session_read, s);
    event_priority_set(s->ev, PRIO_INGEST);
    return 0;
}

/* Takes hello bytes; returns how many, or -1 once the session ended. */
static int is_notice(const struct session *s)
{
    return s->hello_len >= 4 && memcmp(s->hello, LJMP_NOTICE_MAGIC, 4) == 0;
}

/* The whole hello's size, as far as its bytes so far tell. */
static size_t hello_size(const struct session *s)
{
    if (is_notice(s))
        return LJMP_NOTICE_SIZE;
    if (s->hello_len < 7)
        return 7;
    if (s->hello[5] == LJMP_VM_RELAYED)
        return 7 + (size_t)s->hello[6] + LJMP_RELAY_PID_SIZE;
    return ljmp_hello_size(s->hello, s->hello_len);
}

/* Names s by process pid rather than by its peer: its command line, its
 * start and where it runs.  0, or -1 once rejected. */
static int name_by_process(struct session *s, pid_t pid)
{
    char *cmdline = procinfo_cmdline(pid), *cgroup;

    if (cmdline == NULL) {
        session_reject(s, "out of memory for a relayed stream's process");
        return -1;
    }
    free(s->cmdline);
    s->cmdline = cmdline;
    s->pid = pid;
    s->process_start_ms = procinfo_start_ms(pid);
    s->nancestors = 0;
    if ((cgroup = where_from(s)) == NULL) {
        session_reject(s, "out of memory for a relayed stream's process");
        return -1;
    }
    free(s->cgroup);
    s->cgroup = cgroup;
    return 0;
}

/* The relayed stream's name (the hello's version string) before its
 * process's command line, where list and top show it (clients mask what
 * a peer's bytes hold, as they do a command line's).  0, or -1 once
 * rejected. */
static int show_name(struct session *s)
{
    char *shown;

    if (asprintf(&shown, "[%.*s] %s", (int)s->hello[6],
                 (const char *)s->hello + 7, s->cmdline) < 0) {
        session_reject(s, "out of memory for a relayed stream's name");
        return -1;
    }
    free(s->cmdline);
    s->cmdline = shown;
    return 0;
}

/* A relayed stream (ljmp_ingest.h): named by the process it says it is
 * of, if the relay's user owns that process; 0, or -1 once rejected. */
static int take_relay(struct session *s)
{
    const uint8_t *p = s->hello + 7 + s->hello[6];
    uint32_t pid = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24;
    long owner;

    if (s->hello[5] != LJMP_VM_RELAYED)
        return 0;
    if (s->hello[4] != LJMP_INGEST_ACK_VERSION) {
        session_reject(s, "a relayed stream's hello of version %u, not %u",
                       s->hello[4], LJMP_INGEST_ACK_VERSION);
        return -1;
    }
    s->relayed = 1;
    if (pid != 0 && pid != (uint32_t)s->pid &&
        (pid > INT32_MAX || (owner = procinfo_owner((pid_t)pid)) < 0)) {
        session_reject(s, "a relayed stream of pid %u: no such process", pid);
        return -1;
    }
    if (pid != 0 && pid != (uint32_t)s->pid) {
        if (s->uid != 0 && (uid_t)owner != s->uid) {
            session_reject(s,
                           "a relayed stream of pid %u: the process belongs "
                           "to uid %ld, not to the relay's uid %u",
                           pid, owner, (unsigned)s->uid);
            return -1;
        }
        if (name_by_process(s, (pid_t)pid) != 0)
            return -1;
    }
    return show_name(s);
}

/*
 * A notice from the process of n (ljmp_ingest.h): its session whose
 * stream ends where the notice says takes the reason, now if it ended
 * already, else when it ends.  The connection was never a session.
 */
static void take_notice(struct session *n)
{
    struct server *srv = n->srv;
    uint64_t at = ljmp_get_u64le(n->hello + 5);
    struct session *s;
    unsigned told = 0;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (s == n || s->pid != n->pid || s->uid != n->uid ||
            s->start_ms > n->start_ms)
            continue;
        session_lock(s); /* a feed thread may be counting its bytes */
        uint64_t fed = s->stream_bytes;
        session_unlock(s);
        if (fed > at)
            continue;
        if (s->phase == SESSION_ENDED &&
            s->state != LJMP__SESSION_STATE__TRUNCATED)
            continue;
        s->gave_up = n->hello[4];
        s->gave_up_at = at;
        if (s->phase == SESSION_ENDED && note_gave_up(s))
            log_warn("session %llu: %s", (unsigned long long)s->id, s->reason);
        told++;
    }
    log_debug("session %llu: pid %d: a notice that a VM gave up at %llu "
              "stream bytes, for %u of its sessions",
              (unsigned long long)n->id, (int)n->pid, (unsigned long long)at,
              told);
    n->rejected = 1; /* never a session */
    srv->nlive--;
    TAILQ_REMOVE(&srv->sessions, n, link);
    session_free(n);
}

/* The stacks a version 4 hello says its stream carries (a depth past the
 * format's is the stream's to refuse: the decoder checks what comes). */
static void take_hello_stacks(struct session *s)
{
    const uint8_t *p = s->hello + 7 + s->hello[6];

    if (s->hello[4] < LJMP_INGEST_STACKS_VERSION)
        return;
    s->stacks = p[0];
    s->stack_sample = ljmp_get_u64le(p + 1);
}

static ssize_t take_hello(struct session *s, const uint8_t *p, size_t n)
{
    size_t want = hello_size(s);
    size_t take = want - s->hello_len < n ? want - s->hello_len : n;

    memcpy(s->hello + s->hello_len, p, take);
    s->hello_len += take;
    if (is_notice(s)) {
        if (s->hello_len < LJMP_NOTICE_SIZE)
            return (ssize_t)take;
        take_notice(s);
        return -1;
    }
    if (s->hello_len >= 4 && memcmp(s->hello, LJMP_HELLO_MAGIC, 4) != 0) {
        session_reject(s, "not an ljmp ingest stream (no hello)");
        return -1;
    }
    if (s->hello_len >= 5 && (s->hello[4] < LJMP_INGEST_MIN_VERSION ||
                              s->hello[4] > LJMP_INGEST_VERSION)) {
        session_reject(
            s, "ingest protocol version %u; this ljmpd speaks %u to %u",
            s->hello[4], LJMP_INGEST_MIN_VERSION, LJMP_INGEST_VERSION);
        return -1;
    }
    if (clock_now_ms() - s->start_ms > s->srv->cfg.hello_timeout_ms) {
        session_reject(s, "no whole hello within %u ms",
                       s->srv->cfg.hello_timeout_ms);
        return -1;
    }
    if (s->hello_len < hello_size(s))
        return (ssize_t)take; /* the version string or a pid follows */
    if (s->hello_len == want) {
        if (take_pipe(s, n - take) != 0 || take_relay(s) != 0)
            return -1;
        s->vm_flavour = s->hello[5];
        memcpy(s->vm_version, s->hello + 7, s->hello[6]);
        s->vm_version[s->hello[6]] = '\0';
        take_hello_stacks(s);
        session_set_phase(s, SESSION_STREAM);
        event_add(s->ev, NULL); /* no more hello deadline */
        log_debug("session %llu: hello from %s", (unsigned long long)s->id,
                  s->vm_version);
        /* Waiters for the process are answered now; features may hold
         * the stream (C symbols are read before any byte is decoded). */
        notify(s, STARTED);
        if (s->phase == SESSION_STREAM && s->holds == 0)
            start_streaming(s);
    }
    return (ssize_t)take;
}

static uint64_t session_events(const struct session *s)
{
    return lm_totals_events(&s->prof.state.totals);
}

/* A budget shared by the live sessions: each one's part. */
static size_t live_share(const struct server *srv, size_t budget)
{
    return budget / (srv->nlive ? srv->nlive : 1);
}

/*
 * The core applies records directly while a profile fits in the caches,
 * and through its prefetch pipeline once it does not.  The caches are
 * shared by every live session, so each gets its share of the budget
 * (bench/daemon.sh's replayed ingest decides it; see bench/README.md).
 */
#define DIRECT_BUDGET (1u << 20)

static void session_take(struct session *s, const uint8_t *p, size_t n);

/* Stream bytes go to the decoder, on a feed thread if there are any. */
static void take_stream(struct session *s, const uint8_t *p, size_t n)
{
    feed_post(&s->feed, p, n, live_share(s->srv, DIRECT_BUDGET));
    if (s->feed.out >= session_jobs_max(s->srv))
        session_pause_reading(s);
}

static void session_hangup(struct session *s, const char *why);

/* A job's results: its events counted, its bytes recorded, the stream's
 * end or error acted on. */
static void take_results(struct session *s, const struct feed_job *j)
{
    s->srv->counters.ingest_events += j->events;
    if (j->used > 0)
        notify_fed(s, j->at, j->p, j->used);
    if (s->phase == SESSION_ENDED)
        return; /* an observer ended it (its budget) */
    if (j->st == LM_ERROR && s->over[0] != '\0') {
        s->error_offset = s->stream_bytes;
        /* A stop asked for already says why (the user's budget). */
        session_end(s, LJMP__SESSION_STATE__FAILED, "%s",
                    s->hangup[0] != '\0' ? s->hangup : s->over);
        return;
    }
    if (j->st == LM_ERROR) {
        s->error_offset = s->prof.dec.err_offset;
        session_end(s, LJMP__SESSION_STATE__FAILED,
                    "malformed stream at offset %llu: %s",
                    (unsigned long long)s->prof.dec.err_offset,
                    s->prof.dec.errmsg);
        return;
    }
    if (j->st == LM_DONE && s->relayed) {
        /* A relay sends no trailer: the end marker is the end. */
        session_end(s, LJMP__SESSION_STATE__COMPLETE,
                    "a relayed stream, ended by its end marker (no VM "
                    "trailer)");
        return;
    }
    if (j->st == LM_DONE)
        session_set_phase(s, SESSION_TRAILER);
    /* The trailer, if it came with the epilogue. */
    session_take(s, j->p + j->used, j->n - j->used);
}

/*
 * Reading ahead lets a lone VM's bursts wait in ljmpd's buffers rather
 * than in its socket, where they would stall it; with many VMs it only
 * makes their snapshots later (bench/daemon.sh's latency with 32 VMs).
 * So the live sessions share READ_AHEAD bytes of reads out, and each may
 * have at least two.
 */
#define READ_AHEAD (2u << 20)

static size_t read_size(const struct server *srv);

unsigned session_jobs_max(const struct server *srv)
{
    size_t n = live_share(srv, READ_AHEAD) / read_size(srv);

    return n < 2 ? 2 : n > FEED_JOBS ? FEED_JOBS : (unsigned)n;
}

void session_pause_reading(struct session *s)
{
    event_del(s->ev);
    s->read_paused = 1;
    if (s->feed.out > 0)
        feed_wait_for(&s->feed);
}

/* Whether paused s may be read again: it did not hang up, and a buffer
 * is free. */
static int may_read(struct session *s)
{
    return s->hangup[0] == '\0' && s->feed.out < session_jobs_max(s->srv);
}

int session_resume_reading(struct session *s)
{
    if (!s->read_paused || s->phase == SESSION_ENDED || s->holds > 0 ||
        !may_read(s))
        return 0;
    s->read_paused = 0;
    event_add(s->ev, NULL);
    return 1;
}

int session_still(const struct session *s)
{
    return (s->holds > 0 || s->phase == SESSION_ENDED) && s->feed.out == 0;
}

/* A job's results, back on the loop: counted, recorded, the stream's end
 * acted on; then the session reads on, or waits for its jobs out. */
static void session_fed(struct feed_job *j, void *owner)
{
    struct session *s = owner;

    if (s->phase != SESSION_ENDED) {
        if (j->ran)
            take_results(s, j);
        else
            session_take(s, j->p, j->n); /* after the stream's end */
    }
    give_back_buffer(s, j);
    if (session_still(s))
        notify(s, STILL); /* its last job out is back */
    if (s->phase == SESSION_ENDED) {
        if (s->feed.out == 0)
            release_buffers(s);
        return;
    }
    if (s->feed.out == 0 && s->hangup[0] != '\0') {
        session_stop(s, s->hangup, s->hangup_failed);
    } else if (!session_resume_reading(s) && s->feed.out > 0 &&
               (s->read_paused || s->hangup[0] != '\0')) {
        feed_wait_for(&s->feed); /* still waiting */
    }
}

/* Checks the VM's totals against what the daemon decoded. */
static void verify_trailer(struct session *s)
{
    uint64_t events = session_events(s);

    ljmp_trailer_decode(s->trailer, &s->trailer_events, &s->trailer_bytes);
    session_set_phase(s, SESSION_CLOSING);
    if (s->trailer_events != events || s->trailer_bytes != s->stream_bytes) {
        session_end(s, LJMP__SESSION_STATE__FAILED,
                    "the VM wrote %llu events in %llu bytes; ljmpd read "
                    "%llu events in %llu bytes",
                    (unsigned long long)s->trailer_events,
                    (unsigned long long)s->trailer_bytes,
                    (unsigned long long)events,
                    (unsigned long long)s->stream_bytes);
    }
}

static ssize_t take_trailer(struct session *s, const uint8_t *p, size_t n)
{
    size_t take = LJMP_TRAILER_SIZE - s->trailer_len;

    if (take > n)
        take = n;
    memcpy(s->trailer + s->trailer_len, p, take);
    s->trailer_len += take;
    if (s->trailer_len >= 4 && memcmp(s->trailer, LJMP_TRAILER_MAGIC, 4) != 0) {
        s->error_offset = s->stream_bytes;
        session_end(s, LJMP__SESSION_STATE__FAILED,
                    "bytes after the epilogue are not a trailer");
        return -1;
    }
    if (s->trailer_len == LJMP_TRAILER_SIZE)
        verify_trailer(s);
    return (ssize_t)take;
}

/* Takes n bytes from the connection, through the phases. */
static void session_take(struct session *s, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t used;
        switch (s->phase) {
        case SESSION_HELLO:
            used = take_hello(s, p, n);
            break;
        case SESSION_STREAM:
            if (s->holds > 0) {
                s->held = p; /* in the next read buffer, which stays free */
                s->held_len = n;
                return;
            }
            take_stream(s, p, n); /* session_fed goes on */
            return;
        case SESSION_TRAILER:
            used = take_trailer(s, p, n);
            break;
        case SESSION_CLOSING:
            session_end(s, LJMP__SESSION_STATE__FAILED,
                        "%zu bytes after the trailer", n);
            return;
        default:
            return;
        }
        if (used < 0)
            return;
        p += used;
        n -= (size_t)used;
    }
}

void session_adopt_symbols(struct session *s, struct lm_symtab *symtab,
                           struct csyms *c)
{
    /* Nothing was decoded yet: the state's table is still empty. */
    session_lock(s);
    struct lm_symtab empty = s->prof.state.sym;
    s->prof.state.sym = *symtab;
    *symtab = empty;
    session_unlock(s);
    s->csyms = *c;
    s->csyms.symtab = &s->prof.state.sym;
    memset(c, 0, sizeof(*c));
}

void session_hold(struct session *s)
{
    /* An ended session is not read any more (its event is gone). */
    if (s->holds++ == 0 && s->phase != SESSION_ENDED)
        session_pause_reading(s);
}

void session_release(struct session *s)
{
    if (--s->holds == 0 && s->phase != SESSION_ENDED)
        start_streaming(s);
}

/*
 * Nothing holds the stream any more: the VM is told it may stream (once),
 * it is read again, and what it sent meanwhile is taken.
 */
static void start_streaming(struct session *s)
{
    if (!s->acked && s->hello[4] >= LJMP_INGEST_ACK_VERSION)
        ack_hello(s);
    if (!s->acked)
        s->acked_ms = clock_now_ms();
    s->acked = 1;
    (void)session_resume_reading(s);
    if (s->held_len > 0) {
        const uint8_t *p = s->held;
        size_t n = s->held_len;
        s->held = NULL;
        s->held_len = 0;
        session_take(s, p, n);
    }
}

/* The VM hung up: how complete was its session? */
static void session_hangup(struct session *s, const char *why)
{
    switch (s->phase) {
    case SESSION_HELLO:
        session_reject(s, "connection %s before a whole hello (%zu bytes)", why,
                       s->hello_len);
        break;
    case SESSION_STREAM:
        if (lm_decoder_finish(&s->prof.dec) == LM_ERROR) {
            s->error_offset = s->prof.dec.err_offset;
            session_end(s, LJMP__SESSION_STATE__FAILED, "connection %s: %s",
                        why, s->prof.dec.errmsg);
        } else {
            session_end(s, LJMP__SESSION_STATE__TRUNCATED, "connection %s: %s",
                        why, s->prof.dec.errmsg);
        }
        break;
    case SESSION_TRAILER:
        session_end(s, LJMP__SESSION_STATE__TRUNCATED,
                    "connection %s after the epilogue, before the trailer: "
                    "the VM's totals are unknown",
                    why);
        break;
    case SESSION_CLOSING:
        session_end(s, LJMP__SESSION_STATE__COMPLETE, "%s", "");
        break;
    case SESSION_ENDED:
        break;
    }
}

/*
 * A loop turn serves every ready session once, and timers (snapshots)
 * only between turns: with many busy VMs reading --read-budget each, a
 * turn would hold snapshots back by as long as it takes.  So the live
 * sessions share TURN_BUDGET, each taking at least READ_MIN (a smaller
 * read costs more than it saves) and at most --read-budget, which alone
 * serves one VM.  bench/daemon.sh's latency with 32 VMs decides both.
 */
#define TURN_BUDGET (2u << 20)
#define READ_MIN    (32u << 10)

static size_t read_size(const struct server *srv)
{
    size_t share = live_share(srv, TURN_BUDGET);

    if (share < READ_MIN)
        share = READ_MIN;
    return share < srv->cfg.read_budget ? share : srv->cfg.read_budget;
}

/*
 * The VM hung up, its socket failed, or it broke the protocol there
 * (failed: then the session ends FAILED): the session ends now, or once
 * the jobs out are back, as a feed thread holds the decoder and the state
 * until then (and the state must have all the bytes read).  Nothing more
 * is read meanwhile; session_fed comes back here.
 */
static void session_stop(struct session *s, const char *why, int failed)
{
    if (s->feed.out > 0) {
        snprintf(s->hangup, sizeof(s->hangup), "%s", why);
        s->hangup_failed = failed;
        event_del(s->ev);
        if (s->wake_ev != NULL)
            event_del(s->wake_ev);
        feed_wait_for(&s->feed);
    } else if (failed) {
        s->error_offset = s->stream_bytes;
        session_end(s, LJMP__SESSION_STATE__FAILED, "%s", why);
    } else {
        session_hangup(s, why);
    }
}

static void session_gone(struct session *s, const char *why)
{
    session_stop(s, why, 0);
}

static void session_fail_on_socket(struct session *s, const char *why)
{
    session_stop(s, why, 1);
}

/* Keeps what came with the hello: one pipe's read end; more is noted
 * (take_pipe refuses it).  0, or -1 if descriptors came after the hello
 * (which would let a peer queue any number of them for closing). */
static int take_passed_fds(struct session *s, const struct peerfd_set *in)
{
    int after_hello = s->phase != SESSION_HELLO && (in->n > 0 || in->cut);

    if (in->cut)
        s->bad_fds = 1;
    for (unsigned i = 0; i < in->n; i++) {
        if (!after_hello && s->pipe_fd < 0 && !s->bad_fds && in->n == 1) {
            s->pipe_fd = in->fd[i];
            continue;
        }
        s->bad_fds = 1;
        peerfd_close(in->fd[i]);
    }
    return after_hello ? -1 : 0;
}

/* Reads from the VM's socket, taking what descriptors come with the bytes
 * (peerfd_recv); -1 with errno EPROTO once the session ended for
 * them. */
static ssize_t read_socket(struct session *s, uint8_t *buf, size_t n)
{
    struct peerfd_set in;
    ssize_t r = peerfd_recv(s->fd, buf, n, &in);

    if (r >= 0 && take_passed_fds(s, &in) != 0) {
        session_fail_on_socket(
            s, "a file descriptor came on the socket after the hello");
        errno = EPROTO;
        return -1;
    }
    return r;
}

/*
 * Reads stream bytes: from the socket with the descriptors that come (a
 * version 3 hello brings its pipe); from a pipe without waiting even if
 * its flags say otherwise: the peer holds that file description too, and
 * could clear O_NONBLOCK and drain the pipe between our poll and our read.
 */
static ssize_t read_stream(struct session *s, int fd, uint8_t *buf, size_t n)
{
    if (fd == s->pipe_fd) {
        /* An old kernel answers EOPNOTSUPP: the session ends then. */
        struct iovec iov = {buf, n};
        return preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
    }
    return read_socket(s, buf, n);
}

/* One read per callback: a busy VM waits for the next loop iteration
 * while the others are served. */
static void session_read(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    struct server *srv = s->srv;
    ssize_t n;

    if (what & EV_TIMEOUT) {
        if (s->phase == SESSION_HELLO)
            session_reject(s, "no hello within %u ms",
                           srv->cfg.hello_timeout_ms);
        return;
    }
    if (s->feed.out >= session_jobs_max(srv)) {
        /* The limit fell (more live sessions) since take_stream checked:
         * left armed, the event would spin the loop on the readable
         * socket.  session_fed re-arms it. */
        session_pause_reading(s);
        return;
    }
    uint8_t *buf = next_buffer(s);
    if (buf == NULL) {
        session_fail_on_socket(s, "ljmpd is out of memory for its read "
                                  "buffers");
        return;
    }
    n = read_stream(s, fd, buf, read_size(srv));
    if (s->phase == SESSION_ENDED || s->hangup[0] != '\0')
        return; /* the VM broke the protocol (read_socket) */
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN)
            return;
        session_gone(s, strerror(errno));
        return;
    }
    if (n == 0) {
        session_gone(s, "closed");
        return;
    }
    srv->counters.ingest_bytes += (uint64_t)n;
    if (fd == s->pipe_fd)
        wake_if_due(s);
    session_take(s, buf, (size_t)n);
}

/* Bytes s's VM sent that ljmpd has not read yet, on its pipe or socket. */
static int unread_bytes(const struct session *s)
{
    int n = 0;

    if (ioctl(s->pipe_fd >= 0 ? s->pipe_fd : s->fd, FIONREAD, &n) != 0)
        return 0;
    return n;
}

/* Whether ljmpd, not the VM, is the one behind with s's stream: jobs
 * out, reading paused or held, or bytes waiting to be read. */
static int ljmpd_behind(const struct session *s)
{
    return s->feed.out > 0 || s->read_paused || s->holds > 0 ||
           s->held_len > 0 || unread_bytes(s) > 0;
}

/* Whether s's symbol table and the events' header were decoded; not yet
 * known while a feed thread decodes (which ljmpd_behind sees). */
static int stream_started(struct session *s)
{
    if (!s->started && session_trylock(s) == 0) {
        s->started = s->prof.dec.phase >= LM_PH_EVENTS;
        session_unlock(s);
    }
    return s->started;
}

/*
 * A VM writes its symbol table and the events' header as soon as its
 * hello is answered, in the call that starts the profile; an idle VM
 * sends nothing after them.  A peer that announced itself and did not
 * start streaming within --hello-timeout holds a slot for nothing.
 */
static int silent_past_deadline(struct session *s, uint64_t now)
{
    /* A relay's writer sends when it will (Tarantool's buffers 8 MiB
     * before its first write): its slot is its user's, under the caps. */
    return s->phase == SESSION_STREAM && s->acked && !s->started &&
           !s->relayed &&
           clock_elapsed_ms(now, s->acked_ms) > s->srv->cfg.hello_timeout_ms &&
           !stream_started(s) && !ljmpd_behind(s);
}

void session_expire_silent(struct server *srv, uint64_t now)
{
    struct session *s;

again:
    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!silent_past_deadline(s, now))
            continue;
        session_end(s, LJMP__SESSION_STATE__FAILED,
                    "no stream within %u ms of the hello's answer: a VM "
                    "sends its symbol table at once",
                    srv->cfg.hello_timeout_ms);
        /* Ending it may have forgotten finished sessions: look anew. */
        goto again;
    }
}
