/* attach --tree and --unit: the processes of a tree or of a systemd
 * unit, found again every FOLLOW_SCAN_MS from /proc, each new one
 * attached (armed until it runs Lua) when it appears. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "arena.h"
#include "attach.h"
#include "clock.h"
#include "follow.h"
#include "log.h"
#include "peer.h"
#include "procinfo.h"
#include "server.h"
#include "session.h"

#define FOLLOW_SCAN_MS 500
/* Follows at once, every caller's; members of one follow. */
#define MAX_FOLLOWS 64
#define MAX_MEMBERS 4096
#define UNIT_MAX    256
#define CGROUP_MAX  512

/* A process as one scan of /proc saw it. */
struct proc_entry {
    pid_t pid, ppid;
    char cgroup[CGROUP_MAX]; /* its systemd cgroup path, or "" */
};

struct proc_scan {
    struct proc_entry *e;
    size_t n, cap;
};

struct follow {
    TAILQ_ENTRY(follow) link;
    uint64_t id;
    pid_t root;              /* a tree's; 0 for a unit */
    uint64_t root_start_ms;  /* tells the root's pid reused */
    char unit[UNIT_MAX];     /* a unit's name; "" for a tree */
    uid_t uid;               /* who asked */
    struct attach_want want; /* what members' streams carry */
    uint64_t since_ms;
    pid_t *seen; /* members signalled already, sorted */
    size_t nseen;
};

struct follows {
    TAILQ_HEAD(, follow) list;
    unsigned n;
    uint64_t next_id;
    struct event *timer;
};

/* -- /proc ---------------------------------------------------------------- */

/* Every process now, with its parent and (want_units) its cgroup path:
 * 0, or -1 out of memory or without /proc. */
static int scan_procs(struct proc_scan *sc, int want_units)
{
    DIR *d = opendir("/proc");
    struct dirent *de;

    sc->n = 0;
    if (d == NULL)
        return -1;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        if (sc->n == sc->cap) {
            size_t cap = sc->cap ? sc->cap * 2 : 256;
            struct proc_entry *e = realloc(sc->e, cap * sizeof(*e));
            if (e == NULL) {
                closedir(d);
                return -1;
            }
            sc->e = e;
            sc->cap = cap;
        }
        struct proc_entry *e = &sc->e[sc->n];
        e->pid = (pid_t)atoi(de->d_name);
        if ((e->ppid = procinfo_ppid(e->pid)) < 0)
            continue; /* gone meanwhile */
        e->cgroup[0] = '\0';
        if (want_units)
            procinfo_cgroup(e->pid, e->cgroup, sizeof(e->cgroup));
        sc->n++;
    }
    closedir(d);
    return 0;
}

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The members of f in a scan, sorted, into out (MAX_MEMBERS at most):
 * a tree's root and its descendants, or a unit's processes. */
static size_t members_of(const struct follow *f, const struct proc_scan *sc,
                         pid_t *out)
{
    size_t n = 0;

    if (f->root == 0) {
        for (size_t i = 0; i < sc->n && n < MAX_MEMBERS; i++)
            if (procinfo_cgroup_names(sc->e[i].cgroup, f->unit))
                out[n++] = sc->e[i].pid;
    } else {
        int grew = 1;
        for (size_t i = 0; i < sc->n; i++)
            if (sc->e[i].pid == f->root)
                out[n++] = f->root;
        /* Descendants, a generation a pass: a process whose parent is a
         * member is one (a scan lists each pid once, so none is added
         * twice in a pass). */
        while (grew && n > 0) {
            grew = 0;
            qsort(out, n, sizeof(*out), pid_cmp);
            size_t had = n;
            for (size_t i = 0; i < sc->n && n < MAX_MEMBERS; i++) {
                const struct proc_entry *e = &sc->e[i];
                if (bsearch(&e->ppid, out, had, sizeof(*out), pid_cmp) &&
                    !bsearch(&e->pid, out, had, sizeof(*out), pid_cmp))
                    out[n++] = e->pid, grew = 1;
            }
        }
    }
    qsort(out, n, sizeof(*out), pid_cmp);
    return n;
}

/* -- Following ------------------------------------------------------------ */

/* Attaches the members f has not seen, and forgets the ones gone (a pid
 * reused later is a new member).  0, or -1 out of memory. */
static int follow_members(struct server *srv, struct follow *f, const pid_t *m,
                          size_t n)
{
    pid_t *seen = malloc((n ? n : 1) * sizeof(*seen));
    char why[384];

    if (seen == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (f->nseen == 0 ||
            !bsearch(&m[i], f->seen, f->nseen, sizeof(pid_t), pid_cmp)) {
            int r = attach_arm(srv, m[i], f->uid, f->id, &f->want, why,
                               sizeof(why));
            if (r < 0)
                log_info("follow %llu: pid %d not attached: %s",
                         (unsigned long long)f->id, (int)m[i], why);
        }
        seen[i] = m[i];
    }
    free(f->seen);
    f->seen = seen;
    f->nseen = n;
    return 0;
}

static void follow_free_one(struct server *srv, struct follow *f)
{
    TAILQ_REMOVE(&srv->follows->list, f, link);
    srv->follows->n--;
    free(f->seen);
    free(f);
}

/* Whether the root of a tree is still the process that was followed. */
static int root_alive(const struct follow *f)
{
    return f->root == 0 || procinfo_start_ms(f->root) == f->root_start_ms;
}

static int needs_units(const struct follows *fs)
{
    const struct follow *f;

    TAILQ_FOREACH(f, &fs->list, link)
    if (f->root == 0)
        return 1;
    return 0;
}

/* One pass over every follow; the scan is kept for the caller. */
static int follow_pass(struct server *srv, struct proc_scan *sc)
{
    struct follows *fs = srv->follows;
    struct follow *f, *next;
    pid_t *m = malloc(MAX_MEMBERS * sizeof(*m));

    if (m == NULL || scan_procs(sc, needs_units(fs)) != 0) {
        free(m);
        return -1;
    }
    for (f = TAILQ_FIRST(&fs->list); f != NULL; f = next) {
        next = TAILQ_NEXT(f, link);
        if (!root_alive(f)) {
            log_info("follow %llu ends: its root, pid %d, exited",
                     (unsigned long long)f->id, (int)f->root);
            follow_free_one(srv, f);
            continue;
        }
        follow_members(srv, f, m, members_of(f, sc, m));
    }
    free(m);
    return 0;
}

static void schedule(struct server *srv);

static void follow_tick(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    struct proc_scan sc = {0};

    (void)fd;
    (void)what;
    if (follow_pass(srv, &sc) != 0)
        log_warn("follow: cannot scan /proc: %s", strerror(errno));
    free(sc.e);
    if (srv->follows->n > 0)
        schedule(srv);
}

/* -- Answers -------------------------------------------------------------- */

static uint32_t *arena_pids(struct arena *ar, size_t n)
{
    return arena_alloc(ar, (n ? n : 1) * sizeof(uint32_t));
}

/* f's head on the wire (what it follows, who asked, since when), with
 * room for n members streaming and n armed; NULL out of memory. */
static Ljmp__Follow *follow_head(struct arena *ar, const struct follow *f,
                                 size_t n)
{
    Ljmp__Follow *w = arena_alloc(ar, sizeof(*w));

    if (w == NULL)
        return NULL;
    ljmp__follow__init(w);
    w->has_id = w->has_uid = w->has_since_ms = 1;
    w->id = f->id;
    w->uid = (uint32_t)f->uid;
    w->since_ms = f->since_ms;
    if (f->root != 0) {
        w->has_root_pid = 1;
        w->root_pid = (uint32_t)f->root;
    } else if ((w->unit = arena_strdup(ar, f->unit)) == NULL) {
        return NULL;
    }
    w->streaming = arena_pids(ar, n);
    w->armed = arena_pids(ar, n);
    return w->streaming != NULL && w->armed != NULL ? w : NULL;
}

/* Counts pid among w's members streaming or armed: 1, or 0 if it is
 * neither. */
static int add_attached(struct server *srv, Ljmp__Follow *w, pid_t pid)
{
    if (attach_streaming_session(srv, pid) != NULL)
        w->streaming[w->n_streaming++] = (uint32_t)pid;
    else if (attach_is_armed(srv, pid))
        w->armed[w->n_armed++] = (uint32_t)pid;
    else
        return 0;
    return 1;
}

/* f as the wire shows it, with its members now (m, n), each as streaming,
 * armed or skipped (and why) for a caller. */
static Ljmp__Follow *follow_info(struct server *srv, struct arena *ar,
                                 const struct follow *f, const pid_t *m,
                                 size_t n)
{
    Ljmp__Follow *w = follow_head(ar, f, n);

    if (w == NULL)
        return NULL;
    w->skipped = arena_pids(ar, n);
    w->skip_reasons = arena_alloc(ar, (n ? n : 1) * sizeof(char *));
    if (!w->skipped || !w->skip_reasons)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char why[384];
        if (add_attached(srv, w, m[i]))
            continue;
        /* Not attached: the reason as attach by pid would give it. */
        int r =
            attach_arm(srv, m[i], f->uid, f->id, &f->want, why, sizeof(why));
        if (r == ATTACH_ARMED) {
            w->armed[w->n_armed++] = (uint32_t)m[i];
            continue;
        }
        if (r == ATTACH_STREAMING)
            snprintf(why, sizeof(why), "streaming");
        w->skipped[w->n_skipped] = (uint32_t)m[i];
        if ((w->skip_reasons[w->n_skipped++] = arena_strdup(ar, why)) == NULL)
            return NULL;
    }
    w->n_skip_reasons = w->n_skipped;
    return w;
}

static void respond_follow(struct peer *p, uint64_t id, Ljmp__Follow *w,
                           const char *note)
{
    Ljmp__Response resp;

    if (w == NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL, "out of memory");
        return;
    }
    peer_response_init(&resp, id);
    resp.body_case = LJMP__RESPONSE__BODY_FOLLOW;
    resp.follow = w;
    resp.note = (char *)note;
    peer_send(p, &resp);
}

/* -- Requests ------------------------------------------------------------- */

int follow_unit_name(struct peer *p, uint64_t id, const char *in, char *out,
                     size_t len)
{
    size_t n = strlen(in);

    if (n == 0 || n > 200 || in[0] == '.' || strchr(in, '/') != NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "%s is not a systemd unit's name", in);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)in[i])) {
            peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                            "a unit's name holds no spaces or control "
                            "characters");
            return -1;
        }
    snprintf(out, len, "%s%s", in, strchr(in, '.') ? "" : ".service");
    return 0;
}

static struct follow *find_follow(struct server *srv, pid_t root,
                                  const char *unit, uid_t caller)
{
    struct follow *f;

    TAILQ_FOREACH(f, &srv->follows->list, link)
    if (f->root == root && strcmp(f->unit, unit) == 0 &&
        (caller == 0 || caller == f->uid))
        return f;
    return NULL;
}

/* The target a request names: a tree's root or a unit.  0, or -1 (told
 * to p). */
static int target_of(struct peer *p, uint64_t id, int tree, int has_pid,
                     uint32_t pid, const char *unit_in, pid_t *root, char *unit,
                     size_t len)
{
    *root = 0;
    unit[0] = '\0';
    if (tree && unit_in != NULL) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                        "a tree or a unit, not both");
        return -1;
    }
    if (unit_in != NULL)
        return follow_unit_name(p, id, unit_in, unit, len);
    if (!has_pid || pid == 0 || pid > INT32_MAX ||
        procinfo_start_ms((pid_t)pid) == 0) {
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "no such process: %u", has_pid ? pid : 0);
        return -1;
    }
    *root = (pid_t)pid;
    return 0;
}

static void schedule(struct server *srv)
{
    struct timeval tv = {0, FOLLOW_SCAN_MS * 1000};

    if (!evtimer_pending(srv->follows->timer, NULL))
        evtimer_add(srv->follows->timer, &tv);
}

void follow_request(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__AttachRequest *r = req->attach;
    struct server *srv = p->srv;
    char unit[UNIT_MAX];
    pid_t root;
    struct follow *f;
    struct attach_want want;
    const char *note = NULL;

    if (attach_want_of(r, &want, unit, sizeof(unit)) != 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s",
                        unit);
        return;
    }
    if (target_of(p, req->id, r->tree, r->has_pid, r->pid, r->unit, &root, unit,
                  sizeof(unit)) != 0)
        return;
    if ((f = find_follow(srv, root, unit, p->uid)) != NULL) {
        note = "followed already";
    } else {
        if (srv->follows->n >= MAX_FOLLOWS ||
            (f = calloc(1, sizeof(*f))) == NULL) {
            peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                            "cannot follow more: %u follows are kept",
                            srv->follows->n);
            return;
        }
        f->id = ++srv->follows->next_id;
        f->root = root;
        f->root_start_ms = root ? procinfo_start_ms(root) : 0;
        snprintf(f->unit, sizeof(f->unit), "%s", unit);
        f->uid = p->uid;
        f->want = want;
        f->since_ms = clock_wall_ms(clock_now_ms());
        TAILQ_INSERT_TAIL(&srv->follows->list, f, link);
        srv->follows->n++;
        if (root != 0)
            log_info("follow %llu: the tree of pid %d, for uid %u",
                     (unsigned long long)f->id, (int)root, (unsigned)p->uid);
        else
            log_info("follow %llu: unit %s, for uid %u",
                     (unsigned long long)f->id, unit, (unsigned)p->uid);
    }
    /* The members now, attached before the answer. */
    struct proc_scan sc = {0};
    struct arena ar = {0};
    pid_t *m = malloc(MAX_MEMBERS * sizeof(*m));
    if (m == NULL || scan_procs(&sc, root == 0) != 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "cannot scan /proc: %s", strerror(errno));
    } else {
        size_t n = members_of(f, &sc, m);
        follow_members(srv, f, m, n);
        respond_follow(p, req->id, follow_info(srv, &ar, f, m, n), note);
    }
    arena_free(&ar);
    free(sc.e);
    free(m);
    schedule(srv);
}

void follow_detach_request(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__DetachRequest *r = req->detach;
    struct server *srv = p->srv;
    struct follow none = {0}, *f;
    char unit[UNIT_MAX];
    pid_t root;

    if (target_of(p, req->id, r->tree, r->has_pid, r->pid, r->unit, &root, unit,
                  sizeof(unit)) != 0)
        return;
    if ((f = find_follow(srv, root, unit, p->uid)) == NULL) {
        /* Not followed: its members are detached all the same. */
        f = &none;
        f->root = root;
        snprintf(f->unit, sizeof(f->unit), "%s", unit);
        f->uid = p->uid;
    }
    struct proc_scan sc = {0};
    struct arena ar = {0};
    pid_t *m = malloc(MAX_MEMBERS * sizeof(*m));
    Ljmp__Follow *w = NULL;
    int scanned = m != NULL && scan_procs(&sc, root == 0) == 0;
    if (scanned) {
        size_t n = members_of(f, &sc, m);
        w = follow_head(&ar, f, n);
        for (size_t i = 0; w != NULL && i < n; i++) {
            int ended = attach_end(srv, m[i], p->uid);
            if (ended == ATTACH_STREAMING)
                w->streaming[w->n_streaming++] = (uint32_t)m[i];
            else if (ended == ATTACH_ARMED)
                w->armed[w->n_armed++] = (uint32_t)m[i];
        }
    }
    if (f != &none) {
        log_info("follow %llu ends: detached by uid %u",
                 (unsigned long long)f->id, (unsigned)p->uid);
        follow_free_one(srv, f);
    }
    if (!scanned)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "cannot scan /proc: %s", strerror(errno));
    else
        respond_follow(p, req->id, w, "detached");
    arena_free(&ar);
    free(sc.e);
    free(m);
}

int follow_list(struct server *srv, struct arena *ar, uid_t caller,
                Ljmp__SessionList *list)
{
    struct follow *f;

    list->follows =
        arena_alloc(ar, (srv->follows->n + 1) * sizeof(*list->follows));
    if (list->follows == NULL)
        return -1;
    TAILQ_FOREACH(f, &srv->follows->list, link)
    {
        if (caller != 0 && caller != f->uid)
            continue;
        /* The members it attached, as last seen. */
        Ljmp__Follow *w = follow_head(ar, f, f->nseen);
        if (w == NULL)
            return -1;
        for (size_t i = 0; i < f->nseen; i++)
            add_attached(srv, w, f->seen[i]);
        list->follows[list->n_follows++] = w;
    }
    return 0;
}

int follow_start(struct server *srv)
{
    if ((srv->follows = calloc(1, sizeof(*srv->follows))) == NULL)
        return -1;
    TAILQ_INIT(&srv->follows->list);
    srv->follows->timer = evtimer_new(srv->base, follow_tick, srv);
    if (srv->follows->timer == NULL) {
        free(srv->follows);
        srv->follows = NULL;
        return -1;
    }
    return 0;
}

void follow_free(struct server *srv)
{
    if (srv->follows == NULL)
        return;
    while (!TAILQ_EMPTY(&srv->follows->list))
        follow_free_one(srv, TAILQ_FIRST(&srv->follows->list));
    event_free(srv->follows->timer);
    free(srv->follows);
    srv->follows = NULL;
}
