/* A site's callers from ljmpd (CallersRequest), asked and printed as a tree. */
#include "callers.h"

#include <stdlib.h>
#include <string.h>

#include "lm_calltree.h"
#include "lm_hindex.h"
#include "svgtext.h"

int callers_by_live(Ljmp__SortKey sort)
{
    return sort != LJMP__SORT_KEY__SORT_ALLOC_BYTES &&
           sort != LJMP__SORT_KEY__SORT_ALLOC_RATE;
}

uint64_t callers_send(struct conn *c, uint64_t session_id, const char *site,
                      Ljmp__SortKey sort, uint32_t limit)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__CallersRequest cr = LJMP__CALLERS_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;

    sel.has_session_id = 1;
    sel.session_id = session_id;
    cr.session = &sel;
    cr.site = (char *)site;
    cr.has_limit = cr.has_sort = 1;
    cr.limit = limit;
    cr.sort = sort;
    req.body_case = LJMP__REQUEST__BODY_CALLERS;
    req.callers = &cr;
    return conn_send(c, &req, -1);
}

/* Where the callers begin in a stack's frames: after the site's own
 * frame (a builtin that allocated for the site comes before it). */
static size_t callers_from(const Ljmp__CallerStack *k, const char *site)
{
    for (size_t i = 0; i < k->n_frames; i++)
        if (strcmp(k->frames[i], site) == 0)
            return i + 1;
    return k->n_frames > 0 ? 1 : 0;
}

static struct lm_ct_figures figures_of(const Ljmp__CallerStack *k, int sampled)
{
    if (sampled)
        return (struct lm_ct_figures){k->est_alloc_events, k->est_alloc_bytes,
                                      k->est_live_bytes, k->est_live_blocks};
    return (struct lm_ct_figures){(double)k->alloc_events,
                                  (double)k->alloc_bytes, (double)k->live_bytes,
                                  (double)k->live_blocks};
}

int callers_tree(const Ljmp__Callers *cl, struct lm_calltree *t)
{
    int sampled = cl->sample_bytes != 0;

    if (lm_calltree_init(t, cl->site ? cl->site : "") != 0)
        return -1;
    for (size_t i = 0; i < cl->n_stacks; i++) {
        const Ljmp__CallerStack *k = cl->stacks[i];
        size_t from = callers_from(k, cl->site ? cl->site : "");
        struct lm_ct_figures f = figures_of(k, sampled);
        if (lm_calltree_add(t, (const char *const *)k->frames + from,
                            (uint32_t)(k->n_frames - from), &f, sampled) != 0) {
            lm_calltree_free(t);
            return -1;
        }
    }
    return 0;
}

static double node_key(const struct lm_ct_node *n, int by_live)
{
    return by_live ? n->f.live_bytes : n->f.alloc_bytes;
}

struct print_ctx {
    const struct lm_calltree *t;
    FILE *out;
    int by_live;
    unsigned left; /* lines still allowed */
};

/* Node id's children, biggest first by the view's key. */
static uint32_t *children_of(const struct lm_calltree *t, uint32_t id,
                             int by_live, size_t *n)
{
    size_t k = 0;
    for (uint32_t c = t->v[id].child; c != LM_NONE; c = t->v[c].sibling)
        k++;
    uint32_t *v = malloc((k ? k : 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    k = 0;
    for (uint32_t c = t->v[id].child; c != LM_NONE; c = t->v[c].sibling)
        v[k++] = c;
    for (size_t i = 1; i < k; i++) /* few children: insertion sort */
        for (size_t j = i; j > 0 && node_key(&t->v[v[j]], by_live) >
                                        node_key(&t->v[v[j - 1]], by_live);
             j--) {
            uint32_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    *n = k;
    return v;
}

static void print_node(struct print_ctx *p, uint32_t id)
{
    const struct lm_ct_node *n = &p->t->v[id];
    char live[32], alloc[32];
    size_t nc;

    if (p->left == 0)
        return;
    p->left--;
    svg_format_size(live, sizeof(live), n->f.live_bytes);
    svg_format_size(alloc, sizeof(alloc), n->f.alloc_bytes);
    fprintf(p->out, "%s%10s %10s %10.0f  %*s%s\n", n->estimated ? "~" : " ",
            live, alloc, n->f.allocs, (int)(2 * n->depth), "", n->name);
    uint32_t *kids = children_of(p->t, id, p->by_live, &nc);
    for (size_t i = 0; kids != NULL && i < nc; i++)
        print_node(p, kids[i]);
    free(kids);
}

void callers_print(FILE *out, const Ljmp__Callers *cl, int by_live,
                   unsigned max_lines)
{
    struct lm_calltree t;

    if (cl->depth == 0) {
        fprintf(out, "  (no call stacks in this stream: attach --stacks, or "
                     "LJMP_STACKS with LJMP_SOCKET)\n");
        return;
    }
    if (callers_tree(cl, &t) != 0) {
        fprintf(out, "  (out of memory)\n");
        return;
    }
    fprintf(out, " %10s %10s %10s  CALLERS of %s%s\n", "LIVE", "ALLOCATED",
            "ALLOCS", cl->site ? cl->site : "",
            cl->sample_bytes ? " (~ estimated from sampled stacks)" : "");
    struct print_ctx p = {&t, out, by_live, max_lines ? max_lines : ~0u};
    print_node(&p, 0);
    if (cl->more > 0)
        fprintf(out, "  (%u more stacks)\n", cl->more);
    if (cl->unstacked_events > 0 && cl->sample_bytes == 0)
        fprintf(out, "  (%llu events without a stack)\n",
                (unsigned long long)cl->unstacked_events);
    lm_calltree_free(&t);
}
