/* ljmpd: the daemon's entry point: start-up (sockets, modules), the event
 * loop and its tick, and a clean shutdown. */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "clock.h"
#include "control.h"
#include "feed.h"
#include "history.h"
#include "options.h"
#include "peer.h"
#include "recorder.h"
#include "retention.h"
#include "server.h"
#include "session.h"
#include "log.h"
#include "modules.h"

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
    uint64_t now = clock_now_ms();

    (void)fd;
    (void)what;
    feed_collect(srv->feed);
    history_tick(srv, now);
    session_expire_silent(srv, now);
    retention_evict(srv, now);
    control_expire_records(srv, now);
    recorder_check_stalls(srv, now);
    peer_close_idle(srv, now);
    log_limits_flush(now);
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
    struct peer *p;

    (void)what;
    if (srv->stopping)
        return;
    log_info("signal %d: stopping", (int)sig);
    sd_notify(0, "STOPPING=1");
    srv->stopping = 1;
    control_expire_records(srv, clock_now_ms());
    /* What the feed threads hold goes into the state and the recordings. */
    feed_settle(srv->feed);
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

static int server_start(struct server *srv)
{
    struct timeval second = {1, 0};
    int ifd, cfd, activated;

    if (modules_start(srv) != 0)
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
    srv->backoff = evtimer_new(srv->base, on_backoff_over, srv);
    srv->sigterm = evsignal_new(srv->base, SIGTERM, on_stop_signal, srv);
    srv->sigint = evsignal_new(srv->base, SIGINT, on_stop_signal, srv);
    if (srv->ingest == NULL || srv->control == NULL || srv->tick == NULL ||
        srv->backoff == NULL || srv->sigterm == NULL || srv->sigint == NULL) {
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
    modules_free(srv);
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

/*
 * Every session and client holds descriptors (a socket, a pipe, a record
 * file), and at the soft limit accept() backs off for a second at a time:
 * the soft limit goes up to the hard one.  Under the unit both are set
 * (LimitNOFILE=), and its filter would refuse the call: it is not made.
 */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        log_warn("cannot raise the descriptor limit from %llu to %llu: %s",
                 (unsigned long long)was, (unsigned long long)rl.rlim_max,
                 strerror(errno));
    else
        log_debug("descriptor limit raised from %llu to %llu",
                  (unsigned long long)was, (unsigned long long)rl.rlim_max);
}

int main(int argc, char **argv)
{
    static struct server srv;
    int rc;

    options_parse(&srv.cfg, argc, argv);
    log_init((enum log_level)srv.cfg.verbose);
    raise_fd_limit();
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
