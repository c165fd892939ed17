/* What /proc says of a process's attach agent: its signal, where it will
 * connect, and whether it is there at all; and whether a caller may use it. */
#ifndef LJMPD_AGENTFACTS_H
#define LJMPD_AGENTFACTS_H

#include <sys/types.h>

struct agent_facts {
    uid_t uid;        /* real uid */
    int published;    /* the agent named itself in /proc/PID/maps */
    int signal;       /* its signal number, or -1 if it names none */
    int agent_off;    /* LJMP_AGENT=0 in its environment (not published) */
    int env_known;    /* the environment could be read */
    char ingest[108]; /* where its agent connects (as lj_ljmp.c decides) */
    unsigned long long caught; /* SigCgt */
    unsigned long long ignored;
};

/* Reads what /proc says of pid's agent: 0, or -1 if there is no such
 * process (or it cannot be read). */
int agentfacts_read(pid_t pid, struct agent_facts *f);

/* Whether a caller of uid `caller` may attach to the process f describes
 * and it can reach an ljmpd whose ingest socket is ingest_path: 0, or an
 * Ljmp__ErrorCode with the reason in why. */
int agentfacts_check(const struct agent_facts *f, pid_t pid, uid_t caller,
                     const char *ingest_path, char *why, size_t len);

#endif
