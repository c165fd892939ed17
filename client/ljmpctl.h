/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "ljmp_wire.h"
#include "lm_profile.h"
#include "lm_report.h"
#include "status.h"
#include "target.h"

extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_snapshot_entry;
extern const struct cmd_entry cmd_watch_entry;
extern const struct cmd_entry cmd_subscribe_entry;
extern const struct cmd_entry cmd_record_entry;
extern const struct cmd_entry cmd_attach_entry;
extern const struct cmd_entry cmd_detach_entry;
extern const struct cmd_entry cmd_top_entry;
extern const struct cmd_entry cmd_leaks_entry;
extern const struct cmd_entry cmd_plot_entry;
extern const struct cmd_entry cmd_flame_entry;
extern const struct cmd_entry cmd_mark_entry;
extern const struct cmd_entry cmd_diff_entry;

extern const struct cmd_entry cmd_export_entry;
extern const struct cmd_entry cmd_ingest_entry;

/* `report PID` (or --tree, --unit): the report of a live (or kept)
 * session, or of a whole server's merged, from ljmpd, onto out; with
 * o->export_format, the export of the same (`export PID`).  cmd names the
 * command in messages; an exit status. */
int live_report(const char *cmd, const struct view_target *t,
                const struct lm_report_opts *o, FILE *out);

/* What ljmpd said of the sessions a live report or export is of. */
struct live_about {
    uint32_t pid;      /* the session's; 0 for a merged one */
    uint32_t nmembers; /* a merged one's sessions */
    char command[256]; /* the session's command line; "" merged */
    uint32_t stacks;   /* the deepest call stacks a stream carries; 0: none */
    uint64_t stack_sample; /* a stream's sampling mean, 0: every allocation */
};

/* live_report, and what ljmpd said of the sessions in *about (when not
 * NULL, and an answer came). */
int live_report_about(const char *cmd, const struct view_target *t,
                      const struct lm_report_opts *o, FILE *out,
                      struct live_about *about);

/* A PID operand rather than a file: digits only, and no such file. */
int is_pid_operand(const char *arg);

/* Reads the stream in file path ("-": stdin) into p, initialised here,
 * on threads threads; EXIT_OK with *st how the stream ended (p then to
 * free), or an exit status after a message (p freed). */
int load_stream_file(const char *cmd, const char *path,
                     const struct lm_limits *limits, int threads,
                     struct lm_profile *p, enum lm_status *st);

/* EXIT_OK, or EXIT_TRUNCATED after saying where a stream that ended early
 * (st LM_NEED_MORE) stopped. */
int stream_end_status(const char *cmd, const char *path,
                      const struct lm_profile *p, enum lm_status st);

/* A follow (attach --tree, --unit) and its members, on stdout. */
void live_print_follow(const Ljmp__Follow *f);

#endif
