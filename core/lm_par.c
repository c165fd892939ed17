/* Two-thread application of decoded records: the caller reads, both apply. */
#include "lm_par.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The caller hands operations over in batches of about HANDOVER_OPS
 * (128 KiB: they stay in the worker's L2) through a ring of NBATCH, so
 * that it can run ahead while the worker is slowed down (a shard of its
 * heap map growing) and the other way round.  A batch has room for one
 * chunk of records more than the mark.
 */
enum {
    CHUNK = LM_BATCH,
    HANDOVER_OPS = 4096,
    BATCH_OPS = HANDOVER_OPS + CHUNK * LM_OPS_PER_RECORD,
    NBATCH = 8,
};

/*
 * The worker's share of the heap map's hash space, in 65536ths: all of
 * it, since the caller's thread also decodes and resolves locations.
 * With `ljmp-bench core --threads 2 --share N`, 56000 left the worker
 * idle a quarter of the time on s20m.bin and a binary_trees recording;
 * from 62000 to 65536 the two sides wait about as long and the times
 * differ by less than the machine's noise (bench/README.md).  With every
 * block on one side, the peak of live blocks is that side's own, exact.
 */
#define WORKER_SHARE 65536u

struct batch {
    struct lm_op *ops;
    size_t n;
    uint32_t nlocs;     /* the locations the operations may name */
    uint64_t main_live; /* the caller's live blocks when it was handed over */
};

struct lm_par {
    struct lm_state *s;   /* the caller's: symbols, locations, its blocks */
    struct lm_state part; /* the worker's blocks and what they count */
    struct lm_op *mine;   /* the caller's operations of one chunk */
    struct batch ring[NBATCH];
    size_t nfill; /* operations in the batch being filled, ring[head] */
    uint32_t share;
    int finished, finish_rc;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Guarded by mu: batches handed over and batches applied. */
    uint64_t head, tail;
    int quit;
    int failed; /* set by the worker when out of memory */
    /* The worker's, read by the caller after the join. */
    uint64_t peak; /* live blocks, sampled after each batch */
};

/* Applies one batch to the worker's part: 0, or -1 when out of memory. */
static int apply_batch(struct lm_par *p, const struct batch *b)
{
    const char *err;

    if (lm_state_mirror_locs(&p->part, b->nlocs) != 0 ||
        lm_state_apply_ops(&p->part, b->ops, b->n, &err) != 0)
        return -1;
    /* Both parts are now at the same point of the stream. */
    uint64_t live = b->main_live + p->part.totals.live_blocks;
    if (live > p->peak)
        p->peak = live;
    return 0;
}

static void *work(void *arg)
{
    struct lm_par *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
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

/* Hands the batch being filled over, then waits for a free one; -1 if
 * the worker ran out of memory (the stream cannot be applied whole). */
static int hand_over(struct lm_par *p)
{
    int failed;

    pthread_mutex_lock(&p->mu);
    struct batch *b = &p->ring[p->head % NBATCH];
    b->n = p->nfill;
    b->nlocs = p->s->nlocs;
    b->main_live = p->s->totals.live_blocks;
    p->head++;
    pthread_cond_signal(&p->cv);
    while (p->head - p->tail == NBATCH)
        pthread_cond_wait(&p->cv, &p->mu);
    failed = p->failed;
    pthread_mutex_unlock(&p->mu);
    p->nfill = 0;
    return failed ? -1 : 0;
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
    p->share = WORKER_SHARE;
    p->mine = malloc(CHUNK * LM_OPS_PER_RECORD * sizeof(*p->mine));
    for (n = 0; n < NBATCH; n++)
        if ((p->ring[n].ops = malloc(BATCH_OPS * sizeof(struct lm_op))) == NULL)
            goto fail;
    if (p->mine == NULL || lm_state_init(&p->part, NULL) != 0)
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
    free(p->mine);
    free(p);
    return NULL;
}

int lm_par_set_share(struct lm_par *p, uint32_t share)
{
    /* A block's side must not change while it lives. */
    if (p->finished || p->head != 0 || p->nfill != 0 || p->s->heap.count != 0)
        return -1;
    p->share = share;
    return 0;
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
        size_t nmine, nother, at = 0;
        const char *err = "out of memory";
        struct lm_op *other = p->ring[p->head % NBATCH].ops + p->nfill;
        int rc = lm_state_split(p->s, recs + done, k, p->share, p->mine, &nmine,
                                other, &nother, &at, &err);

        p->nfill += nother;
        /* What came before an error is applied, as lm_state_apply does. */
        if (lm_state_apply_ops(p->s, p->mine, nmine, &err) != 0)
            rc = -1, at = 0;
        if (p->nfill >= HANDOVER_OPS && hand_over(p) != 0)
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

/* Joins the worker and merges its part: 0, or -1 when out of memory. */
static int join_and_merge(struct lm_par *p)
{
    int rc = 0;

    if (p->nfill > 0)
        (void)hand_over(p); /* a failure is read below */
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    /* Everything is applied: the live count now is exact. */
    uint64_t live = p->s->totals.live_blocks + p->part.totals.live_blocks;
    if (live > p->peak)
        p->peak = live;
    if (p->failed)
        rc = -1;
    if (lm_state_absorb(p->s, &p->part) != 0)
        rc = -1;
    if (p->peak > p->s->totals.peak_live_blocks)
        p->s->totals.peak_live_blocks = p->peak;
    return rc;
}

int lm_par_finish(struct lm_par *p, char *errbuf, size_t errlen)
{
    if (!p->finished) {
        p->finish_rc = join_and_merge(p);
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
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    for (int n = 0; n < NBATCH; n++)
        free(p->ring[n].ops);
    free(p->mine);
    free(p);
}
