/* The feed scheduler without sockets: jobs of fake streams, run in order,
 * one at a time per stream, streams in turn, taken back on the loop. */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "feed.h"
#include "test_units.h"

/* A fake stream: what its jobs saw when they ran and came back. */
struct stream {
    struct feed_queue q;
    atomic_int busy;       /* its jobs running now */
    atomic_int overlapped; /* times two of its jobs ran at once */
    uint64_t ran_at[64];   /* offsets in the order they ran */
    atomic_uint nran;
    uint64_t done_at[64]; /* offsets in the order they came back */
    int done_ran[64];
    unsigned ndone;
    uint64_t end_at; /* the job at this offset ends the stream */
    int on_loop[64]; /* ran on the loop's thread */
    pthread_t loop;
    /* A gate the first job waits at, until the test opens it. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gated, open;
    /* The order jobs ran in across streams. */
    char *trace;
    atomic_uint *ntrace;
    char name;
};

static void wait_at_gate(struct stream *st)
{
    pthread_mutex_lock(&st->mu);
    while (st->gated && !st->open)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

static void open_gate(struct stream *st)
{
    pthread_mutex_lock(&st->mu);
    st->open = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

static void fake_run(struct feed_job *j, void *owner)
{
    struct stream *st = owner;

    if (atomic_fetch_add(&st->busy, 1) != 0)
        atomic_fetch_add(&st->overlapped, 1);
    unsigned i = atomic_fetch_add(&st->nran, 1);
    st->ran_at[i] = j->at;
    st->on_loop[i] = pthread_equal(pthread_self(), st->loop);
    if (st->trace != NULL)
        st->trace[atomic_fetch_add(st->ntrace, 1)] = st->name;
    if (i == 0)
        wait_at_gate(st);
    usleep(200); /* long enough for another thread to try the stream */
    j->used = j->n;
    j->events = 1;
    j->st = j->at == st->end_at ? LM_DONE : LM_NEED_MORE;
    atomic_fetch_sub(&st->busy, 1);
}

static void fake_done(struct feed_job *j, void *owner)
{
    struct stream *st = owner;

    CU_ASSERT(pthread_equal(pthread_self(), st->loop));
    st->done_at[st->ndone] = j->at;
    st->done_ran[st->ndone++] = j->ran;
}

static const struct feed_ops fake_ops = {fake_run, fake_done};

static void stream_init(struct stream *st, struct feed *f, char name)
{
    memset(st, 0, sizeof(*st));
    feed_queue_init(&st->q, f, &fake_ops, st);
    st->loop = pthread_self();
    st->end_at = UINT64_MAX;
    st->name = name;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
}

static void stream_free(struct stream *st)
{
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
}

static const uint8_t bytes[8192];

/* Posts a job of n bytes, taking jobs back first while the queue is full,
 * as a session stops reading then. */
static void post(struct feed *f, struct stream *st, size_t n)
{
    while (st->q.out >= FEED_JOBS - 1) {
        feed_wait_for(&st->q);
        feed_collect(f);
        usleep(100);
    }
    feed_post(&st->q, bytes, n, 0);
}

/* Each stream's jobs run in the order posted and never two at once, and
 * come back on the loop in that order, all of them. */
static void test_order_per_stream(void)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base, 0, 2, 0);
    struct stream st[3];

    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 3; i++)
        stream_init(&st[i], f, (char)('a' + i));
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < 3; i++)
            post(f, &st[i], 100 + (size_t)i);
    feed_settle(f);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(st[i].q.out, 0);
        CU_ASSERT_EQUAL(atomic_load(&st[i].overlapped), 0);
        CU_ASSERT_EQUAL(atomic_load(&st[i].nran), 20);
        CU_ASSERT_EQUAL(st[i].ndone, 20);
        for (unsigned k = 0; k < 20; k++) {
            uint64_t at = k * (100 + (uint64_t)i);
            CU_ASSERT_EQUAL(st[i].ran_at[k], at);
            CU_ASSERT_EQUAL(st[i].done_at[k], at);
            CU_ASSERT_EQUAL(st[i].done_ran[k], 1);
        }
        stream_free(&st[i]);
    }
    feed_free(f);
    event_base_free(base);
}

/* A stream with jobs queued goes to the back of the line after each job,
 * so a busy stream does not starve one that posted later. */
static void test_streams_take_turns(void)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base, 0, 1, 0);
    struct stream a, b;
    char trace[16] = {0};
    atomic_uint ntrace = 0;

    CU_ASSERT_FATAL(f != NULL);
    stream_init(&a, f, 'a');
    stream_init(&b, f, 'b');
    a.trace = b.trace = trace;
    a.ntrace = b.ntrace = &ntrace;
    a.gated = 1; /* the thread holds a's first job until b has posted */
    for (int k = 0; k < 4; k++)
        feed_post(&a.q, bytes, 1000, 0);
    for (int k = 0; k < 2; k++)
        feed_post(&b.q, bytes, 1000, 0);
    open_gate(&a);
    feed_settle(f);
    CU_ASSERT_STRING_EQUAL(trace, "ababaa");
    CU_ASSERT_EQUAL(a.ndone, 4);
    CU_ASSERT_EQUAL(b.ndone, 2);
    stream_free(&a);
    stream_free(&b);
    feed_free(f);
    event_base_free(base);
}

/* Once a job ends its stream, the jobs after it come back unrun (their
 * bytes are the owner's: a trailer), and later posts too. */
static void test_end_of_stream(void)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base, 0, 2, 0);
    struct stream st;

    CU_ASSERT_FATAL(f != NULL);
    stream_init(&st, f, 'a');
    st.end_at = 200;
    for (int k = 0; k < 5; k++)
        feed_post(&st.q, bytes, 100, 0);
    feed_settle(f);
    feed_post(&st.q, bytes, 100, 0);
    feed_settle(f);
    CU_ASSERT_EQUAL(atomic_load(&st.nran), 3);
    CU_ASSERT_EQUAL(st.ndone, 6);
    for (unsigned k = 0; k < 6; k++) {
        CU_ASSERT_EQUAL(st.done_at[k], k * 100);
        CU_ASSERT_EQUAL(st.done_ran[k], k <= 2);
    }
    stream_free(&st);
    feed_free(f);
    event_base_free(base);
}

/* Without threads a job runs and comes back within feed_post; with them,
 * a small read with no other job out runs on the loop too. */
static void test_runs_on_loop(void)
{
    struct event_base *base = event_base_new();
    struct feed *none = feed_new(base, 0, 0, 0);
    struct feed *f = feed_new(base, 0, 2, 4096);
    struct stream a, b;

    CU_ASSERT_FATAL(none != NULL && f != NULL);
    stream_init(&a, none, 'a');
    feed_post(&a.q, bytes, 8000, 0);
    CU_ASSERT_EQUAL(a.ndone, 1);
    CU_ASSERT_EQUAL(a.on_loop[0], 1);
    CU_ASSERT_EQUAL(a.q.out, 0);

    stream_init(&b, f, 'b');
    feed_post(&b.q, bytes, 100, 0); /* small, alone: on the loop */
    CU_ASSERT_EQUAL(b.ndone, 1);
    feed_post(&b.q, bytes, 8000, 0); /* large: on a thread */
    feed_settle(f);
    CU_ASSERT_EQUAL(b.ndone, 2);
    CU_ASSERT_EQUAL(b.on_loop[0], 1);
    CU_ASSERT_EQUAL(b.on_loop[1], 0);
    CU_ASSERT_EQUAL(b.done_at[1], 100);
    stream_free(&a);
    stream_free(&b);
    feed_free(none);
    feed_free(f);
    event_base_free(base);
}

/* The loop that waits for a stream's job is woken by the feed's bell
 * (no feed_collect): a session that stopped reading resumes. */
static void test_wait_rings_the_loop(void)
{
    struct event_base *base = event_base_new();
    struct feed *f;
    struct stream st;

    CU_ASSERT_FATAL(event_base_priority_init(base, 2) == 0);
    f = feed_new(base, 1, 2, 0);
    CU_ASSERT_FATAL(f != NULL);
    stream_init(&st, f, 'a');
    feed_post(&st.q, bytes, 100, 0);
    feed_wait_for(&st.q);
    for (int i = 0; i < 2000 && st.ndone == 0; i++)
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);
    CU_ASSERT_EQUAL(st.ndone, 1);
    stream_free(&st);
    feed_free(f);
    event_base_free(base);
}

void register_feed_tests(void)
{
    CU_pSuite s = CU_add_suite("feed", NULL, NULL);

    CU_add_test(s, "each stream's jobs in order, one at a time",
                test_order_per_stream);
    CU_add_test(s, "streams take turns", test_streams_take_turns);
    CU_add_test(s, "jobs after a stream's end come back unrun",
                test_end_of_stream);
    CU_add_test(s, "small reads and no threads run on the loop",
                test_runs_on_loop);
    CU_add_test(s, "waiting for a job rings the loop",
                test_wait_rings_the_loop);
}
