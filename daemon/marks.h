/* Marks: a session's per-site counters stored under a name, packed, for
 * the diffs (diff.h). */
#ifndef LJMPD_MARKS_H
#define LJMPD_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "ljmp_wire.h"
#include "lm_diff.h"

struct lm_state;
struct peer;
struct session;

/* Marks a session keeps at most; a new one past them drops the oldest. */
#define MARKS_MAX     16
#define MARK_NAME_MAX 32
/* Marks hold at most this share of their session's memory budget, so
 * that the state they mark keeps room to grow. */
#define MARKS_BUDGET_SHARE 4

/*
 * One mark: the counters (struct lm_diff_counts) of each location that
 * had one above 0, by location, packed: for each, the gap from the last
 * location (+1) and the five counters, as LEB128 varints.  Most counters
 * take a byte or two, so a location costs some 8 bytes where a row of
 * fixed words would take 44: a session of a million locations marks in
 * a few MiB.
 */
struct mark {
    char name[MARK_NAME_MAX + 1];
    uint64_t t_ms; /* monotonic, when taken */
    uint64_t seq;  /* the order taken */
    uint32_t nsites;
    struct lm_diff_counts sum; /* its sites' counters summed */
    uint8_t *packed;
    size_t len;
};

/* A session's marks, oldest first. */
struct marks {
    struct mark *v[MARKS_MAX];
    unsigned n;
    uint64_t seq;       /* marks taken so far */
    unsigned next_auto; /* the next generated name's number */
};

/* -- The store ------------------------------------------------------------ */

/* Whether name may name a mark: 1 to MARK_NAME_MAX letters, digits, '_'
 * or '-', beginning with a letter, and not a diff's word (start, peak,
 * now).  0, or -1 with why. */
int marks_name_ok(const char *name, char *why, size_t len);

/*
 * Packs st's locations with a counter above 0 into m (whose name and time
 * the caller sets), within most bytes of packed sites.  0; 1 when they
 * would take more (m holds none); -1 out of memory.  Reads every location
 * once: under the session's lock.
 */
int marks_pack(const struct lm_state *st, uint64_t most, struct mark *m);

/* Reads a mark's sites in order of location. */
struct mark_reader {
    const uint8_t *p, *end;
    uint32_t next_loc; /* the lowest the next one may be */
};

void mark_read_begin(const struct mark *m, struct mark_reader *r);
/* The next site: 1, or 0 at the end (or at a byte that cannot be one). */
int mark_read_next(struct mark_reader *r, uint32_t *loc,
                   struct lm_diff_counts *c);

/* What m holds, itself included. */
uint64_t mark_memory(const struct mark *m);
void mark_free(struct mark *m);

/* What ms holds, itself and its marks. */
uint64_t marks_memory(const struct marks *ms);
void marks_free(struct marks *ms);

/* The mark called name, or NULL. */
struct mark *marks_find(const struct marks *ms, const char *name);

/* The next generated name (m1, m2... in turn, skipping names in use). */
void marks_auto_name(struct marks *ms, char *out, size_t len);

/* What storing a mark called name would free: the one so named, else the
 * oldest when ms is full; 0 if none. */
uint64_t marks_freed_by(const struct marks *ms, const char *name);

/*
 * Stores m (ms takes it): in place of the one of its name (*replaced),
 * else after the others, the oldest dropped when ms is full (its name in
 * dropped, else "").
 */
void marks_put(struct marks *ms, struct mark *m, int *replaced, char *dropped,
               size_t len);

/* Deletes the mark called name: 0, or -1 if there is none. */
int marks_remove(struct marks *ms, const char *name);

/* -- Sessions ------------------------------------------------------------- */

/* s's marks, or NULL while it has none. */
struct marks *marks_of(const struct session *s);

/* Answers a MarkRequest about s (control.c selected it for p). */
void marks_request(struct peer *p, uint64_t id, struct session *s,
                   const Ljmp__MarkRequest *r);

/* Frees a session's marks with it. */
extern const struct session_observer marks_observer;

#endif
