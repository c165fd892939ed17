/* What /proc says of a process: its command line, when it started, its
 * parent and its systemd cgroup. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
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

/* /proc/PID/stat's fields after the command (which may hold spaces and
 * parentheses, so they start after the last ')') into buf; NULL if the
 * process is gone. */
static const char *stat_fields(pid_t pid, char *buf, size_t len)
{
    char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "re")) == NULL)
        return NULL;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    return close != NULL ? close + 1 : NULL;
}

/* When the process started, in Unix milliseconds (0 if unknown): field 22
 * of /proc/PID/stat, in clock ticks after boot, plus the boot time. */
uint64_t procinfo_start_ms(pid_t pid)
{
    char buf[1024];
    unsigned long long btime = 0, ticks = 0;
    FILE *f;

    if ((f = fopen("/proc/stat", "re")) == NULL)
        return 0;
    while (fgets(buf, sizeof(buf), f) != NULL)
        if (sscanf(buf, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    const char *p = stat_fields(pid, buf, sizeof(buf));
    if (p == NULL ||
        sscanf(p,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
               "%*d %*d %*d %*d %*d %*d %llu",
               &ticks) != 1)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return btime * 1000 +
           ticks * 1000 / (unsigned long long)(hz > 0 ? hz : 100);
}

pid_t procinfo_ppid(pid_t pid)
{
    char buf[1024];
    const char *fields = stat_fields(pid, buf, sizeof(buf));
    int ppid;

    if (fields == NULL || sscanf(fields, " %*c %d", &ppid) != 1)
        return -1;
    return (pid_t)ppid;
}

/* A path that does not fit is nobody's: it is left out whole. */
static void copy_path(char *out, size_t len, const char *path)
{
    size_t n = strlen(path);

    if (n < len)
        memcpy(out, path, n + 1);
}

void procinfo_cgroup(pid_t pid, char *out, size_t len)
{
    char path[64], line[1024];
    FILE *fp;

    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if ((fp = fopen(path, "re")) == NULL)
        return;
    while (fgets(line, sizeof(line), fp) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        /* A hybrid layout's unified line may be "/": systemd's named
         * hierarchy then says where the process is. */
        const char *v2 = strncmp(line, "0::", 3) == 0 ? line + 3 : NULL;
        const char *sd = strstr(line, ":name=systemd:");
        if (v2 != NULL && strcmp(v2, "/") != 0)
            copy_path(out, len, v2);
        else if (sd != NULL && out[0] == '\0')
            copy_path(out, len, sd + 14);
    }
    fclose(fp);
}

int procinfo_cgroup_names(const char *path, const char *name)
{
    size_t len = strlen(name);

    if (len == 0)
        return 0;
    for (const char *p = path; (p = strstr(p, name)) != NULL; p++)
        if (p > path && p[-1] == '/' && (p[len] == '/' || p[len] == '\0'))
            return 1;
    return 0;
}

long procinfo_owner(pid_t pid)
{
    char path[32];
    struct stat st;

    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    return stat(path, &st) == 0 ? (long)st.st_uid : -1;
}
