/* Snapshot messages of sessions: totals, the top locations by a key, and
 * deltas and rates against what a subscriber saw last. */
#ifndef LJMPD_SNAPSHOT_H
#define LJMPD_SNAPSHOT_H

#include "arena.h"
#include "server.h"
#include "session.h"

struct lm_groups;

/* What a subscriber saw of one session at its previous snapshot, per row
 * (name group) of the session. */
struct loc_base {
    uint64_t alloc_events, alloc_bytes, realloc_events, free_events, free_bytes;
};

struct session_base {
    uint64_t session_id;
    uint64_t time_ms;
    struct lm_totals totals;
    uint64_t stream_bytes;
    struct loc_base *locs;
    uint32_t nlocs;
    uint64_t view_id; /* the session's view it was taken from */
    int seen;         /* matched by the latest snapshot */
};

struct snapshot_bases {
    struct session_base *v;
    size_t n, cap;
};

void snapshot_bases_free(struct snapshot_bases *b);

#define SNAPSHOT_UNIT_MAX 256

struct snapshot_opts {
    uint32_t pid;        /* 0: any */
    uint64_t session_id; /* 0: any */
    int tree;            /* pid and its descendants */
    /* With tree: when pid's process started (0: it has exited), so that
     * an older process that had the same pid is not taken for it. */
    uint64_t tree_start_ms;
    char unit[SNAPSHOT_UNIT_MAX]; /* a unit's processes; "": any */
    uint32_t top;                 /* locations per session */
    Ljmp__SortKey sort;
    int merge, by_process; /* one merged view (SnapshotOptions) */
    int by_trace;          /* rows by trace (SnapshotOptions) */
    /* Rows' growth and live history (SnapshotOptions): the window in
     * seconds (0: none) and the points of history. */
    uint32_t growth_window_s, history_points;
    uid_t uid; /* whose sessions the caller may see */
};

#define SNAPSHOT_MAX_TOP             1000
#define SNAPSHOT_MIN_GROWTH_WINDOW_S 10
#define SNAPSHOT_MAX_GROWTH_WINDOW_S 86400
#define SNAPSHOT_MAX_HISTORY_POINTS  64

Ljmp__SessionInfo *snapshot_info(struct arena *a, const struct session *s);
/* Under the session's lock (session_lock): a feed thread may change it. */
Ljmp__Totals *snapshot_totals(struct arena *a, const struct session *s);
/* The daemon's counters as caller may see them: every one for root and
 * ljmpd's own user, else those of caller's own sessions (of_uid set). */
Ljmp__DaemonCounters *snapshot_daemon(struct arena *a, const struct server *srv,
                                      uid_t caller);

/* The snapshots' state in srv: 0, or -1 out of memory. */
int snapshot_start(struct server *srv);
void snapshot_free(struct server *srv);
/* How many sessions' views were taken so far: once a session per turn. */
uint64_t snapshot_views_taken(const struct server *srv);

/*
 * Snapshots are built in turns: those of one turn share the sessions'
 * views, their counters as the first of them found them, and the parts
 * packed for the same options and base.  A turn is one callback of the
 * loop, nothing else running between its snapshots: the subscriptions'
 * ticks that came due together, or one request.  begin opens a turn
 * unless one is open, and says whether it did; end frees the views.
 */
int snapshot_turn_begin(struct server *srv);
void snapshot_turn_end(struct server *srv);

/*
 * The sessions that match opts, newest last, each with its top locations,
 * in the open turn.  bases (NULL for a one-shot snapshot) holds what the
 * subscriber saw before.  Without a base, deltas and rates run from the
 * session's start.  The sessions are in the message's unknown fields,
 * packed.  Returns NULL when out of memory.
 */
Ljmp__Snapshot *snapshot_build(struct arena *a, struct server *srv,
                               const struct snapshot_opts *opts,
                               const struct snapshot_bases *bases,
                               uint64_t now);

/* After a snapshot built for opts was sent: bases moved to what it showed,
 * sessions gone forgotten.  -1 when out of memory. */
int snapshot_advance_bases(struct server *srv, const struct snapshot_opts *opts,
                           struct snapshot_bases *bases);

/*
 * The session's locations gathered by name, as its live views name them
 * (kept in its view, charged to its memory as views are), named up to its
 * state's newest location; under its lock.  Names that would pass its
 * budget are not made: locations from groups->nlocs on are unnamed then.
 * NULL when out of memory.
 */
const struct lm_groups *snapshot_names(struct session *s);

/* Frees a session's view when the session goes. */
extern const struct session_observer snapshot_observer;

/*
 * The sessions a snapshot for opts shows, newest last, into *out (in a's
 * memory): those matching opts, but brief ones (session_brief) unless
 * opts names a pid or a session or the subscriber's bases (NULL: none)
 * hold the session; for a merged view, only those streaming if any is (a
 * process that has exited holds nothing now).  Returns how many, or -1
 * out of memory.
 */
long snapshot_members(struct arena *a, struct server *srv,
                      const struct snapshot_opts *opts,
                      const struct snapshot_bases *bases,
                      struct session ***out);

/* Whether a session matches the selector parts of opts. */
int snapshot_matches(const struct session *s, const struct snapshot_opts *o);

#endif
