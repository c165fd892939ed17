/* ljmpctl's command lines: every option any command knows, and the parser
 * that gives each command only the options its table lists. */
#ifndef LJMPCTL_ARGS_H
#define LJMPCTL_ARGS_H

#include <stdint.h>

/* Every option of every command.  Commands share an option's name and
 * meaning; the range of its value is each command's own (struct
 * opt_use). */
enum ctl_opt {
    OPT_SESSION,        /* --session ID */
    OPT_TOP,            /* -n, --top N */
    OPT_SORT,           /* --sort KEY: a sort key's index in sortkey_table */
    OPT_INTERVAL,       /* --interval MS */
    OPT_COUNT,          /* --count N */
    OPT_ONCE,           /* --once */
    OPT_JSON,           /* --json */
    OPT_LEAK_ONLY,      /* --leak-only */
    OPT_HUMAN_READABLE, /* --human-readable */
    OPT_MAX_STRING,     /* --max-string N */
    OPT_THREADS,        /* --threads N */
    OPT_OUTPUT,         /* -o, --output FILE */
    OPT_WAIT,           /* --wait SECONDS */
    OPT_FORCE,          /* --force */
    OPT_NO_WAIT,        /* --no-wait */
    OPT_TIMEOUT,        /* --timeout MS */
    OPT_TREE,           /* --tree */
    OPT_UNIT,           /* --unit NAME */
    OPT_BY_PROCESS,     /* --by-process */
    OPT_ALL,            /* --all */
    OPT_CENSUS_WAIT,    /* --census-wait SECONDS */
    OPT_NO_CENSUS,      /* --no-census */
    OPT_BY_TRACE,       /* --by-trace */
    OPT_FORMAT,         /* --format NAME */
    OPT_SAMPLE,         /* --sample NAME */
    OPT_PID,            /* --pid PID */
    OPT_NAME,           /* --name NAME */
    OPT_NO_FOLLOW,      /* --no-follow */
    OPT_INGEST,         /* --ingest PATH */
    OPT_MAX_STALL,      /* --max-stall MS */
    OPT_WINDOW,         /* --window SECONDS */
    OPT_SITES,          /* --sites N */
    OPT_WIDTH,          /* --width PIXELS */
    OPT_HEIGHT,         /* --height PIXELS */
    OPT_TITLE,          /* --title TEXT */
    OPT_PEAK,           /* --peak */
    OPT_LIST,           /* --list */
    OPT_DELETE,         /* --delete NAME */
    OPT_DIFF_SORT,      /* --sort KEY of a diff (diff's own keys) */
    OPT_STACKS,         /* --stacks[=DEPTH] (0 when given bare) */
    OPT_STACK_SAMPLE,   /* --stack-sample BYTES */
    OPT_STRIP_STACKS,   /* --strip-stacks */
    OPT_BY,             /* --by WHAT (flame: live or alloc) */
    OPT_R3,             /* --r3 */
    NOPTS
};

/* An option a command takes.  A number must lie in [min, max]; unit, if
 * any, names what it counts in the message about a wrong one. */
struct opt_use {
    enum ctl_opt opt;
    unsigned long long min, max;
    const char *unit;
};

/* Ends a command's table of options. */
#define OPT_USE_END                                                            \
    {                                                                          \
        NOPTS, 0, 0, NULL                                                      \
    }

/* A command line as parsed for one command. */
struct ctl_args {
    uint64_t given;                /* bit 1ull << opt for each option given */
    unsigned long long num[NOPTS]; /* a number's value, a sort key's index */
    const char *text[NOPTS];       /* an option's text as given */
    int noperands;
    char **operands; /* what is left once options are taken out */
};

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

/* Parses the command line of cmd (argv[0] is its name): every option it
 * takes, each at most its table's range, and as many operands as it
 * wants.  0 when it may run; 1 after printing its help for -h; -1 after
 * one line on stderr saying what is wrong. */
int args_parse(const struct cmd_entry *cmd, int argc, char **argv,
               struct ctl_args *out);

/* Whether opt was given. */
int args_has(const struct ctl_args *a, enum ctl_opt opt);

/* The number (or sort key index) given for opt, else absent. */
unsigned long long args_get(const struct ctl_args *a, enum ctl_opt opt,
                            unsigned long long absent);

/* A number up to max, from text; -1 after saying what is wrong with it
 * (what names it: an option or an operand). */
int args_parse_number(const char *cmd, const char *what, const char *text,
                      unsigned long long max, unsigned long long *out);

/* A process id (1 to INT32_MAX); -1 after saying text is not one. */
int args_parse_pid(const char *cmd, const char *text, uint32_t *pid);

#endif
