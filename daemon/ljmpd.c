/* ljmpd: the daemon's entry point: options, sockets, the event loop,
 * retention, and a clean shutdown. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "ljmpd.h"
#include "log.h"

static uint64_t clock_ms(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Durations (retention, rates, deadlines) run on the monotonic clock: a
 * wall clock stepped back must not evict every session at once. */
uint64_t now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int uid_has_quota(uid_t uid)
{
    return uid != 0 && uid != geteuid();
}

int uid_may_take_slot(uid_t uid, unsigned held, unsigned slots)
{
    return !uid_has_quota(uid) || held < slots / 2;
}

/* Unix time of a monotonic instant, for people: offset fixed at start. */
uint64_t wall_ms(uint64_t mono)
{
    static int64_t offset;
    static int known;

    if (!known) {
        offset = (int64_t)clock_ms(CLOCK_REALTIME) -
                 (int64_t)clock_ms(CLOCK_MONOTONIC);
        known = 1;
    }
    return mono != 0 ? (uint64_t)((int64_t)mono + offset) : 0;
}

/*
 * The loop's helpers (feed and symbol threads) run THREAD_NICE below its
 * priority: the loop serves snapshots and requests, and must not queue
 * for the CPU behind the work it hands out.  With 32 VMs and 100
 * subscribers on two CPUs, feed threads at the loop's priority delayed
 * snapshots by 60 to 200 ms.  A thread that cannot lower itself runs at
 * the loop's priority.
 */
#define THREAD_NICE 5

void lower_own_priority(void)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0)
        setpriority(PRIO_PROCESS, 0, nice + THREAD_NICE);
}

int start_helper_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

unsigned join_helper_threads(pthread_t *t, unsigned n, int seconds)
{
    struct timespec until;
    unsigned left = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    for (unsigned i = 0; i < n; i++)
        if (pthread_timedjoin_np(t[i], NULL, &until) != 0) {
            pthread_detach(t[i]);
            left++;
        }
    return left;
}

int bell_init(struct bell *b, struct server *srv, event_callback_fn cb,
              void *arg, const char *who)
{
    b->ev = NULL;
    b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->efd < 0 ||
        (b->ev = event_new(srv->base, b->efd, EV_READ | EV_PERSIST, cb, arg)) ==
            NULL ||
        event_priority_set(b->ev, PRIO_DEFAULT) != 0 ||
        event_add(b->ev, NULL) != 0) {
        log_error("%s: %s", who, strerror(errno ? errno : ENOMEM));
        return -1;
    }
    return 0;
}

void bell_ring(struct bell *b)
{
    uint64_t one = 1;

    /* Fails only when the counter is full: then it is readable. */
    (void)!write(b->efd, &one, sizeof(one));
}

void bell_answer(struct bell *b)
{
    uint64_t n;

    (void)!read(b->efd, &n, sizeof(n));
}

void bell_free(struct bell *b)
{
    if (b->ev != NULL)
        event_free(b->ev);
    if (b->efd >= 0)
        close(b->efd);
    b->ev = NULL;
    b->efd = -1;
}

static const char usage_text[] =
    "usage: ljmpd [OPTIONS]\n"
    "\n"
    "Live memory profiler for LuaJIT: the daemon.  Patched VMs stream their\n"
    "memprof events to the ingest socket; clients (ljmpctl) query sessions,\n"
    "subscribe to snapshots, and record streams on the control socket.\n"
    "\n"
    "Options:\n"
    "  -i, --ingest PATH        ingest socket (default /run/ljmp/ingest.sock\n"
    "                           for root, $XDG_RUNTIME_DIR/ljmp/ otherwise)\n"
    "  -c, --control PATH       control socket (default control.sock there)\n"
    "      --ingest-mode MODE   permissions of the ingest socket (0666)\n"
    "      --control-mode MODE  permissions of the control socket (0660 for\n"
    "                           root, 0600 otherwise)\n"
    "      --retain SECONDS     keep finished sessions this long (600)\n"
    "      --retain-count N     and at most this many (64; past it, the\n"
    "                           user who keeps the most loses the oldest)\n"
    "      --max-sessions N     VMs streaming at once (256; half of them\n"
    "                           for any user but root and ljmpd's)\n"
    "      --max-clients N      control connections at once (256; half of\n"
    "                           them for any user but root and ljmpd's)\n"
    "      --read-budget BYTES  ingest bytes per session per loop turn\n"
    "                           (262144): fairness between busy VMs\n"
    "      --feed-threads N     threads that decode streams (default: the\n"
    "                           CPUs ljmpd may use, at most 8; 0: decode on\n"
    "                           the event loop's thread)\n"
    "      --inline-bytes N     reads under N bytes are decoded on the event\n"
    "                           loop's thread (4096; 0: all on the threads)\n"
    "      --hello-timeout MS   a new VM connection's hello must come within\n"
    "                           this time (5000)\n"
    "      --symbols-wait MS    a VM streams without names for C functions\n"
    "                           if its process's symbols take longer to read\n"
    "                           (2000)\n"
    "      --client-idle SECONDS  close a client that asked for nothing\n"
    "                           in this time and waits for nothing (300)\n"
    "      --record-stall SECONDS  a recording whose file takes no bytes\n"
    "                           this long is stopped (10); until then a file\n"
    "                           that falls behind slows its own VM\n"
    "      --queue BYTES        a client's unsent output before its snapshots\n"
    "                           are coalesced and its requests wait (1048576)\n"
    "      --max-locations N    allocation sites per session (1048576)\n"
    "      --max-string BYTES   longest symbol name accepted (1048576)\n"
    "  -v, --verbose            more log (repeat for debug)\n"
    "  -q, --quiet              errors and warnings only\n"
    "  -h, --help               this text\n"
    "\n"
    "Logs go to stderr.  SIGTERM or SIGINT stop the daemon cleanly: clients\n"
    "are told, recordings are closed.\n";

enum {
    OPT_INGEST_MODE = 256,
    OPT_CONTROL_MODE,
    OPT_RETAIN,
    OPT_RETAIN_COUNT,
    OPT_MAX_SESSIONS,
    OPT_MAX_CLIENTS,
    OPT_READ_BUDGET,
    OPT_QUEUE,
    OPT_HELLO_TIMEOUT,
    OPT_CLIENT_IDLE,
    OPT_RECORD_STALL,
    OPT_MAX_LOCATIONS,
    OPT_MAX_STRING,
    OPT_FEED_THREADS,
    OPT_INLINE_BYTES,
    OPT_SYMBOLS_WAIT,
};

static const struct option long_options[] = {
    {"ingest", required_argument, NULL, 'i'},
    {"control", required_argument, NULL, 'c'},
    {"ingest-mode", required_argument, NULL, OPT_INGEST_MODE},
    {"control-mode", required_argument, NULL, OPT_CONTROL_MODE},
    {"retain", required_argument, NULL, OPT_RETAIN},
    {"retain-count", required_argument, NULL, OPT_RETAIN_COUNT},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
    {"read-budget", required_argument, NULL, OPT_READ_BUDGET},
    {"queue", required_argument, NULL, OPT_QUEUE},
    {"hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT},
    {"client-idle", required_argument, NULL, OPT_CLIENT_IDLE},
    {"record-stall", required_argument, NULL, OPT_RECORD_STALL},
    {"max-locations", required_argument, NULL, OPT_MAX_LOCATIONS},
    {"max-string", required_argument, NULL, OPT_MAX_STRING},
    {"feed-threads", required_argument, NULL, OPT_FEED_THREADS},
    {"inline-bytes", required_argument, NULL, OPT_INLINE_BYTES},
    {"symbols-wait", required_argument, NULL, OPT_SYMBOLS_WAIT},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A number option within [min, max]; exits with a message otherwise. */
static unsigned long long number_arg(const char *name, const char *arg,
                                     int base, unsigned long long min,
                                     unsigned long long max)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(arg, &end, base);
    if (errno != 0 || end == arg || *end != '\0' || v < min || v > max) {
        fprintf(stderr,
                "ljmpd: --%s wants a number in [%llu, %llu], not '%s'\n", name,
                min, max, arg);
        exit(2);
    }
    return v;
}

static void path_arg(char *out, size_t len, const char *name, const char *arg)
{
    if (strlen(arg) >= len || *arg == '\0') {
        fprintf(stderr, "ljmpd: --%s path is empty or longer than %zu bytes\n",
                name, len - 1);
        exit(2);
    }
    strcpy(out, arg);
}

/*
 * As many feed threads as CPUs ljmpd may run on (its affinity, as set by
 * taskset or systemd's CPUAffinity=), at most 8; none on one CPU, where a
 * thread would only add hand-overs to the loop's work.
 */
static unsigned default_feed_threads(void)
{
    cpu_set_t set;
    int n = 1;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n < 2)
        return 0;
    return n < 8 ? (unsigned)n : 8;
}

static void parse_options(struct config *cfg, int argc, char **argv)
{
    int c, level = LOG_INFO;

    memset(cfg, 0, sizeof(*cfg));
    cfg->ingest_mode = 0666;
    cfg->control_mode = getuid() == 0 ? 0660 : 0600;
    cfg->retain_s = 600;
    cfg->retain_count = 64;
    cfg->max_sessions = 256;
    cfg->max_peers = 256;
    cfg->read_budget = 256 << 10;
    cfg->peer_queue = 1 << 20;
    cfg->hello_timeout_ms = 5000;
    cfg->client_idle_s = 300;
    cfg->record_stall_s = 10;
    cfg->max_locations = 1u << 20;
    cfg->max_string = LM_DEFAULT_MAX_STRING;
    cfg->feed_threads = default_feed_threads();
    cfg->inline_bytes = 4096;
    cfg->symbols_wait_ms = 2000;
    while ((c = getopt_long(argc, argv, "i:c:vqh", long_options, NULL)) != -1) {
        switch (c) {
        case 'i':
            path_arg(cfg->ingest_path, sizeof(cfg->ingest_path), "ingest",
                     optarg);
            break;
        case 'c':
            path_arg(cfg->control_path, sizeof(cfg->control_path), "control",
                     optarg);
            break;
        case OPT_INGEST_MODE:
            cfg->ingest_mode = number_arg("ingest-mode", optarg, 8, 0, 0777);
            break;
        case OPT_CONTROL_MODE:
            cfg->control_mode = number_arg("control-mode", optarg, 8, 0, 0777);
            break;
        case OPT_RETAIN:
            cfg->retain_s = number_arg("retain", optarg, 10, 0, 1u << 30);
            break;
        case OPT_RETAIN_COUNT:
            cfg->retain_count =
                number_arg("retain-count", optarg, 10, 0, 1u << 20);
            break;
        case OPT_MAX_SESSIONS:
            cfg->max_sessions =
                number_arg("max-sessions", optarg, 10, 1, 1u << 16);
            break;
        case OPT_MAX_CLIENTS:
            cfg->max_peers = number_arg("max-clients", optarg, 10, 1, 1u << 16);
            break;
        case OPT_READ_BUDGET:
            cfg->read_budget =
                number_arg("read-budget", optarg, 10, 4096, 64u << 20);
            break;
        case OPT_HELLO_TIMEOUT:
            cfg->hello_timeout_ms =
                number_arg("hello-timeout", optarg, 10, 10, 3600000);
            break;
        case OPT_CLIENT_IDLE:
            cfg->client_idle_s =
                number_arg("client-idle", optarg, 10, 1, 86400 * 365);
            break;
        case OPT_RECORD_STALL:
            cfg->record_stall_s =
                number_arg("record-stall", optarg, 10, 1, 86400);
            break;
        case OPT_QUEUE:
            cfg->peer_queue = number_arg("queue", optarg, 10, 0, 1u << 30);
            break;
        case OPT_MAX_LOCATIONS:
            cfg->max_locations =
                number_arg("max-locations", optarg, 10, 1, LM_MAX_LOCATIONS);
            break;
        case OPT_MAX_STRING:
            cfg->max_string =
                number_arg("max-string", optarg, 10, 64, LM_MAX_STRING_LIMIT);
            break;
        case OPT_FEED_THREADS:
            cfg->feed_threads = number_arg("feed-threads", optarg, 10, 0, 64);
            break;
        case OPT_SYMBOLS_WAIT:
            cfg->symbols_wait_ms =
                number_arg("symbols-wait", optarg, 10, 1, 3600000);
            break;
        case OPT_INLINE_BYTES:
            cfg->inline_bytes =
                number_arg("inline-bytes", optarg, 10, 0, 64u << 20);
            break;
        case 'v':
            level = level < LOG_DEBUG ? level + 1 : level;
            break;
        case 'q':
            level = LOG_WARN;
            break;
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        default:
            fputs(usage_text, stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ljmpd: unexpected argument '%s'; see ljmpd --help\n",
                argv[optind]);
        exit(2);
    }
    if ((cfg->ingest_path[0] == '\0' &&
         ljmp_wire_default_path(cfg->ingest_path, sizeof(cfg->ingest_path),
                                LJMP_INGEST_SOCKET) != 0) ||
        (cfg->control_path[0] == '\0' &&
         ljmp_wire_default_path(cfg->control_path, sizeof(cfg->control_path),
                                LJMP_CONTROL_SOCKET) != 0)) {
        fprintf(stderr, "ljmpd: default socket path too long; use -i and -c\n");
        exit(2);
    }
    cfg->verbose = level;
}

/* The socket's directory, made if missing (the parent must exist). */
static int make_socket_dir(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];

    snprintf(dir, sizeof(dir), "%s", path);
    char *d = dirname(dir);
    if (mkdir(d, 0755) == 0 || errno == EEXIST)
        return 0;
    log_error("cannot make the socket directory %s: %s", d, strerror(errno));
    return -1;
}

/*
 * A socket file left by a daemon that died is removed; a live one (it
 * accepts a connection) means another ljmpd runs, and anything that is
 * not a socket is left alone.
 */
static int clear_stale_socket(const struct sockaddr_un *sa)
{
    struct stat st;

    if (lstat(sa->sun_path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s exists and is not a socket; not touching it",
                  sa->sun_path);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
    close(fd);
    if (live) {
        log_error("%s: another ljmpd is listening there", sa->sun_path);
        return -1;
    }
    log_info("removing stale socket %s", sa->sun_path);
    return unlink(sa->sun_path);
}

static int listen_unix(const char *path, unsigned mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (make_socket_dir(path) != 0 || clear_stale_socket(&sa) != 0)
        return -1;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_error("socket: %s", strerror(errno));
        return -1;
    }
    /* Bound with no access, then opened up: no window where the socket
     * has the umask's permissions. */
    mode_t old = umask(0777);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc != 0 || chmod(path, mode) != 0 || listen(fd, 128) != 0) {
        log_error("cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void on_ingest(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    session_accept(arg, fd);
}

static void on_control(struct evconnlistener *l, evutil_socket_t fd,
                       struct sockaddr *sa, int len, void *arg)
{
    (void)l;
    (void)sa;
    (void)len;
    peer_accept(arg, fd);
}

/* Out of descriptors: stop accepting for a second instead of spinning. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct server *srv = arg;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval second = {1, 0};

    (void)l;
    log_warn("accept: %s; pausing new connections for a second", strerror(err));
    srv->counters.accept_backoffs++;
    evconnlistener_disable(srv->ingest);
    evconnlistener_disable(srv->control);
    event_add(srv->backoff, &second);
}

static void on_backoff_over(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;

    (void)fd;
    (void)what;
    evconnlistener_enable(srv->ingest);
    evconnlistener_enable(srv->control);
}

/* A finished session that may be freed now: no feed thread holds it
 * (jobs out come back in one batch with the end). */
static int evictable(const struct session *s)
{
    return s->phase == SESSION_ENDED && s->jobs_out == 0;
}

static void forget_session(struct server *srv, struct session *s)
{
    log_debug("session %llu: forgotten", (unsigned long long)s->id);
    TAILQ_REMOVE(&srv->sessions, s, link);
    srv->nended--;
    srv->counters.sessions_evicted++;
    session_free(s);
}

/* The user who keeps the most finished sessions (ties: the first seen),
 * counted in one pass over the sessions and the users seen so far. */
static uid_t top_keeper(const struct server *srv)
{
    struct {
        uid_t uid;
        unsigned n;
    } seen[64];
    unsigned nseen = 0, best = 0;
    const struct session *s;

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (s->phase != SESSION_ENDED)
            continue;
        unsigned i = 0;
        while (i < nseen && seen[i].uid != s->uid)
            i++;
        if (i == nseen) {
            if (nseen == sizeof(seen) / sizeof(seen[0]))
                continue; /* more users than that: the first ones decide */
            seen[nseen].uid = s->uid;
            seen[nseen++].n = 0;
        }
        if (++seen[i].n > seen[best].n)
            best = i;
    }
    return nseen > 0 ? seen[best].uid : 0;
}

/* The oldest evictable session of the user who keeps the most finished
 * ones, else the oldest evictable one, or NULL. */
static struct session *next_to_forget(const struct server *srv)
{
    struct session *s, *any = NULL;
    uid_t top = top_keeper(srv);

    TAILQ_FOREACH(s, &srv->sessions, link)
    {
        if (!evictable(s))
            continue;
        if (s->uid == top)
            return s;
        if (any == NULL)
            any = s;
    }
    return any;
}

/*
 * Forgets finished sessions past the retention time; then, while more are
 * kept than the count allows, the oldest of the user who keeps the most,
 * so that one user's many short sessions push out their own, not other
 * users' (any local user may connect and hang up at will).
 */
static void evict_sessions(struct server *srv, uint64_t now)
{
    struct session *s, *next;

    for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (evictable(s) &&
            now - s->end_ms >= (uint64_t)srv->cfg.retain_s * 1000)
            forget_session(srv, s);
    }
    while (srv->nended > srv->cfg.retain_count &&
           (s = next_to_forget(srv)) != NULL)
        forget_session(srv, s);
}

/* What systemctl status shows (a no-op without a service manager). */
static void notify_status(const struct server *srv)
{
    sd_notifyf(0,
               "STATUS=%u streaming, %u finished kept, %u clients (%u "
               "subscribed); %llu events ingested, %llu snapshots dropped",
               srv->nlive, srv->nended, srv->npeers, srv->nsubscribers,
               (unsigned long long)srv->counters.ingest_events,
               (unsigned long long)srv->counters.snapshots_dropped);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    uint64_t now = now_ms();

    (void)fd;
    (void)what;
    feed_collect(srv);
    evict_sessions(srv, now);
    control_expire_records(srv, now);
    recorder_check_stalls(srv, now);
    peer_close_idle(srv, now);
    notify_status(srv);
}

/* The loop is alive: told to the service manager at half its deadline. */
static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    sd_notify(0, "WATCHDOG=1");
}

/* Clients are told, recordings closed, then the loop ends. */
static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    struct server *srv = arg;
    struct session *s;
    struct peer *p;

    (void)what;
    if (srv->stopping)
        return;
    log_info("signal %d: stopping", (int)sig);
    sd_notify(0, "STOPPING=1");
    srv->stopping = 1;
    control_expire_records(srv, now_ms());
    /* What the feed threads hold goes into the state and the recordings. */
    feed_settle(srv);
    TAILQ_FOREACH(s, &srv->sessions, link)
    if (s->rec != NULL) {
        struct recording *rec = s->rec;
        s->rec = NULL;
        snprintf(rec->error, sizeof(rec->error), "ljmpd stopped");
        recording_finish(rec, s);
    }
    recorder_stop(srv);
    TAILQ_FOREACH(p, &srv->peers, link)
    {
        Ljmp__Response bye;
        peer_response_init(&bye, 0);
        bye.has_goodbye = 1;
        bye.goodbye = 1;
        peer_send(p, &bye);
        peer_flush_now(p);
    }
    event_base_loopexit(srv->base, NULL);
}

/*
 * Sockets passed by the service manager (ljmpd.socket names them "ingest"
 * and "control"): 1 if both were, 0 if none was, -1 on a mix-up.
 */
static int activated_sockets(struct server *srv, int *ifd, int *cfd)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names), rc = 0;

    *ifd = *cfd = -1;
    if (n <= 0)
        return n < 0 ? -1 : 0;
    /* One socket unit names all its sockets alike: then they come in the
     * order of its ListenStream= lines, ingest first. */
    int by_order = n == 2 && strcmp(names[0], names[1]) == 0;
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        if (by_order) {
            *(i == 0 ? ifd : cfd) = fd;
        } else if (strcmp(names[i], "ingest") == 0 && *ifd < 0) {
            *ifd = fd;
        } else if (strcmp(names[i], "control") == 0 && *cfd < 0) {
            *cfd = fd;
        } else {
            log_warn("socket activation: unexpected socket '%s' closed",
                     names[i]);
            close(fd);
        }
        free(names[i]);
    }
    free(names);
    if (*ifd < 0 || *cfd < 0) {
        log_error("socket activation: need sockets named 'ingest' and "
                  "'control' (FileDescriptorName=)");
        rc = -1;
    }
    /* The paths, for logs and for the attach check of LJMP_INGEST. */
    int fds[2] = {*ifd, *cfd};
    char *paths[2] = {srv->cfg.ingest_path, srv->cfg.control_path};
    for (int i = 0; i < 2 && rc == 0; i++) {
        struct sockaddr_un sa;
        socklen_t len = sizeof(sa);
        memset(&sa, 0, sizeof(sa));
        if (getsockname(fds[i], (struct sockaddr *)&sa, &len) == 0 &&
            sa.sun_family == AF_UNIX && sa.sun_path[0] != '\0')
            snprintf(paths[i], sizeof(srv->cfg.ingest_path), "%s", sa.sun_path);
        evutil_make_socket_nonblocking(fds[i]);
    }
    return rc == 0 ? 1 : -1;
}

/*
 * The loop: ingest callbacks run at the lowest priority, and after every
 * few of them (or 10 ms) the loop looks for control work, so a snapshot
 * is not held up by 32 busy VMs' reads in one turn.
 */
static struct event_base *new_event_base(void)
{
    struct event_config *cfg = event_config_new();
    struct timeval slice = {0, 10000};
    struct event_base *base = NULL;

    if (cfg != NULL && event_config_set_max_dispatch_interval(
                           cfg, &slice, 4, PRIO_DEFAULT) == 0)
        base = event_base_new_with_config(cfg);
    if (cfg != NULL)
        event_config_free(cfg);
    if (base != NULL && event_base_priority_init(base, PRIO_LEVELS) != 0) {
        event_base_free(base);
        base = NULL;
    }
    return base;
}

static int server_start(struct server *srv)
{
    struct timeval second = {1, 0};
    int ifd, cfd, activated;

    TAILQ_INIT(&srv->sessions);
    TAILQ_INIT(&srv->peers);
    TAILQ_INIT(&srv->pending_records);
    TAILQ_INIT(&srv->ops);
    TAILQ_INIT(&srv->recordings);
    TAILQ_INIT(&srv->due);
    srv->rec_bell = (struct bell){.efd = -1};
    srv->start_ms = now_ms();
    wall_ms(srv->start_ms);
    if ((srv->base = new_event_base()) == NULL || recorder_start(srv) != 0 ||
        feed_start(srv) != 0 || symload_start(srv) != 0 ||
        peer_fds_start() != 0)
        return -1;
    if ((activated = activated_sockets(srv, &ifd, &cfd)) < 0)
        return -1;
    if (activated) {
        log_info("sockets from the service manager");
    } else {
        if ((ifd = listen_unix(srv->cfg.ingest_path, srv->cfg.ingest_mode)) < 0)
            return -1;
        srv->own_ingest_path = 1;
        if ((cfd = listen_unix(srv->cfg.control_path, srv->cfg.control_mode)) <
            0) {
            close(ifd);
            return -1;
        }
        srv->own_control_path = 1;
    }
    srv->ingest = evconnlistener_new(
        srv->base, on_ingest, srv,
        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, ifd);
    srv->control = evconnlistener_new(
        srv->base, on_control, srv,
        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, cfd);
    srv->tick = event_new(srv->base, -1, EV_PERSIST, on_tick, srv);
    srv->snapshots_due =
        event_new(srv->base, -1, 0, control_snapshots_due, srv);
    if (srv->snapshots_due != NULL)
        event_priority_set(srv->snapshots_due, PRIO_CONTROL);
    srv->backoff = evtimer_new(srv->base, on_backoff_over, srv);
    srv->sigterm = evsignal_new(srv->base, SIGTERM, on_stop_signal, srv);
    srv->sigint = evsignal_new(srv->base, SIGINT, on_stop_signal, srv);
    if (srv->ingest == NULL || srv->control == NULL || srv->tick == NULL ||
        srv->snapshots_due == NULL || srv->backoff == NULL ||
        srv->sigterm == NULL || srv->sigint == NULL) {
        log_error("out of memory setting up the event loop");
        return -1;
    }
    evconnlistener_set_error_cb(srv->ingest, on_accept_error);
    evconnlistener_set_error_cb(srv->control, on_accept_error);
    event_add(srv->tick, &second);
    event_add(srv->sigterm, NULL);
    event_add(srv->sigint, NULL);
    uint64_t usec;
    if (sd_watchdog_enabled(0, &usec) > 0) {
        struct timeval half = {(time_t)(usec / 2000000),
                               (suseconds_t)(usec / 2 % 1000000)};
        srv->watchdog = event_new(srv->base, -1, EV_PERSIST, on_watchdog, srv);
        if (srv->watchdog == NULL || event_add(srv->watchdog, &half) != 0)
            return -1;
    }
    return 0;
}

static void server_free(struct server *srv)
{
    struct session *s;
    struct peer *p;

    feed_stop(srv); /* before the sessions its threads may be feeding */
    symload_stop(srv);
    while ((p = TAILQ_FIRST(&srv->peers)) != NULL)
        peer_free(p);
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL) {
        TAILQ_REMOVE(&srv->sessions, s, link);
        session_free(s);
    }
    recorder_free(srv); /* after the sessions that finish theirs */
    peer_fds_stop();    /* after the peers and sessions that close theirs */
    if (srv->ingest != NULL)
        evconnlistener_free(srv->ingest);
    if (srv->control != NULL)
        evconnlistener_free(srv->control);
    if (srv->own_ingest_path)
        unlink(srv->cfg.ingest_path);
    if (srv->own_control_path)
        unlink(srv->cfg.control_path);
    if (srv->tick != NULL)
        event_free(srv->tick);
    if (srv->snapshots_due != NULL)
        event_free(srv->snapshots_due);
    if (srv->watchdog != NULL)
        event_free(srv->watchdog);
    if (srv->backoff != NULL)
        event_free(srv->backoff);
    if (srv->sigterm != NULL)
        event_free(srv->sigterm);
    if (srv->sigint != NULL)
        event_free(srv->sigint);
    if (srv->base != NULL)
        event_base_free(srv->base);
}

int main(int argc, char **argv)
{
    static struct server srv;
    int rc;

    parse_options(&srv.cfg, argc, argv);
    log_init((enum log_level)srv.cfg.verbose);
    /* A client that hangs up mid-write is an EPIPE, not a death. */
    signal(SIGPIPE, SIG_IGN);
    if (server_start(&srv) != 0) {
        server_free(&srv);
        return 1;
    }
    log_info("listening: ingest %s, control %s", srv.cfg.ingest_path,
             srv.cfg.control_path);
    sd_notifyf(0, "READY=1\nMAINPID=%d", (int)getpid());
    notify_status(&srv);
    rc = event_base_dispatch(srv.base);
    server_free(&srv);
    log_info("stopped");
    return rc < 0 ? 1 : 0;
}
