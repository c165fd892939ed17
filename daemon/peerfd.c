/* Descriptors that peers pass to ljmpd, and peers' sockets: received
 * explicitly, closed without holding the loop. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helper.h"
#include "peerfd.h"
#include "log.h"

/*
 * A peer chooses what it passes, and the last close of some descriptors
 * waits for somebody else: a TCP socket's with SO_LINGER for its peer to
 * take the data still queued, a FUSE file's for its daemon to answer
 * FLUSH, a Unix socket's for the last close of what is queued in it.  On
 * the loop, one such close would hold every session and client.  So they
 * are closed on threads of their own: sockets are first told not to
 * linger, and a Unix socket's queue is taken and its descriptors queued
 * in turn.  A close that never returns (a FUSE daemon that never answers)
 * holds its thread; the next close then starts another, up to
 * CLOSER_THREADS, after which closes wait in the queue: descriptors, not
 * ljmpd.  What a peer may pass is bounded besides (one descriptor with a
 * hello or a request, none after).
 *
 * Nor may the kernel close them for us on the loop: a read without room
 * for descriptors drops those that came, and a socket's close those still
 * queued, in the calling thread.  So every read from a peer's socket is
 * peerfd_recv's, and a peer's socket is closed by peerfd_close_socket.
 */
enum { CLOSER_THREADS = 4 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread[CLOSER_THREADS];
    unsigned nthreads, idle;
    int quit;
    int *fds;
    size_t n, cap;
} closer = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Takes what a Unix socket holds, after its shutdown (so the queue only
 * shrinks): its descriptors are closed in turn.  A stream ends at 0; a
 * datagram may be empty, so only EAGAIN ends the others. */
static void drain_queue(int fd, int stream)
{
    static __thread uint8_t scratch[16 << 10];
    struct peerfd_set in;

    for (;;) {
        ssize_t r = peerfd_recv(fd, scratch, sizeof(scratch), &in);
        for (unsigned k = 0; k < in.n; k++)
            peerfd_close(in.fd[k]);
        if (r < 0 || (r == 0 && stream))
            break;
    }
}

/* A listening Unix socket's pending connections, taken to be closed in
 * turn (each with its queue). */
static void take_pending(int fd)
{
    int c;

    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while ((c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
        peerfd_close(c);
}

/* Closes fd without waiting for its peer, if it is a socket: one that
 * lingers is told not to, and what a Unix socket holds is taken first. */
static void close_now(int fd)
{
    struct linger now = {1, 0};
    int domain, type, listening = 0;
    socklen_t len = sizeof(domain), tlen = sizeof(type), llen = sizeof(int);

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0) {
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &llen);
        if (domain == AF_UNIX && listening) {
            take_pending(fd);
        } else if (domain == AF_UNIX) {
            peerfd_socket_options(fd);
            shutdown(fd, SHUT_RDWR);
            drain_queue(fd, type == SOCK_STREAM);
        } else {
            shutdown(fd, SHUT_RDWR);
        }
    }
    close(fd);
}

/* A closer thread: idle (counted so by its starter) until a descriptor
 * is queued. */
static void *close_queued(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&closer.mu);
    for (;;) {
        while (closer.n == 0 && !closer.quit)
            pthread_cond_wait(&closer.cv, &closer.mu);
        if (closer.n == 0)
            break;
        int fd = closer.fds[--closer.n];
        closer.idle--;
        pthread_mutex_unlock(&closer.mu);
        close_now(fd);
        pthread_mutex_lock(&closer.mu);
        closer.idle++;
    }
    closer.idle--;
    pthread_mutex_unlock(&closer.mu);
    return NULL;
}

/* Under closer.mu: a thread for the close just queued, if none is idle. */
static void closer_thread_for_one(void)
{
    if (closer.idle > 0 || closer.nthreads == CLOSER_THREADS || closer.quit)
        return;
    int rc = helper_start(&closer.thread[closer.nthreads], close_queued, NULL);
    if (rc != 0) {
        log_warn("starting a thread to close peers' descriptors: %s",
                 strerror(rc));
        return;
    }
    closer.idle++;
    if (closer.nthreads++ > 0)
        log_warn("a descriptor a peer passed is slow to close; closing on "
                 "%u threads",
                 closer.nthreads);
}

int peerfd_start(void)
{
    pthread_mutex_lock(&closer.mu);
    closer_thread_for_one();
    int ok = closer.nthreads == 1;
    pthread_mutex_unlock(&closer.mu);
    return ok ? 0 : -1;
}

void peerfd_close(int fd)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&closer.mu);
    if (closer.nthreads > 0 && closer.n == closer.cap) {
        size_t cap = closer.cap ? 2 * closer.cap : 64;
        int *fds = realloc(closer.fds, cap * sizeof(*fds));
        if (fds != NULL) {
            closer.fds = fds;
            closer.cap = cap;
        }
    }
    if (closer.nthreads == 0 || closer.n == closer.cap) {
        pthread_mutex_unlock(&closer.mu);
        close_now(fd); /* no thread, or no memory: here, as before */
        return;
    }
    closer.fds[closer.n++] = fd;
    closer_thread_for_one();
    pthread_cond_signal(&closer.cv);
    pthread_mutex_unlock(&closer.mu);
}

void peerfd_socket_options(int fd)
{
    int one = 1;

    /* Out-of-band data is read in line: a normal read skips it, and the
     * kernel drops the descriptors that came with it in the reader. */
    setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
}

void peerfd_close_socket(int fd)
{
    if (fd < 0)
        return;
    /* The peer can queue nothing more; what it did is taken here. */
    shutdown(fd, SHUT_RDWR);
    drain_queue(fd, 1);
    close(fd);
}

/* Closes what is queued, waiting a second at most for closes that do not
 * return: the process is ending anyway. */
void peerfd_stop(void)
{
    pthread_mutex_lock(&closer.mu);
    closer.quit = 1;
    pthread_cond_broadcast(&closer.cv);
    unsigned n = closer.nthreads;
    pthread_mutex_unlock(&closer.mu);
    unsigned left = helper_join(closer.thread, n, 1);
    if (left > 0) {
        log_warn("%u descriptors peers passed are still closing; not "
                 "waited for",
                 left);
        return; /* the threads may still use the queue */
    }
    closer.nthreads = 0;
    free(closer.fds);
    closer.fds = NULL;
    closer.n = closer.cap = 0;
}

ssize_t peerfd_recv(int sock, void *buf, size_t len, struct peerfd_set *in)
{
    union {
        char buf[CMSG_SPACE(PEERFD_MAX * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

    in->n = 0;
    in->cut = r >= 0 && (msg.msg_flags & MSG_CTRUNC) != 0;
    if (r < 0)
        return r;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL;
         c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd && in->n < PEERFD_MAX; i++)
            memcpy(&in->fd[in->n++], CMSG_DATA(c) + i * sizeof(int),
                   sizeof(int));
    }
    return r;
}
