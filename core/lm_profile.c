/* Ties a decoder to a state, directly or through the worker of lm_par. */
#include "lm_profile.h"

#include "lm_par.h"

int lm_profile_init(struct lm_profile *p, const struct lm_limits *limits,
                    const struct lm_state_limits *state_limits)
{
    p->par = NULL;
    if (lm_state_init(&p->state, state_limits) != 0)
        return -1;
    lm_decoder_init(&p->dec, limits, lm_state_apply, &p->state);
    return 0;
}

int lm_profile_threads(struct lm_profile *p, int threads)
{
    if (threads < 2 || p->par != NULL)
        return 0;
    p->par = lm_par_new(&p->state);
    if (p->par == NULL)
        return -1;
    p->dec.sink = lm_par_apply;
    p->dec.sink_ctx = p->par;
    return 0;
}

int lm_profile_settle(struct lm_profile *p, char *errbuf, size_t errlen)
{
    return p->par != NULL ? lm_par_finish(p->par, errbuf, errlen) : 0;
}

/* The state goes before the worker thread (see lm_par_free). */
void lm_profile_free(struct lm_profile *p)
{
    char err[64];

    if (p->par != NULL)
        (void)lm_par_finish(p->par, err, sizeof(err));
    lm_decoder_free(&p->dec);
    lm_state_free(&p->state);
    lm_par_free(p->par);
}
