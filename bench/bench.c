/* ljmp-bench: measures the core (decode + aggregation) and whole commands. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ljmp_ingest.h"
#include "lm_profile.h"
#include "lm_state.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A kB figure from /proc/self/status ("VmRSS", "VmHWM"). */
static long status_kb(const char *key)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
            kb = strtol(line + strlen(key) + 1, NULL, 10);
    fclose(f);
    return kb;
}

static uint8_t *load(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    uint8_t *buf;

    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "ljmp-bench: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    buf = malloc((size_t)st.st_size + 1);
    size_t off = 0;
    while (buf != NULL && off < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);
        if (n <= 0) {
            fprintf(stderr, "ljmp-bench: reading %s failed\n", path);
            exit(1);
        }
        off += (size_t)n;
    }
    close(fd);
    *len = off;
    return buf;
}

/* Decodes and aggregates the whole buffer, in chunks of `chunk` bytes. */
static void run_once(const uint8_t *buf, size_t len, size_t chunk, int threads,
                     struct lm_profile *p)
{
    char err[128];

    if (lm_profile_init(p, NULL, NULL) != 0 ||
        lm_profile_threads(p, threads) != 0)
        exit(1);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (lm_profile_feed(p, buf + off, n, NULL) == LM_ERROR)
            break;
    }
    if (lm_decoder_finish(&p->dec) != LM_DONE) {
        fprintf(stderr, "ljmp-bench: stream did not decode: %s\n",
                p->dec.errmsg);
        exit(1);
    }
    if (lm_profile_settle(p, err, sizeof(err)) != 0) {
        fprintf(stderr, "ljmp-bench: %s\n", err);
        exit(1);
    }
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;

    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The peak RSS growth of one decode + aggregation, printed by a fresh
 * process (`ljmp-bench rss`): one forked after the timed runs would find
 * their freed memory already resident, and the figure would depend on
 * --runs. */
static int bench_rss(int argc, char **argv)
{
    if (argc != 3)
        return 1;
    const char *path = argv[0];
    size_t len, chunk = strtoull(argv[1], NULL, 10);
    int threads = atoi(argv[2]);
    uint8_t *buf = load(path, &len);
    long base = status_kb("VmRSS");
    struct lm_profile p;

    run_once(buf, len, chunk ? chunk : len, threads, &p);
    long hwm = status_kb("VmHWM");
    uint64_t blocks = p.state.totals.peak_live_blocks;
    printf("peak live blocks   %" PRIu64 "\n", blocks);
    printf("peak RSS growth    %.1f MiB = %.1f bytes per peak live "
           "block (target <= 32)\n",
           (double)(hwm - base) / 1024,
           (double)(hwm - base) * 1024 / (double)(blocks ? blocks : 1));
    printf("state memory       %.1f MiB at the end (heap map %.1f "
           "bytes per live block)\n",
           (double)lm_state_memory(&p.state) / 1048576,
           (double)lm_heap_memory(&p.state.heap) /
               (double)(p.state.totals.live_blocks ? p.state.totals.live_blocks
                                                   : 1));
    return 0;
}

static void measure_rss(const char *path, size_t chunk, int threads)
{
    char chunk_arg[32], threads_arg[16];
    pid_t pid;

    fflush(stdout);
    snprintf(chunk_arg, sizeof(chunk_arg), "%zu", chunk);
    snprintf(threads_arg, sizeof(threads_arg), "%d", threads);
    pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "ljmp-bench", "rss", path, chunk_arg,
              threads_arg, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

static int bench_core(int argc, char **argv)
{
    int runs = 5, threads = 1;
    size_t chunk = 0;
    const char *path = NULL;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
            chunk = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else
            path = argv[i];
    }
    if (path == NULL || runs < 1 || threads < 1 || threads > 2) {
        fputs("usage: ljmp-bench core FILE [--runs N] [--chunk BYTES] "
              "[--threads 1|2]\n",
              stderr);
        return 1;
    }
    size_t len;
    uint8_t *buf = load(path, &len);
    if (chunk == 0)
        chunk = len;
    double *secs = malloc((size_t)runs * sizeof(double));
    uint64_t events = 0;
    for (int r = 0; r < runs; r++) {
        struct lm_profile p;
        double t0 = now();
        run_once(buf, len, chunk, threads, &p);
        secs[r] = now() - t0;
        events = lm_totals_events(&p.state.totals);
        lm_profile_free(&p);
    }
    double m = median(secs, runs), best = secs[0];
    for (int r = 1; r < runs; r++)
        best = secs[r] < best ? secs[r] : best;
    printf("stream             %s: %.1f MB, %" PRIu64 " events\n", path,
           (double)len / 1e6, events);
    printf("chunk              %zu bytes, %d thread%s\n", chunk, threads,
           threads > 1 ? "s" : "");
    printf("decode+aggregate   median of %d: %.3f s = %.1f M events/s, "
           "%.0f MB/s (target >= 30 M events/s)\n",
           runs, m, (double)events / m / 1e6, (double)len / m / 1e6);
    /* A busy host's noise only ever adds time: the best run is the
     * figure least moved by it (see "Method" in bench/README.md). */
    printf("best run           %.3f s = %.1f M events/s\n", best,
           (double)events / best / 1e6);
    fflush(stdout);
    free(secs);
    free(buf);
    measure_rss(path, chunk, threads);
    return 0;
}

/* Runs a command `runs` times, output to /dev/null: wall time and RSS. */
static int bench_exec(int argc, char **argv)
{
    int runs = 5, first = 0;

    if (argc >= 2 && strcmp(argv[0], "--runs") == 0) {
        runs = atoi(argv[1]);
        first = 2;
    }
    if (first < argc && strcmp(argv[first], "--") == 0)
        first++;
    if (first >= argc || runs < 1) {
        fputs("usage: ljmp-bench exec [--runs N] -- COMMAND...\n", stderr);
        return 1;
    }
    double *secs = malloc((size_t)runs * sizeof(double));
    long maxrss = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, STDOUT_FILENO);
            execvp(argv[first], argv + first);
            _exit(127);
        }
        int status;
        struct rusage ru;
        wait4(pid, &status, 0, &ru);
        secs[r] = now() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ljmp-bench: %s failed\n", argv[first]);
            return 1;
        }
        if (ru.ru_maxrss > maxrss)
            maxrss = ru.ru_maxrss;
    }
    printf("command            %s ... (%d runs)\n", argv[first], runs);
    double m = median(secs, runs); /* sorts secs */
    printf("wall               median %.3f s, min %.3f s\n", m, secs[0]);
    printf("peak RSS           %.1f MiB\n", (double)maxrss / 1024);
    free(secs);
    return 0;
}

/* Reads a pipe to its end, discarding, answering the VM's wake-asks on
 * its socket as ljmpd does. */
static void drain_pipe(int sock, int in, uint8_t *buf, size_t len)
{
    struct ljmp_wake wake = {0};
    struct pollfd pfd[2] = {{.fd = in, .events = POLLIN},
                            {.fd = sock, .events = POLLIN}};
    uint8_t bad;

    for (;;) {
        if (poll(pfd, 2, -1) < 0) { /* a closed socket's fd is -1 */
            if (errno == EINTR)
                continue;
            return;
        }
        if (pfd[1].revents) {
            ssize_t n = read(sock, buf, len);
            if (n <= 0 || ljmp_wake_take(&wake, buf, (size_t)n, &bad) != 0)
                pfd[1].fd = -1; /* the VM closed it, or not a VM */
        }
        if (pfd[0].revents) {
            ssize_t n = read(in, buf, len);
            if (n <= 0)
                return;
        }
        if (ljmp_wake_answer(&wake, in, sock) < 0)
            pfd[1].fd = -1;
    }
}

/* Accepts connections on a Unix socket and reads each to the end in a
 * process of its own, discarding: the reader for the VM streaming
 * benchmark, as concurrent as ljmpd is. */
static int bench_drain(int argc, char **argv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    static char buf[1 << 16];
    int lfd;

    if (argc != 1 || strlen(argv[0]) >= sizeof(sa.sun_path)) {
        fputs("usage: ljmp-bench drain SOCKET\n", stderr);
        return 1;
    }
    strcpy(sa.sun_path, argv[0]);
    unlink(argv[0]);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(lfd, 16) != 0) {
        fprintf(stderr, "ljmp-bench drain: %s: %s\n", argv[0], strerror(errno));
        return 1;
    }
    signal(SIGCHLD, SIG_IGN); /* no zombies */
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (fork() == 0) {
            /* As ljmpd answers a hello: through a pipe (a version 3
             * hello brings one), with word that asks are answered. */
            uint8_t ack[2] = {LJMP_HELLO_ACK, LJMP_WAKE};
            int in;
            close(lfd);
            if (ljmp_recv_with_fd(fd, buf, sizeof(buf), &in) > 0 && in >= 0) {
                if (write(fd, ack, 2) != 2)
                    _exit(1);
                drain_pipe(fd, in, (uint8_t *)buf, sizeof(buf));
            } else {
                if (write(fd, ack, 1) != 1)
                    _exit(1);
                while (read(fd, buf, sizeof(buf)) > 0)
                    ;
            }
            _exit(0);
        }
        close(fd);
    }
}

/* Sends FILE (a recorded stream) to ljmpd's ingest socket as a VM would:
 * hello, stream, trailer; as fast as the daemon takes it. */
static int bench_replay(int argc, char **argv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    uint8_t hello[LJMP_HELLO_MAX], trailer[LJMP_TRAILER_SIZE];
    size_t len;

    if (argc != 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
        fputs("usage: ljmp-bench replay FILE SOCKET EVENTS\n", stderr);
        return 1;
    }
    uint8_t *buf = load(argv[0], &len);
    /* EVENTS (counted by the caller, out of the timing) go in the trailer. */
    ljmp_trailer_encode(trailer, strtoull(argv[2], NULL, 10), len);
    strcpy(sa.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    uint8_t ack = 0;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        write_all(fd, hello,
                  ljmp_hello_encode(hello, 2, LJMP_VM_LUAJIT, "replay")) != 0) {
        fprintf(stderr, "ljmp-bench replay: %s: %s\n", argv[1],
                strerror(errno));
        return 1;
    }
    /* As a VM does, wait for ljmpd's answer before streaming. */
    if (read(fd, &ack, 1) != 1 || ack != LJMP_HELLO_ACK) {
        fprintf(stderr, "ljmp-bench replay: %s: no answer to the hello\n",
                argv[1]);
        return 1;
    }
    if (write_all(fd, buf, len) != 0 ||
        write_all(fd, trailer, sizeof(trailer)) != 0) {
        fprintf(stderr, "ljmp-bench replay: %s: %s\n", argv[1],
                strerror(errno));
        return 1;
    }
    close(fd);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "drain") == 0)
        return bench_drain(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "core") == 0)
        return bench_core(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "exec") == 0)
        return bench_exec(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "rss") == 0) /* internal, for core */
        return bench_rss(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "replay") == 0)
        return bench_replay(argc - 2, argv + 2);
    fputs("usage: ljmp-bench core FILE [--runs N] [--chunk BYTES] "
          "[--threads 1|2]\n"
          "       ljmp-bench exec [--runs N] -- COMMAND...\n"
          "       ljmp-bench drain SOCKET\n"
          "       ljmp-bench replay FILE SOCKET EVENTS\n",
          stderr);
    return 1;
}
