/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

/* Exit statuses, documented in `ljmpctl --help`. */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 1,     /* bad arguments, unreadable input, I/O error */
    EXIT_TRUNCATED = 2, /* the stream ended early: report of what was read */
    EXIT_MALFORMED = 3, /* the stream is malformed: nothing reported */
};

struct cmd_entry {
    const char *name;
    const char *args;  /* synopsis after the name */
    const char *brief; /* one line for the command list */
    const char *help;  /* the whole help text of the command */
    int (*exec)(int argc, char **argv);
};

extern const struct cmd_entry cmd_report_entry;

#endif
