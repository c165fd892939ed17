/* What /proc says of a process: its command line and when it started. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procinfo.h"

/* The process's command line, NULs turned into spaces ("" if unreadable:
 * the process may already be gone, or live in another namespace). */
char *procinfo_cmdline(pid_t pid)
{
    char path[64], buf[4096];
    ssize_t n = -1;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
    }
    if (n < 0)
        n = 0;
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return strdup(buf);
}

/* When the process started, in Unix milliseconds (0 if unknown): field 22
 * of /proc/PID/stat, in clock ticks after boot, plus the boot time. */
uint64_t procinfo_start_ms(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long btime = 0, ticks = 0;
    FILE *f;

    if ((f = fopen("/proc/stat", "re")) == NULL)
        return 0;
    while (fgets(buf, sizeof(buf), f) != NULL)
        if (sscanf(buf, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: skip past the
     * last ')', then fields 3.. follow. */
    char *p = strrchr(buf, ')');
    if (p == NULL ||
        sscanf(p + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
               "%*d %*d %*d %*d %*d %*d %llu",
               &ticks) != 1)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return btime * 1000 +
           ticks * 1000 / (unsigned long long)(hz > 0 ? hz : 100);
}
