/* ljmpctl's command table: one entry per subcommand. */
#ifndef LJMPCTL_H
#define LJMPCTL_H

#include <stdint.h>

#include "args.h"
#include "ljmp_wire.h"
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

/* `report PID` (or --tree, --unit): the report of a live (or kept)
 * session, or of a whole server's merged, from ljmpd. */
int live_report(const struct view_target *t, const struct lm_report_opts *o);

/* A follow (attach --tree, --unit) and its members, on stdout. */
void live_print_follow(const Ljmp__Follow *f);

#endif
