/* ljmpctl: the command-line client of ljmp; dispatches subcommands. */
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "ljmpctl.h"

static const struct cmd_entry *const commands[] = {
    &cmd_list_entry,   &cmd_attach_entry,    &cmd_detach_entry,
    &cmd_top_entry,    &cmd_leaks_entry,     &cmd_snapshot_entry,
    &cmd_watch_entry,  &cmd_report_entry,    &cmd_export_entry,
    &cmd_record_entry, &cmd_subscribe_entry, &cmd_ingest_entry,
    &cmd_plot_entry,   &cmd_flame_entry,     &cmd_mark_entry,
    &cmd_diff_entry,
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: ljmpctl [-s SOCKET] COMMAND [ARGS...]\n"
                 "       ljmpctl help COMMAND\n\n"
                 "Live memory profiler for LuaJIT: client.\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-9s %-22s %s\n", commands[i]->name,
                commands[i]->synopsis, commands[i]->brief);
    fprintf(out,
            "\nA command may be shortened to a unique prefix.  Commands other "
            "than\n`report FILE` talk to ljmpd on its control socket: -s "
            "SOCKET, else\n$LJMP_CONTROL, else %s.\n"
            "\nExit status: %d ok, %d usage or I/O error, %d truncated "
            "stream or\nsession, %d malformed stream or failed session, "
            "%d ljmpd not reachable,\n%d refused by ljmpd (no such "
            "session, permission).\n",
            conn_socket_path(), EXIT_OK, EXIT_USAGE, EXIT_TRUNCATED,
            EXIT_MALFORMED, EXIT_NO_DAEMON, EXIT_REFUSED);
}

/* Whether name starts command c's name. */
static int is_prefix(const char *name, const struct cmd_entry *c)
{
    return strncmp(c->name, name, strlen(name)) == 0;
}

/* Exact name, or a unique prefix of one. */
static const struct cmd_entry *find_command(const char *name)
{
    const struct cmd_entry *found = NULL;

    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
        if (is_prefix(name, commands[i])) {
            if (found != NULL)
                return NULL;
            found = commands[i];
        }
    }
    return found;
}

/* Why name is no command: none starts with it, or several do (named, so
 * that the user sees how much more to type). */
static void say_unknown(const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < NCOMMANDS; i++)
        n += is_prefix(name, commands[i]);
    if (n == 0) {
        fprintf(stderr, "ljmpctl: unknown command '%s'; try 'ljmpctl --help'\n",
                name);
        return;
    }
    fprintf(stderr, "ljmpctl: ambiguous command '%s':", name);
    for (size_t i = 0, k = 0; i < NCOMMANDS; i++)
        if (is_prefix(name, commands[i]))
            fprintf(stderr, "%s %s", k++ ? "," : "", commands[i]->name);
    fputc('\n', stderr);
}

/* Runs cmd once its command line holds only what its table allows. */
static int run(const struct cmd_entry *cmd, int argc, char **argv)
{
    struct ctl_args args;
    int rc = args_parse(cmd, argc, argv, &args);

    if (rc != 0)
        return rc > 0 ? EXIT_OK : EXIT_USAGE;
    return cmd->exec(&args);
}

int main(int argc, char **argv)
{
    const struct cmd_entry *cmd;

    if (argc >= 3 &&
        (strcmp(argv[1], "-s") == 0 || strcmp(argv[1], "--socket") == 0)) {
        conn_set_socket_path(argv[2]);
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return EXIT_OK;
        }
        if ((cmd = find_command(argv[2])) == NULL)
            goto unknown;
        fputs(cmd->help, stdout);
        return EXIT_OK;
    }
    if ((cmd = find_command(argv[1])) == NULL)
        goto unknown;
    return run(cmd, argc - 1, argv + 1);

unknown:
    say_unknown(argc > 2 && strcmp(argv[1], "help") == 0 ? argv[2] : argv[1]);
    return EXIT_USAGE;
}
