/* What /proc says of a process: its command line and when it started. */
#ifndef LJMPD_PROCINFO_H
#define LJMPD_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

/* The process's command line, NULs turned into spaces, in memory the
 * caller frees ("" if unreadable; NULL only when out of memory). */
char *procinfo_cmdline(pid_t pid);

/* When pid started, in Unix milliseconds (0 if unknown): tells a pid
 * reused by another process. */
uint64_t procinfo_start_ms(pid_t pid);

#endif
