/* `ljmpctl mark [PID] [NAME]`: stores a session's per-site counters in
 * ljmpd under a name, for `ljmpctl diff`; lists and deletes marks. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "ljmpctl.h"
#include "pbjson.h"

#define ANSWER_MS 30000

static const char mark_help[] =
    "usage: ljmpctl mark [PID] [NAME] [--session ID] [--json]\n"
    "       ljmpctl mark [PID] --list [--session ID] [--json]\n"
    "       ljmpctl mark [PID] --delete NAME [--session ID]\n"
    "\n"
    "Stores, in ljmpd, the per-site counters of PID's newest session (or\n"
    "of --session ID; without either, of the newest session) under NAME,\n"
    "for `ljmpctl diff`: for each location with a counter above 0, its\n"
    "live bytes and blocks, its allocations (allocs and reallocs) and\n"
    "their bytes, and its free events.  Without NAME, ljmpd names the mark\n"
    "m1, m2... in turn; the answer says which.  A NAME is 1 to 32 letters,\n"
    "digits, '_' or '-', beginning with a letter (so a number is a PID),\n"
    "and not start, peak or now.  A NAME in use is replaced.\n"
    "\n"
    "A session keeps at most 16 marks: a 17th drops the oldest, and says\n"
    "so.  Marks are packed (some 8 bytes a location) and count in the\n"
    "session's memory (`ljmpctl list`), at most a quarter of its budget:\n"
    "a mark that would take more is refused, and nothing is dropped; delete\n"
    "one.  Marks are kept as long as the session is, also after it ended.\n"
    "Taking one reads every location of the session once, as a snapshot\n"
    "does (some 10 ms for a million locations).\n"
    "\n"
    "Options:\n"
    "      --list         the session's marks, oldest first; none taken\n"
    "      --delete NAME  deletes the mark NAME\n"
    "      --session ID   one session, by the id `ljmpctl list` shows\n"
    "      --json         the answer as one JSON object\n"
    "\n"
    "Exit status: 0 stored (listed, deleted), 1 usage, 4 ljmpd not\n"
    "reachable, 5 no such session or mark, or refused (its budget).\n";

/* A wall time (Unix ms) as the local time of day. */
static void put_time(char *out, size_t len, uint64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (localtime_r(&t, &tm) == NULL ||
        strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(out, len, "?");
}

static void print_mark_list(const Ljmp__MarkResult *m)
{
    printf("%-32s %-19s %10s %14s %12s %10s\n", "MARK", "TAKEN", "SITES",
           "LIVE BYTES", "LIVE BLOCKS", "HOLDS");
    for (size_t i = 0; i < m->n_marks; i++) {
        const Ljmp__Mark *x = m->marks[i];
        char when[32];
        put_time(when, sizeof(when), x->time_ms);
        printf("%-32s %-19s %10u %14llu %12llu %10llu\n", x->name, when,
               x->sites, (unsigned long long)x->live_bytes,
               (unsigned long long)x->live_blocks,
               (unsigned long long)x->bytes);
    }
}

static void print_marks(const Ljmp__MarkResult *m, int listing)
{
    const Ljmp__SessionInfo *s = m->session;
    unsigned long long id = s != NULL ? (unsigned long long)s->id : 0;
    unsigned pid = s != NULL ? s->pid : 0;

    if (m->stored != NULL) {
        printf("stored mark %s of session %llu, pid %u: %u sites, %llu "
               "bytes%s\n",
               m->stored->name, id, pid, m->stored->sites,
               (unsigned long long)m->stored->bytes,
               m->replaced ? " (in place of the earlier one)" : "");
        if (m->dropped != NULL)
            printf("dropped the oldest mark, %s: a session keeps 16\n",
                   m->dropped);
    } else if (m->dropped != NULL) {
        printf("deleted mark %s of session %llu, pid %u\n", m->dropped, id,
               pid);
    }
    if (listing || m->stored == NULL)
        printf("session %llu, pid %u: %zu mark%s, %llu bytes\n", id, pid,
               m->n_marks, m->n_marks == 1 ? "" : "s",
               (unsigned long long)m->marks_bytes);
    if (listing && m->n_marks > 0)
        print_mark_list(m);
}

/* The operands: [PID] [NAME], a number being a PID.  0, or EXIT_USAGE. */
static int mark_operands(const struct ctl_args *a, uint32_t *pid,
                         const char **name)
{
    int i = 0;

    *pid = 0;
    *name = NULL;
    if (a->noperands > 0 && is_pid_operand(a->operands[0])) {
        if (args_parse_pid("mark", a->operands[i++], pid) != 0)
            return EXIT_USAGE;
    }
    if (i < a->noperands)
        *name = a->operands[i++];
    if (i < a->noperands) {
        fprintf(stderr,
                "ljmpctl mark: unexpected '%s': expected [PID] [NAME] (see "
                "ljmpctl help mark)\n",
                a->operands[i]);
        return EXIT_USAGE;
    }
    if (*name != NULL && (args_has(a, OPT_LIST) || args_has(a, OPT_DELETE))) {
        fprintf(stderr, "ljmpctl mark: --list and --delete take no NAME "
                        "operand\n");
        return EXIT_USAGE;
    }
    if (args_has(a, OPT_LIST) && args_has(a, OPT_DELETE)) {
        fprintf(stderr, "ljmpctl mark: --list or --delete, not both\n");
        return EXIT_USAGE;
    }
    return 0;
}

static int cmd_mark(const struct ctl_args *a)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__MarkRequest mr = LJMP__MARK_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    const char *name;
    uint32_t pid;
    int rc;

    if (mark_operands(a, &pid, &name) != 0)
        return EXIT_USAGE;
    sel.has_pid = pid != 0;
    sel.pid = pid;
    sel.has_session_id = args_has(a, OPT_SESSION);
    sel.session_id = args_get(a, OPT_SESSION, 0);
    mr.session = &sel;
    mr.name = (char *)(args_has(a, OPT_DELETE) ? a->text[OPT_DELETE] : name);
    mr.has_remove = mr.remove = args_has(a, OPT_DELETE);
    mr.has_list = mr.list = args_has(a, OPT_LIST);
    req.body_case = LJMP__REQUEST__BODY_MARK;
    req.mark = &mr;
    Ljmp__Response *resp = conn_ask(&c, "mark", &req, -1, ANSWER_MS,
                                    LJMP__RESPONSE__BODY_MARK, &rc);
    if (resp != NULL) {
        if (args_has(a, OPT_JSON)) {
            pbjson_write(stdout, &resp->mark->base);
            putchar('\n');
        } else {
            pb_mask_controls(&resp->base);
            print_marks(resp->mark, args_has(a, OPT_LIST));
        }
        ljmp__response__free_unpacked(resp, NULL);
    }
    conn_close(&c);
    return rc;
}

/* clang-format off */
static const struct opt_use mark_options[] = {
    {OPT_LIST, 0, 0, NULL},
    {OPT_DELETE, 0, 0, NULL},
    {OPT_SESSION, 0, UINT64_MAX, NULL},
    {OPT_JSON, 0, 0, NULL},
    OPT_USE_END,
};
/* clang-format on */

const struct cmd_entry cmd_mark_entry = {
    .name = "mark",
    .synopsis = "[PID] [NAME] [--list]",
    .brief = "store a session's site counters for diff",
    .help = mark_help,
    .options = mark_options,
    .max_operands = 2,
    .operands = "[PID] [NAME]",
    .exec = cmd_mark,
};
