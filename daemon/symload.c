/* C symbols read on threads of their own: a process's ELF files can take
 * ljmpd a few hundred milliseconds, which the event loop must not wait. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "bell.h"
#include "clock.h"
#include "helper.h"
#include "procinfo.h"
#include "quota.h"
#include "session.h"
#include "symload.h"
#include "log.h"

/*
 * Readers take one process at a time, and users take turns (see
 * take_next): any local user may connect many processes whose files are
 * made to be slow to read, and their loads must not hold everyone
 * else's VMs at the hello.  A read may also never end (a file on a FUSE
 * mount whose daemon never answers, even the open; csyms.c reads none on
 * users' FUSE mounts, but root's and network mounts may hang).  So a user's
 * processes are read by one reader at a time, and a load that finds
 * every reader busy starts another, up to SYMLOAD_READERS: a user whose
 * read hangs holds one reader, and their later loads wait behind it,
 * while other users' are read.
 */
enum { SYMLOAD_READERS = 4 };

/* A session's C symbols, read on a reader thread into a table of the
 * job's own, then moved into the session's state on the loop. */
struct symload_job {
    struct symload_job *next; /* in the to-do or the done list */
    struct session *s;        /* the loop's: NULL once the session is gone */
    struct event *timer;      /* the loop's: how long the session waits */
    pid_t pid;
    uid_t uid;
    size_t budget;
    uint64_t start_ms; /* when the process started, to tell a reused pid */
    struct lm_symtab symtab;
    struct csyms out;
    uint64_t ms; /* the read took */
    int gone;    /* the pid was another process's by the end of the read */
};

struct reader {
    struct symload *l;
    int busy; /* under l->mu: reading a process of uid */
    uid_t uid;
};

struct symload {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a load queued or a user's read over, or stopping */
    struct symload_job *todo; /* in arrival order */
    struct symload_job *done, **done_tail;
    uid_t last_uid; /* whose load was taken last */
    int stopping;
    struct bell bell; /* rung when the done list was empty */
    struct reader readers[SYMLOAD_READERS];
    pthread_t threads[SYMLOAD_READERS]; /* readers[i]'s */
    unsigned nreaders, idle;
};

static void job_free(struct symload_job *j)
{
    lm_symtab_free(&j->symtab);
    csyms_free(&j->out);
    free(j);
}

static void job_read(struct symload_job *j)
{
    uint64_t t0 = clock_now_ms();

    csyms_load(j->pid, &j->symtab, j->budget, &j->out);
    j->ms = clock_now_ms() - t0;
    /* Read after the hello, the files may be those of another process
     * that took the pid meanwhile (while the VM lives, its pid is its;
     * with no process now, what was read was read before it went). */
    uint64_t now_start = procinfo_start_ms(j->pid);
    j->gone = j->start_ms != 0 && now_start != 0 && now_start != j->start_ms;
}

/* Under l->mu: whether a reader is reading a process of uid. */
static int uid_being_read(const struct symload *l, uid_t uid)
{
    for (unsigned i = 0; i < l->nreaders; i++)
        if (l->readers[i].busy && l->readers[i].uid == uid)
            return 1;
    return 0;
}

/* Under l->mu: the oldest load of the next user after last_uid whose
 * processes no reader is reading, in uid order and round again, so that
 * each user with loads waiting gets one in turn. */
static struct symload_job *take_next(struct symload *l)
{
    struct symload_job **at, **best = NULL, **lowest = NULL;

    for (at = &l->todo; *at != NULL; at = &(*at)->next) {
        uid_t uid = (*at)->uid;
        if (uid_being_read(l, uid))
            continue;
        if (lowest == NULL || uid < (*lowest)->uid)
            lowest = at;
        if (uid > l->last_uid && (best == NULL || uid < (*best)->uid))
            best = at;
    }
    if (best == NULL)
        best = lowest;
    if (best == NULL)
        return NULL;
    struct symload_job *j = *best;
    *best = j->next;
    l->last_uid = j->uid;
    return j;
}

/* Under l->mu: the users with loads waiting whom no reader reads, each
 * a reader's work (a user's loads are read one at a time). */
static unsigned users_waiting(const struct symload *l)
{
    unsigned n = 0;

    for (const struct symload_job *j = l->todo; j != NULL; j = j->next) {
        const struct symload_job *k = l->todo;
        while (k != j && k->uid != j->uid)
            k = k->next;
        n += k == j && !uid_being_read(l, j->uid);
    }
    return n;
}

/* Under l->mu: j read, for the loop. */
static void job_done(struct symload *l, struct symload_job *j)
{
    int wake = l->done == NULL;

    j->next = NULL;
    *l->done_tail = j;
    l->done_tail = &j->next;
    if (wake)
        bell_ring(&l->bell);
}

static void *symload_thread(void *arg)
{
    struct reader *r = arg;
    struct symload *l = r->l;

    helper_lower_priority();
    pthread_mutex_lock(&l->mu);
    for (;;) {
        struct symload_job *j = NULL;
        while (!l->stopping && (j = take_next(l)) == NULL)
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stopping)
            break;
        l->idle--;
        r->busy = 1;
        r->uid = j->uid;
        pthread_mutex_unlock(&l->mu);

        job_read(j);

        pthread_mutex_lock(&l->mu);
        r->busy = 0;
        l->idle++;
        job_done(l, j);
        /* The user's next load may be taken now, by any reader. */
        pthread_cond_broadcast(&l->work);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Under l->mu: one more reader, idle; 0, or -1 without a thread. */
static int start_reader(struct symload *l)
{
    struct reader *r = &l->readers[l->nreaders];

    r->l = l;
    r->busy = 0;
    int rc = helper_start(&l->threads[l->nreaders], symload_thread, r);
    if (rc != 0) {
        log_warn("starting another thread to read C symbols: %s", strerror(rc));
        return -1;
    }
    l->idle++;
    if (l->nreaders++ > 0)
        log_info("C symbols are read on %u threads (every one was busy)",
                 l->nreaders);
    return 0;
}

/* Under l->mu: more readers, up to SYMLOAD_READERS, while the users
 * waiting outnumber the idle readers (which loads posted just before
 * may have spoken for); the first is started with ljmpd. */
static void more_readers(struct symload *l)
{
    unsigned want = users_waiting(l);

    if (l->nreaders == 0)
        want = 1;
    while (l->idle < want && l->nreaders < SYMLOAD_READERS && !l->stopping)
        if (start_reader(l) != 0)
            return;
}

static void stop_waiting(struct symload_job *j);
static void give_symbols(struct session *s, struct symload_job *j);

/* Loads done: each to its session, if it is still there. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    struct symload *l = arg;

    (void)fd;
    (void)what;
    bell_answer(&l->bell);
    pthread_mutex_lock(&l->mu);
    struct symload_job *list = l->done;
    l->done = NULL;
    l->done_tail = &l->done;
    pthread_mutex_unlock(&l->mu);
    while (list != NULL) {
        struct symload_job *j = list;
        list = j->next;
        struct session *s = j->s;
        if (s != NULL) {
            stop_waiting(j);
            give_symbols(s, j);
            session_release(s);
        }
        job_free(j);
    }
}

int symload_start(struct server *srv)
{
    struct symload *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    l->done_tail = &l->done;
    srv->symload = l;
    if (bell_init(&l->bell, srv->base, PRIO_DEFAULT, on_done, l,
                  "symbol thread") != 0)
        return -1;
    pthread_mutex_lock(&l->mu);
    more_readers(l);
    unsigned started = l->nreaders;
    pthread_mutex_unlock(&l->mu);
    if (started == 0) {
        log_error("no thread to read C symbols");
        return -1;
    }
    return 0;
}

/* Its session waits no longer for j (its symbols came, or not in time, or
 * it is going): j is read, if it is, for no session.  Only the loop reads
 * j->s: a reader reads into j's own fields, and on_done frees a job read
 * for no session. */
static void stop_waiting(struct symload_job *j)
{
    if (j->timer != NULL)
        event_free(j->timer);
    j->timer = NULL;
    *session_slot(j->s, &symload_observer) = NULL;
    j->s = NULL;
}

/* Drops j, which s waited for: at once if no reader took it (every reader
 * may be held by a read that never ends), else when its read is done. */
static void cancel(struct symload *l, struct symload_job *j)
{
    struct symload_job **at;
    int queued = 0;

    stop_waiting(j);
    pthread_mutex_lock(&l->mu);
    for (at = &l->todo; *at != NULL; at = &(*at)->next)
        if (*at == j) {
            *at = j->next;
            queued = 1;
            break;
        }
    pthread_mutex_unlock(&l->mu);
    if (queued)
        job_free(j);
}

/* The job s waits for, or NULL. */
static struct symload_job *waited_by(const struct session *s)
{
    return *session_slot(s, &symload_observer);
}

/*
 * What a session's C symbols may cost: a process's share, and, for users
 * other than root and ljmpd's own, what is left of their share across
 * their sessions (kept ones too), since any local user may connect as
 * many processes as the limits allow, each mapping files made to be
 * costly.
 */
static size_t budget_of(const struct session *s)
{
    const struct session *o;
    size_t used = 0;

    if (!quota_applies(s->uid))
        return CSYMS_PROCESS_BUDGET;
    TAILQ_FOREACH(o, &s->srv->sessions, link)
    if (o->uid == s->uid) {
        const struct symload_job *j = waited_by(o);
        used += j != NULL ? j->budget : o->csyms.cost;
    }
    if (used >= CSYMS_UID_BUDGET)
        return 0;
    return CSYMS_UID_BUDGET - used < CSYMS_PROCESS_BUDGET
               ? CSYMS_UID_BUDGET - used
               : CSYMS_PROCESS_BUDGET;
}

/*
 * A user's processes are read one at a time: one whose files are slow to
 * read (a FUSE mount that never answers, say) would hold the user's VMs
 * that connect after it, so a VM waits at most cfg.symbols_wait_ms for
 * its symbols, then streams without them.
 */
static void symbols_late(evutil_socket_t fd, short what, void *arg)
{
    struct symload_job *j = arg;
    struct session *s = j->s;

    (void)fd;
    (void)what;
    log_warn("session %llu: pid %d: its C symbols were not read within %u "
             "ms (the files of the process, or of those queued before it, "
             "are slow to read): its C functions stay unnamed",
             (unsigned long long)s->id, (int)s->pid,
             s->srv->cfg.symbols_wait_ms);
    cancel(s->srv->symload, j);
    session_release(s);
}

/* The symbols read into j, given to s (unless its pid was reused). */
static void give_symbols(struct session *s, struct symload_job *j)
{
    if (j->gone) {
        log_debug("session %llu: pid %d was gone before its C symbols "
                  "were read",
                  (unsigned long long)s->id, (int)s->pid);
        return;
    }
    session_adopt_symbols(s, &j->symtab, &j->out);
    log_debug("session %llu: pid %d: %u C symbols in %llu ms",
              (unsigned long long)s->id, (int)s->pid, s->csyms.n,
              (unsigned long long)j->ms);
    if (s->csyms.fuse_skipped > 0)
        log_warn("session %llu: pid %d: C symbols of %s%s not read: it "
                 "is on a FUSE mount of uid %ld, whose daemon may never "
                 "answer",
                 (unsigned long long)s->id, (int)s->pid, s->csyms.fuse_file,
                 s->csyms.fuse_skipped > 1 ? " and others" : "",
                 s->csyms.fuse_owner);
    if (s->csyms.over_budget)
        log_warn("session %llu: pid %d uid %u: C functions past the "
                 "first %u stay unnamed: %zu KiB of C symbols was all "
                 "it could have (%zu MiB a process, %zu MiB a user)",
                 (unsigned long long)s->id, (int)s->pid, (unsigned)s->uid,
                 s->csyms.n, s->csyms.budget >> 10, CSYMS_PROCESS_BUDGET >> 20,
                 CSYMS_UID_BUDGET >> 20);
}

/* s's hello was taken: its symbols are read while it is held, or, out
 * of memory, it streams without them. */
static void session_started(struct session *s, void *arg)
{
    struct symload *l = s->srv->symload;
    struct symload_job *j;
    const struct config *cfg = &s->srv->cfg;
    struct timeval wait = {(time_t)(cfg->symbols_wait_ms / 1000),
                           (suseconds_t)(cfg->symbols_wait_ms % 1000) * 1000};

    (void)arg;
    /* A relayed stream names its C functions itself (its symbol table);
     * its process's files may be another program's entirely. */
    if (l == NULL || s->relayed)
        return;
    j = calloc(1, sizeof(*j));
    if (j == NULL || lm_symtab_init(&j->symtab) != 0) {
        free(j);
        log_warn("session %llu: out of memory to read C symbols",
                 (unsigned long long)s->id);
        return;
    }
    j->pid = s->pid;
    j->uid = s->uid;
    j->budget = budget_of(s);
    j->start_ms = s->process_start_ms;
    j->s = s;
    *session_slot(s, &symload_observer) = j;
    j->timer = evtimer_new(s->srv->base, symbols_late, j);
    if (j->timer != NULL)
        evtimer_add(j->timer, &wait);
    session_hold(s);
    pthread_mutex_lock(&l->mu);
    struct symload_job **tail = &l->todo;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = j;
    more_readers(l);
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

/* s ended or is going: its symbols, if still awaited, are dropped. */
static void session_gone(struct session *s, void *arg)
{
    struct symload *l = s->srv->symload;
    struct symload_job *j;

    (void)arg;
    if (l != NULL && (j = waited_by(s)) != NULL)
        cancel(l, j);
}

const struct session_observer symload_observer = {
    .started = session_started,
    .ended = session_gone,
    .freed = session_gone,
};

static void drop_list(struct symload_job *list)
{
    while (list != NULL) {
        struct symload_job *j = list;
        list = j->next;
        job_free(j);
    }
}

void symload_stop(struct server *srv)
{
    struct symload *l = srv->symload;
    struct session *s;
    struct symload_job *j;

    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->work);
    unsigned n = l->nreaders;
    pthread_mutex_unlock(&l->mu);
    /* A read that does not end (a file on a mount that never answers)
     * must not hold ljmpd's stop: its thread is left to it, with what it
     * uses (l, and its bell's descriptor).  The kernel may still hold the
     * process's exit until the read ends (a FUSE request its daemon has
     * taken waits for the answer even when killed). */
    unsigned left = helper_join(l->threads, n, HELPER_STOP_WAIT_S);
    if (left > 0)
        log_warn("%u threads are still reading processes' files after %d "
                 "s; ljmpd stops without waiting for them (a read that "
                 "a FUSE daemon never answers keeps the process until "
                 "the mount goes)",
                 left, HELPER_STOP_WAIT_S);
    TAILQ_FOREACH(s, &srv->sessions, link)
    if ((j = waited_by(s)) != NULL)
        stop_waiting(j);
    pthread_mutex_lock(&l->mu);
    drop_list(l->todo);
    drop_list(l->done);
    l->todo = l->done = NULL;
    l->done_tail = &l->done;
    pthread_mutex_unlock(&l->mu);
    srv->symload = NULL;
    if (left > 0) {
        event_free(l->bell.ev);
        return;
    }
    bell_free(&l->bell);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
