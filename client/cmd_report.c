/* `ljmpctl report FILE|-|PID`: the report of a recorded stream, or of a
 * live session from ljmpd. */
#include <errno.h>
#include <fcntl.h>
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
#include "lm_strip.h"

enum { READ_CHUNK = 1 << 20 };

static const char report_help[] =
    "usage: ljmpctl report [OPTIONS] FILE|-\n"
    "       ljmpctl report [OPTIONS] PID\n"
    "       ljmpctl report [OPTIONS] --tree PID | --unit NAME\n"
    "       ljmpctl report --strip-stacks -o OUT FILE|-\n"
    "\n"
    "Reads a memprof stream (revisions R1, R2, R3-seed, R3 and R3S, R3 with\n"
    "call stacks: files from Tarantool's memprof or from ljmp's VM) from\n"
    "FILE, or standard input for '-', and prints the report in the layout\n"
    "of Tarantool's parser\n"
    "(luajit-parse-memprof): ALLOCATIONS, REALLOCATIONS and DEALLOCATIONS\n"
    "by event count with the allocation sites each realloc/free site\n"
    "overrode, then the HEAP SUMMARY (bytes each site still holds) and the\n"
    "ALIASES of chunks loaded from strings.  Ties are broken by name.\n"
    "\n"
    "Options:\n"
    "  --leak-only        print only the heap summary and the aliases\n"
    "  --human-readable   sizes in KiB/MiB/GiB instead of bytes\n"
    "  --json             one JSON object with the same data and totals\n"
    "  --tree             PID and its descendants, merged (from ljmpd)\n"
    "  --unit NAME        a systemd unit's processes, merged (from ljmpd)\n"
    "  --by-process       with --tree or --unit: each held line's share\n"
    "                     per process\n"
    "  --by-trace         what compiled code allocated as rows of its\n"
    "                     trace (TRACE [N] started at CHUNK:LINE), not of\n"
    "                     its lines\n"
    "  --stacks           a STACKS section: each site's callers as a tree,\n"
    "                     live and allocated per caller path (a stream\n"
    "                     with stacks: an R3S FILE or an ljmpd session)\n"
    "  --strip-stacks     no report: write the stream without its stacks,\n"
    "                     as R3 with the same events, to -o OUT\n"
    "  -o, --output OUT   where --strip-stacks writes\n"
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
    "With --tree PID (the process and its descendants) or --unit NAME (a\n"
    "systemd unit's processes), one report of that server's sessions\n"
    "merged, as `ljmpctl top --tree` shows them: lines of the same name\n"
    "summed across processes, after a PROCESSES section listing them;\n"
    "--by-process adds, under each HEAP SUMMARY line, what each process\n"
    "holds of it.\n"
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

/* The report's settings from its command line. */
static void report_args_of(const struct ctl_args *args, struct report_args *a)
{
    memset(a, 0, sizeof(*a));
    a->opts.leak_only = args_has(args, OPT_LEAK_ONLY);
    a->opts.human_readable = args_has(args, OPT_HUMAN_READABLE);
    a->opts.json = args_has(args, OPT_JSON);
    a->opts.by_trace = args_has(args, OPT_BY_TRACE);
    a->opts.stacks = args_has(args, OPT_STACKS);
    a->limits.max_string =
        args_get(args, OPT_MAX_STRING, LM_DEFAULT_MAX_STRING);
    a->limits.max_buffered = args_has(args, OPT_MAX_STRING)
                                 ? a->limits.max_string + 64
                                 : LM_DEFAULT_MAX_BUFFERED;
    a->threads = (int)args_get(args, OPT_THREADS, lm_par_cpus() >= 2 ? 2 : 1);
    a->path = args->noperands > 0 ? args->operands[0] : NULL;
}

/* Feeds the whole input; -1 on a read error, else 0 and how it ended. */
static int read_stream(const char *cmd, int fd, const char *path,
                       struct lm_profile *p, enum lm_status *ended)
{
    uint8_t *buf = malloc(READ_CHUNK);
    enum lm_status st = LM_NEED_MORE;

    if (buf == NULL) {
        fprintf(stderr, "ljmpctl %s: out of memory\n", cmd);
        return -1;
    }
    for (;;) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "ljmpctl %s: %s: %s\n", cmd, path, strerror(errno));
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

int is_pid_operand(const char *arg)
{
    if (*arg == '\0' || strspn(arg, "0123456789") != strlen(arg))
        return 0;
    return access(arg, F_OK) != 0;
}

int load_stream_file(const char *cmd, const char *path,
                     const struct lm_limits *limits, int threads,
                     struct lm_profile *p, enum lm_status *st)
{
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO
                                    : open(path, O_RDONLY | O_CLOEXEC);
    char err[128];

    *st = LM_NEED_MORE;
    if (fd < 0) {
        fprintf(stderr, "ljmpctl %s: cannot open %s: %s\n", cmd, path,
                strerror(errno));
        return EXIT_USAGE;
    }
    if (lm_profile_init(p, limits, NULL) != 0) {
        fprintf(stderr, "ljmpctl %s: out of memory\n", cmd);
        if (fd != STDIN_FILENO)
            close(fd);
        return EXIT_USAGE;
    }
    /* Without the worker thread the state is the same, only slower. */
    (void)lm_profile_threads(p, threads);
    int read_failed = read_stream(cmd, fd, path, p, st);
    if (fd != STDIN_FILENO)
        close(fd);
    if (!read_failed && lm_profile_settle(p, err, sizeof(err)) != 0) {
        fprintf(stderr, "ljmpctl %s: %s: %s\n", cmd, path, err);
        read_failed = 1;
    }
    if (read_failed) {
        lm_profile_free(p);
        return EXIT_USAGE;
    }
    if (*st == LM_ERROR) {
        fprintf(stderr,
                "ljmpctl %s: %s: malformed stream at offset %" PRIu64 ": %s\n",
                cmd, path, p->dec.err_offset, p->dec.errmsg);
        lm_profile_free(p);
        return EXIT_MALFORMED;
    }
    return EXIT_OK;
}

int stream_end_status(const char *cmd, const char *path,
                      const struct lm_profile *p, enum lm_status st)
{
    if (st != LM_NEED_MORE)
        return EXIT_OK;
    fprintf(stderr,
            "ljmpctl %s: %s: %s; the output covers everything before it\n", cmd,
            path, p->dec.errmsg);
    return EXIT_TRUNCATED;
}

static int write_file(void *ctx, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

/* Feeds the whole input to the stripper: how the stream ended, or
 * LM_ERROR (a read error said). */
static enum lm_status strip_input(int fd, const char *path, struct lm_strip *st)
{
    uint8_t *buf = malloc(READ_CHUNK);
    enum lm_status end = LM_NEED_MORE;

    if (buf == NULL) {
        st->failed = 1;
        return LM_ERROR;
    }
    while (end == LM_NEED_MORE) {
        ssize_t n = read(fd, buf, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "ljmpctl report: %s: %s\n", path, strerror(errno));
            st->failed = 1;
            end = LM_ERROR;
            break;
        }
        if (n == 0) {
            end = lm_strip_finish(st);
            break;
        }
        end = lm_strip_feed(st, buf, (size_t)n, NULL);
    }
    free(buf);
    return end;
}

/* The exit status of a strip that ended so, after saying why. */
static int strip_status(const struct lm_strip *st, const char *path,
                        const char *output, enum lm_status end)
{
    if (st->failed) {
        fprintf(stderr, "ljmpctl report: writing %s failed\n", output);
        return EXIT_USAGE;
    }
    if (end == LM_ERROR) {
        fprintf(stderr,
                "ljmpctl report: %s: malformed stream at offset %" PRIu64
                ": %s\n",
                path, st->dec.err_offset, st->dec.errmsg);
        return EXIT_MALFORMED;
    }
    if (end == LM_NEED_MORE) {
        fprintf(stderr,
                "ljmpctl report: %s: %s; %s holds everything before it\n", path,
                st->dec.errmsg, output);
        return EXIT_TRUNCATED;
    }
    return EXIT_OK;
}

/* --strip-stacks: the stream of path, without its stacks, into output
 * (docs/format.md, "Stripping"). */
static int strip_stacks(const struct report_args *a, const char *output)
{
    int fd = strcmp(a->path, "-") == 0 ? STDIN_FILENO
                                       : open(a->path, O_RDONLY | O_CLOEXEC);
    FILE *out;
    struct lm_strip st;

    if (fd < 0) {
        fprintf(stderr, "ljmpctl report: cannot open %s: %s\n", a->path,
                strerror(errno));
        return EXIT_USAGE;
    }
    if ((out = fopen(output, "wbe")) == NULL) {
        fprintf(stderr, "ljmpctl report: cannot create %s: %s\n", output,
                strerror(errno));
        if (fd != STDIN_FILENO)
            close(fd);
        return EXIT_USAGE;
    }
    lm_strip_init(&st, &a->limits, write_file, out);
    enum lm_status end = strip_input(fd, a->path, &st);
    if (fd != STDIN_FILENO)
        close(fd);
    if (fclose(out) != 0)
        st.failed = 1;
    int rc = strip_status(&st, a->path, output, end);
    lm_strip_free(&st);
    return rc;
}

/* --strip-stacks takes a FILE (ljmpd's sessions are not streams here)
 * and -o, which nothing else takes.  0, or -1 after saying what is
 * wrong. */
static int check_stack_options(const struct ctl_args *args)
{
    int strip = args_has(args, OPT_STRIP_STACKS);

    if (strip != args_has(args, OPT_OUTPUT)) {
        fprintf(stderr, "ljmpctl report: --strip-stacks and -o go together\n");
        return -1;
    }
    if (strip && (args_has(args, OPT_TREE) || args_has(args, OPT_UNIT) ||
                  args_has(args, OPT_BY_PROCESS) || args->noperands == 0 ||
                  is_pid_operand(args->operands[0]))) {
        fprintf(stderr, "ljmpctl report: --strip-stacks reads a FILE (or "
                        "-), not ljmpd's sessions\n");
        return -1;
    }
    return 0;
}

static int cmd_report(const struct ctl_args *args)
{
    struct report_args a;
    struct view_target target;
    struct lm_profile p;
    enum lm_status st;
    int rc;

    report_args_of(args, &a);
    if (check_stack_options(args) != 0)
        return EXIT_USAGE;
    if (args_has(args, OPT_STRIP_STACKS))
        return strip_stacks(&a, args->text[OPT_OUTPUT]);
    /* A whole server's report: its target as the live views take it. */
    if (args_has(args, OPT_TREE) || args_has(args, OPT_UNIT) ||
        args_has(args, OPT_BY_PROCESS)) {
        if (view_target_of("report", args, &target) != 0)
            return EXIT_USAGE;
        a.opts.by_process = target.by_process;
        return live_report("report", &target, &a.opts, stdout);
    }
    if (a.path == NULL) {
        fprintf(stderr, "ljmpctl report: expected one FILE, - or PID\n");
        return EXIT_USAGE;
    }
    if (is_pid_operand(a.path)) {
        memset(&target, 0, sizeof(target));
        if (args_parse_pid("report", a.path, &target.pid) != 0)
            return EXIT_USAGE;
        return live_report("report", &target, &a.opts, stdout);
    }
    rc = load_stream_file("report", a.path, &a.limits, a.threads, &p, &st);
    if (rc != EXIT_OK)
        return rc;
    if (lm_report_write(stdout, &p.state, &a.opts) != 0 ||
        fflush(stdout) != 0) {
        fprintf(stderr, "ljmpctl report: writing the report: %s\n",
                strerror(errno));
        rc = EXIT_USAGE;
    } else {
        rc = stream_end_status("report", a.path, &p, st);
    }
    lm_profile_free(&p);
    return rc;
}

/* --max-string and --threads shape the reading of a file; with a PID,
 * ljmpd reads the stream and they change nothing. */
/* One option a line, as the other commands' tables are. */
/* clang-format off */
static const struct opt_use report_options[] = {
    {OPT_LEAK_ONLY, 0, 0, NULL},
    {OPT_HUMAN_READABLE, 0, 0, NULL},
    {OPT_JSON, 0, 0, NULL},
    {OPT_MAX_STRING, 0, LM_MAX_STRING_LIMIT, NULL},
    {OPT_THREADS, 1, 2, NULL},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_BY_PROCESS, 0, 0, NULL},
    {OPT_BY_TRACE, 0, 0, NULL},
    {OPT_STACKS, 0, 0, NULL},
    {OPT_STRIP_STACKS, 0, 0, NULL},
    {OPT_OUTPUT, 0, 0, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_report_entry = {
    .name = "report",
    .synopsis = "[OPTIONS] FILE|-|PID | --tree PID | --unit NAME | "
                "--strip-stacks -o OUT FILE|-",
    .brief = "report of a recorded stream or a session",
    .help = report_help,
    .options = report_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one FILE (- for stdin) or PID",
    .exec = cmd_report,
};
