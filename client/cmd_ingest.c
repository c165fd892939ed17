/* `ljmpctl ingest`: a memprof stream ljmp's VM did not write (Tarantool's
 * memprof through a FIFO, a file being written, stdin) relayed to ljmpd
 * as a session. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ljmp_ingest.h"
#include "ljmp_wire.h"
#include "ljmpctl.h"
#include "lm_decoder.h"

static const char ingest_help[] =
    "usage: ljmpctl ingest [OPTIONS] FILE|FIFO|-\n"
    "\n"
    "Relays a memprof stream that ljmp's VM did not write to ljmpd, as a\n"
    "live session: Tarantool's memprof writing into a named pipe\n"
    "(misc.memprof.start('/path/to/fifo')), a file being written, a\n"
    "recording, or standard input for '-'.  Any revision ljmp reads (R1,\n"
    "R2, R3-seed, R3).  ljmpd then serves the session as any other: top,\n"
    "snapshots, reports, exports, recordings.\n"
    "\n"
    "From a FIFO or stdin, reads until the writer closes it.  From a\n"
    "regular file, follows it as it grows until the stream's end marker\n"
    "(or, with --no-follow, reads what is there).  The stream's end marker\n"
    "ends the session complete; input that ends before it, truncated.\n"
    "\n"
    "The writer is never left blocked: if ljmpd refuses the stream, goes\n"
    "away or takes nothing for --max-stall, ingest says so and reads the\n"
    "rest of the input, dropping it, until the stream ends.\n"
    "\n"
    "Options:\n"
    "  --pid PID        the process the stream is of (yours, unless you are\n"
    "                   root): the session is named by it, as a VM's is; by\n"
    "                   default, by this relay\n"
    "  --name NAME      the stream's name, shown before the command in list\n"
    "                   and top (default: the input's path)\n"
    "  --no-follow      a regular file: read what it holds, then stop\n"
    "  --ingest PATH    ljmpd's ingest socket (default: $LJMP_SOCKET, else\n"
    "                   ljmpd's default beside its control socket)\n"
    "  --max-stall MS   give ljmpd up (and drain) once it took nothing for\n"
    "                   MS (default 1000; 0: wait for ever, lossless)\n"
    "  -h, --help       this help\n"
    "\n"
    "Exit status: 0 the whole stream relayed, 1 usage or I/O error, 2 the\n"
    "input ended before the stream's end (relayed up to there), 3 the\n"
    "stream is malformed (ljmpd fails the session at the same offset), 4\n"
    "ljmpd not reachable, gone or stalled during the stream (the input\n"
    "drained), 5 --pid names another user's process.\n";

enum {
    RELAY_CHUNK = 1 << 16,
    FOLLOW_NAP_MS = 100,
    ACK_WAIT_MS = 10000, /* ljmpd answers at once: it reads no C symbols */
};

/* A relay: its input, ljmpd's connection, and a decoder that only follows
 * the stream to know where it ends (ljmpd checks it for itself). */
struct relay {
    const char *path;
    int in;
    int follow; /* a regular file, followed as it grows */
    int sock;   /* -1 once ljmpd is gone: the input is drained */
    unsigned max_stall_ms;
    struct lm_decoder dec;
    enum lm_status st;
    uint64_t relayed;
};

static int ignore_records(void *ctx, const struct lm_record *recs, size_t n,
                          size_t *failed_at, char *errbuf, size_t errlen)
{
    (void)ctx;
    (void)recs;
    (void)n;
    (void)failed_at;
    (void)errbuf;
    (void)errlen;
    return 0;
}

/* The ingest socket's path: --ingest, else $LJMP_SOCKET, else the
 * default one beside ljmpd's control socket. */
static void ingest_path(const struct ctl_args *args, char *out, size_t len)
{
    const char *env = getenv("LJMP_SOCKET");

    if (args_has(args, OPT_INGEST))
        snprintf(out, len, "%s", args->text[OPT_INGEST]);
    else if (env != NULL && *env != '\0')
        snprintf(out, len, "%s", env);
    else if (ljmp_wire_default_path(out, len, LJMP_INGEST_SOCKET) != 0)
        out[0] = '\0';
}

/* Waits up to ms for ljmpd's answer to the hello: 0 once accepted, -1
 * after saying why not. */
static int wait_ack(int sock, const char *path)
{
    struct pollfd p = {sock, POLLIN, 0};
    uint8_t b;
    ssize_t n = 0;

    if (poll(&p, 1, ACK_WAIT_MS) == 1)
        n = recv(sock, &b, 1, 0);
    if (n == 1 && b == LJMP_HELLO_ACK)
        return 0;
    fprintf(stderr,
            "ljmpctl ingest: ljmpd at %s %s the stream (its log says why)\n",
            path, n == 0 ? "refused" : "did not answer");
    return -1;
}

/* Connects to ljmpd and says hello; the socket, or -1 after a message. */
static int connect_ljmpd(const struct ctl_args *args, const char *name,
                         uint32_t pid)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    uint8_t hello[LJMP_HELLO_MAX];
    size_t n = ljmp_relay_hello_encode(hello, name, pid);
    char path[sizeof(sa.sun_path)];
    int sock;

    ingest_path(args, path, sizeof(path));
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "ljmpctl ingest: cannot connect to ljmpd at %s: %s\n",
                path, strerror(errno));
        if (sock >= 0)
            close(sock);
        return -1;
    }
    if (send(sock, hello, n, MSG_NOSIGNAL) != (ssize_t)n ||
        wait_ack(sock, path) != 0) {
        close(sock);
        return -1;
    }
    return sock;
}

/* Gives ljmpd up: says why once, and goes on without it (the input is
 * still read, so that its writer never waits for good). */
static void give_up(struct relay *r, const char *why)
{
    fprintf(stderr,
            "ljmpctl ingest: %s after %llu bytes; draining the rest of %s\n",
            why, (unsigned long long)r->relayed, r->path);
    close(r->sock);
    r->sock = -1;
}

/* Sends p[0..n) to ljmpd, waiting for it at most r->max_stall_ms at a
 * time (0: for ever), as a VM does: the writer waits behind the relay. */
static void forward(struct relay *r, const uint8_t *p, size_t n)
{
    while (r->sock >= 0 && n > 0) {
        struct pollfd pw = {r->sock, POLLOUT, 0};
        int ready = poll(&pw, 1, r->max_stall_ms ? (int)r->max_stall_ms : -1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0) {
            give_up(r, "ljmpd stalled past --max-stall");
            return;
        }
        ssize_t k = send(r->sock, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            give_up(r, strerror(errno));
            return;
        }
        p += k;
        n -= (size_t)k;
        r->relayed += (uint64_t)k;
    }
}

/* Follows the stream through buf[0..n): only up to its end marker is
 * relayed. */
static size_t take(struct relay *r, const uint8_t *buf, size_t n)
{
    size_t used = n;

    if (r->st == LM_NEED_MORE)
        r->st = lm_decoder_feed(&r->dec, buf, n, &used);
    /* A malformed stream is relayed whole: ljmpd fails it where the
     * relay's decoder did. */
    if (r->st == LM_ERROR)
        used = n;
    forward(r, buf, used);
    return used;
}

static void nap(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Reads the input to its end (or, following a file, to the stream's end
 * marker); 0, or -1 after a message on a read error. */
static int relay_input(struct relay *r)
{
    uint8_t *buf = malloc(RELAY_CHUNK);

    if (buf == NULL) {
        fprintf(stderr, "ljmpctl ingest: out of memory\n");
        return -1;
    }
    while (r->st != LM_DONE) {
        ssize_t n = read(r->in, buf, RELAY_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "ljmpctl ingest: %s: %s\n", r->path,
                    strerror(errno));
            free(buf);
            return -1;
        }
        if (n == 0 && (!r->follow || r->st == LM_ERROR))
            break;
        if (n == 0) {
            nap(FOLLOW_NAP_MS); /* a file that the writer still grows */
            continue;
        }
        take(r, buf, (size_t)n);
    }
    free(buf);
    return 0;
}

/* The input: stdin for "-", else path opened for reading (a FIFO's open
 * waits for its writer); -1 after a message. */
static int open_input(const char *path, int no_follow, int *follow)
{
    struct stat st;
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO
                                    : open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "ljmpctl ingest: cannot read %s: %s\n", path,
                strerror(errno));
        if (fd > STDIN_FILENO)
            close(fd);
        return -1;
    }
    *follow = S_ISREG(st.st_mode) && !no_follow;
    return fd;
}

/* The exit status for how the relay ended. */
static int relay_status(const struct relay *r)
{
    enum lm_status st = r->st;

    if (st == LM_NEED_MORE)
        st = lm_decoder_finish((struct lm_decoder *)&r->dec);
    if (st == LM_ERROR) {
        fprintf(stderr,
                "ljmpctl ingest: %s: malformed stream at offset %llu: "
                "%s\n",
                r->path, (unsigned long long)r->dec.err_offset, r->dec.errmsg);
        return EXIT_MALFORMED;
    }
    if (r->sock < 0)
        return EXIT_NO_DAEMON;
    if (st != LM_DONE) {
        fprintf(stderr,
                "ljmpctl ingest: %s ended before the stream's end marker: %s\n",
                r->path, r->dec.errmsg);
        return EXIT_TRUNCATED;
    }
    return EXIT_OK;
}

/* Whether the caller may name the stream by process pid: it exists, and
 * is the caller's (root may name any); else says why. */
static int may_name(uint32_t pid)
{
    char proc[32];
    struct stat st;

    snprintf(proc, sizeof(proc), "/proc/%u", pid);
    if (stat(proc, &st) != 0) {
        fprintf(stderr, "ljmpctl ingest: --pid %u: no such process\n", pid);
        return 0;
    }
    if (getuid() != 0 && st.st_uid != getuid()) {
        fprintf(stderr,
                "ljmpctl ingest: --pid %u: the process belongs to uid %u, "
                "not to you\n",
                pid, (unsigned)st.st_uid);
        return 0;
    }
    return 1;
}

static int cmd_ingest(const struct ctl_args *args)
{
    struct relay r = {
        .path = args->operands[0],
        .st = LM_NEED_MORE,
        .max_stall_ms = (unsigned)args_get(args, OPT_MAX_STALL, 1000),
    };
    const char *name = args_has(args, OPT_NAME)   ? args->text[OPT_NAME]
                       : strcmp(r.path, "-") == 0 ? "stdin"
                                                  : r.path;
    uint32_t pid = (uint32_t)args_get(args, OPT_PID, 0);
    int rc;

    if (pid != 0 && !may_name(pid))
        return EXIT_REFUSED;
    r.in = open_input(r.path, args_has(args, OPT_NO_FOLLOW), &r.follow);
    if (r.in < 0)
        return EXIT_USAGE;
    lm_decoder_init(&r.dec, NULL, ignore_records, NULL);
    r.sock = connect_ljmpd(args, name, pid);
    if (r.sock < 0)
        fprintf(stderr, "ljmpctl ingest: draining %s\n", r.path);
    rc = relay_input(&r) != 0 ? EXIT_USAGE : relay_status(&r);
    if (r.sock >= 0) {
        /* ljmpd ends the session at the end marker, or as truncated once
         * it reads the end of the connection. */
        shutdown(r.sock, SHUT_WR);
        close(r.sock);
    }
    if (r.in != STDIN_FILENO)
        close(r.in);
    lm_decoder_free(&r.dec);
    return rc;
}

/* clang-format off */
static const struct opt_use ingest_options[] = {
    {OPT_PID, 1, INT32_MAX, NULL},
    {OPT_NAME, 0, 0, NULL},
    {OPT_NO_FOLLOW, 0, 0, NULL},
    {OPT_INGEST, 0, 0, NULL},
    {OPT_MAX_STALL, 0, 3600000, "ms"},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_ingest_entry = {
    .name = "ingest",
    .synopsis = "[OPTIONS] FILE|FIFO|-",
    .brief = "relay a memprof stream (Tarantool's) to ljmpd",
    .help = ingest_help,
    .options = ingest_options,
    .min_operands = 1,
    .max_operands = 1,
    .operands = "one FILE, FIFO or - (stdin)",
    .exec = cmd_ingest,
};
