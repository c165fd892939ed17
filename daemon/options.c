/* ljmpd's command line: every option, its default and its bounds. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljmp_wire.h"
#include "lm_state.h"
#include "log.h"
#include "options.h"

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
    "      --reader USER        a user (name or uid) who may read every\n"
    "                           session: list, snapshots, reports, exports;\n"
    "                           not attach, detach or record (ljmp-push's)\n"
    "      --control-mode MODE  permissions of the control socket (0660 for\n"
    "                           root, 0600 otherwise)\n"
    "      --retain SECONDS     keep finished sessions this long (600)\n"
    "      --retain-count N     and at most this many (64; past it, the\n"
    "                           user who keeps the most loses the oldest)\n"
    "      --max-sessions N     VMs streaming at once (256; an eighth kept\n"
    "                           for root and ljmpd's user; any other user\n"
    "                           holds no more than stay free)\n"
    "      --max-clients N      control connections at once (256; shared\n"
    "                           the same way)\n"
    "      --read-budget BYTES  ingest bytes per session per loop turn\n"
    "                           (262144): fairness between busy VMs\n"
    "      --feed-threads N     threads that decode streams (default: the\n"
    "                           CPUs ljmpd may use, at most 8; 0: decode on\n"
    "                           the event loop's thread)\n"
    "      --inline-bytes N     reads under N bytes are decoded on the event\n"
    "                           loop's thread (4096; 0: all on the threads)\n"
    "      --hello-timeout MS   a new VM connection's hello must come within\n"
    "                           this time, and once answered, the start of\n"
    "                           its stream (5000)\n"
    "      --symbols-wait MS    a VM streams without names for C functions\n"
    "                           if its process's symbols take longer to read\n"
    "                           (2000)\n"
    "      --client-idle SECONDS  close a client that asked for nothing\n"
    "                           in this time and waits for nothing, drop\n"
    "                           one that read none of its report (300)\n"
    "      --record-stall SECONDS  a recording whose file takes no bytes\n"
    "                           this long is stopped (10); until then a file\n"
    "                           that falls behind slows its own VM\n"
    "      --queue BYTES        a client's unsent output before its snapshots\n"
    "                           are coalesced and its requests wait (1048576)\n"
    "      --brief MS           a session shorter than this, of a process "
    "that\n"
    "                           has exited (a helper such as nginx -t), is\n"
    "                           left out of views that name no process\n"
    "                           (2000; 0: none is)\n"
    "      --max-locations N    allocation sites per session (1048576)\n"
    "      --max-string BYTES   longest symbol name accepted (1048576)\n"
    "      --session-memory BYTES  the most ljmpd holds for one session\n"
    "                           (268435456, 256 MiB): names, sites, live\n"
    "                           blocks, buffers; past it the session fails\n"
    "      --user-memory BYTES  the most it holds for one user's sessions,\n"
    "                           streaming and kept (268435456); root and\n"
    "                           ljmpd's own user have no user budget\n"
    "      --memory BYTES       the most it holds for all sessions\n"
    "                           (1073741824, 1 GiB); kept sessions are\n"
    "                           forgotten first to make room\n"
    "      --history-span SECONDS  how far back each session's history\n"
    "                           goes (3600): its totals every second, its\n"
    "                           tracked sites' every 1 to 10 s\n"
    "      --history-memory BYTES  the most a session's history holds\n"
    "                           (1048576, 1 MiB; no more than an eighth of\n"
    "                           --session-memory); past it older points are\n"
    "                           thinned, every other one dropped\n"
    "      --history-sites N    sites a session's history tracks (256):\n"
    "                           half by live bytes, half by live bytes of\n"
    "                           those that keep half of what they allocate\n"
    "  -v, --verbose            debug log\n"
    "  -q, --quiet              errors and warnings only\n"
    "  -h, --help               this text\n"
    "\n"
    "Logs go to stderr.  SIGTERM or SIGINT stop the daemon cleanly: clients\n"
    "are told, recordings are closed.\n";

/* A number option: where its value goes in struct config, and the base
 * and bounds it is read in. */
struct number_opt {
    const char *name;
    size_t offset, size; /* of its field */
    int base;
    unsigned long long min, max;
};

#define NUMBER(name, field, base, min, max)                                    \
    {                                                                          \
        name, offsetof(struct config, field),                                  \
            sizeof(((struct config *)0)->field), base, min, max                \
    }

static const struct number_opt number_opts[] = {
    NUMBER("ingest-mode", ingest_mode, 8, 0, 0777),
    NUMBER("control-mode", control_mode, 8, 0, 0777),
    NUMBER("retain", retain_s, 10, 0, 1u << 30),
    NUMBER("retain-count", retain_count, 10, 0, 1u << 20),
    NUMBER("max-sessions", max_sessions, 10, 1, 1u << 16),
    NUMBER("max-clients", max_peers, 10, 1, 1u << 16),
    NUMBER("read-budget", read_budget, 10, 4096, 64u << 20),
    NUMBER("queue", peer_queue, 10, 0, 1u << 30),
    NUMBER("hello-timeout", hello_timeout_ms, 10, 10, 3600000),
    NUMBER("client-idle", client_idle_s, 10, 1, 86400 * 365),
    NUMBER("record-stall", record_stall_s, 10, 1, 86400),
    NUMBER("max-locations", max_locations, 10, 1, LM_MAX_LOCATIONS),
    NUMBER("max-string", max_string, 10, 64, LM_MAX_STRING_LIMIT),
    NUMBER("feed-threads", feed_threads, 10, 0, 64),
    NUMBER("inline-bytes", inline_bytes, 10, 0, 64u << 20),
    NUMBER("symbols-wait", symbols_wait_ms, 10, 1, 3600000),
    NUMBER("brief", brief_ms, 10, 0, 3600000),
    NUMBER("session-memory", session_memory, 10, 1u << 20, 1ull << 46),
    NUMBER("user-memory", user_memory, 10, 1u << 20, 1ull << 46),
    NUMBER("memory", total_memory, 10, 1u << 20, 1ull << 46),
    NUMBER("history-span", history_span_s, 10, 10, 86400 * 7),
    NUMBER("history-memory", history_memory, 10, 256u << 10, 1u << 30),
    NUMBER("history-sites", history_sites, 10, 2, 1000),
};

#define NNUMBERS (sizeof(number_opts) / sizeof(number_opts[0]))
/* getopt's value of number_opts[i]. */
#define NUMBER_VAL(i) (256 + (int)(i))

/* Reads o's value into cfg; exits with a message when it is not a number
 * within o's bounds. */
static void number_arg(struct config *cfg, const struct number_opt *o,
                       const char *arg)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(arg, &end, o->base);
    if (errno != 0 || end == arg || *end != '\0' || v < o->min || v > o->max) {
        fprintf(stderr,
                "ljmpd: --%s wants a number in [%llu, %llu], not '%s'\n",
                o->name, o->min, o->max, arg);
        exit(2);
    }
    char *field = (char *)cfg + o->offset;
    if (o->size == sizeof(unsigned))
        *(unsigned *)field = (unsigned)v;
    else
        *(size_t *)field = (size_t)v;
}

static const struct option paths_and_flags[] = {
    {"ingest", required_argument, NULL, 'i'},
    {"control", required_argument, NULL, 'c'},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"reader", required_argument, NULL, 'r'},
};

#define NPATHS_AND_FLAGS (sizeof(paths_and_flags) / sizeof(paths_and_flags[0]))

/* getopt's table: the paths and flags, then the number options. */
static void long_options(struct option *out)
{
    size_t n = 0;

    for (size_t i = 0; i < NPATHS_AND_FLAGS; i++)
        out[n++] = paths_and_flags[i];
    for (size_t i = 0; i < NNUMBERS; i++)
        out[n++] = (struct option){number_opts[i].name, required_argument, NULL,
                                   NUMBER_VAL(i)};
    out[n] = (struct option){NULL, 0, NULL, 0};
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

static void set_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->ingest_mode = 0666;
    cfg->control_mode = getuid() == 0 ? 0660 : 0600;
    cfg->retain_s = 600;
    cfg->retain_count = 64;
    cfg->brief_ms = 2000;
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
    cfg->session_memory = (size_t)256 << 20;
    cfg->user_memory = (size_t)256 << 20;
    cfg->total_memory = (size_t)1 << 30;
    cfg->reader_uid = (uid_t)-1; /* none */
    cfg->history_span_s = 3600;
    cfg->history_memory = (size_t)1 << 20;
    cfg->history_sites = 256;
}

/* --reader's user, by name or number; exits with a message for neither. */
static void reader_arg(struct config *cfg, const char *arg)
{
    const struct passwd *pw = getpwnam(arg);
    char *end;
    unsigned long uid;

    if (pw != NULL) {
        cfg->reader_uid = pw->pw_uid;
        return;
    }
    errno = 0;
    uid = strtoul(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || uid >= (uid_t)-1) {
        fprintf(stderr, "ljmpd: --reader: no user '%s'\n", arg);
        exit(2);
    }
    cfg->reader_uid = (uid_t)uid;
}

/* The socket paths not given: the defaults for ljmpd's user. */
static void default_paths(struct config *cfg)
{
    if ((cfg->ingest_path[0] == '\0' &&
         ljmp_wire_default_path(cfg->ingest_path, sizeof(cfg->ingest_path),
                                LJMP_INGEST_SOCKET) != 0) ||
        (cfg->control_path[0] == '\0' &&
         ljmp_wire_default_path(cfg->control_path, sizeof(cfg->control_path),
                                LJMP_CONTROL_SOCKET) != 0)) {
        fprintf(stderr, "ljmpd: default socket path too long; use -i and -c\n");
        exit(2);
    }
}

void options_parse(struct config *cfg, int argc, char **argv)
{
    struct option longs[NPATHS_AND_FLAGS + NNUMBERS + 1];
    int c, level = LOG_INFO;

    set_defaults(cfg);
    long_options(longs);
    while ((c = getopt_long(argc, argv, "i:c:vqh", longs, NULL)) != -1) {
        if (c >= NUMBER_VAL(0) && c < NUMBER_VAL(NNUMBERS)) {
            number_arg(cfg, &number_opts[c - NUMBER_VAL(0)], optarg);
            continue;
        }
        switch (c) {
        case 'i':
            path_arg(cfg->ingest_path, sizeof(cfg->ingest_path), "ingest",
                     optarg);
            break;
        case 'c':
            path_arg(cfg->control_path, sizeof(cfg->control_path), "control",
                     optarg);
            break;
        case 'r':
            reader_arg(cfg, optarg);
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
    default_paths(cfg);
    cfg->verbose = level;
}
