/* ljmpctl's diff of two recordings: each read to its end with the core,
 * its locations summed by name, the two matched by name and ranked. */
#include "filediff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ljmp_diff.h"
#include "ljmpctl.h"
#include "lm_par.h"

/* The sites of the state at a recording's end, named, into e (counters
 * summed by name, those all 0 left out); 0, or -1 out of memory. */
static int sites_of(const struct lm_state *st, struct filediff_end *e)
{
    if (lm_groups_init(&e->g) != 0 || lm_groups_update(&e->g, st) != 0)
        return -1;
    struct lm_counters *sums = malloc(((size_t)e->g.n + 1) * sizeof(*sums));
    e->sites = malloc(((size_t)e->g.n + 1) * sizeof(*e->sites));
    if (sums == NULL || e->sites == NULL) {
        free(sums);
        return -1;
    }
    lm_groups_sum(&e->g, st, sums);
    for (uint32_t i = 0; i < e->g.n; i++) {
        struct lm_diff_site *x = &e->sites[e->n];
        x->name = e->g.v[i].name;
        x->sites = e->g.v[i].nlocs;
        lm_diff_counts_of(&sums[i], &x->c);
        e->n += !lm_diff_counts_zero(&x->c);
    }
    free(sums);
    return 0;
}

/* Reads path to its end into e; an exit status (EXIT_TRUNCATED: read up
 * to where it was cut). */
static int read_end(const char *path, const struct filediff_opts *o,
                    struct filediff_end *e)
{
    struct lm_limits limits = {
        o->max_string ? o->max_string : LM_DEFAULT_MAX_STRING,
        o->max_string ? o->max_string + 64 : LM_DEFAULT_MAX_BUFFERED,
    };
    int threads = o->threads ? o->threads : lm_par_cpus() >= 2 ? 2 : 1;
    struct lm_profile p;
    enum lm_status st;

    int rc = load_stream_file("diff", path, &limits, threads, &p, &st);
    if (rc != EXIT_OK)
        return rc;
    rc = stream_end_status("diff", path, &p, st);
    if (sites_of(&p.state, e) != 0) {
        fprintf(stderr, "ljmpctl diff: out of memory\n");
        rc = EXIT_USAGE;
    }
    lm_profile_free(&p);
    return rc;
}

static void end_msg(Ljmp__DiffEnd *m, const char *path)
{
    ljmp__diff_end__init(m);
    m->name = (char *)path;
}

/* Moves the rows that changed to the front, in order; how many. */
static size_t keep_changed(struct lm_diff_row *rows, size_t n)
{
    size_t kept = 0;

    for (size_t i = 0; i < n; i++)
        if (lm_diff_changed(&rows[i]))
            rows[kept++] = rows[i];
    return kept;
}

/* The first shown rows as d->msg's sites, and total as its total. */
static int fill_sites(struct filediff *d, size_t shown,
                      const struct lm_diff_row *total)
{
    d->site_v = calloc(shown + 1, sizeof(*d->site_v));
    d->sites = calloc(shown + 1, sizeof(*d->sites));
    if (d->site_v == NULL || d->sites == NULL)
        return -1;
    for (size_t i = 0; i < shown; i++) {
        ljmp__diff_site__init(&d->site_v[i]);
        d->site_v[i].name = (char *)d->rows[i].name;
        ljmp_diff_site_fill(&d->site_v[i], &d->rows[i]);
        d->sites[i] = &d->site_v[i];
    }
    ljmp__diff_site__init(&d->total);
    ljmp_diff_site_fill(&d->total, total);
    d->msg.sites = d->sites;
    d->msg.n_sites = shown;
    d->msg.total = &d->total;
    return 0;
}

/* The two ends' sites matched, ranked and put in d->msg; -1 out of
 * memory. */
static int compare_ends(struct filediff *d, const struct filediff_opts *o)
{
    struct filediff_end *a = &d->old_end, *b = &d->new_end;
    struct lm_diff_row total;

    if ((d->rows = malloc((a->n + b->n + 1) * sizeof(*d->rows))) == NULL)
        return -1;
    size_t n = lm_diff_match(a->sites, a->n, b->sites, b->n, d->rows);
    lm_diff_total(d->rows, n, &total);
    size_t changed = keep_changed(d->rows, n);
    size_t shown =
        lm_diff_rank(d->rows, changed, (enum lm_diff_key)o->key, o->limit);
    if (fill_sites(d, shown, &total) != 0)
        return -1;
    d->msg.has_changed = d->msg.has_sort = 1;
    d->msg.changed = (uint32_t)changed;
    d->msg.sort = (Ljmp__DiffKey)o->key;
    return 0;
}

int filediff_run(const char *old_path, const char *new_path,
                 const struct filediff_opts *o, struct filediff *d)
{
    memset(d, 0, sizeof(*d));
    ljmp__diff__init(&d->msg);
    int rc_old = read_end(old_path, o, &d->old_end);
    if (rc_old != EXIT_OK && rc_old != EXIT_TRUNCATED)
        return rc_old;
    int rc_new = read_end(new_path, o, &d->new_end);
    if (rc_new != EXIT_OK && rc_new != EXIT_TRUNCATED)
        return rc_new;
    if (compare_ends(d, o) != 0) {
        fprintf(stderr, "ljmpctl diff: out of memory\n");
        return EXIT_USAGE;
    }
    end_msg(&d->from, old_path);
    end_msg(&d->to, new_path);
    d->msg.from = &d->from;
    d->msg.to = &d->to;
    return rc_old != EXIT_OK ? rc_old : rc_new;
}

static void end_free(struct filediff_end *e)
{
    lm_groups_free(&e->g);
    free(e->sites);
}

void filediff_free(struct filediff *d)
{
    end_free(&d->old_end);
    end_free(&d->new_end);
    free(d->rows);
    free(d->site_v);
    free(d->sites);
    memset(d, 0, sizeof(*d));
}
