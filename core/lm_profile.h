/* A decoder feeding a state, on one thread or two: a reader of one stream. */
#ifndef LM_PROFILE_H
#define LM_PROFILE_H

#include <stddef.h>

#include "lm_decoder.h"
#include "lm_state.h"

struct lm_par;

/* A decoder feeding a state: what a reader of one stream needs. */
struct lm_profile {
    struct lm_decoder dec;
    struct lm_state state;
    struct lm_par *par; /* the worker thread, if any (lm_par.h) */
};

int lm_profile_init(struct lm_profile *p, const struct lm_limits *limits,
                    const struct lm_state_limits *state_limits);
void lm_profile_free(struct lm_profile *p);

/*
 * Before the first feed: with threads = 2, a worker thread applies part
 * of the stream (lm_par.h); 1 keeps to the caller's thread.  -1 when the
 * worker cannot start (the profile still works, on one thread).
 */
int lm_profile_threads(struct lm_profile *p, int threads);

/*
 * Brings the state up to date with everything fed: with a worker, waits
 * for it and merges its part (no more feeding after).  Call before
 * reading p->state.  0, or -1 with a message in errbuf.
 */
int lm_profile_settle(struct lm_profile *p, char *errbuf, size_t errlen);

static inline enum lm_status lm_profile_feed(struct lm_profile *p,
                                             const void *buf, size_t len,
                                             size_t *consumed)
{
    return lm_decoder_feed(&p->dec, buf, len, consumed);
}

#endif
