/* `ljmpctl attach` and `ljmpctl detach`: start and stop a running
 * program's profile through ljmpd, by pid, or a whole process tree or
 * systemd unit that ljmpd keeps following. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "census.h"
#include "conn.h"
#include "ljmpctl.h"

static const char attach_help[] =
    "usage: ljmpctl attach PID [--timeout MS] [--census-wait=SECONDS]\n"
    "                          [--no-census] [--stacks[=DEPTH]]\n"
    "                          [--stack-sample=BYTES]\n"
    "       ljmpctl attach --tree PID [--no-census] [--stacks[=DEPTH]] ...\n"
    "       ljmpctl attach --unit NAME [--no-census] [--stacks[=DEPTH]] ...\n"
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
    "(LJMP_AGENT=0), or a VM that connects to another ingest socket.\n"
    "\n"
    "Census.  A VM attached to announces, as its stream begins, every block\n"
    "its heap holds already (its census), so that reports and live views\n"
    "see the whole heap, blocks from before the attach named by their type\n"
    "(\"[before profiling] table\") or by their function's line.  The VM\n"
    "takes it while it runs, as its allocations drive its collector: an\n"
    "idle one takes it when it next works.  On a terminal, once the stream\n"
    "has started, attach waits for the census and shows its progress (a\n"
    "line that refreshes), then how long it took and what it found;\n"
    "elsewhere it waits only when asked (a line a second).  Options:\n"
    "  --census-wait=SECONDS  wait at most this long (default 30 on a\n"
    "                         terminal, else 0: do not wait); then attach\n"
    "                         prints how far it came and that it goes on,\n"
    "                         and succeeds\n"
    "  --no-census            the VM streams without a census: only blocks\n"
    "                         allocated from now on are seen\n"
    "With --tree or --unit, attach does not wait; `ljmpctl list` shows each\n"
    "session's census.\n"
    "\n"
    "Call stacks.  With --stacks, each allocation also says which Lua call\n"
    "chain made it, up to DEPTH frames (16 by default, at most 64), so that\n"
    "`ljmpctl top`, `report --stacks` and `flame` can show who calls an\n"
    "allocating line.  A stack on every allocation costs the program up to\n"
    "about twice its allocation time; --stack-sample=BYTES takes one for\n"
    "about every BYTES allocated (524288 costs a few percent), large\n"
    "allocations always, and views then show estimates.  Counts per line\n"
    "stay exact either way.\n";

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

#define CENSUS_WAIT_S 30
/* --stacks without a depth */
#define ATTACH_STACKS_DEPTH 16
#define CENSUS_POLL_MS      200
/* A VM that takes a census begins it as its stream starts: a stream that
 * has shown none by then has none (an older VM, or --no-census). */
#define CENSUS_NONE_MS 1000

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Session id as ljmpd lists it now: the list's answer (freed by the
 * caller) and the session in *info (NULL once it is not listed); NULL
 * when ljmpd cannot be asked (*rc says why). */
static Ljmp__Response *listed(uint64_t id, const Ljmp__SessionInfo **info,
                              int *rc)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest lr = LJMP__LIST_REQUEST__INIT;
    struct conn c;

    lr.has_all = lr.all = 1;
    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &lr;
    Ljmp__Response *resp =
        conn_ask(&c, "attach", &req, -1, 5000, LJMP__RESPONSE__BODY_LIST, rc);
    conn_close(&c);
    *info = NULL;
    for (size_t i = 0; resp != NULL && i < resp->list->n_sessions; i++) {
        const Ljmp__SessionInfo *s = resp->list->sessions[i]->info;
        if (s != NULL && s->id == id)
            *info = s;
    }
    return resp;
}

/* A running census's progress: on a terminal one line redrawn, else a
 * line a second. */
struct progress {
    int tty;
    long shown_at; /* the last line's time, when not on a terminal */
};

static void show_progress(struct progress *p, const Ljmp__Census *c, long now)
{
    if (!p->tty && p->shown_at != 0 && now - p->shown_at < 1000)
        return;
    p->shown_at = now;
    fputs(p->tty ? "\r\033[Kcensus: " : "census: ", stdout);
    census_put_state(stdout, c);
    fputs(p->tty ? "" : "\n", stdout);
    fflush(stdout);
}

/* Ends the refreshing line before a line of its own. */
static void end_progress(const struct progress *p)
{
    if (p->tty)
        fputs("\r\033[K", stdout);
}

/*
 * One look at the census of the session: 1 when there is nothing more to
 * wait for (said so), 0 to look again.
 */
static int census_step(const Ljmp__SessionInfo *s, struct progress *p,
                       long waited, long limit)
{
    const Ljmp__Census *c = s != NULL ? s->census : NULL;

    if (c == NULL) {
        if (s != NULL && s->state == LJMP__SESSION_STATE__STREAMING &&
            waited < CENSUS_NONE_MS)
            return 0;
        end_progress(p);
        printf("no census in this stream (a VM without one, or attached "
               "--no-census)\n");
        return 1;
    }
    if (c->state == LJMP__CENSUS_STATE__CENSUS_RUNNING && waited < limit) {
        show_progress(p, c, waited);
        return 0;
    }
    end_progress(p);
    if (c->state == LJMP__CENSUS_STATE__CENSUS_COMPLETE) {
        census_put_done(stdout, c);
        return 1;
    }
    fputs("census ", stdout);
    census_put_state(stdout, c);
    if (c->state == LJMP__CENSUS_STATE__CENSUS_RUNNING)
        printf(" after %ld s; it goes on (ljmpctl list shows it)",
               limit / 1000);
    putchar('\n');
    return 1;
}

/* Waits up to wait_s seconds for session id's census, showing its
 * progress: 0, or EXIT_NO_DAEMON when ljmpd could not be asked. */
static int wait_census(uint64_t id, unsigned long long wait_s)
{
    struct progress p = {isatty(STDOUT_FILENO), 0};
    long start = now_ms(), limit = (long)wait_s * 1000;
    int rc = 0;

    for (;;) {
        const Ljmp__SessionInfo *s;
        Ljmp__Response *resp = listed(id, &s, &rc);
        if (resp == NULL) {
            end_progress(&p);
            return rc;
        }
        int done = census_step(s, &p, now_ms() - start, limit);
        ljmp__response__free_unpacked(resp, NULL);
        fflush(stdout);
        if (done)
            return 0;
        sleep_ms(CENSUS_POLL_MS);
    }
}

static int cmd_attach(const struct ctl_args *a)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__AttachRequest ar = LJMP__ATTACH_REQUEST__INIT;
    uint32_t pid, timeout_ms = (uint32_t)args_get(a, OPT_TIMEOUT, 0);
    /* A script goes on once the stream runs (a census of an idle VM may
     * take until its next requests); one that wants the census waits
     * with the option.  A terminal shows it. */
    unsigned long long census_wait =
        args_get(a, OPT_CENSUS_WAIT, isatty(STDOUT_FILENO) ? CENSUS_WAIT_S : 0);
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
    ar.has_no_census = ar.no_census = args_has(a, OPT_NO_CENSUS);
    if (args_has(a, OPT_STACKS)) {
        ar.has_stacks = 1;
        ar.stacks = (uint32_t)args_get(a, OPT_STACKS, 0);
        if (ar.stacks == 0)
            ar.stacks = ATTACH_STACKS_DEPTH;
    }
    if (args_has(a, OPT_STACK_SAMPLE)) {
        if (!ar.has_stacks) {
            fprintf(stderr, "ljmpctl attach: --stack-sample needs --stacks\n");
            return EXIT_USAGE;
        }
        ar.has_stack_sample = 1;
        ar.stack_sample = args_get(a, OPT_STACK_SAMPLE, 0);
    }
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
            fflush(stdout);
            if (census_wait != 0 && !ar.no_census)
                rc = wait_census(s->id, census_wait);
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

/* Both take --timeout; 0 (or none) is ljmpd's own wait.  Only attach
 * has a census to wait for (at most a day) or to go without. */
static const struct opt_use attach_options[] = {
    {OPT_TIMEOUT, 0, 60000, "ms"},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    {OPT_CENSUS_WAIT, 0, 86400, "s"},
    {OPT_NO_CENSUS, 0, 0, NULL},
    {OPT_STACKS, 1, 64, "frames"},
    {OPT_STACK_SAMPLE, 1, (1ull << 48) - 1, "bytes"},
    OPT_USE_END,
};

static const struct opt_use detach_options[] = {
    {OPT_TIMEOUT, 0, 60000, "ms"},
    {OPT_TREE, 0, 0, NULL},
    {OPT_UNIT, 0, 0, NULL},
    OPT_USE_END,
};

const struct cmd_entry cmd_attach_entry = {
    .name = "attach",
    .synopsis = "PID | --tree PID | --unit NAME [--timeout MS] [--no-census]",
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
    .options = detach_options,
    .min_operands = 0,
    .max_operands = 1,
    .operands = "one PID",
    .exec = cmd_detach,
};
