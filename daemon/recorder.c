/* Recordings: stream bytes copied into clients' files by writer threads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bell.h"
#include "clock.h"
#include "helper.h"
#include "lm_encoder.h"
#include "lm_strip.h"
#include "peer.h"
#include "quota.h"
#include "recorder.h"
#include "session.h"
#include "log.h"

/*
 * A recording's file is the client's choice: a disk that throttles its
 * writers, a network mount that stopped answering, a FUSE file whose
 * daemon never replies.  Written on the loop, one such file held every
 * session and client.  So each recording has a thread that writes and
 * closes its file, fed through a queue of copied bytes:
 *
 * - Past RECORD_QUEUE_HIGH bytes queued, the session is not read until
 *   the queue falls under RECORD_QUEUE_LOW: a slow file slows its own VM,
 *   as a slow ljmpd would (lossless), and no other.
 * - A writer that takes no bytes for --record-stall seconds, while bytes
 *   wait or the file is being closed, is given up: the client is told,
 *   the session read again, and the thread left to end when its write
 *   does (it then frees what it holds).
 * - Writers still running count against their user's RECORD_WRITERS_UID,
 *   so that files that never answer cannot pile up threads without bound.
 */
#define RECORD_QUEUE_HIGH  (4u << 20)
#define RECORD_QUEUE_LOW   (1u << 20)
#define RECORD_WRITERS     64
#define RECORD_WRITERS_UID 8
/* A stripper's output buffer bigger than this is let go once queued: a
 * recording from now strips its whole symbol table in one feed. */
#define STRIP_OUT_KEEP (256u << 10)

/*
 * A recording in pure R3 (rec->r3) feeds its bytes to a stripper
 * (core/lm_strip.h) on their way to the queue: all of them, the symbol
 * table and stack definitions a recording from now starts with too, so
 * that one filter decides what the file holds.  It holds the bytes of an
 * item not yet whole, no more; what one feed writes, in pieces around
 * each stack id dropped, is queued as one chunk.
 */
struct rec_strip {
    struct lm_strip st;
    struct lm_buf out; /* what the feed in progress wrote */
};

struct chunk {
    struct chunk *next;
    size_t len;
    uint8_t data[];
};

struct rec_writer {
    pthread_t thread;
    uid_t uid;
    struct bell *bell;
    struct rec_writer *next_alive; /* in writers.alive, until the end */
    /* Under mu: */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    struct chunk *head, *tail;
    size_t queued;        /* bytes in the chunks */
    uint64_t written;     /* bytes the file took */
    uint64_t progress_ms; /* when it last took some, or was asked to */
    int closing;          /* write what is queued, then close */
    int given_up;         /* drop what is queued, close, and free */
    int wants_room;       /* the loop waits for the queue to fall */
    int done;             /* closed: the thread is over */
    int refs;             /* the loop's and the thread's */
    char error[256];
};

/* The recorder's state: the recordings writing, or telling they ended,
 * and the bell their writers ring. */
struct recorder {
    TAILQ_HEAD(, recording) recordings;
    struct bell bell;
};

/* The writers whose threads run, for the users' counts. */
static struct {
    pthread_mutex_t mu;
    struct rec_writer *alive;
    unsigned n;
} writers = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void writer_unref(struct rec_writer *w)
{
    pthread_mutex_lock(&w->mu);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last)
        return;
    while (w->head != NULL) {
        struct chunk *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

static void writer_unlist(struct rec_writer *w)
{
    pthread_mutex_lock(&writers.mu);
    for (struct rec_writer **p = &writers.alive; *p != NULL;
         p = &(*p)->next_alive)
        if (*p == w) {
            *p = w->next_alive;
            writers.n--;
            break;
        }
    pthread_mutex_unlock(&writers.mu);
}

/* Wakes the loop, unless it gave up on w (under mu). */
static void tell_loop(struct rec_writer *w)
{
    if (!w->given_up)
        bell_ring(w->bell);
}

/* Writes a chunk whole, without the lock; 0, or an errno value. */
static int write_chunk(struct rec_writer *w, const struct chunk *c)
{
    const uint8_t *p = c->data;
    size_t n = c->len;

    while (n > 0) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? errno : EIO;
        p += r;
        n -= (size_t)r;
        pthread_mutex_lock(&w->mu);
        w->written += (uint64_t)r;
        w->progress_ms = clock_now_ms();
        pthread_mutex_unlock(&w->mu);
    }
    return 0;
}

/* Takes the queue's first chunk off it (under mu), telling the loop when
 * the queue falls under the low mark it waits for. */
static void pop_chunk(struct rec_writer *w)
{
    struct chunk *c = w->head;

    w->head = c->next;
    if (w->head == NULL)
        w->tail = NULL;
    w->queued -= c->len;
    free(c);
    if (w->wants_room && w->queued < RECORD_QUEUE_LOW) {
        w->wants_room = 0;
        tell_loop(w);
    }
}

static void *write_file(void *arg)
{
    struct rec_writer *w = arg;

    helper_lower_priority();
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->head == NULL && !w->closing && !w->given_up)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->given_up || w->head == NULL)
            break;
        if (w->error[0] != '\0') {
            pop_chunk(w); /* a failed file takes no more */
            continue;
        }
        struct chunk *c = w->head;
        pthread_mutex_unlock(&w->mu);
        int err = write_chunk(w, c);
        pthread_mutex_lock(&w->mu);
        if (err != 0) {
            snprintf(w->error, sizeof(w->error), "writing the recording: %s",
                     strerror(err));
            tell_loop(w);
        }
        pop_chunk(w);
    }
    pthread_mutex_unlock(&w->mu);
    int rc = close(w->fd);
    int err = errno;
    pthread_mutex_lock(&w->mu);
    if (rc != 0 && w->error[0] == '\0')
        snprintf(w->error, sizeof(w->error), "closing the file: %s",
                 strerror(err));
    w->done = 1;
    tell_loop(w);
    pthread_mutex_unlock(&w->mu);
    writer_unlist(w);
    writer_unref(w);
    return NULL;
}

/* Room for one more writer of uid: 0, or -1 with the reason in why. */
static int writer_slot(uid_t uid, char *why, size_t len)
{
    unsigned mine = 0;

    pthread_mutex_lock(&writers.mu);
    for (struct rec_writer *w = writers.alive; w != NULL; w = w->next_alive)
        mine += w->uid == uid;
    unsigned all = writers.n;
    pthread_mutex_unlock(&writers.mu);
    if (all >= RECORD_WRITERS ||
        (quota_applies(uid) && mine >= RECORD_WRITERS_UID)) {
        snprintf(why, len,
                 "too many record files still being written (%u of yours, "
                 "%u in all; a file that stopped taking writes counts "
                 "until its write returns)",
                 mine, all);
        return -1;
    }
    return 0;
}

int recorder_open(struct server *srv, struct recording *rec, int fd, uid_t uid,
                  char *why, size_t len)
{
    struct rec_writer *w;
    int err;

    if (writer_slot(uid, why, len) != 0)
        return -1;
    if ((w = calloc(1, sizeof(*w))) == NULL) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->fd = fd;
    w->uid = uid;
    w->bell = &srv->recorder->bell;
    w->refs = 2;
    pthread_mutex_lock(&writers.mu);
    if ((err = helper_start(&w->thread, write_file, w)) == 0) {
        w->next_alive = writers.alive;
        writers.alive = w;
        writers.n++;
    }
    pthread_mutex_unlock(&writers.mu);
    if (err != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        snprintf(why, len, "cannot start a thread to write the file: %s",
                 strerror(err));
        return -1;
    }
    rec->w = w;
    rec->srv = srv;
    TAILQ_INSERT_TAIL(&srv->recorder->recordings, rec, link);
    if (rec->waiter != NULL)
        peer_wait_begin(rec->waiter);
    return 0;
}

/* The writer's error (a write or the close failed) as the recording's:
 * the file's fault, an I/O error to the client.  Under w->mu. */
static void take_file_error(struct recording *rec, const struct rec_writer *w)
{
    snprintf(rec->error, sizeof(rec->error), "%s", w->error);
    rec->io_error = 1;
}

/* Queues n bytes for the writer: 0, or -1 with rec->error set. */
static int queue_bytes(struct recording *rec, const uint8_t *p, size_t n)
{
    struct rec_writer *w = rec->w;
    struct chunk *c;

    if (n == 0)
        return 0;
    if ((c = malloc(sizeof(*c) + n)) == NULL) {
        snprintf(rec->error, sizeof(rec->error),
                 "ljmpd is out of memory for the recording");
        return -1;
    }
    c->next = NULL;
    c->len = n;
    memcpy(c->data, p, n);
    pthread_mutex_lock(&w->mu);
    if (w->error[0] != '\0') {
        take_file_error(rec, w);
        pthread_mutex_unlock(&w->mu);
        free(c);
        return -1;
    }
    if (w->head == NULL) {
        w->head = c;
        w->progress_ms = clock_now_ms(); /* the wait for the file starts now */
        pthread_cond_signal(&w->cv);
    } else {
        w->tail->next = c;
    }
    w->tail = c;
    w->queued += n;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* The stripper's writes, gathered to be queued as one chunk. */
static int strip_out(void *ctx, const void *p, size_t n)
{
    struct lm_buf *out = ctx;

    lm_buf_bytes(out, p, n);
    return out->oom ? -1 : 0;
}

/* rec's stripper, with the limits of s's decoder: what the session
 * takes, it takes.  0, or -1 with rec->error set. */
static int strip_begin(struct recording *rec, const struct session *s)
{
    struct rec_strip *rs = calloc(1, sizeof(*rs));

    if (rs == NULL) {
        snprintf(rec->error, sizeof(rec->error),
                 "ljmpd is out of memory for the recording");
        return -1;
    }
    lm_strip_init(&rs->st, &s->prof.dec.limits, strip_out, &rs->out);
    rec->strip = rs;
    return 0;
}

/* The stripper goes once the recording takes no more bytes: an item it
 * held half-read is left out, and the file ends between items. */
static void strip_end(struct recording *rec)
{
    struct rec_strip *rs = rec->strip;

    if (rs == NULL)
        return;
    rec->stacks_stripped = rs->st.dec.revision == LM_REV_R3S;
    lm_strip_free(&rs->st);
    lm_buf_free(&rs->out);
    free(rs);
    rec->strip = NULL;
}

/* Strips n bytes and queues what that wrote: 0, or -1 with rec->error
 * set.  A stream the stripper finds malformed ends the recording only. */
static int strip_bytes(struct recording *rec, const uint8_t *p, size_t n)
{
    struct rec_strip *rs = rec->strip;
    enum lm_status end = lm_strip_feed(&rs->st, p, n, NULL);

    if (end == LM_ERROR && rs->st.failed) {
        snprintf(rec->error, sizeof(rec->error),
                 "ljmpd is out of memory for the recording");
        return -1;
    }
    int rc = queue_bytes(rec, rs->out.data, rs->out.len);
    if (rs->out.cap > STRIP_OUT_KEEP)
        lm_buf_free(&rs->out);
    rs->out.len = 0;
    if (rc != 0 || end != LM_ERROR)
        return rc;
    snprintf(rec->error, sizeof(rec->error),
             "the recorded stream cannot be stripped of its stacks: %s (at "
             "its byte %llu; the file holds the items before)",
             rs->st.dec.errmsg, (unsigned long long)rs->st.dec.err_offset);
    return -1;
}

int recorder_write(struct recording *rec, const uint8_t *p, size_t n)
{
    if (n == 0)
        return 0;
    return rec->strip != NULL ? strip_bytes(rec, p, n) : queue_bytes(rec, p, n);
}

int recorder_full(struct recording *rec)
{
    struct rec_writer *w = rec->w;

    pthread_mutex_lock(&w->mu);
    int full = w->queued >= RECORD_QUEUE_HIGH;
    if (full)
        w->wants_room = 1;
    pthread_mutex_unlock(&w->mu);
    return full;
}

/* Where a recording stands, to its client: begun in session_id, or done
 * with its bytes, the state its session ended in and its error. */
static void recording_tell(const struct recording *rec, uint64_t session_id,
                           int done, uint64_t written)
{
    Ljmp__RecordStatus st = LJMP__RECORD_STATUS__INIT;
    Ljmp__Response resp;

    if (rec->waiter == NULL)
        return;
    st.has_session_id = st.has_done = st.has_from_start = st.has_r3 = 1;
    st.session_id = session_id;
    st.done = done != 0;
    st.from_start = rec->from_start != 0;
    st.r3 = rec->r3 != 0;
    if (done) {
        st.has_stacks_stripped = st.r3;
        st.stacks_stripped = rec->stacks_stripped != 0;
        st.has_bytes_written = 1;
        st.bytes_written = written;
        if (rec->has_state) {
            st.has_state = 1;
            st.state = rec->state;
        }
        if (rec->error[0] != '\0')
            st.error = (char *)rec->error;
        st.has_io_error = 1;
        st.io_error = rec->io_error != 0;
    }
    peer_response_init(&resp, rec->request_id);
    resp.body_case = LJMP__RESPONSE__BODY_RECORD;
    resp.record = &st;
    peer_send(rec->waiter, &resp);
}

void recorder_begun(const struct recording *rec, uint64_t session_id)
{
    recording_tell(rec, session_id, 0, 0);
}

/* The client is told how the recording ended, and rec goes. */
static void recording_over(struct recording *rec, uint64_t written)
{
    struct peer *waiter = rec->waiter;

    TAILQ_REMOVE(&rec->srv->recorder->recordings, rec, link);
    recording_tell(rec, rec->session_id, 1, written);
    if (waiter != NULL) {
        peer_wait_end(waiter);
        peer_idle_check(waiter);
    }
    free(rec);
}

/* The session the client is told of: its id and state now. */
static void recording_of(struct recording *rec, const struct session *s)
{
    rec->session_id = s->id;
    rec->has_state = 1;
    rec->state = s->state;
}

/* rec records its session no more: it takes no more bytes, and every
 * end of a recording comes here first, its stripper's too. */
static void unlink_session(struct recording *rec)
{
    if (rec->s != NULL)
        *session_slot(rec->s, &recorder_observer) = NULL;
    rec->s = NULL;
    strip_end(rec);
}

void recorder_finish(struct recording *rec, const struct session *s)
{
    struct rec_writer *w = rec->w;

    if (s != NULL)
        recording_of(rec, s);
    unlink_session(rec);
    rec->holding = 0;
    pthread_mutex_lock(&w->mu);
    w->closing = 1;
    if (w->head == NULL) /* else a stuck write's wait goes on */
        w->progress_ms = clock_now_ms();
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void recorder_drop(struct recording *rec)
{
    if (rec->waiter != NULL)
        peer_wait_end(rec->waiter);
    rec->waiter = NULL;
    recorder_finish(rec, NULL);
}

/* The session is read again: the file took enough (or is let go). */
static void let_go(struct recording *rec)
{
    if (rec->s != NULL && rec->holding) {
        rec->holding = 0;
        session_release(rec->s);
    }
}

/* Stops recording s (the session goes on), its writer having failed. */
static void recording_stop(struct recording *rec)
{
    struct session *s = rec->s;

    log_warn("session %llu: %s; recording stopped", (unsigned long long)s->id,
             rec->error);
    let_go(rec);
    recorder_finish(rec, s);
}

/* What a writer's bell says: recordings over, failed, or with room. */
static void take_news(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    struct recording *rec, *next;

    (void)fd;
    (void)what;
    bell_answer(&srv->recorder->bell);
    for (rec = TAILQ_FIRST(&srv->recorder->recordings); rec != NULL;
         rec = next) {
        struct rec_writer *w = rec->w;
        next = TAILQ_NEXT(rec, link);
        pthread_mutex_lock(&w->mu);
        int done = w->done, room = !w->wants_room;
        uint64_t written = w->written;
        if (w->error[0] != '\0' && rec->error[0] == '\0')
            take_file_error(rec, w);
        pthread_mutex_unlock(&w->mu);
        if (done) {
            pthread_join(w->thread, NULL);
            writer_unref(w);
            recording_over(rec, written);
        } else if (rec->s != NULL && rec->error[0] != '\0') {
            recording_stop(rec);
        } else if (room) {
            let_go(rec);
        }
    }
}

/* Frees what waits behind the chunk being written (under mu): a writer
 * given up may never return from its write, and must not keep MiBs. */
static void drop_queue_but_head(struct rec_writer *w)
{
    if (w->head == NULL)
        return;
    while (w->head->next != NULL) {
        struct chunk *c = w->head->next;
        w->head->next = c->next;
        w->queued -= c->len;
        free(c);
    }
    w->tail = w->head;
}

/* Lets go of w's thread (under mu): it drops what is queued, and ends
 * on its own, freeing what it holds, when its write or close returns. */
static void abandon(struct rec_writer *w)
{
    w->given_up = 1;
    drop_queue_but_head(w);
    pthread_cond_signal(&w->cv);
}

/* Gives up on a writer that took no bytes for too long: its client is
 * told now, and its thread frees what it holds when its call returns. */
static void give_up(struct recording *rec, uint64_t idle_ms, size_t queued)
{
    struct rec_writer *w = rec->w;
    struct session *s = rec->s;

    if (s != NULL)
        recording_of(rec, s);
    let_go(rec);
    unlink_session(rec);
    rec->io_error = 1;
    snprintf(rec->error, sizeof(rec->error),
             "the record file took no bytes for %llu s (%zu KiB waiting%s); "
             "recording stopped",
             (unsigned long long)(idle_ms / 1000), queued >> 10,
             w->closing ? ", then its close" : "");
    log_warn("session %llu: %s", (unsigned long long)rec->session_id,
             rec->error);
    pthread_mutex_lock(&w->mu);
    abandon(w);
    uint64_t written = w->written;
    pthread_mutex_unlock(&w->mu);
    pthread_detach(w->thread);
    writer_unref(w);
    recording_over(rec, written);
}

void recorder_check_stalls(struct server *srv, uint64_t now)
{
    struct recording *rec, *next;

    for (rec = TAILQ_FIRST(&srv->recorder->recordings); rec != NULL;
         rec = next) {
        struct rec_writer *w = rec->w;
        next = TAILQ_NEXT(rec, link);
        pthread_mutex_lock(&w->mu);
        int waiting = (w->head != NULL || w->closing) && !w->done;
        uint64_t idle = now > w->progress_ms ? now - w->progress_ms : 0;
        size_t queued = w->queued;
        pthread_mutex_unlock(&w->mu);
        if (waiting && idle >= (uint64_t)srv->cfg.record_stall_s * 1000)
            give_up(rec, idle, queued);
    }
}

struct recording *recorder_of(const struct session *s)
{
    return *session_slot(s, &recorder_observer);
}

/* rec records s from now on. */
static void link_session(struct recording *rec, struct session *s)
{
    rec->s = s;
    *session_slot(s, &recorder_observer) = rec;
}

/* Whether s can be recorded from its first stream byte (under its lock). */
static int recordable_from_start(const struct session *s)
{
    return (s->phase == SESSION_HELLO || s->phase == SESSION_STREAM) &&
           s->stream_bytes == 0;
}

/*
 * An R3S recording from the middle: the configuration, then a definition
 * of each id the VM defined since its last reset, as the stack it names
 * (docs/format.md, "Recordings").  An id past the session's bound on
 * stacks names no frames the state kept: it is defined with none.  A
 * recording in R3 says them too, and its stripper drops them with the
 * rest: one filter decides what its file holds.
 */
static void say_stacks(struct lm_buf *b, const struct lm_stacks *k)
{
    struct lm_stack_frame f[LM_STACK_MAX_DEPTH + 1];

    lm_enc_stack_config(b, k->depth, k->sample_bytes);
    for (uint32_t i = 0; i < k->nids; i++) {
        uint32_t n = 0;
        if (k->ids[i].stack != 0 && k->ids[i].stack != LM_NONE) {
            const struct lm_sframe *sf =
                lm_stacks_frames(k, k->ids[i].stack, &n);
            if (n > LM_STACK_MAX_DEPTH + 1)
                n = LM_STACK_MAX_DEPTH + 1;
            for (uint32_t j = 0; j < n; j++)
                f[j] = (struct lm_stack_frame){sf[j].kind, sf[j].addr,
                                               sf[j].value};
        }
        lm_enc_stack_def(b, k->ids[i].id, f, n);
    }
}

/*
 * Starts a recording in the middle of the stream: a symbol table of what
 * the session knows now, then the item the decoder holds half-read, then
 * everything that arrives.  Blocks allocated before are not in the file:
 * their frees show as frees of unknown blocks.
 */
static int record_from_now(struct session *s, struct recording *rec)
{
    const struct lm_decoder *d = &s->prof.dec;
    struct lm_buf b = {0};

    if (s->phase != SESSION_STREAM || d->phase != LM_PH_EVENTS ||
        (s->prof.state.revision != LM_REV_R3 &&
         s->prof.state.revision != LM_REV_R3S)) {
        /* A feed thread may have reached the stream's end before the
         * loop took its job back: the decoder's phase says so first. */
        const char *what = "reading its symbol table";
        if (s->phase != SESSION_STREAM || d->phase > LM_PH_EVENTS)
            what = "ending";
        else if (d->phase == LM_PH_EVENTS)
            what = lm_revision_name(s->prof.state.revision);
        snprintf(rec->error, sizeof(rec->error),
                 "session %llu is %s; a recording can start at the start "
                 "of a stream or among its R3 or R3S events",
                 (unsigned long long)s->id, what);
        return -1;
    }
    lm_enc_symtab_prologue(&b, d->ljs_version);
    lm_enc_symtab_of(&b, &s->prof.state.sym, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_events_prologue(&b, d->ljm_version);
    if (s->prof.state.revision == LM_REV_R3S)
        say_stacks(&b, &s->prof.state.stacks);
    /* The trace in effect where the decoder stands, said again: the VM
     * says it only when it changes (docs/format.md, "Trace context"). */
    if (d->trace != 0)
        lm_enc_trace_mark(&b, d->trace);
    /* A stand-in's trace read, its prototype symbol still to come. */
    if (d->standin != 0)
        lm_enc_standin(&b, d->standin);
    lm_buf_bytes(&b, d->pend, d->pend_len);
    if (b.oom) {
        lm_buf_free(&b);
        snprintf(rec->error, sizeof(rec->error), "out of memory");
        return -1;
    }
    int rc = recorder_write(rec, b.data, b.len);
    lm_buf_free(&b);
    rec->from_offset = s->stream_bytes;
    if (rc == 0)
        link_session(rec, s);
    return rc;
}

/* Under the session's lock: a feed thread may be applying bytes
 * meanwhile, and a recording from now starts where the state is. */
int recorder_attach(struct session *s, struct recording *rec)
{
    int rc = 0;

    if (recorder_of(s) != NULL) {
        snprintf(rec->error, sizeof(rec->error),
                 "session %llu is being recorded already",
                 (unsigned long long)s->id);
        return -1;
    }
    session_lock(s);
    if (rec->r3 && strip_begin(rec, s) != 0) {
        rc = -1;
    } else if (!recordable_from_start(s)) {
        rc = record_from_now(s, rec);
    } else {
        rec->from_start = 1;
        rec->from_offset = 0;
        link_session(rec, s);
    }
    session_unlock(s);
    /* A recording from now begins with the symbol table: its file may
     * be behind already. */
    if (rc == 0 && recorder_full(rec)) {
        rec->holding = 1;
        session_hold(s);
    }
    return rc;
}

/*
 * Copies stream bytes, from stream offset `at`, into the recording; a
 * failed write ends it (the session goes on).  A recording from the start
 * gets the C symbols ljmpd read right after the symbol table's prologue,
 * so that the file names C functions as the live session does.  Bytes
 * before the recording's first offset are in it already: a recording
 * that began while they were being fed has them in its symbol table.
 */
static int copy_bytes(struct recording *rec, const struct session *s,
                      uint64_t at, const uint8_t *p, size_t n)
{
    if (at < rec->from_offset) {
        uint64_t skip = rec->from_offset - at;
        if (skip >= n)
            return 0;
        p += skip;
        n -= (size_t)skip;
        at = rec->from_offset;
    }
    if (rec->from_start && !rec->spliced && at + n >= LM_PROLOGUE_SIZE) {
        size_t head = at < LM_PROLOGUE_SIZE ? LM_PROLOGUE_SIZE - at : 0;
        if (recorder_write(rec, p, head) != 0 ||
            (s->prof.dec.ljs_version == 3 &&
             recorder_write(rec, s->csyms.entries.data, s->csyms.entries.len) !=
                 0))
            return -1;
        rec->spliced = 1;
        p += head;
        n -= head;
    }
    return recorder_write(rec, p, n);
}

/* A session's decoded bytes go to its recording; a file that falls
 * behind holds the session (a slow file slows its own VM only). */
static void session_fed(struct session *s, uint64_t at, const uint8_t *p,
                        size_t n, void *arg)
{
    struct recording *rec = recorder_of(s);

    (void)arg;
    if (rec == NULL)
        return;
    if (copy_bytes(rec, s, at, p, n) != 0) {
        log_warn("session %llu: %s; recording stopped",
                 (unsigned long long)s->id, rec->error);
        let_go(rec);
        recorder_finish(rec, s);
    } else if (!rec->holding && recorder_full(rec)) {
        rec->holding = 1;
        session_hold(s);
    }
}

/* A recording of s stops with it: its file takes what is queued. */
static void session_ended(struct session *s, void *arg)
{
    struct recording *rec = recorder_of(s);

    (void)arg;
    if (rec != NULL)
        recorder_finish(rec, s);
}

/* A session that goes before it ended never sent a valid hello, or
 * ljmpd is stopping. */
static void session_freed(struct session *s, void *arg)
{
    struct recording *rec = recorder_of(s);

    (void)arg;
    if (rec == NULL)
        return;
    if (!s->rejected) {
        recorder_finish(rec, s);
        return;
    }
    snprintf(rec->error, sizeof(rec->error),
             "pid %d connected without a valid hello: %s", (int)s->pid,
             s->reason);
    recorder_finish(rec, NULL);
}

const struct session_observer recorder_observer = {
    .fed = session_fed,
    .ended = session_ended,
    .freed = session_freed,
};

void recorder_forget_peer(struct server *srv, const struct peer *p)
{
    struct recording *rec;

    TAILQ_FOREACH(rec, &srv->recorder->recordings, link)
    if (rec->waiter == p)
        rec->waiter = NULL;
}

int recorder_start(struct server *srv)
{
    struct recorder *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return -1;
    TAILQ_INIT(&r->recordings);
    r->bell = BELL_NONE;
    srv->recorder = r;
    return bell_init(&r->bell, srv->base, PRIO_DEFAULT, take_news, srv,
                     "recordings");
}

/*
 * At the end: every recording was finished; their files are given
 * HELPER_STOP_WAIT_S to take what is queued and close, and clients are told.
 */
void recorder_stop(struct server *srv)
{
    struct recording *rec;
    unsigned n = 0;

    TAILQ_FOREACH(rec, &srv->recorder->recordings, link)
    if (rec->s != NULL) {
        snprintf(rec->error, sizeof(rec->error), "ljmpd stopped");
        recorder_finish(rec, rec->s);
    }

    TAILQ_FOREACH(rec, &srv->recorder->recordings, link)
    n++;
    /* Without room for the handles, no thread is waited for. */
    pthread_t *t = calloc(n ? n : 1, sizeof(*t));
    int joined = t != NULL;
    if (joined) {
        n = 0;
        TAILQ_FOREACH(rec, &srv->recorder->recordings, link)
        t[n++] = rec->w->thread;
        unsigned left = helper_join(t, n, HELPER_STOP_WAIT_S);
        if (left > 0)
            log_warn("%u record files still being written after %d s; left "
                     "behind",
                     left, HELPER_STOP_WAIT_S);
        free(t);
    }
    while ((rec = TAILQ_FIRST(&srv->recorder->recordings)) != NULL) {
        struct rec_writer *w = rec->w;
        pthread_mutex_lock(&w->mu);
        int done = w->done;
        if (w->error[0] != '\0')
            take_file_error(rec, w);
        else if (!done)
            snprintf(rec->error, sizeof(rec->error),
                     "ljmpd stopped before the file took the last %zu KiB "
                     "of the recording",
                     (w->queued + 1023) >> 10);
        if (!done)
            abandon(w);
        uint64_t written = w->written;
        pthread_mutex_unlock(&w->mu);
        if (!joined && done)
            pthread_join(w->thread, NULL);
        else if (!joined)
            pthread_detach(w->thread);
        writer_unref(w);
        recording_over(rec, written);
    }
}

void recorder_free(struct server *srv)
{
    if (srv->recorder == NULL)
        return;
    recorder_stop(srv); /* none left, unless the loop ended on an error */
    bell_free(&srv->recorder->bell);
    free(srv->recorder);
    srv->recorder = NULL;
}
