/* Two threads apply a stream: the caller reads, a worker applies heap ops. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "lm_par.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The caller hands operations over in batches of about HANDOVER_OPS
 * (32 KiB) through a ring of NBATCH, so that it can run ahead while the
 * worker is slowed down (a shard of its heap map growing) and the other
 * way round.  A batch has room for one chunk of records more than the
 * mark.  The threads spin before they sleep, so a hand-over is cheap:
 * smaller batches cost time, and larger or more batches cost memory at
 * the profile's peak (the ring is part of it), since a shard's growth in
 * place leaves little to hide.  HANDOVER_OPS and NBATCH were chosen by
 * measurement (THREADS=2 bench/compare.sh for the time, bench/run.sh for
 * the peak RSS; see "Tuned values" in bench/README.md).
 */
enum {
    CHUNK = LM_BATCH,
    HANDOVER_OPS = 2048,
    BATCH_OPS = HANDOVER_OPS + CHUNK * LM_OPS_PER_RECORD,
    NBATCH = 4,
    SPINS = 4000, /* pauses: 10 to 100 microseconds */
};

struct batch {
    struct lm_op *ops;
    size_t n;
    /* The caller's heap sides, which the operations name: they
     * move only while the worker is idle (see make_room_for_locs). */
    struct lm_heap_side *sides;
    uint32_t nlocs;
    uint64_t direct_bytes; /* the caller's, which a reader may change */
};

struct lm_par {
    struct lm_state *s;   /* the caller's: symbols, locations, counts */
    struct lm_state part; /* the worker's: blocks, overrides */
    struct batch ring[NBATCH];
    size_t nfill; /* operations in the batch being filled, ring[head] */
    int finished, finish_rc;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Changed under mu: batches handed over and batches applied; read
     * without it while spinning. */
    _Atomic uint64_t head, tail;
    int quit;
    int failed; /* set by the worker when out of memory */
    int spins;  /* SPINS, or 0 with one CPU: the other side cannot run */
};

/* Applies one batch to the worker's part: 0, or -1 when out of memory. */
static int apply_batch(struct lm_par *p, const struct batch *b)
{
    const char *err;

    lm_state_lend_sides(&p->part, b->sides, b->nlocs);
    p->part.direct_bytes = b->direct_bytes;
    return lm_state_apply_ops(&p->part, b->ops, b->n, &err);
}

/*
 * Called with mu held, before waiting for the other thread to move *x
 * (its next batch, or the end of one): drops mu and spins while *x stays
 * as it was, for a while, then takes mu again.  The move usually comes
 * within microseconds, and a sleep and a wake-up cost a system call each,
 * and on a virtual machine an interrupt between the CPUs, a large part
 * of the reading thread's time if the worker slept between batches.
 */
static void spin_unlocked(struct lm_par *p, const _Atomic uint64_t *x)
{
    uint64_t value = atomic_load_explicit(x, memory_order_relaxed);

    pthread_mutex_unlock(&p->mu);
    for (int i = 0;
         i < p->spins && atomic_load_explicit(x, memory_order_acquire) == value;
         i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield");
#endif
    }
    pthread_mutex_lock(&p->mu);
}

static void *work(void *arg)
{
    struct lm_par *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->tail == p->head && !p->quit)
            spin_unlocked(p, &p->head);
        while (p->tail == p->head && !p->quit)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->tail == p->head)
            break;
        const struct batch *b = &p->ring[p->tail % NBATCH];
        /* After a failure the part is incomplete: batches are only
         * taken off the ring, so that the caller does not wait. */
        int skip = p->failed;
        pthread_mutex_unlock(&p->mu);
        int rc = skip ? 0 : apply_batch(p, b);
        pthread_mutex_lock(&p->mu);
        if (rc != 0)
            p->failed = 1;
        p->tail++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Waits, with mu held, until at most `ahead` batches are waiting or
 * being applied. */
static void wait_for_worker(struct lm_par *p, uint64_t ahead)
{
    if (p->head - p->tail > ahead)
        spin_unlocked(p, &p->tail);
    while (p->head - p->tail > ahead)
        pthread_cond_wait(&p->cv, &p->mu);
}

/* Hands the batch being filled over, then waits for the worker (see
 * wait_for_worker); -1 if the worker ran out of memory (the stream cannot
 * be applied whole). */
static int hand_over(struct lm_par *p, uint64_t ahead)
{
    int failed;

    pthread_mutex_lock(&p->mu);
    struct batch *b = &p->ring[p->head % NBATCH];
    b->n = p->nfill;
    b->sides = p->s->sides;
    b->nlocs = p->s->nlocs;
    b->direct_bytes = p->s->direct_bytes;
    p->head++;
    pthread_cond_signal(&p->cv);
    wait_for_worker(p, ahead);
    failed = p->failed;
    pthread_mutex_unlock(&p->mu);
    p->nfill = 0;
    return failed ? -1 : 0;
}

/*
 * Makes room for n more locations before records that may make them: a
 * move of the location records waits until the worker has applied every
 * operation handed over, since it writes into them.  Moves are few (the
 * table doubles).  0, or -1 when out of memory.
 */
static int make_room_for_locs(struct lm_par *p, size_t n)
{
    struct lm_state *s = p->s;
    uint64_t want = (uint64_t)s->nlocs + n;

    if (want <= s->locs_cap || s->locs_cap >= s->max_locs)
        return 0;
    if (p->nfill > 0) {
        if (hand_over(p, 0) != 0)
            return -1;
    } else {
        pthread_mutex_lock(&p->mu);
        wait_for_worker(p, 0);
        pthread_mutex_unlock(&p->mu);
    }
    return lm_state_reserve_locs(s, want > UINT32_MAX ? UINT32_MAX
                                                      : (uint32_t)want);
}

int lm_par_cpus(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    return CPU_COUNT(&set);
}

struct lm_par *lm_par_new(struct lm_state *s)
{
    struct lm_par *p;
    int n = 0;

    if (s->heap.count != 0 || s->nlocs != 0)
        return NULL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->s = s;
    p->spins = lm_par_cpus() >= 2 ? SPINS : 0;
    for (n = 0; n < NBATCH; n++)
        if ((p->ring[n].ops = malloc(BATCH_OPS * sizeof(struct lm_op))) == NULL)
            goto fail;
    if (lm_state_init(&p->part, NULL) != 0)
        goto fail;
    lm_state_join(&p->part, s);
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto fail_part;
    if (pthread_cond_init(&p->cv, NULL) != 0)
        goto fail_mutex;
    if (pthread_create(&p->thread, NULL, work, p) != 0)
        goto fail_cond;
    return p;
fail_cond:
    pthread_cond_destroy(&p->cv);
fail_mutex:
    pthread_mutex_destroy(&p->mu);
fail_part:
    lm_state_free(&p->part);
fail:
    while (n-- > 0)
        free(p->ring[n].ops);
    free(p);
    return NULL;
}

int lm_par_apply(void *par, const struct lm_record *recs, size_t n,
                 size_t *failed_at, char *errbuf, size_t errlen)
{
    struct lm_par *p = par;

    if (p->finished) {
        *failed_at = 0;
        snprintf(errbuf, errlen, "cannot apply record: the profile is settled");
        return -1;
    }
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHUNK ? n - done : CHUNK;
        size_t nops, at = 0;
        const char *err = "out of memory";
        int rc = make_room_for_locs(p, k);

        if (rc == 0) {
            struct lm_op *ops = p->ring[p->head % NBATCH].ops + p->nfill;
            rc = lm_state_split(p->s, recs + done, k, ops, &nops, &at, &err);
            /* What came before an error is applied, as lm_state_apply
             * does. */
            p->nfill += nops;
        }
        if (p->nfill >= HANDOVER_OPS && hand_over(p, NBATCH - 1) != 0)
            rc = -1, at = 0, err = "out of memory";
        if (rc != 0) {
            *failed_at = done + at;
            snprintf(errbuf, errlen, "cannot apply record: %s", err);
            return -1;
        }
        done += k;
    }
    return 0;
}

/*
 * Waits until the worker has applied everything and gives its part to
 * the state: 0, or -1 when out of memory.  The worker stays, idle, until
 * lm_par_free(): a thread's exit runs glibc's clean-ups, whose code pages
 * (the kernel maps them in by the dozen around each fault) would land on
 * the profile's peak, where a caller frees its state first (as
 * lm_profile_free does).
 */
static int wait_and_merge(struct lm_par *p)
{
    if (p->nfill > 0)
        (void)hand_over(p, NBATCH - 1); /* a failure is read below */
    pthread_mutex_lock(&p->mu);
    wait_for_worker(p, 0);
    pthread_mutex_unlock(&p->mu);
    lm_state_absorb(p->s, &p->part);
    return p->failed ? -1 : 0;
}

int lm_par_finish(struct lm_par *p, char *errbuf, size_t errlen)
{
    if (!p->finished) {
        p->finish_rc = wait_and_merge(p);
        p->finished = 1;
    }
    if (p->finish_rc != 0)
        snprintf(errbuf, errlen, "cannot apply records: out of memory");
    return p->finish_rc;
}

void lm_par_free(struct lm_par *p)
{
    char err[64];

    if (p == NULL)
        return;
    lm_par_finish(p, err, sizeof(err));
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    for (int n = 0; n < NBATCH; n++)
        free(p->ring[n].ops);
    free(p);
}
