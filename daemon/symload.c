/* C symbols read on a thread of their own: a process's ELF files can take
 * ljmpd a few hundred milliseconds, which the event loop must not wait. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ljmpd.h"
#include "log.h"

/*
 * One thread reads one process at a time.  Users take turns (see
 * take_next): any local user may connect many processes whose files are
 * made to be slow to read, and their loads must not hold everyone
 * else's VMs at the hello.
 */
struct symload {
    pthread_mutex_t mu;
    pthread_cond_t work;
    struct symload_job *todo; /* in arrival order */
    struct symload_job *done, **done_tail;
    uid_t last_uid; /* whose load was taken last */
    int stopping;
    struct bell bell; /* rung when the done list was empty */
    pthread_t thread;
    int running;
};

static void job_free(struct symload_job *j)
{
    lm_symtab_free(&j->symtab);
    csyms_free(&j->out);
    free(j);
}

static void job_read(struct symload_job *j)
{
    uint64_t t0 = now_ms();

    csyms_load(j->pid, &j->symtab, j->budget, &j->out);
    j->ms = now_ms() - t0;
    /* Read after the hello, the files may be those of another process
     * that took the pid meanwhile (while the VM lives, its pid is its;
     * with no process now, what was read was read before it went). */
    uint64_t now_start = read_process_start_ms(j->pid);
    j->gone = j->start_ms != 0 && now_start != 0 && now_start != j->start_ms;
}

/* Under l->mu: the oldest load of the next user after last_uid, in uid
 * order and round again, so that each user with loads waiting gets one
 * in turn. */
static struct symload_job *take_next(struct symload *l)
{
    struct symload_job **at, **best = NULL, **lowest = NULL;

    for (at = &l->todo; *at != NULL; at = &(*at)->next) {
        uid_t uid = (*at)->uid;
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

static void *symload_thread(void *arg)
{
    struct symload *l = arg;

    lower_own_priority();
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (l->todo == NULL && !l->stopping)
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stopping)
            break;
        struct symload_job *j = take_next(l);
        int skip = j->cancelled;
        pthread_mutex_unlock(&l->mu);

        if (!skip)
            job_read(j);

        pthread_mutex_lock(&l->mu);
        int wake = l->done == NULL;
        j->next = NULL;
        *l->done_tail = j;
        l->done_tail = &j->next;
        if (wake)
            bell_ring(&l->bell);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
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
    int rc;

    if (l == NULL)
        return -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    l->done_tail = &l->done;
    srv->symload = l;
    if (bell_init(&l->bell, srv, on_done, l, "symbol thread") != 0)
        return -1;
    rc = start_helper_thread(&l->thread, symload_thread, l);
    if (rc != 0) {
        log_error("symbol thread: %s", strerror(rc));
        return -1;
    }
    l->running = 1;
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
    pthread_cond_signal(&l->work);
    pthread_mutex_unlock(&l->mu);
}

void symload_cancel(struct session *s)
{
    struct symload_job *j = s->symload;
    struct symload *l = s->srv->symload;

    if (j == NULL)
        return;
    s->symload = NULL;
    /* Only the loop reads j->s: the thread reads into j's own fields,
     * and skips a job cancelled before it takes it. */
    j->s = NULL;
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        j->cancelled = 1;
        pthread_mutex_unlock(&l->mu);
    }
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

/* How long ljmpd's exit waits for a read under way. */
#define STOP_WAIT_S 2

static int joined_within(pthread_t t, int seconds)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    return pthread_timedjoin_np(t, NULL, &until) == 0;
}

void symload_stop(struct server *srv)
{
    struct symload *l = srv->symload;

    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_signal(&l->work);
    pthread_mutex_unlock(&l->mu);
    /* A read that does not end (a file on a mount that never answers)
     * must not hold ljmpd's exit: the thread is left to it, with what it
     * uses (l, and its bell's descriptor). */
    int left = l->running && !joined_within(l->thread, STOP_WAIT_S);
    if (left)
        log_warn("the symbol thread is still reading a process's files "
                 "after %d s; ljmpd exits without it",
                 STOP_WAIT_S);
    pthread_mutex_lock(&l->mu);
    drop_list(l->todo);
    drop_list(l->done);
    l->todo = l->done = NULL;
    l->done_tail = &l->done;
    pthread_mutex_unlock(&l->mu);
    srv->symload = NULL;
    if (left) {
        event_free(l->bell.ev);
        return;
    }
    bell_free(&l->bell);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mu);
    free(l);
    srv->symload = NULL;
}
