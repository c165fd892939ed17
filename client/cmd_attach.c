/* `ljmpctl attach PID` and `ljmpctl detach PID`: start and stop a running
 * program's profile through ljmpd. */
#include <stdio.h>

#include "conn.h"
#include "ljmpctl.h"

static const char attach_help[] =
    "usage: ljmpctl attach PID [--timeout MS]\n"
    "\n"
    "Starts profiling a running program: ljmpd checks that you may (root,\n"
    "or the process's owner) and that it runs a patched LuaJIT VM with its\n"
    "attach agent, signals it, and waits for its stream.  The VM starts at\n"
    "its next Lua call, so an idle program (or one inside a long compiled\n"
    "loop) starts late; the wait is --timeout (5000 ms; at most 60000).\n"
    "The VM connects to $LJMP_INGEST as it has it in its environment, else\n"
    "to the default ingest socket: ljmpd must listen there.\n"
    "\n"
    "Prints the new session.  Attaching to a process that streams already\n"
    "says so and succeeds.  Exit status 5 with the reason when it cannot:\n"
    "no such process, permission denied, not a patched VM, agent disabled\n"
    "(LJMP_AGENT=0), or no Lua code ran within the timeout.\n";

static const char detach_help[] =
    "usage: ljmpctl detach PID [--timeout MS]\n"
    "\n"
    "Stops profiling PID: ljmpd signals its VM, which ends the stream at its\n"
    "next Lua call with its own totals; ljmpd answers once the session has\n"
    "ended and says whether those totals matched (complete).  The session\n"
    "stays queryable (`ljmpctl report PID`).  Exit status 5 when PID is not\n"
    "attached or did not stop within --timeout (5000 ms).\n";

/* Sends the request and waits as long as ljmpd may (its timeout + 5 s). */
static Ljmp__Response *ask(const char *cmd, Ljmp__Request *req,
                           uint32_t timeout_ms, struct conn *c, int *rc)
{
    int wait = (int)(timeout_ms ? timeout_ms : 5000) + 5000;

    return conn_ask(c, cmd, req, -1, wait, LJMP__RESPONSE__BODY_SESSION, rc);
}

static int cmd_attach(const struct ctl_args *a)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__AttachRequest ar = LJMP__ATTACH_REQUEST__INIT;
    uint32_t pid, timeout_ms = (uint32_t)args_get(a, OPT_TIMEOUT, 0);
    struct conn c;
    int rc;

    if (args_parse_pid("attach", a->operands[0], &pid) != 0)
        return EXIT_USAGE;
    ar.has_pid = ar.has_timeout_ms = 1;
    ar.pid = pid;
    ar.timeout_ms = timeout_ms;
    req.body_case = LJMP__REQUEST__BODY_ATTACH;
    req.attach = &ar;
    Ljmp__Response *resp = ask("attach", &req, timeout_ms, &c, &rc);
    if (resp != NULL) {
        const Ljmp__SessionInfo *s = resp->session;
        printf("pid %u: %s, session %llu (%s)\n", pid,
               resp->note ? resp->note : "attached", (unsigned long long)s->id,
               s->vm_version ? s->vm_version : "");
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

static int cmd_detach(const struct ctl_args *a)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__DetachRequest dr = LJMP__DETACH_REQUEST__INIT;
    uint32_t pid, timeout_ms = (uint32_t)args_get(a, OPT_TIMEOUT, 0);
    struct conn c;
    int rc;

    if (args_parse_pid("detach", a->operands[0], &pid) != 0)
        return EXIT_USAGE;
    dr.has_pid = dr.has_timeout_ms = 1;
    dr.pid = pid;
    dr.timeout_ms = timeout_ms;
    req.body_case = LJMP__REQUEST__BODY_DETACH;
    req.detach = &dr;
    Ljmp__Response *resp = ask("detach", &req, timeout_ms, &c, &rc);
    if (resp != NULL) {
        const Ljmp__SessionInfo *s = resp->session;
        printf("pid %u: detached, session %llu %s", pid,
               (unsigned long long)s->id, ljmp_wire_state_name(s->state));
        if (s->trailer_seen)
            printf(" (%llu events, %llu stream bytes, as the VM counted)",
                   (unsigned long long)s->trailer_events,
                   (unsigned long long)s->trailer_stream_bytes);
        else if (s->reason)
            printf(": %s", s->reason);
        putchar('\n');
        if (s->state == LJMP__SESSION_STATE__TRUNCATED)
            rc = EXIT_TRUNCATED;
        else if (s->state == LJMP__SESSION_STATE__FAILED)
            rc = EXIT_MALFORMED;
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

/* Both take --timeout; 0 (or none) is ljmpd's own wait, 5000 ms. */
static const struct opt_use attach_options[] = {
    {OPT_TIMEOUT, 0, 60000, "ms"},
    OPT_USE_END,
};

const struct cmd_entry cmd_attach_entry = {
    .name = "attach",
    .synopsis = "PID [--timeout MS]",
    .brief = "start profiling a running program",
    .help = attach_help,
    .options = attach_options,
    .min_operands = 1,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_attach,
};

const struct cmd_entry cmd_detach_entry = {
    .name = "detach",
    .synopsis = "PID [--timeout MS]",
    .brief = "stop profiling it; the session is kept",
    .help = detach_help,
    .options = attach_options,
    .min_operands = 1,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_detach,
};
