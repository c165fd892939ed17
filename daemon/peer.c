/* Control peers: framed requests in (with a descriptor now and then),
 * framed responses out; a bad peer is told why and closes only itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "peer.h"
#include "peerfd.h"
#include "quota.h"
#include "log.h"

#define PEER_READ_SIZE 65536
/* Requests handled per callback: one client cannot hold the loop. */
#define PEER_FRAMES_PER_CALL 16

static void peer_read(evutil_socket_t fd, short what, void *arg);
static void peer_write(evutil_socket_t fd, short what, void *arg);

/* How long a closing peer has to read its last answers, at most (and no
 * longer than an idle one has to ask): one that never reads would
 * otherwise keep its slot, and its queued output, for good. */
#define CLOSE_GRACE_MS 5000

static uint64_t close_grace_ms(const struct server *srv)
{
    uint64_t idle = (uint64_t)srv->cfg.client_idle_s * 1000;

    return idle < CLOSE_GRACE_MS ? idle : CLOSE_GRACE_MS;
}

/* Whether uid may open one more control connection: those uid has open,
 * and those of every user with a quota (see quota_may_take_slot). */
static int may_take_peer(const struct server *srv, uid_t uid)
{
    const struct peer *p;
    unsigned mine = 0, users = 0;

    TAILQ_FOREACH(p, &srv->peers, link)
    {
        mine += p->uid == uid;
        users += quota_applies(p->uid);
    }
    return quota_may_take_slot(uid, mine, users, srv->cfg.max_peers);
}

/* Refuses a new connection, telling it why if its socket takes the
 * answer now (it is not waited for). */
static void refuse(struct server *srv, int fd, const char *why)
{
    Ljmp__Response resp;
    Ljmp__Error err = LJMP__ERROR__INIT;
    size_t n;

    err.has_code = 1;
    err.code = LJMP__ERROR_CODE__ERR_PERMISSION;
    err.message = (char *)why;
    peer_response_init(&resp, 0);
    resp.error = &err;
    uint8_t *frame = ljmp_wire_pack(&resp.base, &n);
    if (frame != NULL)
        (void)!send(fd, frame, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(frame);
    srv->counters.control_rejected++;
    peerfd_close_socket(fd);
}

/* Lines about clients turned away, which any local user (for a daemon
 * whose control socket is open to all) can cause as often as it
 * connects. */
static struct log_limit refusals = LOG_LIMIT("refused control connections");
static struct log_limit rejections = LOG_LIMIT("rejected clients");

/* Whether the client on fd may connect, by its credentials (*cred): when
 * it may not, it is told why if it can be, counted and closed, and -1
 * returned. */
static int admit(struct server *srv, int fd, struct ucred *cred)
{
    socklen_t len = sizeof(*cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0) {
        log_limited(&refusals, LOG_WARN, "control: no peer credentials: %s",
                    strerror(errno));
        srv->counters.control_rejected++;
        peerfd_close_socket(fd);
        return -1;
    }
    if (srv->npeers >= srv->cfg.max_peers) {
        log_limited(&refusals, LOG_WARN,
                    "control: pid %d refused: %u clients connected already "
                    "(--max-clients)",
                    (int)cred->pid, srv->npeers);
        refuse(srv, fd,
               "ljmpd serves as many clients as it may already "
               "(--max-clients): try again later");
        return -1;
    }
    if (!may_take_peer(srv, cred->uid)) {
        log_limited(&refusals, LOG_WARN,
                    "control: pid %d refused: uid %u has its share of the %u "
                    "client slots already (--max-clients)",
                    (int)cred->pid, (unsigned)cred->uid, srv->cfg.max_peers);
        refuse(srv, fd,
               "your user has its share of ljmpd's client connections open "
               "already (--max-clients): close some");
        return -1;
    }
    return 0;
}

/* A peer for the client on fd, reading; NULL when out of memory (fd is
 * left open). */
static struct peer *peer_new(struct server *srv, int fd,
                             const struct ucred *cred)
{
    struct peer *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->srv = srv;
    p->fd = fd;
    p->pid = cred->pid;
    p->uid = cred->uid;
    p->passed_fd = -1;
    p->in = evbuffer_new();
    p->out = evbuffer_new();
    p->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, peer_read, p);
    p->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, peer_write, p);
    if (p->rev != NULL)
        event_priority_set(p->rev, PRIO_CONTROL);
    if (p->wev != NULL)
        event_priority_set(p->wev, PRIO_CONTROL);
    if (p->in != NULL && p->out != NULL && p->rev != NULL && p->wev != NULL &&
        event_add(p->rev, NULL) == 0)
        return p;
    if (p->in != NULL)
        evbuffer_free(p->in);
    if (p->out != NULL)
        evbuffer_free(p->out);
    if (p->rev != NULL)
        event_free(p->rev);
    if (p->wev != NULL)
        event_free(p->wev);
    free(p);
    return NULL;
}

void peer_accept(struct server *srv, int fd)
{
    struct ucred cred;
    struct peer *p;

    peerfd_socket_options(fd);
    if (admit(srv, fd, &cred) != 0)
        return;
    if ((p = peer_new(srv, fd, &cred)) == NULL) {
        log_error("control: out of memory for pid %d; connection closed",
                  (int)cred.pid);
        srv->counters.control_rejected++;
        peerfd_close_socket(fd);
        return;
    }
    p->id = ++srv->next_peer_id;
    p->active_ms = clock_now_ms();
    TAILQ_INSERT_TAIL(&srv->peers, p, link);
    srv->npeers++;
    srv->counters.control_accepted++;
    log_debug("control %llu: pid %d uid %d connected",
              (unsigned long long)p->id, (int)p->pid, (int)p->uid);
}

void peer_free(struct peer *p)
{
    struct server *srv = p->srv;

    srv->peer_handler->gone(p);
    TAILQ_REMOVE(&srv->peers, p, link);
    srv->npeers--;
    event_free(p->rev);
    event_free(p->wev);
    evbuffer_free(p->in);
    evbuffer_free(p->out);
    peerfd_close(p->passed_fd);
    peerfd_close_socket(p->fd);
    log_debug("control %llu: closed", (unsigned long long)p->id);
    free(p);
}

/* Stops reading; the peer goes once its output is flushed. */
static void peer_close_after_flush(struct peer *p)
{
    p->closing = 1;
    p->closing_ms = clock_now_ms();
    event_del(p->rev);
    p->srv->peer_handler->closing(p);
    if (evbuffer_get_length(p->out) == 0)
        peer_free(p);
}

int peer_send(struct peer *p, const Ljmp__Response *resp)
{
    return peer_send_sized(p, resp,
                           protobuf_c_message_get_packed_size(&resp->base));
}

/* Answers refused for a memory budget, which a client may ask for again
 * and again. */
static struct log_limit over_budget = LOG_LIMIT("answers over a budget");

/*
 * Whether an answer of n bytes, bigger than a client's --queue (a
 * report), would take what ljmpd holds for the client's user (its
 * sessions, and what its clients have not read) past the user's memory
 * budget, or all of it past the total: many clients that ask for reports
 * and never read them would each hold a frame of up to 32 MiB.  Smaller
 * answers (snapshots) are bounded by --queue, and not walked for.  Says
 * why in why.
 */
static int over_memory_budget(const struct peer *p, size_t n, int part,
                              char *why, size_t len)
{
    const struct server *srv = p->srv;
    const struct peer *q;
    uint64_t mine = 0, all = 0;

    if (n <= srv->cfg.peer_queue && !part)
        return 0;
    TAILQ_FOREACH(q, &srv->peers, link)
    {
        size_t queued = evbuffer_get_length(q->out);
        all += queued;
        mine += q->uid == p->uid ? queued : 0;
    }
    mine += quota_bytes_of(&srv->held, p->uid) + n;
    all += srv->held.total + n;
    if (quota_applies(p->uid) && mine > srv->cfg.user_memory) {
        snprintf(why, len,
                 "the answer (%zu bytes) would take what ljmpd holds for uid "
                 "%u to %llu bytes, over its user's memory budget of %zu",
                 n, (unsigned)p->uid, (unsigned long long)mine,
                 srv->cfg.user_memory);
        return 1;
    }
    if (all > srv->cfg.total_memory) {
        snprintf(why, len,
                 "the answer (%zu bytes) would take what ljmpd holds to %llu "
                 "bytes, over its memory budget of %zu",
                 n, (unsigned long long)all, srv->cfg.total_memory);
        return 1;
    }
    return 0;
}

static int send_checked(struct peer *p, const Ljmp__Response *resp, size_t n,
                        int part);

int peer_send_sized(struct peer *p, const Ljmp__Response *resp, size_t n)
{
    return send_checked(p, resp, n, 0);
}

int peer_send_part(struct peer *p, const Ljmp__Response *resp)
{
    return send_checked(p, resp,
                        protobuf_c_message_get_packed_size(&resp->base), 1);
}

int peer_may_take(const struct peer *p)
{
    return evbuffer_get_length(p->out) <= p->srv->cfg.peer_queue;
}

void peer_set_bulk(struct peer *p, int bulk)
{
    /* An event's priority is set while it is neither pending nor active. */
    int pending = event_pending(p->wev, EV_WRITE, NULL);

    event_del(p->wev);
    event_priority_set(p->wev, bulk ? PRIO_INGEST : PRIO_CONTROL);
    if (pending)
        event_add(p->wev, NULL);
}

/* Queues resp, of packed size n; part: checked against the memory budget
 * whatever its size. */
static int send_checked(struct peer *p, const Ljmp__Response *resp, size_t n,
                        int part)
{
    char why[256];
    struct evbuffer_iovec v;

    if (p->gone)
        return 0; /* served all the same; nobody reads the answer */

    if (n > LJMP_WIRE_MAX_FRAME) {
        log_error("control %llu: a %zu-byte response is over the frame limit",
                  (unsigned long long)p->id, n);
        if (resp->error == NULL)
            peer_send_error(p, resp->id, LJMP__ERROR_CODE__ERR_INTERNAL,
                            "the response (%zu bytes) is larger than the "
                            "protocol's frame limit (%u bytes)",
                            n, LJMP_WIRE_MAX_FRAME);
        return -1;
    }
    if (over_memory_budget(p, n, part, why, sizeof(why))) {
        log_limited(&over_budget, LOG_WARN, "control %llu: %s",
                    (unsigned long long)p->id, why);
        if (resp->error == NULL)
            peer_send_error(p, resp->id, LJMP__ERROR_CODE__ERR_INTERNAL, "%s",
                            why);
        return -1;
    }
    if (evbuffer_reserve_space(p->out, (ev_ssize_t)(LJMP_WIRE_HEADER + n), &v,
                               1) < 1) {
        log_error("control %llu: out of memory queueing a response",
                  (unsigned long long)p->id);
        return -1;
    }
    ljmp_wire_put_len(v.iov_base, (uint32_t)n);
    protobuf_c_message_pack(&resp->base,
                            (uint8_t *)v.iov_base + LJMP_WIRE_HEADER);
    v.iov_len = LJMP_WIRE_HEADER + n;
    evbuffer_commit_space(p->out, &v, 1);
    /*
     * Written at once, as far as the socket takes it: subscribers who
     * subscribed together tick together, and a snapshot left for the next
     * turn of the loop would wait for all the others to be built.  What
     * is left, a hard error included, is the write event's (peer_write),
     * which also lets a closing peer go once its output is out.
     */
    (void)evbuffer_write(p->out, p->fd);
    event_add(p->wev, NULL);
    /* A client that does not read its answers gets no more until it
     * does: the queue stays bounded. */
    if (!p->throttled && evbuffer_get_length(p->out) > p->srv->cfg.peer_queue) {
        p->throttled = 1;
        event_del(p->rev);
    }
    return 0;
}

void peer_response_init(Ljmp__Response *resp, uint64_t id)
{
    ljmp__response__init(resp);
    resp->has_version = resp->has_id = 1;
    resp->version = LJMP_WIRE_VERSION;
    resp->id = id;
}

void peer_send_error(struct peer *p, uint64_t id, Ljmp__ErrorCode code,
                     const char *fmt, ...)
{
    Ljmp__Response resp;
    Ljmp__Error err = LJMP__ERROR__INIT;
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    err.has_code = 1;
    err.code = code;
    err.message = msg;
    peer_response_init(&resp, id);
    resp.error = &err;
    peer_send(p, &resp);
}

/* A peer that broke the protocol: told why, counted, closed. */
static void peer_reject(struct peer *p, const char *why)
{
    log_limited(&rejections, LOG_WARN,
                "control %llu: pid %d: %s; connection closed",
                (unsigned long long)p->id, (int)p->pid, why);
    p->srv->counters.control_rejected++;
    peer_send_error(p, 0, LJMP__ERROR_CODE__ERR_BAD_REQUEST, "%s", why);
    peer_close_after_flush(p);
}

/* Keeps the descriptor passed with a request; more than one (which would
 * let a client queue any number of them for closing) is noted, and the
 * client rejected (peer_read). */
static void take_passed_fds(struct peer *p, const struct peerfd_set *in)
{
    if (in->cut || in->n > 1 || (in->n == 1 && p->passed_fd >= 0))
        p->fds_over = 1;
    for (unsigned i = 0; i < in->n; i++) {
        if (p->passed_fd < 0 && !p->fds_over)
            p->passed_fd = in->fd[i];
        else
            peerfd_close(in->fd[i]);
    }
}

/* Dispatches up to max whole frames of the input; 0, 1 if whole frames
 * are left, or -1 when the peer was rejected. */
static int peer_frames(struct peer *p, int max)
{
    uint8_t hdr[LJMP_WIRE_HEADER];

    while (!p->closing && !p->throttled &&
           evbuffer_copyout(p->in, hdr, sizeof(hdr)) == sizeof(hdr)) {
        uint32_t len = ljmp_wire_get_len(hdr);
        char why[128];
        if (len > LJMP_WIRE_MAX_REQUEST) {
            snprintf(why, sizeof(why),
                     "a %u-byte request frame is over the limit (%u bytes)",
                     len, LJMP_WIRE_MAX_REQUEST);
            peer_reject(p, why);
            return -1;
        }
        if (evbuffer_get_length(p->in) < LJMP_WIRE_HEADER + (size_t)len)
            break;
        if (max-- == 0)
            return 1;
        uint8_t *frame = evbuffer_pullup(p->in, LJMP_WIRE_HEADER + len);
        if (frame == NULL) {
            peer_reject(p, "out of memory reading a request");
            return -1;
        }
        Ljmp__Request *req =
            ljmp__request__unpack(NULL, len, frame + LJMP_WIRE_HEADER);
        evbuffer_drain(p->in, LJMP_WIRE_HEADER + len);
        if (req == NULL) {
            snprintf(why, sizeof(why),
                     "a %u-byte request frame is not a Request message", len);
            peer_reject(p, why);
            return -1;
        }
        p->active_ms = clock_now_ms();
        p->srv->peer_handler->request(p, req);
        ljmp__request__free_unpacked(req, NULL);
        /* A descriptor belongs to the request it came with. */
        peerfd_close(p->passed_fd);
        p->passed_fd = -1;
    }
    return 0;
}

/* Reads what the socket has (with any descriptor passed), unless a whole
 * request is waiting already. */
static ssize_t peer_recv(struct peer *p)
{
    struct evbuffer_iovec v;
    struct peerfd_set in;

    if (evbuffer_reserve_space(p->in, PEER_READ_SIZE, &v, 1) < 1) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n = peerfd_recv(p->fd, v.iov_base, PEER_READ_SIZE, &in);
    if (n >= 0)
        take_passed_fds(p, &in);
    if (n > 0) {
        v.iov_len = (size_t)n;
        evbuffer_commit_space(p->in, &v, 1);
    }
    return n;
}

/* Whether the client closed its end for good (not just its sending
 * half): then nothing it asked for can reach it. */
static int peer_hung_up(const struct peer *p)
{
    struct pollfd pfd = {.fd = p->fd, .events = POLLIN};

    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP);
}

/* Whether a whole request frame is waiting. */
static int peer_has_frame(struct peer *p)
{
    uint8_t hdr[LJMP_WIRE_HEADER];

    return evbuffer_copyout(p->in, hdr, sizeof(hdr)) == sizeof(hdr) &&
           evbuffer_get_length(p->in) >=
               LJMP_WIRE_HEADER + (size_t)ljmp_wire_get_len(hdr);
}

/* The client is gone for good: its answers would go nowhere, so they
 * are dropped, and no more are queued (peer_send). */
static void peer_mark_gone(struct peer *p)
{
    p->gone = 1;
    p->throttled = 0;
    evbuffer_drain(p->out, evbuffer_get_length(p->out));
    event_del(p->wev);
}

/*
 * The client is gone for good (it hung up, or its socket broke).  What it
 * sent is served all the same, in turns (a script may send a detach and
 * close at once): ljmpd reads on to the end of it, then the peer is
 * closed, and what it held (a subscription, waits) freed.
 */
static void peer_lost(struct peer *p)
{
    if (p->closing) {
        peer_free(p);
        return;
    }
    peer_mark_gone(p);
    if (!p->eof)
        event_add(p->rev, NULL);
    event_active(p->rev, EV_READ, 0);
}

static void peer_read(evutil_socket_t fd, short what, void *arg)
{
    struct peer *p = arg;

    (void)fd;
    (void)what;
    if (!p->eof && evbuffer_get_length(p->in) <=
                       LJMP_WIRE_HEADER + LJMP_WIRE_MAX_REQUEST) {
        ssize_t n = peer_recv(p);
        if (p->fds_over) {
            peer_reject(p, "more than one file descriptor came with a "
                           "request");
            return;
        }
        if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
            /* The end of what the client sent, or its socket broke.  One
             * only done sending gets its answers (waiting for any VM it
             * asked about), then is closed. */
            p->eof = 1;
            event_del(p->rev);
            if (!p->gone && (n < 0 || peer_hung_up(p)))
                peer_mark_gone(p);
        }
    }
    /* More whole requests than this turn's share: the rest next turn (or,
     * throttled, once the client has read its answers: peer_write). */
    int more = peer_frames(p, PEER_FRAMES_PER_CALL);
    if (more == 1) {
        event_active(p->rev, EV_READ, 0);
    } else if (more == 0 && p->eof) {
        if (p->gone)
            peer_free(p);
        else if (!p->throttled)
            peer_idle_check(p);
    }
}

static void peer_write(evutil_socket_t fd, short what, void *arg)
{
    struct peer *p = arg;

    (void)what;
    /* libevent's write of an empty buffer says -1 without a call, errno
     * left as it was (ENOENT from a look in /proc): not a lost client. */
    if (evbuffer_get_length(p->out) > 0 && evbuffer_write(p->out, fd) < 0 &&
        errno != EAGAIN && errno != EINTR) {
        peer_lost(p);
        return;
    }
    if (evbuffer_get_length(p->out) == 0) {
        event_del(p->wev);
        if (p->closing) {
            peer_free(p);
            return;
        }
    }
    if (p->throttled && !p->closing &&
        evbuffer_get_length(p->out) <= p->srv->cfg.peer_queue) {
        p->throttled = 0;
        if (!p->eof)
            event_add(p->rev, NULL);
        event_active(p->rev, EV_READ, 0); /* requests read before */
    }
    if (!p->closing && peer_may_take(p))
        p->srv->peer_handler->drained(p);
}

/* Nothing it asked for is under way: no subscription, wait, recording. */
static int peer_waits(const struct peer *p)
{
    return p->waits != 0;
}

void peer_close_idle(struct server *srv, uint64_t now)
{
    struct peer *p, *next;

    for (p = TAILQ_FIRST(&srv->peers); p != NULL; p = next) {
        next = TAILQ_NEXT(p, link);
        /* One that was done sending may have hung up since: no read event
         * watches it any more. */
        if (p->eof && !p->gone && !p->closing && peer_hung_up(p)) {
            peer_lost(p);
            continue;
        }
        if (p->closing) {
            if (clock_elapsed_ms(now, p->closing_ms) >= close_grace_ms(srv)) {
                log_info("control %llu: pid %d left its last answers "
                         "unread for %llu ms; dropped",
                         (unsigned long long)p->id, (int)p->pid,
                         (unsigned long long)(now - p->closing_ms));
                peer_free(p);
            }
            continue;
        }
        if (peer_waits(p) || clock_elapsed_ms(now, p->active_ms) <
                                 (uint64_t)srv->cfg.client_idle_s * 1000)
            continue;
        log_info("control %llu: pid %d idle for %u s; closed",
                 (unsigned long long)p->id, (int)p->pid,
                 srv->cfg.client_idle_s);
        peer_send_error(p, 0, LJMP__ERROR_CODE__ERR_TIMEOUT,
                        "idle for %u s with nothing asked: closing (see "
                        "ljmpd --client-idle)",
                        srv->cfg.client_idle_s);
        peer_close_after_flush(p);
    }
}

void peer_wait_begin(struct peer *p)
{
    p->waits++;
}

void peer_wait_end(struct peer *p)
{
    p->waits--;
}

void peer_idle_check(struct peer *p)
{
    /* Frames still waiting are served first: peer_read closes it then. */
    if (!p->eof || p->closing || peer_waits(p) || peer_has_frame(p))
        return;
    size_t left = evbuffer_get_length(p->in);
    if (left > 0) {
        char why[128];
        snprintf(why, sizeof(why),
                 "the client stopped sending %zu bytes into a frame", left);
        peer_reject(p, why);
    } else {
        peer_close_after_flush(p);
    }
}

/* Writes what can be written now, without waiting (shutdown). */
void peer_flush_now(struct peer *p)
{
    while (evbuffer_get_length(p->out) > 0)
        if (evbuffer_write(p->out, p->fd) <= 0)
            break;
}
