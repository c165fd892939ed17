/* `ljmpctl attach` and `ljmpctl detach`: start and stop a running
 * program's profile through ljmpd, by pid, or a whole process tree or
 * systemd unit that ljmpd keeps following. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "ljmpctl.h"

static const char attach_help[] =
    "usage: ljmpctl attach PID [--timeout MS]\n"
    "       ljmpctl attach --tree PID\n"
    "       ljmpctl attach --unit NAME\n"
    "\n"
    "Starts profiling a running program: ljmpd checks that you may (root,\n"
    "or the process's owner) and that it runs a patched LuaJIT VM with its\n"
    "attach agent, signals it, and waits for its stream.  The VM starts at\n"
    "its next Lua call.  One that runs no Lua within --timeout (500 ms; at\n"
    "most 60000), such as an idle nginx worker, is left armed: attach\n"
    "succeeds, saying so, `ljmpctl list` shows it, its session starts when\n"
    "it next runs Lua, and `ljmpctl detach PID` disarms it.  The VM\n"
    "connects to the ingest socket its agent was started with ($LJMP_INGEST,\n"
    "else the default one), which it names in /proc/PID/maps: ljmpd must\n"
    "listen there.\n"
    "\n"
    "--tree PID attaches PID and its descendants (an nginx master and its\n"
    "workers); --unit NAME every process of a systemd unit (NAME.service if\n"
    "NAME has no type).  ljmpd keeps following: processes that appear later\n"
    "(a reload's workers, a respawned one) are attached as they start.\n"
    "Members without an agent, or another user's, are listed as skipped,\n"
    "with the reason.  `ljmpctl detach` with the same target ends it.\n"
    "\n"
    "Prints the new session, the process armed, or the follow and its\n"
    "members.  Attaching to a process that streams already says so and\n"
    "succeeds.  Exit status 5 with the reason when it cannot: no such\n"
    "process, permission denied, not a patched VM, agent disabled\n"
    "(LJMP_AGENT=0), or a VM that connects to another ingest socket.\n";

static const char detach_help[] =
    "usage: ljmpctl detach PID [--timeout MS]\n"
    "       ljmpctl detach --tree PID | --unit NAME [--timeout MS]\n"
    "\n"
    "Stops profiling PID: ljmpd signals its VM, which ends the stream at its\n"
    "next Lua call with its own totals; ljmpd answers once the session has\n"
    "ended and says whether those totals matched (complete).  The session\n"
    "stays queryable (`ljmpctl report PID`).  A process armed and not\n"
    "streaming yet is disarmed.  With --tree or --unit, ljmpd stops\n"
    "following and detaches (or disarms) every member; detach waits until\n"
    "their streams have ended.  Exit status 5 when nothing was attached, or\n"
    "a stream did not end within --timeout (5000 ms).\n";

#define DETACH_WAIT_MS 5000

/* Sends the request and waits as long as ljmpd may (its timeout + 5 s). */
static Ljmp__Response *ask(const char *cmd, Ljmp__Request *req,
                           uint32_t timeout_ms, struct conn *c, int *rc)
{
    int wait = (int)(timeout_ms ? timeout_ms : 5000) + 5000;

    return conn_ask(c, cmd, req, -1, wait, 0, rc);
}

/* The target of a command line: --tree PID, --unit NAME or PID.  0, or
 * EXIT_USAGE after saying what is wrong. */
static int target_of(const char *cmd, const struct ctl_args *a, uint32_t *pid,
                     int *tree, const char **unit)
{
    *tree = args_has(a, OPT_TREE);
    *unit = args_has(a, OPT_UNIT) ? a->text[OPT_UNIT] : NULL;
    *pid = 0;
    if (*tree && *unit != NULL) {
        fprintf(stderr, "ljmpctl %s: --tree or --unit, not both\n", cmd);
        return EXIT_USAGE;
    }
    if (*unit != NULL) {
        if (a->noperands == 0)
            return 0;
        fprintf(stderr, "ljmpctl %s: --unit takes no PID\n", cmd);
        return EXIT_USAGE;
    }
    if (a->noperands != 1) {
        fprintf(stderr, "ljmpctl %s: expected one PID (see ljmpctl help %s)\n",
                cmd, cmd);
        return EXIT_USAGE;
    }
    return args_parse_pid(cmd, a->operands[0], pid) != 0 ? EXIT_USAGE : 0;
}

static void print_armed(const Ljmp__ArmedProcess *m, const char *note)
{
    printf("pid %u: %s\n", m->pid, note ? note : "armed");
}

static int cmd_attach(const struct ctl_args *a)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__AttachRequest ar = LJMP__ATTACH_REQUEST__INIT;
    uint32_t pid, timeout_ms = (uint32_t)args_get(a, OPT_TIMEOUT, 0);
    const char *unit;
    struct conn c;
    int rc, tree;

    if ((rc = target_of("attach", a, &pid, &tree, &unit)) != 0)
        return rc;
    ar.has_pid = pid != 0;
    ar.pid = pid;
    ar.has_timeout_ms = 1;
    ar.timeout_ms = timeout_ms;
    ar.has_tree = tree;
    ar.tree = tree;
    ar.unit = (char *)unit;
    req.body_case = LJMP__REQUEST__BODY_ATTACH;
    req.attach = &ar;
    Ljmp__Response *resp = ask("attach", &req, timeout_ms, &c, &rc);
    if (resp != NULL) {
        if (resp->body_case == LJMP__RESPONSE__BODY_SESSION) {
            const Ljmp__SessionInfo *s = resp->session;
            printf("pid %u: %s, session %llu (%s)\n", pid,
                   resp->note ? resp->note : "attached",
                   (unsigned long long)s->id,
                   s->vm_version ? s->vm_version : "");
        } else if (resp->body_case == LJMP__RESPONSE__BODY_ARMED) {
            print_armed(resp->armed, resp->note);
        } else if (resp->body_case == LJMP__RESPONSE__BODY_FOLLOW) {
            if (resp->note)
                printf("%s: ", resp->note);
            live_print_follow(resp->follow);
        } else {
            fprintf(stderr, "ljmpctl attach: unexpected answer from ljmpd\n");
            rc = EXIT_NO_DAEMON;
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* How many of pids still stream to ljmpd (-1 if it cannot be asked). */
static int still_streaming(const uint32_t *pids, size_t n)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest lr = LJMP__LIST_REQUEST__INIT;
    struct conn c;
    int rc, left = 0;

    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &lr;
    Ljmp__Response *resp =
        conn_ask(&c, "detach", &req, -1, 5000, LJMP__RESPONSE__BODY_LIST, &rc);
    conn_close(&c);
    if (resp == NULL)
        return -1;
    for (size_t i = 0; i < resp->list->n_sessions; i++) {
        const Ljmp__SessionInfo *s = resp->list->sessions[i]->info;
        for (size_t k = 0; s != NULL && k < n; k++)
            left +=
                s->pid == pids[k] && s->state == LJMP__SESSION_STATE__STREAMING;
    }
    ljmp__response__free_unpacked(resp, NULL);
    return left;
}

/* A follow's members detached: waits for their streams to end. */
static int detached_all(const Ljmp__Follow *f, uint32_t timeout_ms)
{
    long waited = 0, limit = timeout_ms ? (long)timeout_ms : DETACH_WAIT_MS;
    int left;

    while ((left = still_streaming(f->streaming, f->n_streaming)) > 0 &&
           waited < limit) {
        sleep_ms(50);
        waited += 50;
    }
    if (left < 0)
        return EXIT_NO_DAEMON;
    if (left > 0) {
        fprintf(stderr,
                "ljmpctl detach: %d of them still stream after %ld ms (a VM "
                "stops at its next Lua call)\n",
                left, limit);
        return EXIT_REFUSED;
    }
    return 0;
}

static int print_detached(uint32_t pid, const Ljmp__SessionInfo *s)
{
    printf("pid %u: detached, session %llu %s", pid, (unsigned long long)s->id,
           ljmp_wire_state_name(s->state));
    if (s->trailer_seen)
        printf(" (%llu events, %llu stream bytes, as the VM counted)",
               (unsigned long long)s->trailer_events,
               (unsigned long long)s->trailer_stream_bytes);
    else if (s->reason)
        printf(": %s", s->reason);
    putchar('\n');
    if (s->state == LJMP__SESSION_STATE__TRUNCATED)
        return EXIT_TRUNCATED;
    if (s->state == LJMP__SESSION_STATE__FAILED)
        return EXIT_MALFORMED;
    return 0;
}

static int cmd_detach(const struct ctl_args *a)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__DetachRequest dr = LJMP__DETACH_REQUEST__INIT;
    uint32_t pid, timeout_ms = (uint32_t)args_get(a, OPT_TIMEOUT, 0);
    const char *unit;
    struct conn c;
    int rc, tree;

    if ((rc = target_of("detach", a, &pid, &tree, &unit)) != 0)
        return rc;
    dr.has_pid = pid != 0;
    dr.pid = pid;
    dr.has_timeout_ms = 1;
    dr.timeout_ms = timeout_ms;
    dr.has_tree = tree;
    dr.tree = tree;
    dr.unit = (char *)unit;
    req.body_case = LJMP__REQUEST__BODY_DETACH;
    req.detach = &dr;
    Ljmp__Response *resp = ask("detach", &req, timeout_ms, &c, &rc);
    conn_close(&c);
    if (resp == NULL)
        return rc;
    if (resp->body_case == LJMP__RESPONSE__BODY_SESSION) {
        rc = print_detached(pid, resp->session);
    } else if (resp->body_case == LJMP__RESPONSE__BODY_ARMED) {
        print_armed(resp->armed, resp->note);
    } else if (resp->body_case == LJMP__RESPONSE__BODY_FOLLOW) {
        const Ljmp__Follow *f = resp->follow;
        printf("%s: ", resp->note ? resp->note : "detached");
        live_print_follow(f);
        if (f->n_streaming + f->n_armed == 0 && f->id == 0) {
            fprintf(stderr, "ljmpctl detach: nothing of it was attached\n");
            rc = EXIT_REFUSED;
        } else {
            rc = detached_all(f, timeout_ms);
        }
    } else {
        fprintf(stderr, "ljmpctl detach: unexpected answer from ljmpd\n");
        rc = EXIT_NO_DAEMON;
    }
    ljmp__response__free_unpacked(resp, NULL);
    return rc;
}

/* Both take --timeout; 0 (or none) is ljmpd's own wait. */
static const struct opt_use attach_options[] = {
    {OPT_TIMEOUT, 0, 60000, "ms"},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    OPT_USE_END,
};

const struct cmd_entry cmd_attach_entry = {
    .name = "attach",
    .synopsis = "PID | --tree PID | --unit NAME [--timeout MS]",
    .brief = "start profiling a running program, a tree or a unit",
    .help = attach_help,
    .options = attach_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_attach,
};

const struct cmd_entry cmd_detach_entry = {
    .name = "detach",
    .synopsis = "PID | --tree PID | --unit NAME [--timeout MS]",
    .brief = "stop profiling it; the session is kept",
    .help = detach_help,
    .options = attach_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_detach,
};
