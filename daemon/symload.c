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
        if (j->s != NULL)
            session_symbols_loaded(j->s, j);
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

void symload_post(struct session *s, size_t budget)
{
    struct symload *l = s->srv->symload;
    struct symload_job *j = calloc(1, sizeof(*j));

    if (j == NULL || lm_symtab_init(&j->symtab) != 0) {
        free(j);
        log_warn("session %llu: out of memory to read C symbols",
                 (unsigned long long)s->id);
        session_symbols_loaded(s, NULL);
        return;
    }
    j->s = s;
    j->pid = s->pid;
    j->uid = s->uid;
    j->budget = budget;
    j->start_ms = s->process_start_ms;
    s->symload = j;
    pthread_mutex_lock(&l->mu);
    struct symload_job **tail = &l->todo;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = j;
    more_readers(l);
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

void symload_cancel(struct session *s)
{
    struct symload_job *j = s->symload, **at;
    struct symload *l = s->srv->symload;
    int queued = 0;

    if (j == NULL)
        return;
    s->symload = NULL;
    /* Only the loop reads j->s: a reader reads into j's own fields, and
     * on_done frees a job read for no session. */
    j->s = NULL;
    if (l == NULL)
        return;
    /* One no reader took goes now: every reader may be held by a read
     * that never ends. */
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

static void drop_list(struct symload_job *list)
{
    while (list != NULL) {
        struct symload_job *j = list;
        list = j->next;
        if (j->s != NULL)
            j->s->symload = NULL;
        job_free(j);
    }
}

void symload_stop(struct server *srv)
{
    struct symload *l = srv->symload;

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
