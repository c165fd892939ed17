/* ljmpd's command line: every option, its default and its bounds. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
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

void options_parse(struct config *cfg, int argc, char **argv)
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
