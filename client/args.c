/* ljmpctl's command lines: each command takes the options its table
 * lists, checked against that table's ranges, and no other. */
#define _GNU_SOURCE
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sortkey.h"
#include "status.h"

/* What an option's value is. */
enum opt_value {
    VALUE_NONE,
    VALUE_NUMBER,
    VALUE_SORT_KEY,
    VALUE_TEXT,
    /* --name or --name=N: a number that may be left out (then 0) */
    VALUE_OPTIONAL_NUMBER,
};

struct opt_def {
    const char *name;
    char letter; /* its one-letter form, or 0 */
    enum opt_value value;
};

/* Every option's spelling, whichever commands take it. */
static const struct opt_def opt_defs[NOPTS] = {
    [OPT_SESSION] = {"session", 0, VALUE_NUMBER},
    [OPT_TOP] = {"top", 'n', VALUE_NUMBER},
    [OPT_SORT] = {"sort", 0, VALUE_SORT_KEY},
    [OPT_INTERVAL] = {"interval", 0, VALUE_NUMBER},
    [OPT_COUNT] = {"count", 0, VALUE_NUMBER},
    [OPT_ONCE] = {"once", 0, VALUE_NONE},
    [OPT_JSON] = {"json", 0, VALUE_NONE},
    [OPT_LEAK_ONLY] = {"leak-only", 0, VALUE_NONE},
    [OPT_HUMAN_READABLE] = {"human-readable", 0, VALUE_NONE},
    [OPT_MAX_STRING] = {"max-string", 0, VALUE_NUMBER},
    [OPT_THREADS] = {"threads", 0, VALUE_NUMBER},
    [OPT_OUTPUT] = {"output", 'o', VALUE_TEXT},
    [OPT_WAIT] = {"wait", 0, VALUE_NUMBER},
    [OPT_FORCE] = {"force", 0, VALUE_NONE},
    [OPT_NO_WAIT] = {"no-wait", 0, VALUE_NONE},
    [OPT_TIMEOUT] = {"timeout", 0, VALUE_NUMBER},
    [OPT_TREE] = {"tree", 0, VALUE_NONE},
    [OPT_UNIT] = {"unit", 0, VALUE_TEXT},
    [OPT_BY_PROCESS] = {"by-process", 0, VALUE_NONE},
    [OPT_ALL] = {"all", 0, VALUE_NONE},
    [OPT_CENSUS_WAIT] = {"census-wait", 0, VALUE_NUMBER},
    [OPT_NO_CENSUS] = {"no-census", 0, VALUE_NONE},
    [OPT_BY_TRACE] = {"by-trace", 0, VALUE_NONE},
    [OPT_FORMAT] = {"format", 0, VALUE_TEXT},
    [OPT_SAMPLE] = {"sample", 0, VALUE_TEXT},
    [OPT_PID] = {"pid", 0, VALUE_NUMBER},
    [OPT_NAME] = {"name", 0, VALUE_TEXT},
    [OPT_NO_FOLLOW] = {"no-follow", 0, VALUE_NONE},
    [OPT_INGEST] = {"ingest", 0, VALUE_TEXT},
    [OPT_MAX_STALL] = {"max-stall", 0, VALUE_NUMBER},
    [OPT_WINDOW] = {"window", 0, VALUE_NUMBER},
    [OPT_SITES] = {"sites", 0, VALUE_NUMBER},
    [OPT_WIDTH] = {"width", 0, VALUE_NUMBER},
    [OPT_HEIGHT] = {"height", 0, VALUE_NUMBER},
    [OPT_TITLE] = {"title", 0, VALUE_TEXT},
    [OPT_PEAK] = {"peak", 0, VALUE_NONE},
    [OPT_LIST] = {"list", 0, VALUE_NONE},
    [OPT_DELETE] = {"delete", 0, VALUE_TEXT},
    /* Spelled as --sort, which no command takes beside it: a diff's keys
     * are not the live views'. */
    [OPT_DIFF_SORT] = {"sort", 0, VALUE_TEXT},
    [OPT_STACKS] = {"stacks", 0, VALUE_OPTIONAL_NUMBER},
    [OPT_STACK_SAMPLE] = {"stack-sample", 0, VALUE_NUMBER},
    [OPT_STRIP_STACKS] = {"strip-stacks", 0, VALUE_NONE},
    [OPT_BY] = {"by", 0, VALUE_TEXT},
    [OPT_R3] = {"r3", 0, VALUE_NONE},
};

/* Each option is a bit of ctl_args.given. */
_Static_assert(NOPTS <= 64, "ctl_args.given holds a bit per option");

/* getopt_long's value for an option: above every letter, so that a
 * letter getopt complains about is told apart from one of ours. */
#define OPT_VAL(opt) (256 + (int)(opt))
#define VAL_HELP     OPT_VAL(NOPTS)

/* getopt_long's tables for one command: its options and -h, --help. */
struct getopt_tables {
    struct option longopts[NOPTS + 2];
    char shortopts[2 * NOPTS + 4];
};

static void build_tables(const struct opt_use *uses, struct getopt_tables *t)
{
    size_t n = 0, s = 0;

    /* ':' first: a missing value is told apart from an unknown option. */
    t->shortopts[s++] = ':';
    for (const struct opt_use *u = uses; u->opt != NOPTS; u++) {
        const struct opt_def *d = &opt_defs[u->opt];
        int has_arg = d->value == VALUE_NONE              ? no_argument
                      : d->value == VALUE_OPTIONAL_NUMBER ? optional_argument
                                                          : required_argument;
        t->longopts[n++] =
            (struct option){d->name, has_arg, NULL, OPT_VAL(u->opt)};
        if (d->letter != 0) {
            t->shortopts[s++] = d->letter;
            t->shortopts[s++] = ':';
        }
    }
    t->longopts[n++] = (struct option){"help", no_argument, NULL, VAL_HELP};
    t->longopts[n] = (struct option){NULL, 0, NULL, 0};
    t->shortopts[s++] = 'h';
    t->shortopts[s] = '\0';
}

/* cmd's entry for opt, or NULL if cmd does not take it. */
static const struct opt_use *use_of(const struct cmd_entry *cmd, int opt)
{
    for (const struct opt_use *u = cmd->options; u->opt != NOPTS; u++)
        if ((int)u->opt == opt)
            return u;
    return NULL;
}

/* The option whose one-letter form is letter, or -1. */
static int opt_of_letter(int letter)
{
    for (int i = 0; i < NOPTS; i++)
        if (opt_defs[i].letter == letter)
            return i;
    return -1;
}

/* "--name" or "-n" as the user wrote it, for a message. */
static void spelled(char *out, size_t len, const char *arg, int letter)
{
    if (letter > 0 && letter < 256) {
        snprintf(out, len, "-%c", letter);
        return;
    }
    snprintf(out, len, "%.*s", (int)strcspn(arg, "="), arg);
}

/* How many of cmd's long options (--help too) begin with what was typed:
 * more than one, and getopt_long found it ambiguous. */
static int long_matches(const struct cmd_entry *cmd, const char *typed)
{
    size_t len = strcspn(typed, "=");
    int n = strncmp("help", typed, len) == 0;

    for (const struct opt_use *u = cmd->options; u->opt != NOPTS; u++)
        n += strncmp(opt_defs[u->opt].name, typed, len) == 0;
    return n;
}

/* One line about an option getopt_long refused (c is what it returned):
 * which option, and why this command does not take it so. */
static void say_refused(const struct cmd_entry *cmd, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    char name[64], why[64];

    if (optopt >= 256) /* one of ours, with or without a value wrongly */
        snprintf(name, sizeof(name), "--%s",
                 optopt == VAL_HELP ? "help" : opt_defs[optopt - 256].name);
    else
        spelled(name, sizeof(name), arg, optopt);
    if (c == ':')
        snprintf(why, sizeof(why), "needs a value");
    else if (optopt >= 256)
        snprintf(why, sizeof(why), "takes no value");
    else if (optopt == 0 && strncmp(arg, "--", 2) == 0 &&
             long_matches(cmd, arg + 2) > 1)
        snprintf(why, sizeof(why), "is ambiguous");
    else
        snprintf(why, sizeof(why), "is not an option of %s", cmd->name);
    fprintf(stderr, "ljmpctl %s: option %s %s (see ljmpctl help %s)\n",
            cmd->name, name, why, cmd->name);
}

int args_parse_number(const char *cmd, const char *what, const char *text,
                      unsigned long long max, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || *out > max) {
        fprintf(stderr, "ljmpctl %s: %s wants a number up to %llu, not '%s'\n",
                cmd, what, max, text);
        return -1;
    }
    return 0;
}

int args_parse_pid(const char *cmd, const char *text, uint32_t *pid)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || end == text || v == 0 || v > INT32_MAX) {
        fprintf(stderr, "ljmpctl %s: '%s' is not a process id\n", cmd, text);
        return -1;
    }
    *pid = (uint32_t)v;
    return 0;
}

/* An option's number, in the range the command's table gives it. */
static int parse_in_range(const char *cmd, const struct opt_use *u,
                          const char *text, unsigned long long *out)
{
    char *end, wants[96];

    errno = 0;
    *out = strtoull(text, &end, 10);
    if (errno == 0 && end != text && *end == '\0' && *out >= u->min &&
        *out <= u->max)
        return 0;
    if (u->max == u->min + 1)
        snprintf(wants, sizeof(wants), "%llu or %llu", u->min, u->max);
    else if (u->min == 0)
        snprintf(wants, sizeof(wants), "a number%s%s up to %llu",
                 u->unit ? " of " : "", u->unit ? u->unit : "", u->max);
    else
        snprintf(wants, sizeof(wants), "a number%s%s from %llu to %llu",
                 u->unit ? " of " : "", u->unit ? u->unit : "", u->min, u->max);
    fprintf(stderr, "ljmpctl %s: --%s wants %s, not '%s'\n", cmd,
            opt_defs[u->opt].name, wants, text);
    return -1;
}

/* Takes the value of option u, given as text; -1 after a message. */
static int take_value(const struct cmd_entry *cmd, const struct opt_use *u,
                      const char *text, struct ctl_args *out)
{
    enum ctl_opt opt = u->opt;
    int key;

    out->given |= 1ull << opt;
    out->text[opt] = text;
    switch (opt_defs[opt].value) {
    case VALUE_NONE:
        out->num[opt] = 1;
        return 0;
    case VALUE_NUMBER:
        return parse_in_range(cmd->name, u, text, &out->num[opt]);
    case VALUE_OPTIONAL_NUMBER:
        out->num[opt] = 0;
        return text == NULL
                   ? 0
                   : parse_in_range(cmd->name, u, text, &out->num[opt]);
    case VALUE_SORT_KEY:
        if ((key = sortkey_named(cmd->name, text)) < 0)
            return -1;
        out->num[opt] = (unsigned long long)key;
        return 0;
    case VALUE_TEXT:
        return 0;
    }
    return -1;
}

/* The operands left once options are taken: as many as cmd wants? */
static int check_operands(const struct cmd_entry *cmd, struct ctl_args *out)
{
    if (out->noperands > cmd->max_operands) {
        fprintf(stderr,
                "ljmpctl %s: unexpected '%s': expected %s (see "
                "ljmpctl help %s)\n",
                cmd->name, out->operands[cmd->max_operands], cmd->operands,
                cmd->name);
        return -1;
    }
    if (out->noperands < cmd->min_operands) {
        fprintf(stderr, "ljmpctl %s: expected %s (see ljmpctl help %s)\n",
                cmd->name, cmd->operands, cmd->name);
        return -1;
    }
    return 0;
}

int args_parse(const struct cmd_entry *cmd, int argc, char **argv,
               struct ctl_args *out)
{
    struct getopt_tables t;
    int c;

    memset(out, 0, sizeof(*out));
    build_tables(cmd->options, &t);
    opterr = 0; /* its messages would name neither option nor command */
    optind = 1;
    while ((c = getopt_long(argc, argv, t.shortopts, t.longopts, NULL)) != -1) {
        if (c == VAL_HELP || c == 'h') {
            fputs(cmd->help, stdout);
            return 1;
        }
        int opt = c >= 256 ? c - 256 : opt_of_letter(c);
        const struct opt_use *u = opt >= 0 ? use_of(cmd, opt) : NULL;
        if (c == '?' || c == ':' || u == NULL) {
            say_refused(cmd, c, argv);
            return -1;
        }
        if (take_value(cmd, u, optarg, out) != 0)
            return -1;
    }
    out->noperands = argc - optind;
    out->operands = argv + optind;
    return check_operands(cmd, out);
}

int args_has(const struct ctl_args *a, enum ctl_opt opt)
{
    return (a->given >> opt) & 1;
}

unsigned long long args_get(const struct ctl_args *a, enum ctl_opt opt,
                            unsigned long long absent)
{
    return args_has(a, opt) ? a->num[opt] : absent;
}
