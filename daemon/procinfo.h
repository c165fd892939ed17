/* What /proc says of a process: its command line, when it started, its
 * parent and its systemd cgroup. */
#ifndef LJMPD_PROCINFO_H
#define LJMPD_PROCINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The process's command line, NULs turned into spaces, in memory the
 * caller frees ("" if unreadable; NULL only when out of memory). */
char *procinfo_cmdline(pid_t pid);

/* When pid started, in Unix milliseconds (0 if unknown): tells a pid
 * reused by another process. */
uint64_t procinfo_start_ms(pid_t pid);

/* The uid owning process pid, or -1 if there is no such process. */
long procinfo_owner(pid_t pid);

/* The parent of pid, or -1 if /proc does not say (the process is gone). */
pid_t procinfo_ppid(pid_t pid);

/* The path of pid's systemd cgroup into out (len bytes): the unified
 * hierarchy's, or on a hybrid layout systemd's named one; "" when /proc
 * does not say or the path does not fit. */
void procinfo_cgroup(pid_t pid, char *out, size_t len);

/* Whether a cgroup path has name as one of its components (a unit's cgroup
 * is named after the unit, under its slice). */
int procinfo_cgroup_names(const char *path, const char *name);

#endif
