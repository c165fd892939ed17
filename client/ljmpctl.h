/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

#include <stdint.h>

#include "args.h"
#include "ljmp_wire.h"
#include "status.h"

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

/* A follow (attach --tree, --unit) and its members, on stdout. */
void live_print_follow(const Ljmp__Follow *f);

#endif
