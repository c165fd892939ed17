/* ljmpd-bench: N patched VMs streaming into ljmpd with M subscribers;
 * ingest rate, daemon CPU and memory, snapshot latency, and the VMs' speed
 * against a plain drain (see bench/README.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ljmp_wire.h"
#include "lm_profile.h"
#include "lm_state.h"

struct opts {
    const char *ljmpd, *luajit, *script, *probe, *drain, *hold, *replay;
    int vms, subs;
    int nice;
    unsigned interval_ms;
    long hold_blocks;
    const char *feed_threads; /* ljmpd's --feed-threads, or its default */
    int replay_only;
    int parity_rounds; /* rounds of the parity phase, 0 for none */
    int parity_only;
};

struct sub {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    uint64_t snapshots;
    int probe;
};

static char dir[64], ingest[128], control[128];
static char mark_name[512];
/* Per probe mark: when a subscriber saw it, when the snapshot that first
 * counted it was taken, and when the probe's snapshot before that one was
 * (which the mark missed if it came before). */
static uint64_t *seen_ms, *taken_ms, *before_ms;
static size_t seen_cap;
static uint64_t marks_seen;
static uint64_t last_taken_ms; /* the probe's previous snapshot */
/* How late each of the probe's snapshots was taken, against the one
 * before and the interval (ms; a timer's lateness moves every mark). */
static double *tick_late;
static size_t nticks, ticks_cap;
static uint64_t first_tick_ms, first_tick_seq;
static unsigned probe_interval_ms;

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "ljmpd-bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int connect_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static pid_t spawn(char *const argv[], const char *socket, const char *out)
{
    pid_t pid = fork();

    if (pid == 0) {
        if (socket != NULL)
            setenv("LJMP_SOCKET", socket, 1);
        int fd =
            open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0)
        die("fork");
    return pid;
}

static void wait_for_socket(const char *path)
{
    for (int i = 0; i < 500; i++) {
        int fd = connect_unix(path);
        if (fd >= 0) {
            close(fd);
            return;
        }
        usleep(10000);
    }
    fprintf(stderr, "ljmpd-bench: nothing listens at %s\n", path);
    exit(1);
}

static pid_t start_ljmpd(const struct opts *o)
{
    char *argv[] = {(char *)o->ljmpd, "-i",   ingest, "-c", control, "-q",
                    "--retain-count", "1000", NULL,   NULL, NULL};
    if (o->feed_threads != NULL) {
        argv[8] = "--feed-threads";
        argv[9] = (char *)o->feed_threads;
    }
    pid_t pid = spawn(argv, NULL, NULL);

    /* The daemon serves every VM: as a service it runs with more weight
     * than any one of them (ljmpd.service.in: Nice=-5). */
    if (o->nice != 0 && setpriority(PRIO_PROCESS, (id_t)pid, o->nice) != 0)
        fprintf(stderr, "ljmpd-bench: setpriority: %s\n", strerror(errno));
    wait_for_socket(control);
    return pid;
}

/* utime + stime of a process, in seconds. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long ut = 0, st = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1,
                            " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                            "%*u %lu %lu",
                            &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long status_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtol(line + strlen(key) + 1, NULL, 10);
    fclose(f);
    return v;
}

static int send_request(int fd, Ljmp__Request *req)
{
    size_t len;
    uint8_t *frame;

    req->has_version = 1;
    req->version = LJMP_WIRE_VERSION;
    if ((frame = ljmp_wire_pack(&req->base, &len)) == NULL)
        return -1;
    ssize_t w = write(fd, frame, len);
    free(frame);
    return w == (ssize_t)len ? 0 : -1;
}

static void subscribe(struct sub *s, uint32_t pid, unsigned interval_ms)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__SubscribeRequest sr = LJMP__SUBSCRIBE_REQUEST__INIT;
    Ljmp__SnapshotOptions o = LJMP__SNAPSHOT_OPTIONS__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;

    memset(s, 0, sizeof(*s));
    if ((s->fd = connect_unix(control)) < 0)
        die("connect to the control socket");
    sel.has_pid = pid != 0;
    sel.pid = pid;
    o.sessions = &sel;
    o.has_top = o.has_sort = 1;
    o.top = pid != 0 ? 50 : 20;
    o.sort = pid != 0 ? LJMP__SORT_KEY__SORT_ALLOC_BYTES
                      : LJMP__SORT_KEY__SORT_ALLOC_RATE;
    sr.options = &o;
    sr.has_interval_ms = 1;
    sr.interval_ms = interval_ms;
    if (pid != 0)
        probe_interval_ms = interval_ms;
    req.body_case = LJMP__REQUEST__BODY_SUBSCRIBE;
    req.subscribe = &sr;
    s->probe = pid != 0;
    if (send_request(s->fd, &req) != 0)
        die("subscribe");
}

/* The probe's MARK allocations seen in a snapshot: when each was first
 * seen. */
static void note_marks(const Ljmp__Snapshot *snap, uint64_t now)
{
    for (size_t i = 0; i < snap->n_sessions; i++)
        for (size_t j = 0; j < snap->sessions[i]->n_top; j++) {
            const Ljmp__Location *l = snap->sessions[i]->top[j];
            if (strcmp(l->name, mark_name) != 0)
                continue;
            while (marks_seen < l->alloc_events) {
                if (marks_seen == seen_cap) {
                    seen_cap = seen_cap ? 2 * seen_cap : 1024;
                    seen_ms = realloc(seen_ms, seen_cap * sizeof(*seen_ms));
                    taken_ms = realloc(taken_ms, seen_cap * sizeof(*taken_ms));
                    before_ms =
                        realloc(before_ms, seen_cap * sizeof(*before_ms));
                }
                taken_ms[marks_seen] = snap->time_ms;
                before_ms[marks_seen] = last_taken_ms;
                seen_ms[marks_seen++] = now;
            }
        }
    /* Against the schedule of the probe's timer (libevent's persistent
     * timers keep to it), from its second snapshot (the first is sent at
     * once); the earliest is taken as on time. */
    if (snap->seq >= 2) {
        if (first_tick_ms == 0) {
            first_tick_ms = snap->time_ms;
            first_tick_seq = snap->seq;
        }
        if (nticks == ticks_cap) {
            ticks_cap = ticks_cap ? 2 * ticks_cap : 256;
            tick_late = realloc(tick_late, ticks_cap * sizeof(*tick_late));
        }
        tick_late[nticks++] =
            (double)snap->time_ms - (double)first_tick_ms -
            (double)(snap->seq - first_tick_seq) * probe_interval_ms;
    }
    last_taken_ms = snap->time_ms;
}

/* Reads what a subscriber has; parses whole frames. */
static void sub_read(struct sub *s)
{
    if (s->cap - s->len < 65536) {
        s->cap = s->cap ? 2 * s->cap : 1 << 20;
        s->buf = realloc(s->buf, s->cap);
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n <= 0)
        return;
    s->len += (size_t)n;
    uint64_t now = wall_ms();
    size_t off = 0;
    while (s->len - off >= LJMP_WIRE_HEADER) {
        uint32_t len = ljmp_wire_get_len(s->buf + off);
        if (s->len - off < LJMP_WIRE_HEADER + (size_t)len)
            break;
        /* Only the probe's are unpacked: a hundred subscribers' 6 MB a
         * second kept this one process, at nice 0 among the busy VMs,
         * from reading the probe's in time. */
        if (!s->probe) {
            s->snapshots++;
            off += LJMP_WIRE_HEADER + len;
            continue;
        }
        Ljmp__Response *r =
            ljmp__response__unpack(NULL, len, s->buf + off + LJMP_WIRE_HEADER);
        if (r != NULL && r->body_case == LJMP__RESPONSE__BODY_SNAPSHOT) {
            s->snapshots++;
            note_marks(r->snapshot, now);
        }
        if (r != NULL)
            ljmp__response__free_unpacked(r, NULL);
        off += LJMP_WIRE_HEADER + len;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
}

static void serve_subs(struct sub *subs, int n, int timeout_ms)
{
    struct pollfd pfd[1024];

    for (int i = 0; i < n; i++)
        pfd[i] = (struct pollfd){subs[i].fd, POLLIN, 0};
    if (poll(pfd, (nfds_t)n, timeout_ms) <= 0)
        return;
    for (int i = 0; i < n; i++)
        if (pfd[i].revents & POLLIN)
            sub_read(&subs[i]);
}

static Ljmp__Response *list_sessions(void)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest lr = LJMP__LIST_REQUEST__INIT;
    struct sub s = {0};
    Ljmp__Response *r = NULL;

    /* Brief sessions too: a replay may end within ljmpd's --brief. */
    lr.has_all = lr.all = 1;
    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &lr;
    if ((s.fd = connect_unix(control)) < 0 || send_request(s.fd, &req) != 0)
        die("list");
    s.cap = 1 << 20;
    s.buf = malloc(s.cap);
    while (r == NULL) {
        ssize_t n = read(s.fd, s.buf + s.len, s.cap - s.len);
        if (n <= 0)
            die("reading the session list");
        s.len += (size_t)n;
        if (s.len >= 4 && s.len >= 4 + ljmp_wire_get_len(s.buf))
            r = ljmp__response__unpack(NULL, ljmp_wire_get_len(s.buf),
                                       s.buf + 4);
        if (s.len == s.cap)
            s.buf = realloc(s.buf, s.cap *= 2);
    }
    close(s.fd);
    free(s.buf);
    return r;
}

/* How many of r's sessions have ended (left streaming); *complete (may
 * be NULL) gets how many ended complete, their trailers verified. */
static size_t sessions_ended(const Ljmp__Response *r, size_t *complete)
{
    size_t ended = 0, done = 0;

    for (size_t i = 0; i < r->list->n_sessions; i++) {
        int st = r->list->sessions[i]->info->state;
        ended += st != LJMP__SESSION_STATE__STREAMING;
        done += st == LJMP__SESSION_STATE__COMPLETE;
    }
    if (complete != NULL)
        *complete = done;
    return ended;
}

/* Lists sessions until n have ended, or for about timeout_ms: the last
 * list. */
static Ljmp__Response *wait_sessions_ended(size_t n, unsigned timeout_ms)
{
    Ljmp__Response *r = NULL;

    for (unsigned waited = 0;; waited++) {
        if (r != NULL)
            ljmp__response__free_unpacked(r, NULL);
        r = list_sessions();
        if (sessions_ended(r, NULL) >= n || waited >= timeout_ms)
            return r;
        usleep(1000);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p)
{
    return n ? v[(size_t)((double)(n - 1) * p + 0.5)] : 0;
}

/*
 * Runs the VMs to the end; their wall times into t and their voluntary
 * context switches into waits (each sorted).  A VM sleeps only to wait
 * for the hello's answer and when its socket is full: waits counts the
 * times its reader held it back, a figure the machine's noise hardly
 * moves, unlike wall time.  Their involuntary context switches go into
 * preempts (sorted) unless it is NULL: the times another thread took a
 * VM's CPU, such as a reader woken by its writes.
 */
static double run_vms(const struct opts *o, const char *socket, double *t,
                      double *waits, double *preempts, struct sub *subs,
                      int nsubs)
{
    pid_t *pids = calloc((size_t)o->vms, sizeof(*pids));
    double *start = calloc((size_t)o->vms, sizeof(*start));
    double t0 = mono();
    int left = o->vms;

    for (int i = 0; i < o->vms; i++) {
        char *argv[] = {(char *)o->luajit, (char *)o->script, NULL};
        start[i] = mono();
        pids[i] = spawn(argv, socket, NULL);
    }
    while (left > 0) {
        int st;
        struct rusage ru;
        pid_t p = wait4(-1, &st, WNOHANG, &ru);
        if (p <= 0) {
            if (nsubs > 0)
                serve_subs(subs, nsubs, 5);
            else
                usleep(2000);
            continue;
        }
        for (int i = 0; i < o->vms; i++)
            if (pids[i] == p) {
                t[i] = mono() - start[i];
                waits[i] = (double)ru.ru_nvcsw;
                if (preempts != NULL)
                    preempts[i] = (double)ru.ru_nivcsw;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    fprintf(stderr, "ljmpd-bench: VM %d failed\n", (int)p);
                left--;
            }
    }
    double wall = mono() - t0;
    qsort(t, (size_t)o->vms, sizeof(*t), cmp_double);
    qsort(waits, (size_t)o->vms, sizeof(*waits), cmp_double);
    if (preempts != NULL)
        qsort(preempts, (size_t)o->vms, sizeof(*preempts), cmp_double);
    free(pids);
    free(start);
    return wall;
}

/* The name the daemon gives the probe's MARK line. */
static void find_mark(const char *probe)
{
    char line[512];
    FILE *f = fopen(probe, "r");
    int n = 0;

    if (f == NULL)
        die(probe);
    while (fgets(line, sizeof(line), f) != NULL) {
        n++;
        if (strstr(line, "-- MARK") != NULL)
            snprintf(mark_name, sizeof(mark_name), "@%s:%d", probe, n);
    }
    fclose(f);
}

/* Latencies of the probe's marks, from its output and the subscriber. */
static void report_latency(const char *out, unsigned interval_ms)
{
    FILE *f = fopen(out, "r");
    double *lat = calloc(marks_seen + 1, sizeof(*lat));
    double *sent = calloc(marks_seen + 1, sizeof(*sent));
    double *missed = calloc(marks_seen + 1, sizeof(*missed));
    size_t n = 0, nmissed = 0;
    unsigned long long k, t;

    while (f != NULL && fscanf(f, "%llu %llu", &k, &t) == 2) {
        if (k < 1 || k > marks_seen || seen_ms[k - 1] < t)
            continue;
        sent[n] = (double)seen_ms[k - 1] - (double)taken_ms[k - 1];
        lat[n++] = (double)(seen_ms[k - 1] - t);
        /* Made before a snapshot that did not count it: how late. */
        if (before_ms[k - 1] >= t)
            missed[nmissed++] = (double)(before_ms[k - 1] - t);
    }
    if (f != NULL)
        fclose(f);
    qsort(lat, n, sizeof(*lat), cmp_double);
    qsort(sent, n, sizeof(*sent), cmp_double);
    qsort(missed, nmissed, sizeof(*missed), cmp_double);
    /* The earliest tick is the schedule's zero. */
    qsort(tick_late, nticks, sizeof(*tick_late), cmp_double);
    for (size_t i = nticks; i-- > 0;)
        tick_late[i] -= tick_late[0];
    printf("latency alloc->subscriber: %zu marks, p50 %.0f ms, p99 %.0f ms, "
           "max %.0f ms (interval %u ms; target p99 <= %u ms)\n",
           n, pct(lat, n, 0.5), pct(lat, n, 0.99), n ? lat[n - 1] : 0,
           interval_ms, interval_ms + 50);
    /* Where the time goes: a snapshot's way from ljmpd's clock to the
     * subscriber, and marks that a snapshot taken after them missed (the
     * VM's buffer, ljmpd's queues) and by how much. */
    printf("latency parts: the probe's snapshots taken late p50 %.0f ms, "
           "p99 %.0f ms; taken->received p50 %.0f ms, p99 %.0f ms; %zu "
           "marks missed a snapshot taken after them, by up to %.0f ms "
           "(median %.0f)\n",
           pct(tick_late, nticks, 0.5), pct(tick_late, nticks, 0.99),
           pct(sent, n, 0.5), pct(sent, n, 0.99), nmissed,
           nmissed ? missed[nmissed - 1] : 0, pct(missed, nmissed, 0.5));
    free(lat);
    free(sent);
    free(missed);
}

static void stop_pid(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* Phase 1: the VMs streaming to a reader that discards. */
static double drain_phase(const struct opts *o, double *t, double *waits)
{
    char sock[160];
    char *argv[] = {(char *)o->drain, "drain", sock, NULL};

    snprintf(sock, sizeof(sock), "%s/drain.sock", dir);
    pid_t drain = spawn(argv, NULL, NULL);
    wait_for_socket(sock);
    double wall = run_vms(o, sock, t, waits, NULL, NULL, 0);
    stop_pid(drain);
    return wall;
}

/* Closes n subscribers' connections and frees them. */
static void close_subs(struct sub *subs, int n)
{
    for (int i = 0; i < n; i++) {
        close(subs[i].fd);
        free(subs[i].buf);
    }
    free(subs);
}

static void ingest_phase(const struct opts *o, const double *drain_t,
                         const double *drain_waits)
{
    pid_t d = start_ljmpd(o);
    struct sub *subs = calloc((size_t)o->subs + 1, sizeof(*subs));
    double *t = calloc((size_t)o->vms, sizeof(*t));
    double *waits = calloc((size_t)o->vms, sizeof(*waits));
    char stop[160], out[160];

    snprintf(stop, sizeof(stop), "%s/probe.stop", dir);
    snprintf(out, sizeof(out), "%s/probe.out", dir);
    char *pargv[] = {(char *)o->luajit, (char *)o->probe, stop, NULL};
    pid_t probe = spawn(pargv, ingest, out);
    subscribe(&subs[0], (uint32_t)probe, o->interval_ms);
    for (int i = 1; i <= o->subs; i++)
        subscribe(&subs[i], 0, o->interval_ms);
    /* Let the probe settle in before the load starts. */
    for (int i = 0; i < 10; i++)
        serve_subs(subs, o->subs + 1, 100);
    double cpu0 = cpu_seconds(d);
    Ljmp__Response *r0 = list_sessions();
    uint64_t ev0 = r0->list->daemon->ingest_events;
    ljmp__response__free_unpacked(r0, NULL);
    double wall = run_vms(o, ingest, t, waits, NULL, subs, o->subs + 1);
    double cpu = cpu_seconds(d) - cpu0;
    Ljmp__Response *r1 = list_sessions();
    uint64_t ev = r1->list->daemon->ingest_events - ev0;
    ljmp__response__free_unpacked(r1, NULL);
    /* A few more snapshots for the probe, then stop it. */
    for (int i = 0; i < 20; i++)
        serve_subs(subs, o->subs + 1, 100);
    fclose(fopen(stop, "w"));
    waitpid(probe, NULL, 0);
    for (int i = 0; i < 20; i++)
        serve_subs(subs, o->subs + 1, 100);

    Ljmp__Response *r = list_sessions();
    const Ljmp__DaemonCounters *dc = r->list->daemon;
    size_t complete;
    sessions_ended(r, &complete);
    uint64_t snaps = 0;
    for (int i = 0; i <= o->subs; i++)
        snaps += subs[i].snapshots;
    printf("VM wall median: %.3f s streaming to ljmpd, %.3f s to a plain "
           "drain (%.2fx)\n",
           t[o->vms / 2], drain_t[o->vms / 2],
           t[o->vms / 2] / drain_t[o->vms / 2]);
    printf("VM waits on its socket (voluntary context switches, median): "
           "%.0f streaming to ljmpd, %.0f to a plain drain\n",
           waits[o->vms / 2], drain_waits[o->vms / 2]);
    printf("ingest: %llu events in %.3f s = %.2f M events/s in total\n",
           (unsigned long long)ev, wall, (double)ev / wall / 1e6);
    printf("daemon CPU: %.3f s = %.3f s per million events\n", cpu,
           ev ? cpu / ((double)ev / 1e6) : 0);
    printf("sessions complete (trailer verified): %zu of %zu; ingest bytes "
           "%llu; snapshots received %llu, dropped %llu; rejected %llu, "
           "malformed %llu, truncated %llu\n",
           complete, r->list->n_sessions, (unsigned long long)dc->ingest_bytes,
           (unsigned long long)snaps, (unsigned long long)dc->snapshots_dropped,
           (unsigned long long)dc->sessions_rejected,
           (unsigned long long)dc->sessions_malformed,
           (unsigned long long)dc->sessions_truncated);
    ljmp__response__free_unpacked(r, NULL);
    report_latency(out, o->interval_ms);
    close_subs(subs, o->subs + 1);
    free(t);
    free(waits);
    stop_pid(d);
}

/*
 * The parity phase: rounds of the VMs streaming to the drain and to ljmpd
 * (both kept running, with the subscribers), in a random order each
 * round.  On a shared host, one drain run against one ljmpd run moves
 * from try to try by more than ljmpd's effect: the median of the
 * rounds' ratios is the figure to compare with parity.
 */
static void parity_phase(const struct opts *o)
{
    char sock[160];
    char *argv[] = {(char *)o->drain, "drain", sock, NULL};
    int rounds = o->parity_rounds, nsubs = o->subs;
    double *ratio = calloc((size_t)rounds, sizeof(*ratio));
    double *wd = calloc((size_t)rounds, sizeof(*wd));
    double *wl = calloc((size_t)rounds, sizeof(*wl));
    double *pd = calloc((size_t)rounds, sizeof(*pd));
    double *pl = calloc((size_t)rounds, sizeof(*pl));
    double *t = calloc((size_t)o->vms, sizeof(*t));
    double *waits = calloc((size_t)o->vms, sizeof(*waits));
    double *preempts = calloc((size_t)o->vms, sizeof(*preempts));
    struct sub *subs = calloc((size_t)nsubs + 1, sizeof(*subs));

    snprintf(sock, sizeof(sock), "%s/drain.sock", dir);
    pid_t drain = spawn(argv, NULL, NULL);
    wait_for_socket(sock);
    pid_t d = start_ljmpd(o);
    for (int i = 0; i < nsubs; i++)
        subscribe(&subs[i], 0, o->interval_ms);
    srand((unsigned)getpid());
    for (int r = 0; r < rounds; r++) {
        double td = 0, tl = 0;
        int ljmpd_first = rand() % 2;
        for (int k = 0; k < 2; k++) {
            int to_ljmpd = (k == 0) == ljmpd_first;
            run_vms(o, to_ljmpd ? ingest : sock, t, waits, preempts, subs,
                    nsubs);
            *(to_ljmpd ? &tl : &td) = t[o->vms / 2];
            *(to_ljmpd ? &wl[r] : &wd[r]) = waits[o->vms / 2];
            *(to_ljmpd ? &pl[r] : &pd[r]) = preempts[o->vms / 2];
        }
        ratio[r] = tl / td;
        printf("parity round %d: %.3f s to ljmpd, %.3f s to the drain "
               "(%.3fx), waits %.0f and %.0f, preempted %.0f and %.0f\n",
               r + 1, tl, td, ratio[r], wl[r], wd[r], pl[r], pd[r]);
    }
    qsort(ratio, (size_t)rounds, sizeof(*ratio), cmp_double);
    qsort(wl, (size_t)rounds, sizeof(*wl), cmp_double);
    qsort(wd, (size_t)rounds, sizeof(*wd), cmp_double);
    qsort(pl, (size_t)rounds, sizeof(*pl), cmp_double);
    qsort(pd, (size_t)rounds, sizeof(*pd), cmp_double);
    printf("parity: VM wall time streaming to ljmpd / to a plain drain, "
           "median of %d interleaved rounds %.3fx (from %.3fx to %.3fx); "
           "waits on its socket, median %.0f and %.0f; preempted (involuntary "
           "context switches), median %.0f and %.0f\n",
           rounds, pct(ratio, (size_t)rounds, 0.5), ratio[0], ratio[rounds - 1],
           pct(wl, (size_t)rounds, 0.5), pct(wd, (size_t)rounds, 0.5),
           pct(pl, (size_t)rounds, 0.5), pct(pd, (size_t)rounds, 0.5));
    close_subs(subs, nsubs);
    stop_pid(d);
    stop_pid(drain);
    free(preempts);
    free(waits);
    free(t);
    free(pl);
    free(pd);
    free(wl);
    free(wd);
    free(ratio);
}

/* Phase 3: one VM holding many blocks; the daemon's memory for them. */
static void memory_phase(const struct opts *o)
{
    pid_t d = start_ljmpd(o);
    char nblocks[32];

    usleep(100000);
    long base = status_kb(d, "VmRSS:");
    snprintf(nblocks, sizeof(nblocks), "%ld", o->hold_blocks);
    char *argv[] = {(char *)o->luajit, (char *)o->hold, nblocks, NULL};
    waitpid(spawn(argv, ingest, NULL), NULL, 0);
    Ljmp__Response *r = wait_sessions_ended(1, 5000);
    if (r->list->n_sessions != 1) {
        fprintf(stderr, "ljmpd-bench: the hold VM made %zu sessions\n",
                r->list->n_sessions);
        exit(1);
    }
    const Ljmp__Totals *tot = r->list->sessions[0]->totals;
    long rss = status_kb(d, "VmRSS:"), hwm = status_kb(d, "VmHWM:");
    printf("daemon memory: %llu live blocks; RSS %ld KiB at start, %ld KiB "
           "after (peak %ld KiB): %.1f B per live block (%.1f at peak); the "
           "session's state says %llu B\n",
           (unsigned long long)tot->live_blocks, base, rss, hwm,
           (double)(rss - base) * 1024.0 / (double)tot->live_blocks,
           (double)(hwm - base) * 1024.0 / (double)tot->live_blocks,
           (unsigned long long)tot->memory_bytes);
    ljmp__response__free_unpacked(r, NULL);
    stop_pid(d);
}

/* The alloc/realloc/free events of a recorded stream. */
static uint64_t count_events(const char *path)
{
    static uint8_t buf[1 << 16];
    struct lm_profile p;
    FILE *f = fopen(path, "rb");
    size_t n;

    if (f == NULL || lm_profile_init(&p, NULL, NULL) != 0)
        die(path);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        lm_profile_feed(&p, buf, n, NULL);
    fclose(f);
    uint64_t events = lm_totals_events(&p.state.totals);
    if (lm_decoder_finish(&p.dec) != LM_DONE) {
        fprintf(stderr, "ljmpd-bench: %s: %s\n", path, p.dec.errmsg);
        exit(1);
    }
    lm_profile_free(&p);
    return events;
}

/*
 * Phase 4: N copies of a recorded stream sent into ljmpd as fast as it
 * takes them, by writers that cost next to nothing: what the daemon
 * ingests when the VMs do not compete with it for the CPU.
 */
static void replay_phase(const struct opts *o)
{
    char events[32];
    uint64_t per_stream = count_events(o->replay);
    pid_t d = start_ljmpd(o);
    pid_t *pids = calloc((size_t)o->vms, sizeof(*pids));
    size_t complete;

    snprintf(events, sizeof(events), "%llu", (unsigned long long)per_stream);
    char *argv[] = {(char *)o->drain, "replay", (char *)o->replay,
                    ingest,           events,   NULL};
    double cpu0 = cpu_seconds(d), t0 = mono();
    for (int i = 0; i < o->vms; i++)
        pids[i] = spawn(argv, NULL, NULL);
    for (int i = 0; i < o->vms; i++)
        waitpid(pids[i], NULL, 0);
    /* The last bytes are in the sockets still: wait for every session. */
    Ljmp__Response *r = wait_sessions_ended((size_t)o->vms, 600000);
    sessions_ended(r, &complete);
    double wall = mono() - t0, cpu = cpu_seconds(d) - cpu0;
    uint64_t total = r->list->daemon->ingest_events;
    printf("replay: %d streams of %s into ljmpd: %llu events in %.3f s = "
           "%.2f M events/s in total; daemon CPU %.3f s = %.3f s per million "
           "events; %zu of %d complete\n",
           o->vms, o->replay, (unsigned long long)total, wall,
           (double)total / wall / 1e6, cpu, cpu / ((double)total / 1e6),
           complete, o->vms);
    ljmp__response__free_unpacked(r, NULL);
    free(pids);
    stop_pid(d);
}

static void usage(void)
{
    fputs("usage: ljmpd-bench --ljmpd PATH --luajit PATH --script LUA "
          "--probe LUA --hold LUA\n"
          "                   --drain LJMP-BENCH [--vms N] [--subs M] "
          "[--interval MS] [--hold-blocks N] [--nice N]\n"
          "                   [--replay FILE [--replay-only]] "
          "[--feed-threads N]\n"
          "                   [--parity-rounds N [--parity-only]]\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"ljmpd", required_argument, NULL, 'd'},
        {"luajit", required_argument, NULL, 'l'},
        {"script", required_argument, NULL, 's'},
        {"probe", required_argument, NULL, 'p'},
        {"hold", required_argument, NULL, 'H'},
        {"drain", required_argument, NULL, 'D'},
        {"vms", required_argument, NULL, 'n'},
        {"subs", required_argument, NULL, 'm'},
        {"interval", required_argument, NULL, 'i'},
        {"hold-blocks", required_argument, NULL, 'b'},
        {"nice", required_argument, NULL, 'N'},
        {"replay", required_argument, NULL, 'R'},
        {"replay-only", no_argument, NULL, 'O'},
        {"feed-threads", required_argument, NULL, 'F'},
        {"parity-rounds", required_argument, NULL, 'P'},
        {"parity-only", no_argument, NULL, 'Q'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {
        .vms = 1, .subs = 1, .interval_ms = 1000, .hold_blocks = 1000000};
    int c;

    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'd':
            o.ljmpd = optarg;
            break;
        case 'l':
            o.luajit = optarg;
            break;
        case 's':
            o.script = optarg;
            break;
        case 'p':
            o.probe = optarg;
            break;
        case 'H':
            o.hold = optarg;
            break;
        case 'D':
            o.drain = optarg;
            break;
        case 'n':
            o.vms = atoi(optarg);
            break;
        case 'm':
            o.subs = atoi(optarg);
            break;
        case 'i':
            o.interval_ms = (unsigned)atoi(optarg);
            break;
        case 'b':
            o.hold_blocks = atol(optarg);
            break;
        case 'N':
            o.nice = atoi(optarg);
            break;
        case 'R':
            o.replay = optarg;
            break;
        case 'O':
            o.replay_only = 1;
            break;
        case 'F':
            o.feed_threads = optarg;
            break;
        case 'P':
            o.parity_rounds = atoi(optarg);
            break;
        case 'Q':
            o.parity_only = 1;
            break;
        default:
            usage();
        }
    }
    if (!o.ljmpd || !o.luajit || !o.script || !o.probe || !o.drain || !o.hold ||
        o.vms < 1 || o.subs < 0 || o.subs > 1000 || o.parity_rounds < 0 ||
        (o.parity_only && o.parity_rounds == 0))
        usage();
    signal(SIGPIPE, SIG_IGN);
    snprintf(dir, sizeof(dir), "/tmp/ljmpd-bench-XXXXXX");
    if (mkdtemp(dir) == NULL)
        die("mkdtemp");
    snprintf(ingest, sizeof(ingest), "%s/ingest.sock", dir);
    snprintf(control, sizeof(control), "%s/control.sock", dir);
    find_mark(o.probe);

    printf("%d VMs running %s, %d subscribers, interval %u ms, ljmpd nice "
           "%d\n",
           o.vms, o.script, o.subs, o.interval_ms, o.nice);
    double *drain_t = calloc((size_t)o.vms, sizeof(*drain_t));
    double *drain_waits = calloc((size_t)o.vms, sizeof(*drain_waits));
    if (o.parity_rounds > 0)
        parity_phase(&o);
    if (!o.parity_only && (!o.replay_only || o.replay == NULL)) {
        drain_phase(&o, drain_t, drain_waits);
        ingest_phase(&o, drain_t, drain_waits);
        memory_phase(&o);
    }
    if (o.replay != NULL && !o.parity_only)
        replay_phase(&o);
    free(drain_t);
    free(drain_waits);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) != 0;
}
