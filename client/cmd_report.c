/* `ljmpctl report FILE|-|PID`: the report of a recorded stream, or of a
 * live session from ljmpd. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljmpctl.h"
#include "lm_par.h"
#include "lm_report.h"
#include "lm_profile.h"
#include "lm_state.h"

enum { READ_CHUNK = 1 << 20 };

static const char report_help[] =
    "usage: ljmpctl report [OPTIONS] FILE|-\n"
    "       ljmpctl report [OPTIONS] PID\n"
    "\n"
    "Reads a memprof stream (revisions R1, R2, R3-seed and R3: files from\n"
    "Tarantool's memprof or from ljmp's VM) from FILE, or standard input\n"
    "for '-', and prints the report in the layout of Tarantool's parser\n"
    "(luajit-parse-memprof): ALLOCATIONS, REALLOCATIONS and DEALLOCATIONS\n"
    "by event count with the allocation sites each realloc/free site\n"
    "overrode, then the HEAP SUMMARY (bytes each site still holds) and the\n"
    "ALIASES of chunks loaded from strings.  Ties are broken by name.\n"
    "\n"
    "Options:\n"
    "  --leak-only        print only the heap summary and the aliases\n"
    "  --human-readable   sizes in KiB/MiB/GiB instead of bytes\n"
    "  --json             one JSON object with the same data and totals\n"
    "  --max-string=N     reject chunk or symbol names longer than N bytes\n"
    "                     (default 1 MiB, at most 1 GiB)\n"
    "  --threads=N        1, or 2 to apply the stream on two threads (the\n"
    "                     default when this process may use two CPUs)\n"
    "  -h, --help         this help\n"
    "\n"
    "A stream that ends early (a VM that died) is reported up to its last\n"
    "whole event; stderr says where and why it ended.  Malformed input gives\n"
    "one line on stderr with the byte offset, and no report.\n"
    "\n"
    "Given a PID (a number that is not a file's name), asks ljmpd for the\n"
    "same report of that process's newest session, from its live state:\n"
    "streaming, or finished and still kept.\n"
    "\n"
    "Exit status: 0 complete stream (or a session still streaming), 1 usage\n"
    "or I/O error, 2 truncated stream (report printed), 3 malformed stream,\n"
    "4 ljmpd not reachable, 5 no session of PID.\n";

struct report_args {
    struct lm_report_opts opts;
    struct lm_limits limits;
    int threads;
    const char *path;
};

static int parse_args(int argc, char **argv, struct report_args *a)
{
    enum { OPT_LEAK = 256, OPT_HUMAN, OPT_JSON, OPT_MAXSTR, OPT_THREADS };
    static const struct option longopts[] = {
        {"leak-only", no_argument, NULL, OPT_LEAK},
        {"human-readable", no_argument, NULL, OPT_HUMAN},
        {"json", no_argument, NULL, OPT_JSON},
        {"max-string", required_argument, NULL, OPT_MAXSTR},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    unsigned long long max_string;

    memset(a, 0, sizeof(*a));
    a->limits.max_string = LM_DEFAULT_MAX_STRING;
    a->limits.max_buffered = LM_DEFAULT_MAX_BUFFERED;
    a->threads = lm_par_cpus() >= 2 ? 2 : 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LEAK:
            a->opts.leak_only = 1;
            break;
        case OPT_HUMAN:
            a->opts.human_readable = 1;
            break;
        case OPT_JSON:
            a->opts.json = 1;
            break;
        case OPT_MAXSTR:
            if (parse_number("report", "--max-string", optarg,
                             LM_MAX_STRING_LIMIT, &max_string) < 0)
                return -1;
            a->limits.max_string = max_string;
            a->limits.max_buffered = a->limits.max_string + 64;
            break;
        case OPT_THREADS:
            if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0) {
                fprintf(stderr,
                        "ljmpctl report: --threads wants 1 or 2, not '%s'\n",
                        optarg);
                return -1;
            }
            a->threads = optarg[0] - '0';
            break;
        case 'h':
            fputs(report_help, stdout);
            exit(EXIT_OK);
        default:
            fputs("try 'ljmpctl report --help'\n", stderr);
            return -1;
        }
    }
    if (optind != argc - 1) {
        fputs("ljmpctl report: expected one FILE (- for stdin) or PID; try "
              "'ljmpctl report --help'\n",
              stderr);
        return -1;
    }
    a->path = argv[optind];
    return 0;
}

/* Feeds the whole input; -1 on a read error, else 0 and how it ended. */
static int read_stream(int fd, const char *path, struct lm_profile *p,
                       enum lm_status *ended)
{
    uint8_t *buf = malloc(READ_CHUNK);
    enum lm_status st = LM_NEED_MORE;

    if (buf == NULL) {
        fprintf(stderr, "ljmpctl report: out of memory\n");
        return -1;
    }
    for (;;) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "ljmpctl report: %s: %s\n", path, strerror(errno));
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        size_t used;
        st = lm_profile_feed(p, buf, (size_t)n, &used);
        if (st == LM_DONE && used < (size_t)n)
            st = lm_profile_feed(p, buf + used, (size_t)n - used, &used);
        if (st == LM_ERROR)
            break;
    }
    free(buf);
    *ended = lm_decoder_finish(&p->dec);
    return 0;
}

/* A process id rather than a file: digits only, and no such file. */
static int is_pid(const char *arg)
{
    if (*arg == '\0' || strspn(arg, "0123456789") != strlen(arg))
        return 0;
    return access(arg, F_OK) != 0;
}

static int cmd_report(int argc, char **argv)
{
    struct report_args a;
    struct lm_profile p;
    enum lm_status st = LM_NEED_MORE;
    int fd, rc;

    if (parse_args(argc, argv, &a) != 0)
        return EXIT_USAGE;
    if (is_pid(a.path))
        return live_report(a.path, a.opts.leak_only, a.opts.human_readable,
                           a.opts.json);
    fd = strcmp(a.path, "-") == 0 ? STDIN_FILENO
                                  : open(a.path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "ljmpctl report: cannot open %s: %s\n", a.path,
                strerror(errno));
        return EXIT_USAGE;
    }
    if (lm_profile_init(&p, &a.limits, NULL) != 0) {
        fprintf(stderr, "ljmpctl report: out of memory\n");
        return EXIT_USAGE;
    }
    /* Without the worker thread the report is the same, only slower. */
    (void)lm_profile_threads(&p, a.threads);
    int read_failed = read_stream(fd, a.path, &p, &st);
    char err[128];
    if (fd != STDIN_FILENO)
        close(fd);
    if (!read_failed && lm_profile_settle(&p, err, sizeof(err)) != 0) {
        fprintf(stderr, "ljmpctl report: %s: %s\n", a.path, err);
        read_failed = 1;
    }
    if (read_failed) {
        rc = EXIT_USAGE;
    } else if (st == LM_ERROR) {
        fprintf(stderr,
                "ljmpctl report: %s: malformed stream at offset %" PRIu64
                ": %s\n",
                a.path, p.dec.err_offset, p.dec.errmsg);
        rc = EXIT_MALFORMED;
    } else {
        if (lm_report_write(stdout, &p.state, &a.opts) != 0 ||
            fflush(stdout) != 0) {
            fprintf(stderr, "ljmpctl report: writing the report: %s\n",
                    strerror(errno));
            rc = EXIT_USAGE;
        } else if (st == LM_NEED_MORE) {
            fprintf(stderr,
                    "ljmpctl report: %s: %s; the report covers "
                    "everything before it\n",
                    a.path, p.dec.errmsg);
            rc = EXIT_TRUNCATED;
        } else {
            rc = EXIT_OK;
        }
    }
    lm_profile_free(&p);
    return rc;
}

const struct cmd_entry cmd_report_entry = {
    "report",
    "[OPTIONS] FILE|-|PID",
    "report of a recorded stream or a session",
    report_help,
    cmd_report,
};
