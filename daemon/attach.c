/* Attach and detach by pid: checks, the signal to the VM's agent, the
 * bounded wait for its stream to begin or end, and the processes armed
 * that have not run Lua since. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentfacts.h"
#include "attach.h"
#include "clock.h"
#include "procinfo.h"
#include "peer.h"
#include "session.h"
#include "log.h"
#include "snapshot.h"

#define ATTACH_WAIT_MS 500
#define DETACH_WAIT_MS 5000
#define MAX_WAIT_MS    60000
/* Processes armed at once, every caller's: each holds a descriptor. */
#define MAX_ARMED 4096

/* A request waiting for a VM: attach waits for its hello, detach for the
 * end of its session. */
struct op_wait {
    TAILQ_ENTRY(op_wait) link;
    struct server *srv;
    int detach;
    uid_t uid; /* attach: the process's */
    pid_t pid;
    uint64_t session_id; /* detach: the session that must end */
    struct peer *peer;
    uint64_t request_id;
    unsigned wait_ms;
    struct event *timer;
};

/* A process whose agent was signalled to attach and whose VM has not
 * connected since: it will at its next Lua call.  Its pidfd tells when it
 * exits, and the record goes then. */
struct armed {
    TAILQ_ENTRY(armed) link;
    struct server *srv;
    pid_t pid;
    uid_t uid; /* the process's */
    uint64_t since_ms;
    uint64_t follow_id;
    int pidfd;
    struct event *exited;
};

/* The attach module's state: the requests waiting for a VM, and the
 * processes armed. */
struct attach {
    TAILQ_HEAD(, op_wait) ops;
    TAILQ_HEAD(, armed) armed;
    unsigned narmed;
};

/* Facts and checks for pid on behalf of a caller of uid `caller`: 0, or
 * an error code with the reason in why. */
static int check_target(struct server *srv, pid_t pid, uid_t caller,
                        struct agent_facts *f, char *why, size_t len)
{
    if (agentfacts_read(pid, f) != 0) {
        snprintf(why, len, "no such process: %d", (int)pid);
        return LJMP__ERROR_CODE__ERR_NO_SESSION;
    }
    return agentfacts_check(f, pid, caller, srv->cfg.ingest_path, why, len);
}

static void respond_session(struct peer *p, uint64_t id,
                            const struct session *s, const char *note)
{
    struct arena a = {0};
    Ljmp__Response resp;

    peer_response_init(&resp, id);
    resp.body_case = LJMP__RESPONSE__BODY_SESSION;
    resp.session = snapshot_info(&a, s);
    resp.note = (char *)note;
    if (resp.session != NULL)
        peer_send(p, &resp);
    else
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL, "out of memory");
    arena_free(&a);
}

/* -- Processes armed ----------------------------------------------------- */

static struct armed *armed_find(struct server *srv, pid_t pid)
{
    struct armed *a;

    TAILQ_FOREACH(a, &srv->attach->armed, link)
    if (a->pid == pid)
        return a;
    return NULL;
}

static void armed_free(struct armed *a)
{
    TAILQ_REMOVE(&a->srv->attach->armed, a, link);
    a->srv->attach->narmed--;
    if (a->exited != NULL)
        event_free(a->exited);
    if (a->pidfd >= 0)
        close(a->pidfd);
    free(a);
}

static void armed_exited(evutil_socket_t fd, short what, void *arg)
{
    struct armed *a = arg;

    (void)fd;
    (void)what;
    log_info("attach: pid %d exited while armed", (int)a->pid);
    armed_free(a);
}

static int open_process(pid_t pid);

/* Keeps pid armed (the record it has already, or a new one): the record,
 * or NULL when MAX_ARMED are or out of memory. */
static struct armed *armed_keep(struct server *srv, pid_t pid, uid_t uid,
                                uint64_t follow_id)
{
    struct armed *a = armed_find(srv, pid);

    if (a != NULL) {
        if (a->follow_id == 0)
            a->follow_id = follow_id;
        return a;
    }
    if (srv->attach->narmed >= MAX_ARMED || (a = calloc(1, sizeof(*a))) == NULL)
        return NULL;
    a->srv = srv;
    a->pid = pid;
    a->uid = uid;
    a->since_ms = clock_wall_ms(clock_now_ms());
    a->follow_id = follow_id;
    /* A pidfd turns readable when its process exits. */
    if ((a->pidfd = open_process(pid)) >= 0) {
        a->exited = event_new(srv->base, a->pidfd, EV_READ, armed_exited, a);
        if (a->exited == NULL || event_add(a->exited, NULL) != 0) {
            if (a->exited != NULL)
                event_free(a->exited);
            close(a->pidfd);
            free(a);
            return NULL;
        }
    }
    TAILQ_INSERT_TAIL(&srv->attach->armed, a, link);
    srv->attach->narmed++;
    return a;
}

/* Whether an armed record is still its process's: without a pidfd (an
 * old kernel), the pid is checked when the record is shown. */
static int armed_alive(const struct armed *a)
{
    return a->pidfd >= 0 || kill(a->pid, 0) == 0 || errno == EPERM;
}

static Ljmp__ArmedProcess *armed_info(struct arena *ar, const struct armed *a)
{
    Ljmp__ArmedProcess *m = arena_alloc(ar, sizeof(*m));
    char *cmd = procinfo_cmdline(a->pid);

    if (m == NULL || cmd == NULL) {
        free(cmd);
        return NULL;
    }
    ljmp__armed_process__init(m);
    m->has_pid = m->has_uid = m->has_since_ms = m->has_follow_id = 1;
    m->pid = (uint32_t)a->pid;
    m->uid = (uint32_t)a->uid;
    m->since_ms = a->since_ms;
    m->follow_id = a->follow_id;
    m->cmdline = arena_strdup(ar, cmd);
    free(cmd);
    return m->cmdline != NULL ? m : NULL;
}

static void respond_armed(struct peer *p, uint64_t id, const struct armed *a,
                          const char *note)
{
    struct arena ar = {0};
    Ljmp__Response resp;

    peer_response_init(&resp, id);
    resp.body_case = LJMP__RESPONSE__BODY_ARMED;
    resp.armed = armed_info(&ar, a);
    resp.note = (char *)note;
    if (resp.armed != NULL)
        peer_send(p, &resp);
    else
        peer_send_error(p, id, LJMP__ERROR_CODE__ERR_INTERNAL, "out of memory");
    arena_free(&ar);
}

int attach_list_armed(struct server *srv, struct arena *ar, uid_t caller,
                      Ljmp__SessionList *list)
{
    struct armed *a, *next;

    list->armed =
        arena_alloc(ar, (srv->attach->narmed + 1) * sizeof(*list->armed));
    if (list->armed == NULL)
        return -1;
    for (a = TAILQ_FIRST(&srv->attach->armed); a != NULL; a = next) {
        next = TAILQ_NEXT(a, link);
        if (!armed_alive(a)) {
            armed_free(a);
            continue;
        }
        if (caller != 0 && caller != a->uid)
            continue;
        if ((list->armed[list->n_armed] = armed_info(ar, a)) == NULL)
            return -1;
        list->n_armed++;
    }
    return 0;
}

int attach_is_armed(struct server *srv, pid_t pid)
{
    return armed_find(srv, pid) != NULL;
}

/* -- Waits ---------------------------------------------------------------- */

/* Ends a wait; its client may go if it asked for nothing else (unless
 * the client is being freed: check 0). */
static void op_free(struct op_wait *w, int check)
{
    struct peer *p = w->peer;

    TAILQ_REMOVE(&w->srv->attach->ops, w, link);
    event_free(w->timer);
    free(w);
    peer_wait_end(p);
    if (check)
        peer_idle_check(p);
}

/* No stream yet: the VM runs no Lua now (an idle worker), and starts at
 * its next Lua call; ljmpd keeps it armed and says so. */
static void attach_timeout(struct op_wait *w)
{
    struct armed *a = armed_keep(w->srv, w->pid, w->uid, 0);

    if (a == NULL) {
        peer_send_error(w->peer, w->request_id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "pid %d did not connect within %u ms, and cannot be "
                        "kept armed: %u processes are (or out of memory)",
                        (int)w->pid, w->wait_ms, w->srv->attach->narmed);
        return;
    }
    log_info("attach: pid %d armed (no Lua ran within %u ms)", (int)w->pid,
             w->wait_ms);
    respond_armed(w->peer, w->request_id, a,
                  "armed: its stream starts at its next Lua call");
}

static void op_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct op_wait *w = arg;

    (void)fd;
    (void)what;
    if (w->detach)
        peer_send_error(w->peer, w->request_id, LJMP__ERROR_CODE__ERR_TIMEOUT,
                        "pid %d did not end its stream within %u ms: no Lua "
                        "code ran (the VM stops at its next Lua call); it "
                        "is still streaming",
                        (int)w->pid, w->wait_ms);
    else
        attach_timeout(w);
    op_free(w, 1);
}

static int op_wait_for(struct peer *p, uint64_t id, int detach, pid_t pid,
                       uid_t uid, uint64_t session_id, unsigned wait_ms)
{
    struct op_wait *w = calloc(1, sizeof(*w));
    struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};

    if (w == NULL)
        return -1;
    w->timer = evtimer_new(p->srv->base, op_timeout, w);
    if (w->timer != NULL)
        event_priority_set(w->timer, PRIO_CONTROL);
    if (w->timer == NULL) {
        free(w);
        return -1;
    }
    w->srv = p->srv;
    w->detach = detach;
    w->pid = pid;
    w->uid = uid;
    w->session_id = session_id;
    w->peer = p;
    w->request_id = id;
    w->wait_ms = wait_ms;
    TAILQ_INSERT_TAIL(&p->srv->attach->ops, w, link);
    peer_wait_begin(p);
    evtimer_add(w->timer, &tv);
    return 0;
}

struct session *attach_streaming_session(struct server *srv, pid_t pid)
{
    struct session *s, *found = NULL;

    /* A relay naming pid (ljmpctl ingest --pid) is not its VM's stream. */
    TAILQ_FOREACH(s, &srv->sessions, link)
    if (s->pid == pid && !s->relayed &&
        (s->phase == SESSION_HELLO || s->phase == SESSION_STREAM))
        found = s;
    return found;
}

static unsigned wait_of(int has, uint32_t ms, unsigned dflt)
{
    if (!has || ms == 0)
        return dflt;
    return ms < MAX_WAIT_MS ? ms : MAX_WAIT_MS;
}

/* -- Signals -------------------------------------------------------------- */

/*
 * A handle on the process before it is checked: if it exits and its pid
 * is reused meanwhile, the signal goes to the process that was checked
 * (and fails), never to the newcomer.  -1 where the kernel has no pidfd
 * (then the pid is signalled directly).
 */
static int open_process(pid_t pid)
{
#ifdef SYS_pidfd_open
    return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
    (void)pid;
    return -1;
#endif
}

static int queue_signal(int pidfd, pid_t pid, int sig, uint64_t request)
{
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0) {
        siginfo_t info;
        memset(&info, 0, sizeof(info));
        info.si_signo = sig;
        info.si_code = SI_QUEUE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        info.si_value.sival_ptr = (void *)(uintptr_t)request;
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, &info, 0);
    }
#else
    (void)pidfd;
#endif
    union sigval v = {.sival_ptr = (void *)(uintptr_t)request};
    return sigqueue(pid, sig, v);
}

/* Checks pid for a caller and signals the request to its agent: 0, or an
 * error code with the reason in why. */
static int signal_agent(struct server *srv, pid_t pid, uid_t caller,
                        uint64_t request, struct agent_facts *f, char *why,
                        size_t len)
{
    int pidfd = open_process(pid);
    int code = check_target(srv, pid, caller, f, why, len);

    if (code == 0 && queue_signal(pidfd, pid, f->signal, request) != 0) {
        int err = errno;
        snprintf(why, len, "cannot signal pid %d: %s%s", (int)pid,
                 strerror(err),
                 err == EPERM ? " (ljmpd runs as another user)" : "");
        code = err == EPERM ? LJMP__ERROR_CODE__ERR_PERMISSION
                            : LJMP__ERROR_CODE__ERR_NO_SESSION;
    }
    if (pidfd >= 0)
        close(pidfd);
    return code;
}

/*
 * A process that streams already may hold other VMs that do not (a host
 * that embeds several, nginx's master between the two VMs of a reload):
 * the signal reaches them all, and each VM that streams already ignores
 * it.  Their sessions come as any do; what answers the request is the
 * session that streams.
 */
static void signal_other_vms(struct server *srv, pid_t pid, uid_t caller,
                             const struct attach_want *w)
{
    struct agent_facts f;
    char why[384];

    if (signal_agent(srv, pid, caller, attach_request_value(w), &f, why,
                     sizeof(why)) != 0)
        log_info("attach: pid %d streams; its other VMs: %s", (int)pid, why);
}

int attach_want_of(const Ljmp__AttachRequest *r, struct attach_want *w,
                   char *why, size_t len)
{
    w->no_census = r->has_no_census && r->no_census;
    w->stacks = r->has_stacks ? r->stacks : 0;
    w->stack_sample = r->has_stack_sample ? r->stack_sample : 0;
    if (w->stacks > LM_STACK_MAX_DEPTH) {
        snprintf(why, len, "stacks of depth %u: at most %d", w->stacks,
                 LM_STACK_MAX_DEPTH);
        return -1;
    }
    if (w->stack_sample > LJMP_REQ_SAMPLE_MAX ||
        (w->stack_sample != 0 && w->stacks == 0)) {
        snprintf(why, len,
                 w->stacks == 0 ? "a stack sample without stacks"
                                : "a stack sample of %llu bytes: too large",
                 (unsigned long long)w->stack_sample);
        return -1;
    }
    return 0;
}

int attach_arm(struct server *srv, pid_t pid, uid_t caller, uint64_t follow_id,
               const struct attach_want *w, char *why, size_t len)
{
    struct agent_facts f;
    int code;

    if (attach_streaming_session(srv, pid) != NULL) {
        signal_other_vms(srv, pid, caller, w);
        return ATTACH_STREAMING;
    }
    if ((code = signal_agent(srv, pid, caller, attach_request_value(w), &f, why,
                             len)) != 0)
        return -code;
    log_info("attach: pid %d signalled for uid %u (follow %llu)", (int)pid,
             (unsigned)caller, (unsigned long long)follow_id);
    if (armed_keep(srv, pid, f.uid, follow_id) == NULL) {
        snprintf(why, len, "%u processes are armed already (or out of memory)",
                 srv->attach->narmed);
        return -LJMP__ERROR_CODE__ERR_INTERNAL;
    }
    return ATTACH_ARMED;
}

int attach_end(struct server *srv, pid_t pid, uid_t caller)
{
    struct agent_facts f;
    struct armed *a = armed_find(srv, pid);
    char why[384];
    int streaming = attach_streaming_session(srv, pid) != NULL;

    if (!streaming && a == NULL)
        return -1;
    if (a != NULL)
        armed_free(a);
    if (signal_agent(srv, pid, caller, LJMP_REQ_DETACH, &f, why, sizeof(why)) !=
        0) {
        log_info("detach: %s", why);
        return -1;
    }
    return streaming ? ATTACH_STREAMING : ATTACH_ARMED;
}

/* -- Requests ------------------------------------------------------------- */

/*
 * Attach and detach requests a client may have waiting for a VM: each
 * holds a timer and signals the process, and one that never waits for
 * its answers could queue them without end.
 */
#define MAX_OPS_PER_PEER 16

static int too_many_ops(struct peer *p, uint64_t id)
{
    const struct op_wait *w;
    unsigned n = 0;

    TAILQ_FOREACH(w, &p->srv->attach->ops, link)
    n += w->peer == p;
    if (n < MAX_OPS_PER_PEER)
        return 0;
    peer_send_error(p, id, LJMP__ERROR_CODE__ERR_BAD_REQUEST,
                    "too many attach or detach requests waiting (%u): wait "
                    "for their answers first",
                    n);
    return 1;
}

/* Whether a request names a process id at all (a pid_t is signed, the
 * wire's is not): else the client is told, the number as it sent it. */
static int names_a_pid(struct peer *p, uint64_t id, int has_pid, uint32_t pid)
{
    if (has_pid && pid > 0 && pid <= INT32_MAX)
        return 1;
    peer_send_error(p, id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                    "no such process: %u", has_pid ? pid : 0);
    return 0;
}

void attach_request(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__AttachRequest *r = req->attach;
    pid_t pid = (pid_t)r->pid;
    struct attach_want w;
    struct agent_facts f;
    struct session *s;
    char why[384];

    if (attach_want_of(r, &w, why, sizeof(why)) != 0) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s",
                        why);
        return;
    }
    if (!names_a_pid(p, req->id, r->has_pid, r->pid) ||
        too_many_ops(p, req->id))
        return;
    if ((s = attach_streaming_session(p->srv, pid)) != NULL &&
        session_visible(s, p->uid)) {
        signal_other_vms(p->srv, pid, p->uid, &w);
        respond_session(p, req->id, s, "already attached");
        return;
    }
    int code = signal_agent(p->srv, pid, p->uid, attach_request_value(&w), &f,
                            why, sizeof(why));
    if (code != 0) {
        peer_send_error(p, req->id, (Ljmp__ErrorCode)code, "%s", why);
        return;
    }
    log_info("attach: pid %d signalled for uid %u%s, stacks %u", (int)pid,
             (unsigned)p->uid, w.no_census ? ", without census" : "", w.stacks);
    if (op_wait_for(
            p, req->id, 0, pid, f.uid, 0,
            wait_of(r->has_timeout_ms, r->timeout_ms, ATTACH_WAIT_MS)) != 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
}

/* Detach of a process armed and not streaming yet: disarmed at once. */
static void disarm(struct peer *p, uint64_t id, struct armed *a)
{
    struct agent_facts f;
    char why[384];

    if (signal_agent(p->srv, a->pid, p->uid, LJMP_REQ_DETACH, &f, why,
                     sizeof(why)) != 0)
        log_info("detach: %s (dropped as armed)", why);
    respond_armed(p, id, a, "disarmed: it had not run Lua since it was armed");
    armed_free(a);
}

void attach_detach_request(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__DetachRequest *r = req->detach;
    pid_t pid = (pid_t)r->pid;
    struct agent_facts f;
    struct armed *a;
    char why[384];

    if (!names_a_pid(p, req->id, r->has_pid, r->pid) ||
        too_many_ops(p, req->id))
        return;
    struct session *s = attach_streaming_session(p->srv, pid);
    if (s == NULL || !session_visible(s, p->uid)) {
        if ((a = armed_find(p->srv, pid)) != NULL &&
            (p->uid == 0 || p->uid == a->uid)) {
            disarm(p, req->id, a);
            return;
        }
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "pid %d is not attached: no session of it is "
                        "streaming to this ljmpd, and it is not armed",
                        (int)pid);
        return;
    }
    int code = signal_agent(p->srv, pid, p->uid, LJMP_REQ_DETACH, &f, why,
                            sizeof(why));
    if (code != 0) {
        peer_send_error(p, req->id, (Ljmp__ErrorCode)code, "%s", why);
        return;
    }
    log_info("detach: pid %d signalled for uid %u", (int)pid, (unsigned)p->uid);
    if (op_wait_for(
            p, req->id, 1, pid, f.uid, s->id,
            wait_of(r->has_timeout_ms, r->timeout_ms, DETACH_WAIT_MS)) != 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
}

/* Attach requests for s's process are answered; it is armed no more. */
static void session_started(struct session *s, void *arg)
{
    struct server *srv = s->srv;
    struct op_wait *w, *next;
    struct armed *a;

    (void)arg;
    if (s->relayed)
        return; /* no attach makes it, nor answers an attach */
    if ((a = armed_find(srv, s->pid)) != NULL) {
        s->attached = 1;
        armed_free(a);
    }
    for (w = TAILQ_FIRST(&srv->attach->ops); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (!w->detach && w->pid == s->pid) {
            s->attached = 1;
            respond_session(w->peer, w->request_id, s, NULL);
            op_free(w, 1);
        }
    }
}

/* Detach requests for s are answered. */
static void session_ended(struct session *s, void *arg)
{
    struct server *srv = s->srv;
    struct op_wait *w, *next;

    (void)arg;
    for (w = TAILQ_FIRST(&srv->attach->ops); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->detach && w->session_id == s->id) {
            respond_session(w->peer, w->request_id, s, NULL);
            op_free(w, 1);
        }
    }
}

const struct session_observer attach_observer = {
    .started = session_started,
    .ended = session_ended,
};

void attach_peer_gone(struct peer *p)
{
    struct op_wait *w, *next;

    for (w = TAILQ_FIRST(&p->srv->attach->ops); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (w->peer == p)
            op_free(w, 0);
    }
}

int attach_start(struct server *srv)
{
    if ((srv->attach = calloc(1, sizeof(*srv->attach))) == NULL)
        return -1;
    TAILQ_INIT(&srv->attach->ops);
    TAILQ_INIT(&srv->attach->armed);
    return 0;
}

void attach_free(struct server *srv)
{
    /* The waits went with their peers; the armed records go here. */
    while (!TAILQ_EMPTY(&srv->attach->armed))
        armed_free(TAILQ_FIRST(&srv->attach->armed));
    free(srv->attach);
    srv->attach = NULL;
}
