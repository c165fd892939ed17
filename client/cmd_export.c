/* `ljmpctl export`: a recording or a live session for pprof, flame graph
 * tools and speedscope. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljmpctl.h"
#include "lm_export.h"
#include "lm_par.h"

static const char export_help[] =
    "usage: ljmpctl export [OPTIONS] FILE|-|PID\n"
    "       ljmpctl export [OPTIONS] --tree PID | --unit NAME\n"
    "\n"
    "Writes a profile for the tools people already use, from a recorded\n"
    "stream (FILE, or standard input for '-') or from the state of a\n"
    "process's newest session in ljmpd (PID: streaming, or finished and\n"
    "kept), or a whole server's sessions merged (--tree, --unit).\n"
    "\n"
    "Each named place is one frame: a Lua line (its function named by chunk\n"
    "and the line it is defined on), a C function, a trace by the line it\n"
    "starts at, the VM's internals.  With no call stacks in the stream,\n"
    "each sample is one frame.  With call stacks (attach --stacks), a\n"
    "sample is a place and a stack: the place, then the callers; when the\n"
    "stacks were sampled (--stack-sample), its values are estimates and\n"
    "the events without a stack are left out (the estimates stand for\n"
    "them).\n"
    "\n"
    "Formats:\n"
    "  pprof       a gzipped profile.proto (go tool pprof, Pyroscope,\n"
    "              Grafana) with four sample types: alloc_objects and\n"
    "              alloc_space (blocks made, by allocations and\n"
    "              reallocations, and their bytes), inuse_objects and\n"
    "              inuse_space (live blocks and bytes, the default); a\n"
    "              sample's labels: pid and command (live sessions), trace\n"
    "              (what compiled code made)\n"
    "  folded      'frame;frame VALUE' lines for flamegraph.pl and inferno;\n"
    "              merged, each process is a root frame\n"
    "  speedscope  speedscope's JSON file format: a sampled profile, weights\n"
    "              in bytes (or objects), one profile per process\n"
    "\n"
    "Options:\n"
    "  --format NAME        pprof (default), folded or speedscope\n"
    "  --sample NAME        inuse_space (default), inuse_objects,\n"
    "                       alloc_space or alloc_objects: pprof's default\n"
    "                       sample type, the value of the others\n"
    "  -o, --output FILE    where to write (default: standard output; pprof\n"
    "                       is never written to a terminal)\n"
    "  --tree               PID and its descendants, merged (from ljmpd)\n"
    "  --unit NAME          a systemd unit's processes, merged (from ljmpd)\n"
    "  --max-string=N       reject chunk or symbol names longer than N bytes\n"
    "                       (a FILE; default 1 MiB, at most 1 GiB)\n"
    "  --threads=N          1 or 2 threads to read a FILE\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 written, 1 usage or I/O error, 2 truncated stream or\n"
    "session (written up to its end), 3 malformed stream, 4 ljmpd not\n"
    "reachable, 5 no session of PID.\n";

/* The export's format and value from --format and --sample; -1 after a
 * message. */
static int export_opts_of(const struct ctl_args *args, struct lm_report_opts *o)
{
    static const char *const formats[] = {"pprof", "folded", "speedscope"};
    const char *format = args->text[OPT_FORMAT];
    const char *sample = args->text[OPT_SAMPLE];

    memset(o, 0, sizeof(*o));
    o->export_format = args_has(args, OPT_FORMAT) ? 0 : 1 + LM_EXPORT_PPROF;
    for (int i = 0; format != NULL && i < 3; i++)
        if (strcmp(format, formats[i]) == 0)
            o->export_format = 1 + i;
    if (o->export_format == 0) {
        fprintf(stderr,
                "ljmpctl export: unknown format '%s' (pprof, folded or "
                "speedscope)\n",
                format);
        return -1;
    }
    o->export_value = LM_VALUE_INUSE_SPACE;
    if (args_has(args, OPT_SAMPLE) &&
        (o->export_value = (int)lm_export_value_named(sample)) ==
            LM_VALUE_COUNT) {
        fprintf(stderr,
                "ljmpctl export: unknown sample '%s' (inuse_space, "
                "inuse_objects, alloc_space or alloc_objects)\n",
                sample);
        return -1;
    }
    return 0;
}

/* The output: stdout, unless -o names a file (created or truncated, not
 * through a symbolic link); NULL after a message. */
static FILE *open_output(const char *path, const struct lm_report_opts *o)
{
    if (path == NULL || strcmp(path, "-") == 0) {
        if (o->export_format == 1 + LM_EXPORT_PPROF && isatty(STDOUT_FILENO)) {
            fprintf(stderr, "ljmpctl export: pprof is binary: give -o FILE "
                            "or redirect standard output\n");
            return NULL;
        }
        return stdout;
    }
    int fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        fprintf(stderr, "ljmpctl export: cannot write %s: %s\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    return f;
}

/* Closes out; a file that could not be written whole is removed, so that
 * no tool reads half a profile.  The exit status given rc. */
static int close_output(FILE *out, const char *path, int rc)
{
    int failed = out == stdout ? fflush(out) != 0 : fclose(out) != 0;

    if (failed && (rc == EXIT_OK || rc == EXIT_TRUNCATED)) {
        fprintf(stderr, "ljmpctl export: writing %s: %s\n",
                out == stdout ? "standard output" : path, strerror(errno));
        rc = EXIT_USAGE;
    }
    if (out != stdout && rc != EXIT_OK && rc != EXIT_TRUNCATED)
        unlink(path);
    return rc;
}

/* A recorded stream's export: its state at the end of the file. */
static int export_file(const struct ctl_args *args, const char *path,
                       const struct lm_report_opts *o, FILE *out)
{
    struct lm_limits limits = {
        args_get(args, OPT_MAX_STRING, LM_DEFAULT_MAX_STRING),
        args_has(args, OPT_MAX_STRING) ? args_get(args, OPT_MAX_STRING, 0) + 64
                                       : LM_DEFAULT_MAX_BUFFERED,
    };
    int threads = (int)args_get(args, OPT_THREADS, lm_par_cpus() >= 2 ? 2 : 1);
    struct lm_export_opts e = {
        .format = (enum lm_export_format)(o->export_format - 1),
        .value = (enum lm_export_value)o->export_value,
    };
    const struct lm_state *state;
    struct lm_profile p;
    enum lm_status st;
    int rc = load_stream_file("export", path, &limits, threads, &p, &st);

    if (rc != EXIT_OK)
        return rc;
    state = &p.state;
    if (lm_export_write(out, &state, NULL, 1, &e) != 0) {
        fprintf(stderr, "ljmpctl export: writing the export: %s\n",
                errno ? strerror(errno) : "out of memory");
        rc = EXIT_USAGE;
    } else {
        rc = stream_end_status("export", path, &p, st);
    }
    lm_profile_free(&p);
    return rc;
}

static int cmd_export(const struct ctl_args *args)
{
    const char *path = args->noperands > 0 ? args->operands[0] : NULL;
    const char *output = args->text[OPT_OUTPUT];
    struct lm_report_opts o;
    struct view_target target;
    int live = args_has(args, OPT_TREE) || args_has(args, OPT_UNIT);
    FILE *out;
    int rc;

    if (export_opts_of(args, &o) != 0)
        return EXIT_USAGE;
    memset(&target, 0, sizeof(target));
    if (live && view_target_of("export", args, &target) != 0)
        return EXIT_USAGE;
    if (!live && path == NULL) {
        fprintf(stderr, "ljmpctl export: expected one FILE, - or PID\n");
        return EXIT_USAGE;
    }
    if (!live && is_pid_operand(path)) {
        if (args_parse_pid("export", path, &target.pid) != 0)
            return EXIT_USAGE;
        live = 1;
    }
    if ((out = open_output(output, &o)) == NULL)
        return EXIT_USAGE;
    rc = live ? live_report("export", &target, &o, out)
              : export_file(args, path, &o, out);
    return close_output(out, output, rc);
}

/* clang-format off */
static const struct opt_use export_options[] = {
    {OPT_FORMAT, 0, 0, NULL},
    {OPT_SAMPLE, 0, 0, NULL},
    {OPT_OUTPUT, 0, 0, NULL},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_MAX_STRING, 0, LM_MAX_STRING_LIMIT, NULL},
    {OPT_THREADS, 1, 2, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_export_entry = {
    .name = "export",
    .synopsis = "[OPTIONS] FILE|-|PID",
    .brief = "profile for pprof, flame graphs, speedscope",
    .help = export_help,
    .options = export_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one FILE (- for stdin) or PID",
    .exec = cmd_export,
};
