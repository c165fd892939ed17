/* Marks: sessions' per-site counters stored under names, packed, within a
 * share of the session's budget; mark requests, answered on the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "clock.h"
#include "log.h"
#include "marks.h"
#include "peer.h"
#include "session.h"
#include "snapshot.h"

/* -- Names ---------------------------------------------------------------- */

/* The words a diff's ends are called besides marks' names. */
static const char *const end_words[] = {"start", "peak", "now"};

static int is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_name_char(char c)
{
    return is_letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int marks_name_ok(const char *name, char *why, size_t len)
{
    size_t n = strlen(name);

    if (n == 0 || n > MARK_NAME_MAX || !is_letter(name[0])) {
        snprintf(why, len,
                 "a mark's name is 1 to %u letters, digits, '_' or '-', "
                 "beginning with a letter",
                 MARK_NAME_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_name_char(name[i])) {
            snprintf(why, len,
                     "a mark's name holds only letters, digits, '_' and "
                     "'-', not '%c'",
                     name[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(end_words) / sizeof(end_words[0]); i++) {
        if (strcmp(name, end_words[i]) == 0) {
            snprintf(why, len,
                     "'%s' is one of a diff's ends (start, peak, now), not "
                     "a mark's name",
                     name);
            return -1;
        }
    }
    return 0;
}

/* -- Packing -------------------------------------------------------------- */

/* The most bytes one site packs into: a location's gap, five counters. */
#define SITE_MAX_BYTES (5 + LM_DIFF_NCOUNTS * 10)

/* Most counters are below 128, or 16384: those take one branch. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    if (v < 0x80) {
        *p = (uint8_t)v;
        return p + 1;
    }
    if (v < 0x4000) {
        p[0] = (uint8_t)(v | 0x80);
        p[1] = (uint8_t)(v >> 7);
        return p + 2;
    }
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A varint at *p (before end) into *v: 0, or -1 if it is cut or too long. */
static inline int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;

    if (*p < end && **p < 0x80) {
        *v = *(*p)++;
        return 0;
    }
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* A packing buffer, grown by doubling up to what its mark may take. */
struct packer {
    uint8_t *buf;
    size_t len, cap;
    uint64_t most;
};

/*
 * Room for one more site: 0; 1 past most; -1 out of memory.  The first
 * call takes room for every location at its longest (within most): only
 * the pages written are touched, and what is left over goes back at the
 * end, so the buffer is never copied as it fills.
 */
static int packer_room(struct packer *k, uint32_t nlocs)
{
    if (k->len > k->most)
        return 1;
    if (k->cap - k->len >= SITE_MAX_BYTES)
        return 0;
    uint64_t want =
        k->cap ? 2 * (uint64_t)k->cap : (uint64_t)nlocs * SITE_MAX_BYTES;
    size_t cap = want < k->most + SITE_MAX_BYTES ? (size_t)want
                                                 : k->most + SITE_MAX_BYTES;
    uint8_t *b = realloc(k->buf, cap);
    if (b == NULL)
        return -1;
    k->buf = b;
    k->cap = cap;
    return 0;
}

/* Appends location loc (at least next_loc) and its counters. */
static void packer_put(struct packer *k, uint32_t loc, uint32_t next_loc,
                       const struct lm_diff_counts *c)
{
    uint8_t *p = put_varint(k->buf + k->len, loc - next_loc);

#define PUT_COUNTER(name) p = put_varint(p, c->name);
    LM_DIFF_COUNTS(PUT_COUNTER)
#undef PUT_COUNTER
    k->len = (size_t)(p - k->buf);
}

int marks_pack(const struct lm_state *st, uint64_t most, struct mark *m)
{
    struct packer k = {NULL, 0, 0, most};
    uint32_t next_loc = 0;
    int rc = 0;

    m->nsites = 0;
    memset(&m->sum, 0, sizeof(m->sum));
    for (uint32_t loc = 0; loc < st->nlocs && rc == 0; loc++) {
        struct lm_diff_counts c;
        lm_diff_counts_at(st, loc, &c);
        if (lm_diff_counts_zero(&c) || (rc = packer_room(&k, st->nlocs)) != 0)
            continue;
        packer_put(&k, loc, next_loc, &c);
        next_loc = loc + 1;
        m->nsites++;
        lm_diff_counts_add(&m->sum, &c);
    }
    if (rc == 0 && k.len > most)
        rc = 1;
    if (rc != 0) {
        free(k.buf);
        m->nsites = 0;
        return rc;
    }
    /* Only what it holds: the doubling left up to half of it spare. */
    uint8_t *fit = k.len > 0 ? realloc(k.buf, k.len) : NULL;
    if (k.len == 0)
        free(k.buf);
    m->packed = k.len > 0 ? (fit != NULL ? fit : k.buf) : NULL;
    m->len = k.len;
    return 0;
}

void mark_read_begin(const struct mark *m, struct mark_reader *r)
{
    r->p = m->packed;
    r->end = m->len > 0 ? m->packed + m->len : m->packed; /* none: NULL */
    r->next_loc = 0;
}

int mark_read_next(struct mark_reader *r, uint32_t *loc,
                   struct lm_diff_counts *c)
{
    uint64_t gap, v[LM_DIFF_NCOUNTS];

    if (r->p >= r->end || get_varint(&r->p, r->end, &gap) != 0 ||
        gap > UINT32_MAX - r->next_loc)
        return 0;
    for (unsigned i = 0; i < LM_DIFF_NCOUNTS; i++)
        if (get_varint(&r->p, r->end, &v[i]) != 0)
            return 0;
    *loc = r->next_loc + (uint32_t)gap;
    r->next_loc = *loc + 1;
    unsigned i = 0;
#define GET_COUNTER(name) c->name = v[i++];
    LM_DIFF_COUNTS(GET_COUNTER)
#undef GET_COUNTER
    return 1;
}

/* -- The store ------------------------------------------------------------ */

uint64_t mark_memory(const struct mark *m)
{
    return sizeof(*m) + m->len;
}

void mark_free(struct mark *m)
{
    if (m == NULL)
        return;
    free(m->packed);
    free(m);
}

uint64_t marks_memory(const struct marks *ms)
{
    uint64_t n = sizeof(*ms);

    for (unsigned i = 0; i < ms->n; i++)
        n += mark_memory(ms->v[i]);
    return n;
}

void marks_free(struct marks *ms)
{
    if (ms == NULL)
        return;
    for (unsigned i = 0; i < ms->n; i++)
        mark_free(ms->v[i]);
    free(ms);
}

/* The index of the mark called name, or -1. */
static int index_of(const struct marks *ms, const char *name)
{
    for (unsigned i = 0; i < ms->n; i++)
        if (strcmp(ms->v[i]->name, name) == 0)
            return (int)i;
    return -1;
}

struct mark *marks_find(const struct marks *ms, const char *name)
{
    int i = ms != NULL ? index_of(ms, name) : -1;

    return i >= 0 ? ms->v[i] : NULL;
}

void marks_auto_name(struct marks *ms, char *out, size_t len)
{
    do
        snprintf(out, len, "m%u", ++ms->next_auto);
    while (index_of(ms, out) >= 0);
}

uint64_t marks_freed_by(const struct marks *ms, const char *name)
{
    int i = index_of(ms, name);

    if (i >= 0)
        return mark_memory(ms->v[i]);
    return ms->n == MARKS_MAX ? mark_memory(ms->v[0]) : 0;
}

/* Removes the mark at index i, the others keeping their order. */
static void drop_at(struct marks *ms, unsigned i)
{
    mark_free(ms->v[i]);
    memmove(&ms->v[i], &ms->v[i + 1], (ms->n - i - 1) * sizeof(ms->v[0]));
    ms->n--;
}

void marks_put(struct marks *ms, struct mark *m, int *replaced, char *dropped,
               size_t len)
{
    int i = index_of(ms, m->name);

    m->seq = ++ms->seq;
    *replaced = i >= 0;
    snprintf(dropped, len, "%s", "");
    if (i >= 0) {
        drop_at(ms, (unsigned)i); /* the newest now: it goes last */
    } else if (ms->n == MARKS_MAX) {
        snprintf(dropped, len, "%s", ms->v[0]->name);
        drop_at(ms, 0);
    }
    ms->v[ms->n++] = m;
}

int marks_remove(struct marks *ms, const char *name)
{
    int i = ms != NULL ? index_of(ms, name) : -1;

    if (i < 0)
        return -1;
    drop_at(ms, (unsigned)i);
    return 0;
}

/* -- Sessions: the store in a session's slot ------------------------------ */

struct marks *marks_of(const struct session *s)
{
    return *session_slot(s, &marks_observer);
}

/* s's marks, made at its first; NULL out of memory. */
static struct marks *marks_made(struct session *s)
{
    void **slot = session_slot(s, &marks_observer);

    if (*slot == NULL)
        *slot = calloc(1, sizeof(struct marks));
    return *slot;
}

/* s's marks' bytes in its memory, charged to its user. */
static void charge(struct session *s)
{
    const struct marks *ms = marks_of(s);

    s->mem_marks = ms != NULL ? marks_memory(ms) : 0;
    s->nmarks = ms != NULL ? ms->n : 0;
    budget_charge(s);
}

static void marks_freed(struct session *s, void *arg)
{
    void **slot = session_slot(s, &marks_observer);

    (void)arg;
    marks_free(*slot);
    *slot = NULL;
    s->mem_marks = 0;
    s->nmarks = 0;
}

const struct session_observer marks_observer = {
    .freed = marks_freed,
};

/* -- Mark requests -------------------------------------------------------- */

static Ljmp__Mark *mark_msg(struct arena *a, const struct mark *m)
{
    Ljmp__Mark *x = arena_alloc(a, sizeof(*x));

    if (x == NULL)
        return NULL;
    ljmp__mark__init(x);
    x->name = (char *)m->name;
    x->has_time_ms = x->has_sites = x->has_bytes = 1;
    x->has_live_bytes = x->has_live_blocks = 1;
    x->time_ms = clock_wall_ms(m->t_ms);
    x->sites = m->nsites;
    x->bytes = mark_memory(m);
    x->live_bytes = m->sum.live_bytes;
    x->live_blocks = m->sum.live_blocks;
    return x;
}

/* Sends s's marks, with what was stored (or NULL) and dropped. */
static void send_marks(struct peer *p, uint64_t id, struct session *s,
                       const struct mark *stored, int replaced,
                       const char *dropped)
{
    const struct marks *ms = marks_of(s);
    unsigned n = ms != NULL ? ms->n : 0;
    struct arena a = {0};
    Ljmp__MarkResult out = LJMP__MARK_RESULT__INIT;
    Ljmp__Response resp;

    out.session = snapshot_info(&a, s);
    out.marks = arena_alloc(&a, (n + 1) * sizeof(*out.marks));
    if (out.session == NULL || out.marks == NULL ||
        (stored != NULL && (out.stored = mark_msg(&a, stored)) == NULL))
        goto oom;
    for (unsigned i = 0; i < n; i++)
        if ((out.marks[out.n_marks++] = mark_msg(&a, ms->v[i])) == NULL)
            goto oom;
    out.has_replaced = stored != NULL;
    out.replaced = replaced;
    if (dropped != NULL && dropped[0] != '\0')
        out.dropped = (char *)dropped;
    out.has_marks_bytes = 1;
    out.marks_bytes = s->mem_marks;
    peer_response_init(&resp, id);
    resp.body_case = LJMP__RESPONSE__BODY_MARK;
    resp.mark = &out;
    peer_send(p, &resp);
    arena_free(&a);
    return;
oom:
    arena_free(&a);
    peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL, "out of memory");
}

/* What a mark called name may pack into: a share of s's budget less its
 * other marks, and what s may still take, each counting what storing it
 * frees.  *by_share: the share is the smaller. */
static uint64_t room_for(struct session *s, const struct marks *ms,
                         const char *name, int *by_share)
{
    uint64_t freed = marks_freed_by(ms, name);
    uint64_t held = marks_memory(ms) - freed + sizeof(struct mark);
    uint64_t share = s->mem_budget / MARKS_BUDGET_SHARE;
    uint64_t in_share = share > held ? share - held : 0;
    uint64_t room = budget_room(s) + freed;
    uint64_t in_budget =
        room > sizeof(struct mark) ? room - sizeof(struct mark) : 0;

    *by_share = in_share <= in_budget;
    return *by_share ? in_share : in_budget;
}

/* Tells p that a mark of s would take more than most. */
static void refuse_mark(struct peer *p, uint64_t id, const struct session *s,
                        uint64_t most, int by_share)
{
    if (by_share)
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a mark of session %llu would take more than the "
                        "%llu bytes left to marks (a quarter of its memory "
                        "budget of %llu bytes; its %u marks hold %llu): "
                        "remove one (ljmpctl mark --delete NAME)",
                        (unsigned long long)s->id, (unsigned long long)most,
                        (unsigned long long)s->mem_budget, s->nmarks,
                        (unsigned long long)s->mem_marks);
    else
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a mark of session %llu would take more than the "
                        "%llu bytes left in its memory budget, its user's "
                        "or ljmpd's (see ljmpctl list): remove a mark "
                        "(ljmpctl mark --delete NAME) or raise ljmpd's "
                        "--session-memory, --user-memory or --memory",
                        (unsigned long long)s->id, (unsigned long long)most);
}

/* Takes a mark of s called name (NULL: a generated name). */
static void take_mark(struct peer *p, uint64_t id, struct session *s,
                      const char *asked)
{
    char name[MARK_NAME_MAX + 1], why[160], dropped[MARK_NAME_MAX + 1];
    struct marks *ms = marks_made(s);
    struct mark *m = calloc(1, sizeof(*m));
    int by_share, replaced, rc = -1;

    if (asked != NULL && marks_name_ok(asked, why, sizeof(why)) != 0) {
        free(m);
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s", why);
        return;
    }
    if (ms != NULL && m != NULL) {
        if (asked != NULL)
            snprintf(name, sizeof(name), "%s", asked);
        else
            marks_auto_name(ms, name, sizeof(name));
        uint64_t most = room_for(s, ms, name, &by_share);
        uint64_t t0 = clock_now_ms();
        session_lock(s); /* a feed thread may be changing the state */
        rc = marks_pack(&s->prof.state, most, m);
        session_unlock(s);
        log_debug("session %llu: mark %s of %u locations in %llu ms",
                  (unsigned long long)s->id, name, s->prof.state.nlocs,
                  (unsigned long long)(clock_now_ms() - t0));
        if (rc == 1)
            refuse_mark(p, id, s, most, by_share);
    }
    if (rc != 0) {
        free(m);
        if (rc < 0)
            peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL,
                            "out of memory taking a mark");
        return;
    }
    snprintf(m->name, sizeof(m->name), "%s", name);
    m->t_ms = clock_now_ms();
    marks_put(ms, m, &replaced, dropped, sizeof(dropped));
    charge(s);
    send_marks(p, id, s, m, replaced, dropped);
}

void marks_request(struct peer *p, uint64_t id, struct session *s,
                   const Ljmp__MarkRequest *r)
{
    if (r->list) {
        send_marks(p, id, s, NULL, 0, NULL);
    } else if (r->remove) {
        if (r->name == NULL || marks_remove(marks_of(s), r->name) != 0) {
            peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                            "session %llu has no mark '%s'",
                            (unsigned long long)s->id,
                            r->name != NULL ? r->name : "");
            return;
        }
        charge(s);
        send_marks(p, id, s, NULL, 0, r->name);
    } else {
        take_mark(p, id, s, r->name);
    }
}
