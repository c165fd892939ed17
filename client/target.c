/* The sessions a view command is about, from its command line, and as the
 * selector of its request. */
#include "target.h"

#include <stdio.h>
#include <string.h>

#include "status.h"

int view_target_of(const char *cmd, const struct ctl_args *a,
                   struct view_target *t)
{
    memset(t, 0, sizeof(*t));
    t->tree = args_has(a, OPT_TREE);
    t->unit = args_has(a, OPT_UNIT) ? a->text[OPT_UNIT] : NULL;
    t->session = args_get(a, OPT_SESSION, 0);
    t->by_process = args_has(a, OPT_BY_PROCESS);
    t->by_trace = args_has(a, OPT_BY_TRACE);
    if (t->tree && t->unit != NULL) {
        fprintf(stderr, "ljmpctl %s: --tree or --unit, not both\n", cmd);
        return EXIT_USAGE;
    }
    if (t->session != 0 && (t->tree || t->unit != NULL)) {
        fprintf(stderr,
                "ljmpctl %s: --session names one session; not with "
                "--tree or --unit\n",
                cmd);
        return EXIT_USAGE;
    }
    if (t->by_process && !t->tree && t->unit == NULL) {
        fprintf(stderr,
                "ljmpctl %s: --by-process breaks down the merged view of "
                "--tree or --unit\n",
                cmd);
        return EXIT_USAGE;
    }
    if (t->unit != NULL && a->noperands > 0) {
        fprintf(stderr, "ljmpctl %s: --unit takes no PID\n", cmd);
        return EXIT_USAGE;
    }
    if (t->tree && a->noperands == 0) {
        fprintf(stderr, "ljmpctl %s: --tree needs the PID of its root\n", cmd);
        return EXIT_USAGE;
    }
    if (a->noperands > 0 && args_parse_pid(cmd, a->operands[0], &t->pid) != 0)
        return EXIT_USAGE;
    return 0;
}

int view_target_merged(const struct view_target *t)
{
    return t->tree || t->unit != NULL;
}

void view_target_select(const struct view_target *t, Ljmp__Selector *sel)
{
    sel->has_pid = t->pid != 0;
    sel->pid = t->pid;
    sel->has_session_id = t->session != 0;
    sel->session_id = t->session;
    sel->has_tree = t->tree;
    sel->tree = t->tree;
    sel->unit = (char *)t->unit;
}

void view_target_fill(const struct view_target *t, Ljmp__SnapshotOptions *o,
                      Ljmp__Selector *sel)
{
    view_target_select(t, sel);
    o->sessions = sel;
    o->has_merge = o->merge = view_target_merged(t);
    o->has_by_process = o->by_process = t->by_process;
    o->has_by_trace = o->by_trace = t->by_trace;
}

void view_target_name(const struct view_target *t, char *out, size_t len)
{
    if (t->unit != NULL)
        snprintf(out, len, "unit %s", t->unit);
    else if (t->tree)
        snprintf(out, len, "the tree of pid %u", t->pid);
    else
        snprintf(out, len, "every session");
}
