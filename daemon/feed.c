/* Feed threads: sessions' stream bytes decoded and applied off the event
 * loop, so that ljmpd ingests on every CPU it may use. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bell.h"
#include "feed.h"
#include "helper.h"
#include "session.h"
#include "log.h"

/*
 * A session's jobs run one at a time, in order, and it has at most
 * session_jobs_max() out: then its socket is not read, and a busy VM
 * waits in its socket as before.  Sessions with jobs take turns (one job
 * each, then to the back of the line), so one busy VM cannot starve the
 * others.
 */
struct feed {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a session queued, or stopping */
    pthread_cond_t idle; /* a job done */
    struct session *todo, **todo_tail;
    struct feed_job *done, **done_tail;
    unsigned running; /* jobs a thread has taken and not finished */
    int stopping;
    int woken; /* the bell rung since the loop last took the list */
    struct bell bell;
    pthread_t *threads;
    unsigned nthreads;
};

/* Decodes and applies a job's bytes; the loop reads the state meanwhile
 * only under the session's lock. */
static void feed_run(struct feed_job *j)
{
    struct session *s = j->s;

    j->ran = 1;
    session_lock(s);
    s->prof.state.direct_bytes = j->direct_bytes;
    uint64_t before = lm_totals_events(&s->prof.state.totals);
    j->used = 0;
    j->st = lm_profile_feed(&s->prof, j->p, j->n, &j->used);
    s->stream_bytes += j->used;
    j->events = lm_totals_events(&s->prof.state.totals) - before;
    session_unlock(s);
}

/* Under f->mu; wakes a thread if wake. */
static void list_session(struct feed *f, struct session *s, int wake)
{
    s->feed_next = NULL;
    *f->todo_tail = s;
    f->todo_tail = &s->feed_next;
    if (wake)
        pthread_cond_signal(&f->work);
}

/* The session's next job, taken off its queue (under f->mu). */
static struct feed_job *take_job(struct session *s)
{
    struct feed_job *j = &s->jobs[s->feed_run];

    s->feed_run = (s->feed_run + 1) % SESSION_BUFS;
    s->feed_queued--;
    return j;
}

/* Under f->mu: the loop takes the whole list when it wakes. */
static void wake_loop(struct feed *f)
{
    if (f->woken)
        return;
    f->woken = 1;
    bell_ring(&f->bell);
}

/*
 * Under f->mu.  The loop is woken for a job done only when it waits for
 * one (see feed_wait_for) or the job ended its stream; else the job
 * waits in the list until the loop has to wake, or its next tick.  A
 * wake-up for every job had the loop take the VM's CPU once a read
 * (a binary_trees run: 1100 times).
 */
static void add_done(struct feed *f, struct feed_job *j, int wake)
{
    j->next = NULL;
    *f->done_tail = j;
    f->done_tail = &j->next;
    if (wake)
        wake_loop(f);
}

static void *feed_thread(void *arg)
{
    struct feed *f = arg;

    helper_lower_priority();
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->todo == NULL && !f->stopping)
            pthread_cond_wait(&f->work, &f->mu);
        if (f->stopping)
            break;
        struct session *s = f->todo;
        if ((f->todo = s->feed_next) == NULL)
            f->todo_tail = &f->todo;
        struct feed_job *j = take_job(s);
        f->running++;
        pthread_mutex_unlock(&f->mu);

        feed_run(j);

        pthread_mutex_lock(&f->mu);
        f->running--;
        /* Bytes after the end of a stream are the loop's (a trailer), and
         * the loop may free the decoder once it sees the end. */
        if (j->st == LM_DONE || j->st == LM_ERROR)
            s->feed_ended = 1;
        add_done(f, j, s->feed_waited || s->feed_ended);
        s->feed_waited = 0;
        while (s->feed_queued > 0 && s->feed_ended)
            add_done(f, take_job(s), 1);
        /* Back in line; with none before it, this thread takes it on (its
         * caches hold the state), and another one woken for it would only
         * find the line empty: with one VM streaming, such wake-ups took
         * the VM's CPU from it a thousand times in a binary_trees run. */
        if (s->feed_queued > 0)
            list_session(f, s, f->todo != NULL);
        else
            s->feed_listed = 0;
        pthread_cond_broadcast(&f->idle);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Every job done so far, in the order they finished. */
static struct feed_job *take_done(struct feed *f)
{
    pthread_mutex_lock(&f->mu);
    struct feed_job *list = f->done;
    f->done = NULL;
    f->done_tail = &f->done;
    f->woken = 0;
    pthread_mutex_unlock(&f->mu);
    return list;
}

static void give_back(struct feed_job *list)
{
    while (list != NULL) {
        struct feed_job *j = list;
        list = j->next;
        session_fed(j);
    }
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    (void)fd;
    (void)what;
    bell_answer(&srv->feed->bell);
    give_back(take_done(srv->feed));
}

void feed_collect(struct server *srv)
{
    if (srv->feed != NULL && srv->feed->nthreads > 0)
        give_back(take_done(srv->feed));
}

void feed_wait_for(struct session *s)
{
    struct feed *f = s->srv->feed;

    if (f == NULL || f->nthreads == 0)
        return;
    pthread_mutex_lock(&f->mu);
    s->feed_waited = 1;
    /* Jobs done before may be s's. */
    if (f->done != NULL)
        wake_loop(f);
    pthread_mutex_unlock(&f->mu);
}

/*
 * Whether the loop decodes s's new job of n bytes itself: a read under
 * cfg.inline_bytes costs less to decode than to hand over (two context
 * switches, and an idle VM sends a few bytes now and then).  Only with
 * no job of s out: they must run in order.  Larger reads go to the
 * threads even for a lone VM, since the loop then reads ahead into the
 * session's other buffers while a thread applies: on Debian's default
 * socket buffer (net.core.wmem_max: 416 KiB for the VM's socket) a
 * binary_trees VM waited on its socket 133 times a run (median of 8)
 * with the loop applying its reads itself, and 22 times with 2 MiB read
 * ahead (bench/README.md).
 */
static int fed_on_loop(const struct session *s, size_t n)
{
    return s->jobs_out == 1 && n < s->srv->cfg.inline_bytes;
}

void feed_post(struct session *s, const uint8_t *p, size_t n,
               uint64_t direct_bytes)
{
    struct feed *f = s->srv->feed;
    struct feed_job *j = &s->jobs[(s->job_head + s->jobs_out) % SESSION_BUFS];

    j->p = p;
    j->n = n;
    j->at = s->post_offset;
    j->direct_bytes = direct_bytes;
    j->ran = 0;
    s->post_offset += n;
    s->jobs_out++;
    if (f->nthreads == 0 || fed_on_loop(s, n)) {
        /* No job of s is out, so no thread holds it; the threads' next
         * job must stay in step with the loop's. */
        pthread_mutex_lock(&f->mu);
        s->feed_run = (s->feed_run + 1) % SESSION_BUFS;
        pthread_mutex_unlock(&f->mu);
        feed_run(j);
        session_fed(j);
        return;
    }
    if (s->jobs_out >= session_jobs_max(s->srv))
        session_pause_reading(s);
    pthread_mutex_lock(&f->mu);
    s->feed_queued++;
    if (s->feed_ended) {
        add_done(f, take_job(s), 1);
    } else if (!s->feed_listed) {
        s->feed_listed = 1;
        list_session(f, s, 1);
    }
    pthread_mutex_unlock(&f->mu);
}

void feed_settle(struct server *srv)
{
    struct feed *f = srv->feed;

    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    while (f->todo != NULL || f->running > 0)
        pthread_cond_wait(&f->idle, &f->mu);
    pthread_mutex_unlock(&f->mu);
    give_back(take_done(f));
}

int feed_start(struct server *srv)
{
    struct feed *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    srv->feed = f;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->idle, NULL);
    f->todo_tail = &f->todo;
    f->done_tail = &f->done;
    f->bell.efd = -1;
    if (srv->cfg.feed_threads == 0)
        return 0;
    f->threads = calloc(srv->cfg.feed_threads, sizeof(*f->threads));
    if (f->threads == NULL) {
        log_error("feed threads: out of memory");
        return -1;
    }
    if (bell_init(&f->bell, srv->base, PRIO_DEFAULT, on_done, srv,
                  "feed threads") != 0)
        return -1;
    for (unsigned i = 0; i < srv->cfg.feed_threads; i++) {
        int rc = helper_start(&f->threads[i], feed_thread, f);
        if (rc != 0) {
            log_error("feed thread %u: %s", i, strerror(rc));
            break;
        }
        f->nthreads++;
    }
    return f->nthreads == srv->cfg.feed_threads ? 0 : -1;
}

void feed_stop(struct server *srv)
{
    struct feed *f = srv->feed;

    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    f->stopping = 1;
    pthread_cond_broadcast(&f->work);
    pthread_mutex_unlock(&f->mu);
    for (unsigned i = 0; i < f->nthreads; i++)
        pthread_join(f->threads[i], NULL);
    bell_free(&f->bell);
    pthread_cond_destroy(&f->idle);
    pthread_cond_destroy(&f->work);
    pthread_mutex_destroy(&f->mu);
    free(f->threads);
    free(f);
    srv->feed = NULL;
}
