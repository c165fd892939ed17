/* C symbols read on threads of their own, users in turn, one process of
 * a user at a time: the event loop never waits for a file. */
#ifndef LJMPD_SYMLOAD_H
#define LJMPD_SYMLOAD_H

#include <stdint.h>
#include <sys/types.h>

#include "csyms.h"
#include "lm_symtab.h"

struct server;
struct session;

/* A session's C symbols, read on a symload.c thread into a table of the
 * job's own, then moved into the session's state on the loop. */
struct symload_job {
    struct symload_job *next;
    struct session *s; /* the loop's: NULL once the session is gone */
    pid_t pid;
    uid_t uid;
    size_t budget;
    uint64_t start_ms; /* when the process started, to tell a reused pid */
    struct lm_symtab symtab;
    struct csyms out;
    uint64_t ms; /* the read took */
    int gone;    /* the pid was another process's by the end of the read */
};

/* symload.c: C symbols read on threads, users in turn, one process of a
 * user at a time. */
int symload_start(struct server *srv);
/* Reads s's C symbols, within budget bytes, for session_symbols_loaded():
 * later on the loop (s->symload is set meanwhile), or at once without
 * any when out of memory. */
void symload_post(struct session *s, size_t budget);
/* s is going: its symbols, if still being read, are dropped. */
void symload_cancel(struct session *s);
void symload_stop(struct server *srv);

#endif
