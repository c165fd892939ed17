/* Subscriptions without sockets: snapshots due together go out in one
 * batch, and a subscriber that falls behind has its snapshots coalesced. */
#include <CUnit/CUnit.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "subscription.h"
#include "test_units.h"

/* A subscriber: its backlog, and what it was sent. */
struct subscriber {
    size_t backlog;
    unsigned nsent;
    uint64_t seq[16], dropped[16];
    double interval_s[16];
    unsigned batch[16]; /* the batch each snapshot went out in */
    struct subscription *free_on_send[2]; /* freed by its first send */
};

struct fixture {
    struct event_base *base;
    struct subscription_set set;
    uint64_t dropped;
    unsigned batches, open; /* batches begun; one is open */
};

static size_t fake_backlog(const struct subscription *sub)
{
    const struct subscriber *who = sub->owner;

    return who->backlog;
}

static struct fixture *current;

static void fake_send(struct subscription *sub, double interval_s)
{
    struct subscriber *who = sub->owner;
    unsigned i = who->nsent++;

    CU_ASSERT(current->open);
    who->seq[i] = sub->seq;
    who->dropped[i] = sub->dropped;
    who->interval_s[i] = interval_s;
    who->batch[i] = current->batches;
    for (int k = 0; k < 2; k++)
        if (who->free_on_send[k] != NULL) {
            subscription_free(who->free_on_send[k]);
            who->free_on_send[k] = NULL;
        }
}

static void fake_begin(void *arg)
{
    struct fixture *fx = arg;

    CU_ASSERT(!fx->open);
    fx->open = 1;
    fx->batches++;
}

static void fake_end(void *arg)
{
    struct fixture *fx = arg;

    CU_ASSERT(fx->open);
    fx->open = 0;
}

static const struct subscription_ops fake_ops = {fake_backlog, fake_send,
                                                 fake_begin, fake_end};

static void fixture_init(struct fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    fx->base = event_base_new();
    CU_ASSERT_FATAL(fx->base != NULL);
    CU_ASSERT_FATAL(subscription_set_init(&fx->set, fx->base, 0, 1000,
                                          &fx->dropped, &fake_ops, fx) == 0);
    current = fx;
}

static void fixture_free(struct fixture *fx)
{
    subscription_set_free(&fx->set);
    event_base_free(fx->base);
}

static struct subscription *
subscribe(struct fixture *fx, struct subscriber *who, unsigned interval_ms)
{
    struct snapshot_opts opts = {.top = 10};
    struct subscription *sub =
        subscription_new(&fx->set, who, 7, &opts, interval_ms, 0);

    CU_ASSERT_FATAL(sub != NULL);
    return sub;
}

/* Fires sub's timer now, as when its interval passed. */
static void tick(struct subscription *sub)
{
    event_active(sub->timer, EV_TIMEOUT, 0);
}

static void turn(struct fixture *fx)
{
    event_base_loop(fx->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* Timers that fire in one turn of the loop make one batch. */
static void test_due_together_one_batch(void)
{
    struct fixture fx;
    struct subscriber a = {0}, b = {0}, c = {0};

    fixture_init(&fx);
    struct subscription *sa = subscribe(&fx, &a, 1000);
    struct subscription *sb = subscribe(&fx, &b, 1000);
    struct subscription *sc = subscribe(&fx, &c, 1000);
    CU_ASSERT_EQUAL(fx.set.n, 3);
    tick(sa);
    tick(sb);
    turn(&fx);
    tick(sc);
    turn(&fx);
    CU_ASSERT_EQUAL(fx.batches, 2);
    CU_ASSERT_EQUAL(a.nsent, 1);
    CU_ASSERT_EQUAL(b.nsent, 1);
    CU_ASSERT_EQUAL(c.nsent, 1);
    CU_ASSERT_EQUAL(a.batch[0], 1);
    CU_ASSERT_EQUAL(b.batch[0], 1);
    CU_ASSERT_EQUAL(c.batch[0], 2);
    /* The caller sent number 1 when it subscribed. */
    CU_ASSERT_EQUAL(a.seq[0], 2);
    subscription_free(sa);
    subscription_free(sb);
    subscription_free(sc);
    CU_ASSERT_EQUAL(fx.set.n, 0);
    fixture_free(&fx);
}

/* Past the bound, due snapshots are not built but counted; the next one
 * sent says how many it stands for, and its number counts only sends. */
static void test_coalesced_while_behind(void)
{
    struct fixture fx;
    struct subscriber slow = {.backlog = 5000}, fast = {0};

    fixture_init(&fx);
    struct subscription *ss = subscribe(&fx, &slow, 1000);
    struct subscription *sf = subscribe(&fx, &fast, 1000);
    for (int i = 0; i < 3; i++) {
        tick(ss);
        tick(sf);
        turn(&fx);
    }
    CU_ASSERT_EQUAL(slow.nsent, 0);
    CU_ASSERT_EQUAL(ss->dropped, 3);
    CU_ASSERT_EQUAL(fx.dropped, 3);
    CU_ASSERT_EQUAL(fast.nsent, 3);
    CU_ASSERT_EQUAL(fast.dropped[2], 0);
    CU_ASSERT_EQUAL(fast.seq[2], 4);
    slow.backlog = 1000; /* at the bound: not over it */
    tick(ss);
    turn(&fx);
    CU_ASSERT_EQUAL(slow.nsent, 1);
    CU_ASSERT_EQUAL(slow.seq[0], 2);
    CU_ASSERT_EQUAL(slow.dropped[0], 3);
    CU_ASSERT_EQUAL(fx.dropped, 3);
    subscription_free(ss);
    subscription_free(sf);
    fixture_free(&fx);
}

/* A timer that fires again before its snapshot was built adds nothing. */
static void test_due_once(void)
{
    struct fixture fx;
    struct subscriber a = {0};

    fixture_init(&fx);
    struct subscription *sa = subscribe(&fx, &a, 1000);
    tick(sa);
    turn(&fx);
    tick(sa);
    tick(sa);
    turn(&fx);
    CU_ASSERT_EQUAL(a.nsent, 2);
    CU_ASSERT_EQUAL(a.seq[1], 3);
    subscription_free(sa);
    fixture_free(&fx);
}

/* A send may free subscriptions (a peer that fails closes): its own, and
 * another that is due; the rest of the batch is served. */
static void test_freed_while_due(void)
{
    struct fixture fx;
    struct subscriber a = {0}, b = {0}, c = {0};

    fixture_init(&fx);
    struct subscription *sa = subscribe(&fx, &a, 1000);
    struct subscription *sb = subscribe(&fx, &b, 1000);
    struct subscription *sc = subscribe(&fx, &c, 1000);
    a.free_on_send[0] = sa;
    a.free_on_send[1] = sb;
    tick(sa);
    tick(sb);
    tick(sc);
    turn(&fx);
    CU_ASSERT_EQUAL(a.nsent, 1);
    CU_ASSERT_EQUAL(b.nsent, 0);
    CU_ASSERT_EQUAL(c.nsent, 1);
    CU_ASSERT_EQUAL(fx.set.n, 1);
    CU_ASSERT(TAILQ_EMPTY(&fx.set.due));
    subscription_free(sc);
    fixture_free(&fx);
}

/* The real timer: snapshots every interval, each saying how long since
 * the one before. */
static void test_timer_interval(void)
{
    struct fixture fx;
    struct subscriber a = {0};
    struct snapshot_opts opts = {.top = 1};

    fixture_init(&fx);
    struct subscription *sa =
        subscription_new(&fx.set, &a, 1, &opts, 60, clock_now_ms());
    CU_ASSERT_FATAL(sa != NULL);
    for (int i = 0; i < 200 && a.nsent < 3; i++)
        event_base_loop(fx.base, EVLOOP_ONCE);
    CU_ASSERT_EQUAL(a.nsent, 3);
    for (unsigned i = 0; i < 3; i++)
        CU_ASSERT(a.interval_s[i] >= 0.05 && a.interval_s[i] < 1.0);
    CU_ASSERT_EQUAL(a.seq[2], 4);
    subscription_free(sa);
    fixture_free(&fx);
}

void register_subscription_tests(void)
{
    CU_pSuite s = CU_add_suite("subscriptions", NULL, NULL);

    CU_add_test(s, "due together: one batch", test_due_together_one_batch);
    CU_add_test(s, "coalesced and counted while behind",
                test_coalesced_while_behind);
    CU_add_test(s, "a timer fired twice is due once", test_due_once);
    CU_add_test(s, "freed while due", test_freed_while_due);
    CU_add_test(s, "the timer's interval", test_timer_interval);
}
