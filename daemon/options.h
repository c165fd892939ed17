/* ljmpd's command line: every option, its default and its bounds. */
#ifndef LJMPD_OPTIONS_H
#define LJMPD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct config {
    char ingest_path[108];
    char control_path[108];
    unsigned ingest_mode, control_mode; /* permissions of the socket files */
    unsigned retain_s;                  /* finished sessions kept this long */
    unsigned retain_count;              /* and at most this many */
    unsigned max_sessions;              /* streaming at once */
    unsigned max_peers;                 /* control connections at once */
    size_t read_budget;                 /* ingest bytes per callback */
    unsigned feed_threads;              /* 0: decode on the loop's thread */
    size_t inline_bytes;                /* smaller reads decoded on the loop */
    unsigned hello_timeout_ms;          /* for a new ingest peer's hello, and
                                         * then its stream's start */
    unsigned symbols_wait_ms;           /* for its C symbols, after it */
    size_t peer_queue;                  /* control output bytes before drops */
    unsigned client_idle_s;             /* idle clients closed after this */
    unsigned record_stall_s; /* a record file that takes no bytes so long */
    unsigned brief_ms;       /* sessions shorter, of exited processes */
    uint32_t max_locations;  /* per session */
    size_t max_string;       /* per session */
    /* Memory budgets, in bytes (budget.c): per session, per user with a
     * quota (quota.h), and for every session in all. */
    size_t session_memory, user_memory, total_memory;
    /* A user who may read every session, not act on any (--reader;
     * (uid_t)-1: none). */
    uid_t reader_uid;
    /* Each session's history (history.c): how far back, in how many
     * bytes at most, and how many sites it tracks. */
    unsigned history_span_s;
    size_t history_memory;
    unsigned history_sites;
    int verbose;
};

/* Fills cfg from the command line; prints usage and exits on --help or
 * a bad option (status 2). */
void options_parse(struct config *cfg, int argc, char **argv);

#endif
