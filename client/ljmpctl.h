/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

#include <stdint.h>

#include "args.h"
#include "ljmp_wire.h"

/* Exit statuses, documented in `ljmpctl --help`. */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 1,     /* bad arguments, unreadable input, I/O error */
    EXIT_TRUNCATED = 2, /* the stream ended early: report of what was read */
    EXIT_MALFORMED = 3, /* the stream is malformed: nothing reported */
    EXIT_NO_DAEMON = 4, /* ljmpd is not running, or went away */
    EXIT_REFUSED = 5,   /* ljmpd refused: no such session, permission */
};

/* The sort keys of live views: option name, title, top's key, wire value. */
struct sort_key {
    const char *name, *title;
    int key;
    Ljmp__SortKey value;
};

#define LIVE_NSORT_KEYS 6
extern const struct sort_key live_sort_keys[LIVE_NSORT_KEYS];

/* Index of the sort key called name, or -1 after a message on stderr. */
int live_sort_key_named(const char *cmd, const char *name);

/* A command: its name, its help, the options it takes and how many
 * operands (args_parse holds its command line to them), and what runs it
 * once its command line is parsed. */
struct cmd_entry {
    const char *name;
    const char *synopsis;          /* after the name, in the command list */
    const char *brief;             /* one line for the command list */
    const char *help;              /* the whole help text of the command */
    const struct opt_use *options; /* OPT_USE_END last; -h, --help too */
    int min_operands, max_operands;
    const char *operands; /* what they are, for a message: "one PID" */
    int (*exec)(const struct ctl_args *a);
};

extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_snapshot_entry;
extern const struct cmd_entry cmd_watch_entry;
extern const struct cmd_entry cmd_subscribe_entry;
extern const struct cmd_entry cmd_record_entry;
extern const struct cmd_entry cmd_attach_entry;
extern const struct cmd_entry cmd_detach_entry;
extern const struct cmd_entry cmd_top_entry;

/* `report PID`: the report of a live (or kept) session, from ljmpd. */
int live_report_pid(const char *pid, int leak_only, int human_readable,
                    int json);

#endif
