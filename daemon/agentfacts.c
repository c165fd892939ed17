/* What /proc says of a process's attach agent (its maps, status and
 * environment), and the checks before ljmpd signals it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentfacts.h"
#include "ljmp_ingest.h"
#include "ljmp_wire.h"

static int read_status(pid_t pid, struct agent_facts *f)
{
    char path[64], line[256];
    FILE *fp;
    int have = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((fp = fopen(path, "re")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), fp) != NULL) {
        unsigned u;
        if (sscanf(line, "Uid: %u", &u) == 1)
            f->uid = (uid_t)u, have |= 1;
        else if (sscanf(line, "SigCgt: %llx", &f->caught) == 1)
            have |= 2;
        else if (sscanf(line, "SigIgn: %llx", &f->ignored) == 1)
            have |= 4;
    }
    fclose(fp);
    return have == 7 ? 0 : -1;
}

/* Parses the agent's name from the path field of a maps line: its signal
 * and ingest path, or -1 if it is not one. */
static int parse_agent_name(const char *line, struct agent_facts *f)
{
    static const char tag[] = "/memfd:" LJMP_AGENT_NAME_PREFIX;
    static const char deleted[] = " (deleted)";
    const char *p = strstr(line, tag), *path;
    size_t len;
    int sig, at = 0;

    if (p == NULL)
        return -1;
    p += sizeof(tag) - 1;
    if (sscanf(p, "sig=%d ingest=%n", &sig, &at) != 1 || at == 0)
        return -1;
    path = p + at;
    len = strcspn(path, "\n");
    if (len >= sizeof(deleted) - 1 && memcmp(path + len - (sizeof(deleted) - 1),
                                             deleted, sizeof(deleted) - 1) == 0)
        len -= sizeof(deleted) - 1;
    if (len == 0 || len >= sizeof(f->ingest))
        return -1;
    memcpy(f->ingest, path, len);
    f->ingest[len] = '\0';
    f->signal = sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : -1;
    return 0;
}

/* The agent's own name in /proc/PID/maps (see ljmp_ingest.h). */
static void read_published(pid_t pid, struct agent_facts *f)
{
    char path[64], line[1024];
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    if ((fp = fopen(path, "re")) == NULL)
        return;
    while (fgets(line, sizeof(line), fp) != NULL)
        if (parse_agent_name(line, f) == 0) {
            f->published = 1;
            break;
        }
    fclose(fp);
}

/* The real-time signal an LJMP_SIGNAL value names (an offset from
 * SIGRTMIN, as the VM's agent reads it), or -1 if it names none. */
static int rt_signal(const char *offset)
{
    char *end;
    long k = strtol(offset, &end, 10);

    if (end == offset || k < 0 || k > SIGRTMAX - SIGRTMIN)
        return -1;
    return SIGRTMIN + (int)k;
}

/* LJMP_AGENT, LJMP_SIGNAL and LJMP_INGEST from the process's environment
 * (readable by its owner and root), for an agent that did not name
 * itself: its VM could not make the memfd. */
static void read_environ(pid_t pid, struct agent_facts *f)
{
    char path[64], xdg[108] = "";
    static char buf[65536];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0)
        return;
    buf[n] = '\0';
    f->env_known = 1;
    for (char *v = buf; v < buf + n; v += strlen(v) + 1) {
        if (strcmp(v, "LJMP_AGENT=0") == 0)
            f->agent_off = 1;
        else if (strncmp(v, "LJMP_SIGNAL=", 12) == 0)
            f->signal = rt_signal(v + 12);
        else if (strncmp(v, "LJMP_INGEST=", 12) == 0 && v[12] != '\0')
            snprintf(f->ingest, sizeof(f->ingest), "%s", v + 12);
        else if (strncmp(v, "XDG_RUNTIME_DIR=", 16) == 0 && v[16] != '\0')
            snprintf(xdg, sizeof(xdg), "%s", v + 16);
    }
    /* The agent's own rule: $LJMP_INGEST, else the default for its user. */
    if (f->ingest[0] == '\0') {
        if (f->uid != 0 && xdg[0] != '\0')
            snprintf(f->ingest, sizeof(f->ingest), "%.80s/ljmp/ingest.sock",
                     xdg);
        else
            snprintf(f->ingest, sizeof(f->ingest), "/run/ljmp/ingest.sock");
    }
}

int agentfacts_read(pid_t pid, struct agent_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->signal = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;
    if (pid <= 0 || read_status(pid, f) != 0)
        return -1;
    read_published(pid, f);
    if (!f->published)
        read_environ(pid, f);
    return 0;
}

static int sig_bit(unsigned long long mask, int sig)
{
    return sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
}

int agentfacts_check(const struct agent_facts *f, pid_t pid, uid_t caller,
                     const char *ingest_path, char *why, size_t len)
{
    if (caller != 0 && caller != f->uid) {
        snprintf(why, len,
                 "permission denied: pid %d belongs to uid %u, and you are "
                 "uid %u (only its owner or root may attach)",
                 (int)pid, (unsigned)f->uid, (unsigned)caller);
        return LJMP__ERROR_CODE__ERR_PERMISSION;
    }
    if (!f->published && f->agent_off) {
        snprintf(why, len,
                 "pid %d disabled its attach agent (LJMP_AGENT=0 in its "
                 "environment)",
                 (int)pid);
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if (f->signal < 0) {
        snprintf(why, len,
                 "pid %d has an LJMP_SIGNAL that names no real-time signal "
                 "(its agent is off)",
                 (int)pid);
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if (!sig_bit(f->caught, f->signal)) {
        snprintf(why, len,
                 "pid %d is not a patched LuaJIT VM with its attach agent "
                 "(it does not handle signal %d%s)",
                 (int)pid, f->signal,
                 sig_bit(f->ignored, f->signal) ? "; its VM has closed" : "");
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    if ((f->published || f->env_known) && strcmp(f->ingest, ingest_path) != 0) {
        snprintf(why, len,
                 "pid %d would connect to %s, not to this ljmpd's %s (%s)",
                 (int)pid, f->ingest, ingest_path,
                 f->published ? "its agent says so; start it with "
                                "LJMP_INGEST set to this path, or run ljmpd "
                                "there"
                              : "set LJMP_INGEST in its environment, or run "
                                "ljmpd there");
        return LJMP__ERROR_CODE__ERR_UNSUPPORTED;
    }
    return 0;
}
