/* Each session's history: its totals every tick, its tracked sites' counters
 * at a coarser step, its peak, within a span and a memory bound. */
#ifndef LJMPD_HISTORY_H
#define LJMPD_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "lm_diff.h"

struct server;
struct session;
struct lm_state;

/* The bounds of one session's history (ljmpd's --history-* options). */
struct history_limits {
    uint64_t span_ms;   /* points older than this are dropped */
    uint64_t max_bytes; /* everything the history holds, itself included */
    uint32_t max_sites; /* sites tracked (and kept at the peak) */
};

/* The site step starts here and doubles each time the frames are thinned,
 * up to the coarse step: a young session has points at once. */
#define HISTORY_FIRST_STEP_MS  1000
#define HISTORY_COARSE_STEP_MS 10000
/* Locations scored per tick when choosing the tracked sites, so that a
 * session with a million of them costs the loop a slice per tick. */
#define HISTORY_SCAN_PER_TICK (32u << 10)
/* Tries, 20 ms apart, to sample a session a feed thread held at the tick. */
#define HISTORY_TRIES 5

/* A session's totals at one instant (monotonic ms). */
struct history_totals {
    uint64_t t_ms;
    uint64_t live_bytes, live_blocks;
    uint64_t alloc_bytes, alloc_events, freed_bytes, free_events;
};

/* One tracked site's counters in a frame: freed_blocks counts the blocks
 * made there (allocations, reallocs' new blocks) that are gone since,
 * wherever they were freed. */
struct history_site {
    uint32_t loc; /* the location's index in the session's state */
    uint64_t live_bytes, live_blocks, alloc_events, freed_blocks;
};

/* The tracked sites at one instant, sorted by loc. */
struct history_frame {
    uint64_t t_ms;
    uint32_t n;
    struct history_site *sites;
    /* The session's live bytes then: what a chart stacks the sites in. */
    uint64_t live_bytes;
};

/* A candidate site while the tracked ones are being chosen. */
struct history_cand {
    uint64_t score;
    uint32_t loc;
};

struct history {
    struct history_limits lim;
    struct history_totals *totals; /* oldest first */
    uint32_t ntotals, totals_alloc, totals_cap;
    struct history_frame *frames; /* oldest first */
    uint32_t nframes;
    uint64_t frame_bytes; /* the frames' sites */
    uint64_t frames_bytes_max;
    uint64_t step_ms, next_frame_ms;
    uint64_t thinnings; /* times older points were thinned */
    uint64_t skipped;   /* ticks a feed thread held the session */
    unsigned retry;     /* held at the tick: tries so far to sample it since */
    /* The sample of highest live bytes, with the tracked sites then, and
     * their counters as a diff compares them (beside peak.sites, which
     * lack the allocated bytes: ljmpctl diff from or to the peak). */
    struct history_totals peak_totals;
    struct history_frame peak;
    struct lm_diff_counts *peak_counts;
    /* The tracked sites, sorted, and the pass that chooses the next ones:
     * the top half by live bytes, and the top half by live bytes of the
     * sites that keep at least half of what they allocated. */
    uint32_t *tracked, ntracked;
    uint32_t scan_at;
    struct history_cand *by_bytes, *by_kept;
    uint32_t nby_bytes, nby_kept;
    int final_taken; /* an ended session's last sample */
};

/* A new history within lim; NULL when out of memory. */
struct history *history_new(const struct history_limits *lim);
void history_free(struct history *h);
/* The bytes h holds, itself included (within lim.max_bytes). */
uint64_t history_memory(const struct history *h);

/* Adds a totals point at t->t_ms: points past the span dropped, the older
 * half thinned when full. */
void history_add_totals(struct history *h, const struct history_totals *t);
/* Adds a frame of n sites (sorted by loc) at t_ms, copied; -1 when out of
 * memory.  The frames stay within their share of the bound. */
int history_add_frame(struct history *h, uint64_t t_ms,
                      const struct history_site *sites, uint32_t n);

/* -- The leak rule ------------------------------------------------------- */

#define HISTORY_MIN_POINTS 5
#define HISTORY_MIN_R2     0.8
#define HISTORY_MIN_RISING 0.8
#define HISTORY_MIN_KEPT   0.25

/* A least-squares line through a site's live bytes over time. */
struct history_fit {
    double slope_per_s; /* bytes per second */
    double r2;          /* of the fit; 1 for a straight rise */
    double rising;      /* fraction of steps that did not decrease */
    uint32_t points;
};

void history_fit(const double *t_s, const double *bytes, uint32_t n,
                 struct history_fit *f);
/* The rule: enough points, a positive slope, a fit of R^2 >= 0.8, at
 * least 80% of the steps not decreasing, the last point above the first,
 * and kept (live blocks gained per allocation over the points; 1 for a
 * site that allocated nothing, growing by reallocs) at least a quarter. */
int history_is_suspect(const struct history_fit *f, double first_bytes,
                       double last_bytes, double kept);

struct history_suspect {
    uint32_t loc;   /* its first location */
    uint32_t sites; /* locations summed (those of one name) */
    struct history_fit fit;
    struct history_site now; /* its counters in the newest frame */
    uint64_t window_allocs, window_frees;
    double kept;                /* live blocks gained per allocation */
    uint64_t first_ms, last_ms; /* the points used */
};

/*
 * The suspects among the sites of the newest frame, over the frames of the
 * last window_ms before now_ms, biggest growth first: at most max in out.
 * group (NULL: each location its own) gives each of the newest frame's
 * sites a group, whose locations are summed as one site (a line's
 * locations in and out of compiled code, of several symbol epochs).
 * Returns how many, or -1 out of memory.  *points: frames in the window.
 */
long history_leaks(const struct history *h, uint64_t now_ms, uint64_t window_ms,
                   const uint32_t *group, struct history_suspect *out,
                   size_t max, uint32_t *points);

/* -- Trends -------------------------------------------------------------- */

#define HISTORY_SPARK_MAX 64

/* One group's live bytes over a window: its fit and a few of its points,
 * spread over the window, oldest first. */
struct history_trend {
    uint32_t group;
    uint32_t nspark;
    struct history_fit fit;
    double kept; /* live blocks gained per allocation, as the leak rule's */
    uint64_t spark[HISTORY_SPARK_MAX];
};

/*
 * The trends of the groups the newest frame's sites belong to (group_of:
 * a location's group, for the first nlocs locations; the others have
 * none), over the frames of the last window_ms before now_ms, with up to
 * nspark points each: those of two points or more, into *out (malloc'd,
 * sorted by group).  Returns how many, or -1 out of memory.
 */
long history_trends(const struct history *h, uint64_t now_ms,
                    uint64_t window_ms, const uint32_t *group_of,
                    uint32_t nlocs, uint32_t nspark,
                    struct history_trend **out);
/* The trend of group in v (n of them, as history_trends made), or NULL. */
const struct history_trend *history_trend_of(const struct history_trend *v,
                                             long n, uint32_t group);

/* The first of h's frames at or after start_ms (nframes if none). */
uint32_t history_first_frame(const struct history *h, uint64_t start_ms);
/* Site loc of frame f (its sites are sorted by loc), or NULL. */
const struct history_site *history_find_site(const struct history_frame *f,
                                             uint32_t loc);

/* The newest frame, or NULL. */
static inline const struct history_frame *
history_newest(const struct history *h)
{
    return h->nframes > 0 ? &h->frames[h->nframes - 1] : NULL;
}

/* -- Sessions ------------------------------------------------------------ */

/* Samples one session's state (under its lock, or still) at now. */
void history_sample(struct history *h, const struct lm_state *st, uint64_t now);
/* Samples every session on the server's tick; a session a feed thread
 * holds is tried again every 20 ms, HISTORY_TRIES times at most (the loop
 * never waits for a job). */
void history_tick(struct server *srv, uint64_t now);
/* s's history, or NULL (not started, or out of memory). */
struct history *history_of(const struct session *s);

extern const struct session_observer history_observer;

#endif
