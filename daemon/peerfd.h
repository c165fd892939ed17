/* Peers' sockets and the descriptors peers pass: read explicitly, closed
 * on threads of their own so that no close holds the loop. */
#ifndef LJMPD_PEERFD_H
#define LJMPD_PEERFD_H

#include <sys/types.h>

/* The most descriptors one message may carry (the kernel's SCM_MAX_FD). */
#define PEERFD_MAX 253

/* What a read from a peer's socket brought besides its bytes. */
struct peerfd_set {
    int fd[PEERFD_MAX];
    unsigned n;
    int cut; /* more came than fit (the kernel closed them) */
};

/* Starts the closing service: 0, or -1 with the reason logged. */
int peerfd_start(void);
/* Closes what is still queued, within a bound, and ends the service. */
void peerfd_stop(void);
/* recvmsg of up to len bytes from a peer's socket, without waiting, and
 * the descriptors that came with them, all in *in: the caller keeps what
 * it wants and gives the others to peerfd_close.  Returns as recvmsg. */
ssize_t peerfd_recv(int sock, void *buf, size_t len, struct peerfd_set *in);
/* Closes a descriptor a peer chose, on a thread of its own; never
 * waits.  -1 is ignored. */
void peerfd_close(int fd);
/* Sets up a peer's socket, before its first read, for peerfd_recv. */
void peerfd_socket_options(int fd);
/* Closes a peer's socket (ingest or control), taking first what is still
 * queued in it.  -1 is ignored. */
void peerfd_close_socket(int fd);

#endif
