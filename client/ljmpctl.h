/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

#include <stdint.h>

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

#define NSORT_KEYS 6
extern const struct sort_key sort_keys[NSORT_KEYS];

/* Index of the sort key called name, or -1 after a message on stderr. */
int sort_key_named(const char *cmd, const char *name);

struct cmd_entry {
    const char *name;
    const char *args;  /* synopsis after the name */
    const char *brief; /* one line for the command list */
    const char *help;  /* the whole help text of the command */
    int (*exec)(int argc, char **argv);
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

/* A number argument up to max; -1 after saying what is wrong with it. */
int parse_number(const char *cmd, const char *what, const char *arg,
                 unsigned long long max, unsigned long long *out);

/* A process id (1 to INT32_MAX); -1 after saying it is not one. */
int parse_pid(const char *cmd, const char *arg, uint32_t *pid);

/* `report PID`: the report of a live (or kept) session, from ljmpd. */
int live_report(const char *pid, int leak_only, int human_readable, int json);

#endif
