/* The feed: streams' bytes decoded and applied on threads off the event
 * loop, each stream's jobs in order and one at a time, streams in turn. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bell.h"
#include "feed.h"
#include "helper.h"
#include "log.h"

/*
 * Streams with jobs queued wait in one line; a thread takes the first
 * stream's next job, and the stream goes to the back of the line if it
 * has more, so one busy VM cannot starve the others.  A stream's jobs
 * run one at a time: its decoder and state are one thread's at a time.
 */
struct feed {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a stream in line, or stopping */
    pthread_cond_t idle; /* a job done */
    struct feed_queue *line, **line_tail;
    struct feed_job *done, **done_tail;
    unsigned running; /* jobs a thread has taken and not finished */
    int stopping;
    int woken; /* the bell rung since the loop last took the list */
    size_t inline_bytes;
    struct bell bell;
    pthread_t *threads;
    unsigned nthreads;
};

static void run_job(struct feed_job *j)
{
    j->ran = 1;
    j->q->ops->run(j, j->q->owner);
}

/* Under f->mu; wakes a thread if wake. */
static void get_in_line(struct feed *f, struct feed_queue *q, int wake)
{
    q->next_in_line = NULL;
    *f->line_tail = q;
    f->line_tail = &q->next_in_line;
    if (wake)
        pthread_cond_signal(&f->work);
}

/* The stream's next job, taken off its queue (under f->mu). */
static struct feed_job *take_job(struct feed_queue *q)
{
    struct feed_job *j = &q->jobs[q->run];

    q->run = (q->run + 1) % FEED_JOBS;
    q->queued--;
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
 * waits in the list until the loop has to wake, or calls feed_collect.
 * A wake-up for every job had the loop take a lone VM's CPU once a read.
 */
static void add_done(struct feed *f, struct feed_job *j, int wake)
{
    j->next = NULL;
    *f->done_tail = j;
    f->done_tail = &j->next;
    if (wake)
        wake_loop(f);
}

/* Under f->mu: the stream's job j ran. */
static void job_ran(struct feed *f, struct feed_queue *q, struct feed_job *j)
{
    /* Bytes after the end of a stream are the owner's (a trailer), and
     * it may free the decoder once it sees the end. */
    if (j->st == LM_DONE || j->st == LM_ERROR)
        q->ended = 1;
    add_done(f, j, q->waited || q->ended);
    q->waited = 0;
    while (q->queued > 0 && q->ended)
        add_done(f, take_job(q), 1);
    /* Back in line; with none before it, this thread takes it on (its
     * caches hold the state), and another one woken for it would only
     * find the line empty. */
    if (q->queued > 0)
        get_in_line(f, q, f->line != NULL);
    else
        q->listed = 0;
    pthread_cond_broadcast(&f->idle);
}

static void *feed_thread(void *arg)
{
    struct feed *f = arg;

    helper_lower_priority();
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->line == NULL && !f->stopping)
            pthread_cond_wait(&f->work, &f->mu);
        if (f->stopping)
            break;
        struct feed_queue *q = f->line;
        if ((f->line = q->next_in_line) == NULL)
            f->line_tail = &f->line;
        struct feed_job *j = take_job(q);
        f->running++;
        pthread_mutex_unlock(&f->mu);

        run_job(j);

        pthread_mutex_lock(&f->mu);
        f->running--;
        job_ran(f, q, j);
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

/* On the loop: j is no longer out; its owner takes it back. */
static void give_back(struct feed_job *j)
{
    struct feed_queue *q = j->q;

    q->head = (q->head + 1) % FEED_JOBS;
    q->out--;
    q->ops->done(j, q->owner);
}

static void give_back_all(struct feed_job *list)
{
    while (list != NULL) {
        struct feed_job *j = list;
        list = j->next;
        give_back(j);
    }
}

static void on_bell(evutil_socket_t fd, short what, void *arg)
{
    struct feed *f = arg;

    (void)fd;
    (void)what;
    bell_answer(&f->bell);
    give_back_all(take_done(f));
}

void feed_collect(struct feed *f)
{
    if (f != NULL && f->nthreads > 0)
        give_back_all(take_done(f));
}

void feed_wait_for(struct feed_queue *q)
{
    struct feed *f = q->f;

    if (f->nthreads == 0)
        return;
    pthread_mutex_lock(&f->mu);
    q->waited = 1;
    /* Jobs done before may be q's. */
    if (f->done != NULL)
        wake_loop(f);
    pthread_mutex_unlock(&f->mu);
}

void feed_queue_init(struct feed_queue *q, struct feed *f,
                     const struct feed_ops *ops, void *owner)
{
    memset(q, 0, sizeof(*q));
    q->f = f;
    q->ops = ops;
    q->owner = owner;
    for (int i = 0; i < FEED_JOBS; i++)
        q->jobs[i].q = q;
}

struct feed_job *feed_next_job(struct feed_queue *q)
{
    return &q->jobs[(q->head + q->out) % FEED_JOBS];
}

/*
 * Whether the loop runs q's new job of n bytes itself: a small read costs
 * less to decode than to hand over (two context switches, and an idle VM
 * sends a few bytes now and then).  Only with no other job of q out: they
 * must run in order.  Larger reads go to the threads even for a lone VM,
 * since the loop then reads ahead into the owner's other buffers while a
 * thread applies, and a VM's bursts wait there rather than in its socket.
 */
static int runs_on_loop(const struct feed_queue *q, size_t n)
{
    return q->f->nthreads == 0 || (q->out == 1 && n < q->f->inline_bytes);
}

void feed_post(struct feed_queue *q, const uint8_t *p, size_t n,
               uint64_t direct_bytes)
{
    struct feed *f = q->f;
    struct feed_job *j = feed_next_job(q);

    j->p = p;
    j->n = n;
    j->at = q->post_offset;
    j->direct_bytes = direct_bytes;
    j->ran = 0;
    q->post_offset += n;
    q->out++;
    if (runs_on_loop(q, n)) {
        /* No job of q is out, so no thread holds it; the threads' next
         * job must stay in step with the loop's. */
        pthread_mutex_lock(&f->mu);
        q->run = (q->run + 1) % FEED_JOBS;
        pthread_mutex_unlock(&f->mu);
        run_job(j);
        give_back(j);
        return;
    }
    pthread_mutex_lock(&f->mu);
    q->queued++;
    if (q->ended) {
        add_done(f, take_job(q), 1);
    } else if (!q->listed) {
        q->listed = 1;
        get_in_line(f, q, 1);
    }
    pthread_mutex_unlock(&f->mu);
}

void feed_settle(struct feed *f)
{
    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    while (f->line != NULL || f->running > 0)
        pthread_cond_wait(&f->idle, &f->mu);
    pthread_mutex_unlock(&f->mu);
    give_back_all(take_done(f));
}

static int start_threads(struct feed *f, unsigned n)
{
    if ((f->threads = calloc(n, sizeof(*f->threads))) == NULL) {
        log_error("feed threads: out of memory");
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        int rc = helper_start(&f->threads[i], feed_thread, f);
        if (rc != 0) {
            log_error("feed thread %u: %s", i, strerror(rc));
            return -1;
        }
        f->nthreads++;
    }
    return 0;
}

struct feed *feed_new(struct event_base *base, int prio, unsigned nthreads,
                      size_t inline_bytes)
{
    struct feed *f = calloc(1, sizeof(*f));

    if (f == NULL) {
        log_error("feed: out of memory");
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->idle, NULL);
    f->line_tail = &f->line;
    f->done_tail = &f->done;
    f->inline_bytes = inline_bytes;
    f->bell = BELL_NONE;
    if (nthreads > 0 &&
        (bell_init(&f->bell, base, prio, on_bell, f, "feed threads") != 0 ||
         start_threads(f, nthreads) != 0)) {
        feed_free(f);
        return NULL;
    }
    return f;
}

void feed_free(struct feed *f)
{
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
}
