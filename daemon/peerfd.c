/* Descriptors that peers pass to ljmpd: received explicitly, closed on a
 * thread of their own. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ljmpd.h"
#include "log.h"

/*
 * A peer chooses what it passes, and the last close of some descriptors
 * waits for somebody else: a FUSE file's for its daemon to answer FLUSH, a
 * TCP socket's with SO_LINGER for its peer to take the data still queued.
 * On the loop, one such close would hold every session and client.  So
 * they are closed here, in turn; one that never returns holds only the
 * ones queued behind it, which are file descriptors, not ljmpd.
 *
 * Nor may the kernel close them for us on the loop: a read without room
 * for descriptors drops those that came, and drops them in the reading
 * thread.  So every read from a peer's socket is recv_from_peer's.
 */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, quit;
    int *fds;
    size_t n, cap;
} closer = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

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
        pthread_mutex_unlock(&closer.mu);
        close(fd);
        pthread_mutex_lock(&closer.mu);
    }
    pthread_mutex_unlock(&closer.mu);
    return NULL;
}

int peer_fds_start(void)
{
    int rc = start_helper_thread(&closer.thread, close_queued, NULL);

    if (rc != 0) {
        log_error("starting the thread that closes peers' descriptors: %s",
                  strerror(rc));
        return -1;
    }
    closer.running = 1;
    return 0;
}

void peer_fd_close(int fd)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&closer.mu);
    if (closer.running && closer.n == closer.cap) {
        size_t cap = closer.cap ? 2 * closer.cap : 64;
        int *fds = realloc(closer.fds, cap * sizeof(*fds));
        if (fds != NULL) {
            closer.fds = fds;
            closer.cap = cap;
        }
    }
    if (!closer.running || closer.n == closer.cap) {
        pthread_mutex_unlock(&closer.mu);
        close(fd); /* no thread, or no memory: here, as before */
        return;
    }
    closer.fds[closer.n++] = fd;
    pthread_cond_signal(&closer.cv);
    pthread_mutex_unlock(&closer.mu);
}

/* Closes what is queued, waiting a second at most for a close that does
 * not return: the process is ending anyway. */
void peer_fds_stop(void)
{
    struct timespec until;

    if (!closer.running)
        return;
    pthread_mutex_lock(&closer.mu);
    closer.quit = 1;
    pthread_cond_signal(&closer.cv);
    pthread_mutex_unlock(&closer.mu);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (pthread_timedjoin_np(closer.thread, NULL, &until) != 0) {
        log_warn("a descriptor a peer passed is still closing; not waited "
                 "for");
        pthread_detach(closer.thread);
        closer.running = 0;
        return;
    }
    closer.running = 0;
    free(closer.fds);
    closer.fds = NULL;
    closer.n = closer.cap = 0;
}

ssize_t recv_from_peer(int sock, void *buf, size_t len, struct peer_fds *in)
{
    union {
        char buf[CMSG_SPACE(PEER_MAX_FDS * sizeof(int))];
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
        for (size_t i = 0; i < nfd && in->n < PEER_MAX_FDS; i++)
            memcpy(&in->fd[in->n++], CMSG_DATA(c) + i * sizeof(int),
                   sizeof(int));
    }
    return r;
}
