/* ljmpd's shared types: the server, ingest sessions, control peers. */
#ifndef LJMPD_H
#define LJMPD_H

#include <pthread.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "ljmp_ingest.h"
#include "csyms.h"
#include "ljmp_wire.h"
#include "lm_groups.h"
#include "lm_state.h"

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
    unsigned hello_timeout_ms;          /* for a new ingest peer's hello */
    unsigned symbols_wait_ms;           /* for its C symbols, after it */
    size_t peer_queue;                  /* control output bytes before drops */
    unsigned client_idle_s;             /* idle clients closed after this */
    unsigned record_stall_s; /* a record file that takes no bytes so long */
    uint32_t max_locations;  /* per session */
    size_t max_string;       /* per session */
    int verbose;
};

/* The daemon's counters (X-macro: the struct and the wire from one list). */
#define SERVER_COUNTERS(_)                                                     \
    _(sessions_accepted)                                                       \
    _(sessions_rejected)                                                       \
    _(sessions_malformed)                                                      \
    _(sessions_truncated)                                                      \
    _(sessions_complete)                                                       \
    _(sessions_evicted)                                                        \
    _(ingest_bytes)                                                            \
    _(ingest_events)                                                           \
    _(control_accepted)                                                        \
    _(control_rejected)                                                        \
    _(snapshots_sent)                                                          \
    _(snapshots_dropped)                                                       \
    _(accept_backoffs)

struct server_counters {
#define SERVER_COUNTER_FIELD(name) uint64_t name;
    SERVER_COUNTERS(SERVER_COUNTER_FIELD)
#undef SERVER_COUNTER_FIELD
};

enum session_phase {
    SESSION_HELLO,   /* reading the hello */
    SESSION_STREAM,  /* feeding the decoder */
    SESSION_TRAILER, /* epilogue read; reading the trailer */
    SESSION_CLOSING, /* trailer read; waiting for the VM to hang up */
    SESSION_ENDED,   /* connection closed; state kept for queries */
};

/* Raw stream bytes of a session, copied into a client's file by a
 * writer thread (recorder.c). */
struct recording {
    TAILQ_ENTRY(recording) link; /* in the server's, until its end is told */
    struct server *srv;
    struct rec_writer *w;
    struct session *s;    /* the session recorded; NULL before and after */
    uint64_t from_offset; /* the stream offset it copies from */
    int from_start;
    struct peer *waiter; /* told when it ends; NULL once gone */
    int spliced;         /* from_start: the C symbols are in the file */
    uint64_t request_id;
    uint64_t session_id; /* the session recorded, once known */
    int has_state;       /* its state when the recording ended */
    Ljmp__SessionState state;
    char error[320];
};

/*
 * Stream bytes handed to a feed thread (feed.c), in one of a session's
 * read buffers: a thread applies one while the loop reads into the next
 * ones, and the loop takes the results back in order in session_fed().
 * Eight buffers of --read-budget (256 KiB) are 2 MiB of reading ahead:
 * a VM's bursts (a collector's sweep) wait there, not in a socket that
 * Debian's defaults cap at 416 KiB, where they would stall the VM.
 * A session has as many buffers as it has had jobs out at once, and
 * their pages are touched only as far as reads fill them.
 */
#define SESSION_BUFS 8
struct feed_job {
    struct feed_job *next; /* in the feed's done list */
    struct session *s;
    uint8_t *buf; /* read_budget bytes, or NULL: see next_buffer() */
    const uint8_t *p;
    size_t n;
    uint64_t at;           /* stream offset of p */
    uint64_t direct_bytes; /* the state's direct-path budget for it */
    int ran;               /* 0: not fed, as an earlier job ended the stream */
    enum lm_status st;
    size_t used;
    uint64_t events; /* decoded from these bytes */
};

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

struct session {
    TAILQ_ENTRY(session) link;
    struct server *srv;
    uint64_t id;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    char *cmdline;
    uint64_t process_start_ms, start_ms, end_ms;

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
    uint8_t trailer[LJMP_TRAILER_SIZE];
    size_t trailer_len;
    uint64_t trailer_events, trailer_bytes;

    /* A feed thread changes prof and stream_bytes while jobs are out:
     * the loop reads them under mu (session_lock). */
    pthread_mutex_t mu;
    struct lm_profile prof;
    uint64_t stream_bytes;     /* fed to the decoder */
    struct lm_groups groups;   /* its locations by name, for views */
    struct session_view *view; /* what this turn's snapshots see (snapshot.c) */

    /* The loop's: jobs out from job_head on, oldest first; with as many
     * out as session_jobs_max() allows, the socket is not read. */
    struct feed_job jobs[SESSION_BUFS];
    unsigned job_head, jobs_out;
    int read_paused; /* its event taken off until a job comes back */
    uint8_t *spare[SESSION_BUFS]; /* read buffers no job holds */
    unsigned nspare;
    uint64_t post_offset; /* stream offset after the bytes posted */
    char hangup[128];     /* the VM hung up while jobs were out: why */
    int hangup_failed;    /* ... or broke the protocol (the end: FAILED) */
    /* The feed's, under its lock. */
    struct session *feed_next; /* in its to-do list */
    unsigned feed_run;         /* the job a thread takes next */
    unsigned feed_queued;      /* jobs posted and not taken */
    int feed_listed;           /* in the to-do list, or being fed */
    int feed_ended;            /* a job ended the stream: no more are run */
    int feed_waited;           /* the loop waits for a job back */

    Ljmp__SessionState state;
    char reason[256];
    uint64_t error_offset;

    struct recording *rec;
    struct csyms csyms; /* C symbols read from the process's files */
    /* While they are being read (no stream byte is decoded before: a
     * location's name is fixed at birth), the socket is not read, and
     * what came after the hello waits in the next read buffer. */
    struct symload_job *symload;
    struct event *symload_timer; /* how long the session waits for them */
    const uint8_t *held;
    size_t held_len;
};

struct subscription;

/* A control connection: framed requests in, framed responses out. */
struct peer {
    TAILQ_ENTRY(peer) link;
    struct server *srv;
    uint64_t id;
    int fd;
    pid_t pid;
    uid_t uid;
    struct event *rev, *wev;
    struct evbuffer *in, *out;
    int passed_fd;        /* a descriptor sent with the last request, or -1 */
    int fds_over;         /* more than one came with a request */
    int closing;          /* flush what is queued, then close */
    int throttled;        /* not reading: too much output queued */
    int eof;              /* the client sent all it will: close when idle */
    int gone;             /* ... and closed for good: close once served */
    unsigned npending;    /* its record requests waiting for a process */
    unsigned nops;        /* its attach/detach requests waiting for a VM */
    unsigned nrecordings; /* recordings under way that answer to it */
    uint64_t active_ms;   /* when it last sent a request */
    uint64_t closing_ms;  /* when it started closing */
    struct subscription *sub;
};

/* A record request for a process that has not streamed yet. */
struct pending_record {
    TAILQ_ENTRY(pending_record) link;
    pid_t pid;
    uid_t uid; /* who asked: checked again when the session comes */
    uint64_t deadline_ms;
    struct recording *rec;
};

TAILQ_HEAD(session_list, session);
TAILQ_HEAD(peer_list, peer);
TAILQ_HEAD(pending_record_list, pending_record);
TAILQ_HEAD(recording_list, recording);
struct op_wait;
TAILQ_HEAD(op_list, op_wait);
TAILQ_HEAD(subscription_list, subscription);

/* How a helper thread wakes the loop: an eventfd the loop watches, whose
 * callback (cb) answers it with bell_answer() and takes the work done. */
struct bell {
    int efd;
    struct event *ev;
};

struct server {
    struct event_base *base;
    struct config cfg;
    struct evconnlistener *ingest, *control;
    int own_ingest_path, own_control_path; /* unlink at exit */
    struct event *tick, *backoff, *sigterm, *sigint, *watchdog;
    struct session_list sessions; /* oldest first */
    struct peer_list peers;
    struct pending_record_list pending_records;
    struct op_list ops; /* attach and detach requests waiting for a VM */
    unsigned nlive, nended, npeers, nsubscribers, npending;
    uint64_t next_session_id, next_peer_id;
    /* Snapshots built together share sessions' views (snapshot.h): the
     * subscriptions whose snapshots are due, built by one callback. */
    struct subscription_list due;
    struct event *snapshots_due;
    uint64_t snapshot_turn, views_taken;
    int snapshot_turn_open;
    uint64_t start_ms;
    struct server_counters counters;
    struct feed *feed;
    struct symload *symload;
    struct recording_list recordings; /* writing, or telling they ended */
    struct bell rec_bell;
    int stopping;
};

/*
 * Event priorities: clients (requests, snapshots, timers) before ingest,
 * and the loop looks up from ingest every few callbacks, so that a busy
 * stream never delays a snapshot by more than that (see server_start).
 */
enum {
    PRIO_CONTROL = 0,
    PRIO_DEFAULT = 1, /* listeners, signals */
    PRIO_INGEST = 2,
    PRIO_LEVELS = 3,
};

uint64_t now_ms(void);

/* Whether uid is held to a share of ljmpd's slots and budgets: every
 * local user but root and ljmpd's own, since any local user may connect,
 * and none should crowd the others out. */
int uid_has_quota(uid_t uid);

/* Whether uid, holding `held` of ljmpd's `slots` (client connections or
 * streaming sessions), may take one more: a user with a quota gets half
 * of them, so that one user's connections cannot lock the others out. */
int uid_may_take_slot(uid_t uid, unsigned held, unsigned slots);
uint64_t wall_ms(uint64_t mono);
/* Lowers the calling thread's priority below the loop's (nice is per
 * thread on Linux), for the threads that work for it. */
void lower_own_priority(void);
/* Starts fn(arg) on a thread that takes no signals (they are the
 * loop's): 0, or an errno value. */
int start_helper_thread(pthread_t *t, void *(*fn)(void *), void *arg);
/* Joins the n threads at t within `seconds` in all, and detaches those
 * still running then (a close or read that never returns): how many. */
unsigned join_helper_threads(pthread_t *t, unsigned n, int seconds);
/* How long ljmpd's stop waits for its helpers' reads and writes under
 * way (C symbols, recordings). */
#define HELPER_STOP_WAIT_S 2

/* 0, or -1 with the reason logged, for `who`. */
int bell_init(struct bell *b, struct server *srv, event_callback_fn cb,
              void *arg, const char *who);
void bell_ring(struct bell *b);
void bell_answer(struct bell *b);
void bell_free(struct bell *b);

/* peerfd.c */
/* The most descriptors one message may carry (the kernel's SCM_MAX_FD). */
#define PEER_MAX_FDS 253
/* What a read from a peer's socket brought besides its bytes. */
struct peer_fds {
    int fd[PEER_MAX_FDS];
    unsigned n;
    int cut; /* more came than fit (the kernel closed them) */
};
/* recvmsg of up to len bytes from a peer's socket, without waiting, and
 * the descriptors that came with them, all in *in: the caller keeps what
 * it wants and gives the others to peer_fd_close.  Returns as recvmsg. */
ssize_t recv_from_peer(int sock, void *buf, size_t len, struct peer_fds *in);
/* Closes a descriptor a peer chose, on a thread of its own (see peerfd.c);
 * never waits.  -1 is ignored. */
void peer_fd_close(int fd);
/* Closes a peer's socket (ingest or control), taking first what is still
 * queued in it.  -1 is ignored. */
void peer_socket_close(int fd);
/* Sets up a peer's socket, before its first read, for recv_from_peer. */
void peer_socket_options(int fd);
int peer_fds_start(void);
void peer_fds_stop(void);

/* session.c */
/* When pid started, in Unix milliseconds (0 if unknown). */
uint64_t read_process_start_ms(pid_t pid);
void session_accept(struct server *srv, int fd);
/* Takes back a feed job's results: counts, records, ends or reads on. */
void session_fed(struct feed_job *j);
/* The jobs a session may have out now (2 to SESSION_BUFS). */
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
int session_record(struct session *s, struct recording *rec);
/* Reads paused s again if nothing else holds it (symbols awaited, jobs
 * out, a full recording): 1 if it did. */
int session_resume_reading(struct session *s);

/* recorder.c */
int recorder_start(struct server *srv);
/* Waits a little for record files to take what is queued, and tells
 * every recording's client how it ended (all were finished). */
void recorder_stop(struct server *srv);
void recorder_free(struct server *srv);
/* Starts a thread that writes rec's file, fd (uid's): 0, or -1 with the
 * reason in why.  From then on the recording answers to rec->waiter. */
int recording_open(struct server *srv, struct recording *rec, int fd, uid_t uid,
                   char *why, size_t len);
/* Queues n stream bytes for the file: 0, or -1 with rec->error set (the
 * file failed, or ljmpd is out of memory). */
int recording_write(struct recording *rec, const uint8_t *p, size_t n);
/* Whether so much waits for the file that the session must not be read
 * (it is read again once the file took most of it). */
int recording_full(struct recording *rec);
/* Ends the recording (s: the session it recorded, if any, whose id and
 * state the client is told): its file takes what is queued and is
 * closed, then the client is told. */
void recording_finish(struct recording *rec, const struct session *s);
/* Ends a recording whose client was told it failed: it is not told
 * again. */
void recording_drop(struct recording *rec);
/* Tells the recording's client it has begun, in session_id (0 while the
 * process has not streamed yet). */
void recording_begun(const struct recording *rec, uint64_t session_id);
/* Gives up on record files that took no bytes for --record-stall. */
void recorder_check_stalls(struct server *srv, uint64_t now);
/* The peer is gone: its recordings go on, telling nobody. */
void recorder_forget_peer(struct server *srv, const struct peer *p);
int session_visible(const struct session *s, uid_t uid);

/* The C symbols of s, read by symload.c (j NULL: none, out of memory). */
void session_symbols_loaded(struct session *s, struct symload_job *j);

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

/* feed.c: cfg.feed_threads threads decode and apply sessions' bytes; a
 * session's jobs run in order, one at a time, sessions take turns. */
int feed_start(struct server *srv);
/* Feeds p[0..n), in s's next free read buffer, with the state's budget
 * for its direct path: on a thread (the job is out until session_fed),
 * or at once without threads. */
void feed_post(struct session *s, const uint8_t *p, size_t n,
               uint64_t direct_bytes);
/* Waits for every job out and takes each back (session_fed). */
void feed_settle(struct server *srv);
/* Takes back the jobs done (session_fed), as the loop is woken only when
 * it waits for one: on every tick, so none waits long. */
void feed_collect(struct server *srv);
/* The loop waits for one of s's jobs out to come back (it stopped
 * reading s): wakes it when one does. */
void feed_wait_for(struct session *s);
/* Ends the threads; jobs not taken back are dropped with their sessions. */
void feed_stop(struct server *srv);

/* peer.c */
void peer_accept(struct server *srv, int fd);
void peer_free(struct peer *p);
/* A response of this protocol version to request id (0: to none). */
void peer_response_init(Ljmp__Response *resp, uint64_t id);
/* Queues a response; -1 (and the peer is closing) when it cannot. */
int peer_send(struct peer *p, const Ljmp__Response *resp);
/* The same, for a response whose packed size n is known (a snapshot's is
 * measured against the frame limit first; measuring it walks the whole
 * message, and took twice the time of packing it). */
int peer_send_sized(struct peer *p, const Ljmp__Response *resp, size_t n);
void peer_flush_now(struct peer *p);
/* Closes clients idle longer than --client-idle that wait for nothing. */
void peer_close_idle(struct server *srv, uint64_t now);
/* A peer that finished sending goes once nothing it asked for is left. */
void peer_idle_check(struct peer *p);
void peer_send_error(struct peer *p, uint64_t id, Ljmp__ErrorCode code,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* attach.c */
void attach_request(struct peer *p, const Ljmp__Request *req);
void detach_request(struct peer *p, const Ljmp__Request *req);
void attach_session_started(struct server *srv, struct session *s);
void attach_session_ended(struct server *srv, const struct session *s);
void attach_peer_gone(struct peer *p);

/* control.c */
void control_dispatch(struct peer *p, const Ljmp__Request *req);
void control_subscription_free(struct subscription *sub);
/* srv->snapshots_due's callback: builds the snapshots that are due. */
void control_snapshots_due(evutil_socket_t fd, short what, void *arg);
void control_expire_records(struct server *srv, uint64_t now);
void control_session_started(struct server *srv, struct session *s);
/* Drops what the peer left waiting (record requests). */
void control_peer_gone(struct peer *p);

#endif
