/* Attach and detach by pid: checks, the signal to the VM's agent, and the
 * bounded wait for its stream to begin or end. */
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

#include "attach.h"
#include "clock.h"
#include "peer.h"
#include "session.h"
#include "log.h"
#include "snapshot.h"

#define DEFAULT_WAIT_MS 5000
#define MAX_WAIT_MS     60000

/* A request waiting for a VM: attach waits for its hello, detach for the
 * end of its session. */
struct op_wait {
    TAILQ_ENTRY(op_wait) link;
    struct server *srv;
    int detach;
    pid_t pid;
    uint64_t session_id; /* detach: the session that must end */
    struct peer *peer;
    uint64_t request_id;
    unsigned wait_ms;
    struct event *timer;
};

/* The attach module's state: the requests waiting for a VM. */
struct attach {
    TAILQ_HEAD(, op_wait) ops;
};

/* What /proc says about a process, for the checks. */
struct proc_facts {
    uid_t uid;        /* real uid */
    int signal;       /* the agent's signal number, from its environment */
    int agent_off;    /* LJMP_AGENT=0 */
    int env_known;    /* the environment could be read */
    char ingest[108]; /* where its agent connects (as lj_ljmp.c decides) */
    char xdg[108];    /* its XDG_RUNTIME_DIR */
    unsigned long long caught; /* SigCgt */
    unsigned long long ignored;
};

static int read_status(pid_t pid, struct proc_facts *f)
{
    char path[64], line[256];
    FILE *fp;
    int have = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((fp = fopen(path, "re")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), fp) != NULL) {
        unsigned u;
        if (sscanf(line, "Uid: %u", &u) == 1)
            f->uid = (uid_t)u, have |= 1;
        else if (sscanf(line, "SigCgt: %llx", &f->caught) == 1)
            have |= 2;
        else if (sscanf(line, "SigIgn: %llx", &f->ignored) == 1)
            have |= 4;
    }
    fclose(fp);
    return have == 7 ? 0 : -1;
}

/* The real-time signal an LJMP_SIGNAL value names (an offset from
 * SIGRTMIN, as the VM's agent reads it), or -1 if it names none. */
static int rt_signal(const char *offset)
{
    char *end;
    long k = strtol(offset, &end, 10);

    if (end == offset || k < 0 || k > SIGRTMAX - SIGRTMIN)
        return -1;
    return SIGRTMIN + (int)k;
}

/* LJMP_AGENT, LJMP_SIGNAL and LJMP_INGEST from the process's environment
 * (readable by its owner and root). */
static void read_environ(pid_t pid, struct proc_facts *f)
{
    char path[64];
    static char buf[65536];
    ssize_t n;
    int fd;

    f->signal = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return;
    buf[n] = '\0';
    f->env_known = 1;
    for (char *v = buf; v < buf + n; v += strlen(v) + 1) {
        if (strcmp(v, "LJMP_AGENT=0") == 0)
            f->agent_off = 1;
        else if (strncmp(v, "LJMP_SIGNAL=", 12) == 0)
            f->signal = rt_signal(v + 12);
        else if (strncmp(v, "LJMP_INGEST=", 12) == 0 && v[12] != '\0')
            snprintf(f->ingest, sizeof(f->ingest), "%s", v + 12);
        else if (strncmp(v, "XDG_RUNTIME_DIR=", 16) == 0 && v[16] != '\0')
            snprintf(f->xdg, sizeof(f->xdg), "%s", v + 16);
    }
    /* The agent's own rule: $LJMP_INGEST, else the default for its user. */
    if (f->ingest[0] == '\0') {
        if (f->uid != 0 && f->xdg[0] != '\0')
            snprintf(f->ingest, sizeof(f->ingest), "%.80s/ljmp/ingest.sock",
                     f->xdg);
        else
            snprintf(f->ingest, sizeof(f->ingest), "/run/ljmp/ingest.sock");
    }
}

static int sig_bit(unsigned long long mask, int sig)
{
    return sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
}

/*
 * Whether the caller may attach to pid and pid can be attached: 0, or an
 * error code with the reason in why.
 */
static int check_target(const struct peer *p, pid_t pid, struct proc_facts *f,
                        char *why, size_t len)
{
    memset(f, 0, sizeof(*f));
    if (pid <= 0 || read_status(pid, f) != 0) {
        snprintf(why, len, "no such process: %d", (int)pid);
        return LJMP__ERROR_CODE__ERR_NO_SESSION;
    }
    if (p->uid != 0 && p->uid != f->uid) {
        snprintf(why, len,
                 "permission denied: pid %d belongs to uid %u, and you are "
                 "uid %u (only its owner or root may attach)",
                 (int)pid, (unsigned)f->uid, (unsigned)p->uid);
        return LJMP__ERROR_CODE__ERR_PERMISSION;
    }
    read_environ(pid, f);
    if (f->agent_off) {
        snprintf(why, len,
                 "pid %d disabled its attach agent (LJMP_AGENT=0 in its "
                 "environment)",
                 (int)pid);
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if (f->signal < 0) {
        snprintf(why, len,
                 "pid %d has an LJMP_SIGNAL that names no real-time signal "
                 "(its agent is off)",
                 (int)pid);
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if (!sig_bit(f->caught, f->signal)) {
        snprintf(why, len,
                 "pid %d is not a patched LuaJIT VM with its attach agent "
                 "(it does not handle signal %d%s)",
                 (int)pid, f->signal,
                 sig_bit(f->ignored, f->signal) ? "; its VM has closed" : "");
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if (f->env_known && strcmp(f->ingest, p->srv->cfg.ingest_path) != 0) {
        snprintf(why, len,
                 "pid %d would connect to %s, not to this ljmpd's %s (set "
                 "LJMP_INGEST in its environment, or run ljmpd there)",
                 (int)pid, f->ingest, p->srv->cfg.ingest_path);
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    return 0;
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
        peer_send_error(w->peer, w->request_id, LJMP__ERROR_CODE__ERR_TIMEOUT,
                        "pid %d did not connect within %u ms: no Lua code "
                        "ran (an idle VM starts at its next Lua call, and "
                        "will then), or it is profiling already (to a file, "
                        "or to another ljmpd), or it could not connect",
                        (int)w->pid, w->wait_ms);
    op_free(w, 1);
}

static int op_wait_for(struct peer *p, uint64_t id, int detach, pid_t pid,
                       uint64_t session_id, unsigned wait_ms)
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
    w->session_id = session_id;
    w->peer = p;
    w->request_id = id;
    w->wait_ms = wait_ms;
    TAILQ_INSERT_TAIL(&p->srv->attach->ops, w, link);
    peer_wait_begin(p);
    evtimer_add(w->timer, &tv);
    return 0;
}

/* The newest session of pid that is streaming (not ending), or NULL. */
static struct session *streaming_session(struct server *srv, pid_t pid)
{
    struct session *s, *found = NULL;

    TAILQ_FOREACH(s, &srv->sessions, link)
    if (s->pid == pid &&
        (s->phase == SESSION_HELLO || s->phase == SESSION_STREAM))
        found = s;
    return found;
}

static unsigned wait_of(int has, uint32_t ms)
{
    if (!has || ms == 0)
        return DEFAULT_WAIT_MS;
    return ms < MAX_WAIT_MS ? ms : MAX_WAIT_MS;
}

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

static int queue_signal(int pidfd, pid_t pid, int sig, int request)
{
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0) {
        siginfo_t info;
        memset(&info, 0, sizeof(info));
        info.si_signo = sig;
        info.si_code = SI_QUEUE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        info.si_value.sival_int = request;
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, &info, 0);
    }
#else
    (void)pidfd;
#endif
    union sigval v = {.sival_int = request};
    return sigqueue(pid, sig, v);
}

static int send_request(struct peer *p, uint64_t id, int pidfd, pid_t pid,
                        int sig, int request)
{
    if (queue_signal(pidfd, pid, sig, request) == 0)
        return 0;
    peer_send_error(p, id,
                    errno == EPERM ? LJMP__ERROR_CODE__ERR_PERMISSION
                                   : LJMP__ERROR_CODE__ERR_NO_SESSION,
                    "cannot signal pid %d: %s%s", (int)pid, strerror(errno),
                    errno == EPERM ? " (ljmpd runs as another user)" : "");
    return -1;
}

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
    struct proc_facts f;
    char why[384];

    if (!names_a_pid(p, req->id, r->has_pid, r->pid) ||
        too_many_ops(p, req->id))
        return;
    int pidfd = open_process(pid);
    int code = check_target(p, pid, &f, why, sizeof(why));
    struct session *s;

    if (code != 0) {
        if (pidfd >= 0)
            close(pidfd);
        peer_send_error(p, req->id, (Ljmp__ErrorCode)code, "%s", why);
        return;
    }
    if ((s = streaming_session(p->srv, pid)) != NULL &&
        session_visible(s, p->uid)) {
        if (pidfd >= 0)
            close(pidfd);
        respond_session(p, req->id, s, "already attached");
        return;
    }
    int sent = send_request(p, req->id, pidfd, pid, f.signal, LJMP_REQ_ATTACH);
    if (pidfd >= 0)
        close(pidfd);
    if (sent != 0)
        return;
    log_info("attach: pid %d signalled for uid %u", (int)pid, (unsigned)p->uid);
    if (op_wait_for(p, req->id, 0, pid, 0,
                    wait_of(r->has_timeout_ms, r->timeout_ms)) != 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
}

void attach_detach_request(struct peer *p, const Ljmp__Request *req)
{
    const Ljmp__DetachRequest *r = req->detach;
    pid_t pid = (pid_t)r->pid;
    struct proc_facts f;
    char why[384];

    if (!names_a_pid(p, req->id, r->has_pid, r->pid) ||
        too_many_ops(p, req->id))
        return;
    struct session *s = streaming_session(p->srv, pid);
    if (s == NULL || !session_visible(s, p->uid)) {
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_NO_SESSION,
                        "pid %d is not attached: no session of it is "
                        "streaming to this ljmpd",
                        (int)pid);
        return;
    }
    int pidfd = open_process(pid);
    int code = check_target(p, pid, &f, why, sizeof(why));
    if (code != 0) {
        if (pidfd >= 0)
            close(pidfd);
        peer_send_error(p, req->id, (Ljmp__ErrorCode)code, "%s", why);
        return;
    }
    int sent = send_request(p, req->id, pidfd, pid, f.signal, LJMP_REQ_DETACH);
    if (pidfd >= 0)
        close(pidfd);
    if (sent != 0)
        return;
    log_info("detach: pid %d signalled for uid %u", (int)pid, (unsigned)p->uid);
    if (op_wait_for(p, req->id, 1, pid, s->id,
                    wait_of(r->has_timeout_ms, r->timeout_ms)) != 0)
        peer_send_error(p, req->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                        "out of memory");
}

/* Attach requests for s's process are answered. */
static void session_started(struct session *s, void *arg)
{
    struct server *srv = s->srv;
    struct op_wait *w, *next;

    (void)arg;
    for (w = TAILQ_FIRST(&srv->attach->ops); w != NULL; w = next) {
        next = TAILQ_NEXT(w, link);
        if (!w->detach && w->pid == s->pid) {
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
    return 0;
}

void attach_free(struct server *srv)
{
    free(srv->attach); /* its waits went with their peers */
    srv->attach = NULL;
}
