/* Ingest sessions: one per VM connection, from hello to trailer, fed to the
 * core's decoder and state as bytes arrive. */
#ifndef LJMPD_SESSION_H
#define LJMPD_SESSION_H

#include <pthread.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/event.h>

#include "csyms.h"
#include "feed.h"
#include "ljmp_ingest.h"
#include "ljmp_wire.h"
#include "lm_profile.h"
#include "lm_state.h"
#include "server.h"

#define SESSION_MAX_ANCESTORS 16

enum session_phase {
    SESSION_HELLO,   /* reading the hello */
    SESSION_STREAM,  /* feeding the decoder */
    SESSION_TRAILER, /* epilogue read; reading the trailer */
    SESSION_CLOSING, /* trailer read; waiting for the VM to hang up */
    SESSION_ENDED,   /* connection closed; state kept for queries */
};

struct session {
    TAILQ_ENTRY(session) link;
    struct server *srv;
    uint64_t id;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    char *cmdline;
    uint64_t process_start_ms, start_ms, end_ms;
    /* Where the process stood when it connected, so that a tree or a unit
     * still selects its session once it has exited: its ancestors,
     * nearest first, and its systemd cgroup ("" if unknown). */
    pid_t ancestors[SESSION_MAX_ANCESTORS];
    unsigned nancestors;
    char *cgroup;
    int process_gone; /* seen exited (session_brief) */
    int attached;     /* started by an attach: never brief */
    int relayed;      /* a stream relayed by `ljmpctl ingest` */

    int fd;           /* the ingest socket */
    int pipe_fd;      /* the read end of the VM's pipe (version 3), or -1 */
    int pipe_taken;   /* pipe_fd is an anonymous pipe's read end, ours */
    int bad_fds;      /* file descriptors that came beside the hello's pipe */
    struct event *ev; /* reading the stream: from the pipe, if any */
    struct event *wake_ev; /* with a pipe: the VM's wake-asks (socket) */
    struct ljmp_wake wake;
    enum session_phase phase;
    uint8_t hello[LJMP_HELLO_MAX];
    size_t hello_len;
    char vm_version[256];
    uint8_t vm_flavour;
    /* The call stacks the hello says the stream carries: their depth (0:
     * none) and sampling mean in bytes (0: every allocation). */
    uint8_t stacks;
    uint64_t stack_sample;
    uint8_t trailer[LJMP_TRAILER_SIZE];
    size_t trailer_len;
    uint64_t trailer_events, trailer_bytes;

    /* A feed thread changes prof and stream_bytes while jobs are out:
     * the loop reads them under mu (session_lock). */
    pthread_mutex_t mu;
    struct lm_profile prof;
    uint64_t stream_bytes; /* fed to the decoder */
    /* When the VM's census began and completed (monotonic; 0 before), as
     * the feed decoded them (docs/format.md, "Census"). */
    uint64_t census_begin_ms, census_complete_ms;
    /* What session_census last read: the loop's own (see there). */
    struct session_census {
        struct lm_census c;
        uint64_t duplicates, preceding_frees, live_bytes;
        uint64_t begin_ms, complete_ms; /* monotonic; 0 before */
        int streaming; /* a census begun is running, not partial */
    } census_seen;

    /* Its reads, handed to the feed in its read buffers; with as many
     * out as session_jobs_max() allows, the socket is not read. */
    struct feed_queue feed;
    int read_paused;           /* its event taken off until a job comes back */
    uint8_t *spare[FEED_JOBS]; /* read buffers no job holds */
    unsigned nspare;
    char hangup[256];  /* the VM hung up while jobs were out: why */
    int hangup_failed; /* ... or broke the protocol (the end: FAILED) */

    Ljmp__SessionState state;
    char reason[256];
    uint64_t error_offset;

    /* Memory held for it, against its budgets (budget.c).  mem_fed: its
     * state and decoder as the last job left them (a feed thread's);
     * mem_views: what the snapshots keep for it (snapshot.c); nbufs: its
     * read buffers; mem_charged: what its user is charged now.  A job
     * whose state grows past mem_limit (its budget's word, set on the
     * loop) fails the stream, saying why in over.  The feed thread and
     * the loop share mem_fed and mem_limit: atomics.  mem_history: what
     * its history holds (history.c); mem_marks: what its marks hold, and
     * nmarks how many (marks.c); the loop's. */
    uint64_t mem_fed, mem_views, mem_charged, mem_limit, mem_history;
    uint64_t mem_marks;
    unsigned nmarks;
    uint64_t mem_budget; /* the most it may hold, set when it starts */
    unsigned nbufs;
    char over[192];

    struct csyms csyms; /* C symbols read from the process's files */
    /* Features holding the stream before it is decoded (session_hold):
     * the socket is not read, and what came after the hello waits in the
     * next read buffer, which stays free meanwhile. */
    unsigned holds;
    /* Reports reading its state on their thread (report.c): it is not
     * forgotten meanwhile (retention.c). */
    unsigned readers;
    int acked; /* the VM was told it may stream */
    /* When it was told so (monotonic), and whether its stream has started
     * since (its symbol table and the events' header decoded): a VM
     * writes them at once, an idle one included (session_expire_silent). */
    uint64_t acked_ms;
    int started;
    int rejected; /* never a session: no valid hello (reason says why) */
    /* The VM said it gave up, its stream ending at gave_up_at bytes
     * (ljmp_ingest.h's notice): the reason for a truncated end there. */
    uint8_t gave_up;
    uint64_t gave_up_at;
    const uint8_t *held;
    size_t held_len;

    /* What each observer keeps of the session (session_slot); the session
     * never looks inside. */
    void *slots[SESSION_OBSERVERS];
};

/* session.c */
void session_accept(struct server *srv, int fd);
/* The jobs a session may have out now (2 to FEED_JOBS). */
unsigned session_jobs_max(const struct server *srv);
/* Stops reading s until one of its jobs comes back. */
void session_pause_reading(struct session *s);
static inline void session_lock(struct session *s)
{
    pthread_mutex_lock(&s->mu);
}
/* 0 when taken, or nonzero while a feed thread holds it. */
static inline int session_trylock(struct session *s)
{
    return pthread_mutex_trylock(&s->mu);
}
static inline void session_unlock(struct session *s)
{
    pthread_mutex_unlock(&s->mu);
}
void session_free(struct session *s);
/* Ends a streaming session: closes its connection, keeps its state. */
void session_end(struct session *s, Ljmp__SessionState state, const char *fmt,
                 ...) __attribute__((format(printf, 3, 4)));
/* Ends the sessions that announced themselves and sent no stream within
 * --hello-timeout of the hello's answer (run on the server's tick). */
void session_expire_silent(struct server *srv, uint64_t now);
/* Reads paused s again if nothing else holds it (a feature's hold, jobs
 * out): 1 if it did. */
int session_resume_reading(struct session *s);

/* Whether uid may act on s (attach, detach, record) and read it: root,
 * ljmpd's own user, or s's. */
int session_visible(const struct session *s, uid_t uid);
/* Whether uid may read s (list, snapshots, reports, exports): as above,
 * or ljmpd's --reader. */
int session_readable(const struct session *s, uid_t uid);

/* What s's profile holds, in bytes, by what it holds it for (its read
 * buffers, at most FEED_JOBS of --read-budget, are the loop's). */
struct session_memory {
    uint64_t names;     /* symbols: names, prototypes, traces, C symbols */
    uint64_t locations; /* allocation sites, their counters and overrides */
    uint64_t blocks;    /* the live heap map */
    uint64_t buffered;  /* the decoder's item cut by a read */
    uint64_t views;     /* the snapshots' name groups */
    uint64_t history;   /* its totals and sites over time (history.c) */
    uint64_t marks;     /* its stored counters (marks.c) */
};

/* The bytes held for s now (cheap: what its last job measured). */
uint64_t session_memory(const struct session *s);
/* s's memory by part, read from its state: under its lock, or on the
 * thread that runs its job. */
void session_memory_parts(const struct session *s, struct session_memory *m);
/* The biggest part of m, named ("names", "live blocks"...), in *bytes. */
const char *session_memory_biggest(const struct session_memory *m,
                                   uint64_t *bytes);
/* s grew past a budget: it stops at once (its jobs out are not run) and
 * ends as failed with why. */
void session_over_budget(struct session *s, const char *why);

/* Whether s is brief: the VM started it by itself (not an attach), it
 * ended within --brief of its start and its process has exited since (a
 * helper such as `nginx -t`, or a start-up process that forked the server
 * and left).  Views that name no process leave
 * such sessions out; a pid or id still selects them. */
int session_brief(struct session *s);

/*
 * What a session tells the features that watch it (control, attach,
 * symbol loading, recording, snapshots), in the order they registered.
 * A callback may end the session (started) or hold it (session_hold).
 */
struct session_observer {
    /* The hello was taken: the session streams. */
    void (*started)(struct session *s, void *arg);
    /* Stream bytes p[0..n), from stream offset at, were decoded: in
     * stream order, on the loop (a recording copies them). */
    void (*fed)(struct session *s, uint64_t at, const uint8_t *p, size_t n,
                void *arg);
    /* The session ended: its connection is closed, its state kept. */
    void (*ended)(struct session *s, void *arg);
    /* The session is about to be freed (ended or not): drop it. */
    void (*freed)(struct session *s, void *arg);
    /* Its last job out came back while it is held or ended: its state
     * stands still now (session_still). */
    void (*still)(struct session *s, void *arg);
    void *arg;
};

/* Registers o (which must outlive srv's sessions): 0, or -1 when full. */
int session_observe(struct server *srv, const struct session_observer *o);

/* Where observer o keeps its own state for s (NULL until it stores some);
 * o must be registered.  The slot is o's even when s is const to it. */
void **session_slot(const struct session *s, const struct session_observer *o);

/* What SessionInfo says of s's census (state NONE when its stream had
 * none), on the loop: read under its lock, or, while a feed thread holds
 * that, as last read (a job is a few milliseconds). */
void session_census(const struct session *s, struct session_census *out);

/* Phase changes go through here, which checks the transition. */
void session_set_phase(struct session *s, enum session_phase to);

/* Holds s's stream: its socket is not read until every hold is released.
 * A hold taken when the session starts keeps its first byte from being
 * decoded (C symbols are read meanwhile): the VM is told to stream only
 * then.  Bytes that came with the hello wait in the next read buffer. */
void session_hold(struct session *s);
void session_release(struct session *s);

/* Whether s's state stands still: s is held or ended, and no job of its
 * is out, so no thread changes the state until it is released (or, ended,
 * ever).  Threads may then read the state without its lock, as the loop
 * does; the observers' still callback says when a session becomes so. */
int session_still(const struct session *s);

/* Gives s the C symbols read for it (before any byte was decoded: a
 * location's name is fixed at birth): symtab's contents move into the
 * state, and *c into the session; both are left empty. */
void session_adopt_symbols(struct session *s, struct lm_symtab *symtab,
                           struct csyms *c);

#endif
