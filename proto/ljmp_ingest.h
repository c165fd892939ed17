/* The ingest connection between a profiled VM and ljmpd: hello, stream,
 * trailer.  Shared by luajit-patch (copied into the VM) and the daemon. */
#ifndef LJMP_INGEST_H
#define LJMP_INGEST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

/*
 * A VM connects to the ingest socket and writes, in order:
 *
 *   hello   := "LJMP" version(u8) flavour(u8) vmlen(u8) vm-version[vmlen]
 *   stream  := a memprof stream, revision R3 (docs/format.md)
 *   trailer := "LJMT" events(u64) stream-bytes(u64)      (little endian)
 *
 * Since version 2, ljmpd answers a whole, valid hello with one byte,
 * LJMP_HELLO_ACK, once it has read what it needs from the running
 * process (its C symbols, from /proc/PID), and the VM waits for it (at
 * most LJMP_ACK_WAIT_MS) before it streams.  Without the wait, a short
 * program's whole stream fits in the socket's buffer and the program can
 * exit before ljmpd looks at it.  A VM that hears nothing in time
 * streams anyway; ljmpd still takes version 1 hellos, unanswered.
 *
 * Since version 3, the stream and trailer may come through a pipe
 * instead: the VM makes it, and sends its read end with the hello
 * (SCM_RIGHTS, attached to the hello's bytes), which then says version
 * 3; after the hello's answer the socket carries only wake-ups (below).
 * The VM lends its buffers to the pipe (vmsplice) and copies only short
 * writes: one copy fewer than into a socket, which makes a lone VM's
 * streaming a little cheaper.  But ljmpd's reads out of lent pages
 * cost it more than its reads out of socket buffers, so beside many
 * busy VMs it ingests less through pipes.  A VM therefore uses a pipe
 * only with LJMP_PIPE=1, and only when the kernel lets the pipe hold a
 * whole buffer; else it sends a version 2 hello and streams on the
 * socket (bench/vm.sh and bench/daemon.sh compare the two).  A version 3
 * hello without a pipe's read end, or an fd with a lower version, is
 * refused.
 *
 * A pipe wakes its writer for every page read, and nothing wakes it only
 * once most of the pipe was read: beside many busy VMs, writers woken
 * that often took the CPU from ljmpd.  So a VM that needs the pipe
 * emptier asks on the socket, and sleeps until ljmpd answers:
 *
 *   wake-ask := LJMP_WAKE_ASK level(u32)   VM: wake me once the pipe
 *                                          holds at most level bytes
 *   wake     := LJMP_WAKE                  ljmpd: it does now
 *
 * The answer comes once the pipe is that empty (at once if it is
 * already); an ask replaces one not yet answered.  ljmpd says that it
 * answers asks by following its LJMP_HELLO_ACK to a version 3 hello with
 * LJMP_WAKE, in the same send; a VM that does not see it (an older
 * ljmpd) looks at the pipe in naps of 2 to 16 ms instead.  A VM that
 * asked still looks now and then (LJMP_WAKE_LOOK_MS), so a lost answer
 * only slows it.
 *
 * Since version 4, the hello says what the stream carries beyond R3,
 * after the version string:
 *
 *   stacks(u8) stack-sample(u64)   (little endian)
 *
 * stacks is the depth of the call stacks asked for (1 to 64), 0 for none
 * (the stream is then R3); stack-sample is their sampling mean in bytes,
 * 0 for a stack on every allocation (docs/format.md, "Stacks (R3S)").
 * A version 4 hello streams through a pipe exactly when it comes with
 * one (its read end, as in version 3).
 *
 * The trailer carries the VM's own totals (alloc, realloc and free events
 * written; bytes of the stream, from "ljs" to the epilogue), so that the
 * daemon can tell a complete session from a truncated one.  A VM whose
 * stream failed writes no trailer.  Who the peer is comes from the
 * socket's credentials, never from the hello.
 */

/*
 * A VM whose profile ended because ljmpd left it waiting past its stall
 * bound cannot say so in its stream: the socket (or pipe) is full, and
 * the stream may end in the middle of an event.  It says so on a second
 * connection to the ingest socket, which carries only
 *
 *   notice := "LJMN" reason(u8) stream-bytes(u64)      (little endian)
 *
 * and is closed.  stream-bytes is what the VM wrote of the stream (after
 * the hello): ljmpd gives the reason to the session of the same process
 * whose stream ends there.  A notice never waits: if ljmpd cannot take
 * it, the session ends as an ordinary truncated one.
 */
#define LJMP_NOTICE_MAGIC    "LJMN"
#define LJMP_NOTICE_SIZE     (4 + 1 + 8)
#define LJMP_GAVE_UP_STALLED 1 /* the reader stalled past the VM's bound */

#define LJMP_HELLO_MAGIC           "LJMP"
#define LJMP_TRAILER_MAGIC         "LJMT"
#define LJMP_INGEST_VERSION        4
#define LJMP_INGEST_MIN_VERSION    1 /* the oldest hello ljmpd takes */
#define LJMP_INGEST_ACK_VERSION    2 /* the first whose hello is answered */
#define LJMP_INGEST_PIPE_VERSION   3 /* the first whose stream is a pipe's */
#define LJMP_INGEST_STACKS_VERSION 4 /* the first that says its stacks */
#define LJMP_HELLO_STACKS_SIZE     (1 + 8)
#define LJMP_HELLO_ACK             0x06
#define LJMP_ACK_WAIT_MS           1000
#define LJMP_WAKE_ASK              0x57 /* 'W' */
#define LJMP_WAKE_ASK_SIZE         (1 + 4)
#define LJMP_WAKE                  0x52 /* 'R' */
#define LJMP_WAKE_LOOK_MS          250
/* The stacks' part is the larger of a hello's tails (the relay's pid) */
#define LJMP_HELLO_MAX    (4 + 3 + 255 + LJMP_HELLO_STACKS_SIZE)
#define LJMP_TRAILER_SIZE (4 + 8 + 8)

/*
 * Attach and detach: ljmpd sends the VM's process SIGRTMIN + offset
 * with sigqueue(3), the request in the value.  The offset is
 * LJMP_DEFAULT_SIGNAL_OFFSET, or the LJMP_SIGNAL=offset the VM was started
 * with.  The VM connects to its ingest socket ($LJMP_INGEST, else ljmpd's
 * default path) at its next safe point.
 *
 * The agent names its signal (the number itself) and that socket in
 * /proc/PID/maps: a page mapped from a memfd named by LJMP_AGENT_NAME_FMT,
 * which the maps line shows as "/memfd:" NAME " (deleted)".  The path is
 * the name's last field and may hold spaces.  Where that line is missing,
 * ljmpd reads LJMP_SIGNAL and LJMP_INGEST from /proc/PID/environ.
 */
#define LJMP_AGENT_NAME_PREFIX     "ljmp-agent v1 "
#define LJMP_AGENT_NAME_FMT        LJMP_AGENT_NAME_PREFIX "sig=%d ingest=%s"
#define LJMP_DEFAULT_SIGNAL_OFFSET 7
enum ljmp_request {
    LJMP_REQ_ATTACH = 1,
    LJMP_REQ_DETACH = 2,
    /* an attach whose stream skips the census of the heap it finds */
    LJMP_REQ_ATTACH_NO_CENSUS = 3,
};

/*
 * The request travels in the signal's value (sival_ptr, 64 bits): the
 * request in bits 0-7; for an attach, the depth of the call stacks asked
 * for in bits 8-15 (0: none) and their sampling mean in bytes in bits
 * 16-63 (0: every allocation).
 */
#define LJMP_REQ_MASK         0xffu
#define LJMP_REQ_STACKS_SHIFT 8
#define LJMP_REQ_SAMPLE_SHIFT 16
#define LJMP_REQ_SAMPLE_MAX   ((1ull << 48) - 1)

static inline uint64_t ljmp_request_value(int request, unsigned depth,
                                          uint64_t sample)
{
    return (uint64_t)(request & LJMP_REQ_MASK) |
           (uint64_t)(depth & 0xffu) << LJMP_REQ_STACKS_SHIFT |
           (sample & LJMP_REQ_SAMPLE_MAX) << LJMP_REQ_SAMPLE_SHIFT;
}

enum ljmp_vm_flavour {
    LJMP_VM_LUAJIT = 1,    /* upstream LuaJIT 2.1 (Debian's luajit) */
    LJMP_VM_OPENRESTY = 2, /* OpenResty's branch (Debian's luajit2) */
    /* A stream ljmp's VM did not write (Tarantool's memprof, a file),
     * relayed by `ljmpctl ingest` (see ljmp_relay_hello_encode). */
    LJMP_VM_RELAYED = 3,
};

/*
 * A relayed stream's hello is a version 2 hello of flavour
 * LJMP_VM_RELAYED whose version string is the stream's name, followed by
 *
 *   pid(u32)      (little endian) the process the stream is of, 0: none
 *
 * ljmpd names the session by that process if the relay's user owns it
 * (or is root), else by the relay; the stream may be of any memprof
 * revision, and its end marker ends the session: a relay sends no
 * trailer.
 */
#define LJMP_RELAY_PID_SIZE 4

/* Writes a hello of a version (LJMP_INGEST_VERSION with a pipe, else
 * 2) into out (LJMP_HELLO_MAX bytes); returns its size. */
static inline size_t ljmp_hello_encode(uint8_t *out, uint8_t version,
                                       uint8_t flavour, const char *vm_version)
{
    size_t n = strlen(vm_version);

    if (n > 255)
        n = 255;
    memcpy(out, LJMP_HELLO_MAGIC, 4);
    out[4] = version;
    out[5] = flavour;
    out[6] = (uint8_t)n;
    memcpy(out + 7, vm_version, n);
    return 7 + n;
}

/* A VM's hello's whole size (not a relayed one's), as far as its first
 * have bytes tell. */
static inline size_t ljmp_hello_size(const uint8_t *hello, size_t have)
{
    if (have < 7)
        return 7;
    return 7 + (size_t)hello[6] +
           (hello[4] >= LJMP_INGEST_STACKS_VERSION ? LJMP_HELLO_STACKS_SIZE
                                                   : 0);
}

/* Writes a relayed stream's hello (above) into out (LJMP_HELLO_MAX
 * bytes); returns its size. */
static inline size_t ljmp_relay_hello_encode(uint8_t *out, const char *name,
                                             uint32_t pid)
{
    size_t n =
        ljmp_hello_encode(out, LJMP_INGEST_ACK_VERSION, LJMP_VM_RELAYED, name);

    for (int i = 0; i < LJMP_RELAY_PID_SIZE; i++)
        out[n + i] = (uint8_t)(pid >> (8 * i));
    return n + LJMP_RELAY_PID_SIZE;
}

/* recvmsg of up to len bytes from an ingest connection and, if fd is not
 * NULL, the descriptor that came with them (a version 3 hello's pipe) in
 * *fd, else -1 there; any other descriptors are dropped.  Returns as
 * recvmsg.  ljmpd's own reads check more (daemon/session.c). */
static inline ssize_t ljmp_recv_with_fd(int sock, void *buf, size_t len,
                                        int *fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;

    if (fd != NULL) {
        *fd = -1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
    }
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n > 0 && fd != NULL && (c = CMSG_FIRSTHDR(&msg)) != NULL &&
        c->cmsg_type == SCM_RIGHTS)
        memcpy(fd, CMSG_DATA(c), sizeof(int));
    return n;
}

static inline void ljmp_put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t ljmp_get_u64le(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void ljmp_notice_encode(uint8_t *out, uint8_t reason,
                                      uint64_t stream_bytes)
{
    memcpy(out, LJMP_NOTICE_MAGIC, 4);
    out[4] = reason;
    ljmp_put_u64le(out + 5, stream_bytes);
}

static inline void ljmp_wake_ask_encode(uint8_t *out, uint32_t level)
{
    out[0] = LJMP_WAKE_ASK;
    for (int i = 0; i < 4; i++)
        out[1 + i] = (uint8_t)(level >> (8 * i));
}

/* A pipe reader's side of the wake-ups: the ask being read, and the one
 * to answer. */
struct ljmp_wake {
    uint8_t ask[LJMP_WAKE_ASK_SIZE];
    size_t ask_len;
    int asked;      /* an ask is unanswered */
    uint32_t level; /* its level */
};

/* Takes bytes from the socket; 0, or -1 at the first byte that does not
 * begin an ask (*bad says which). */
static inline int ljmp_wake_take(struct ljmp_wake *w, const uint8_t *p,
                                 size_t n, uint8_t *bad)
{
    for (size_t i = 0; i < n; i++) {
        if (w->ask_len == 0 && p[i] != LJMP_WAKE_ASK) {
            *bad = p[i];
            return -1;
        }
        w->ask[w->ask_len++] = p[i];
        if (w->ask_len < LJMP_WAKE_ASK_SIZE)
            continue;
        w->level = 0;
        for (int k = 3; k >= 0; k--)
            w->level = w->level << 8 | w->ask[1 + k];
        w->asked = 1;
        w->ask_len = 0;
    }
    return 0;
}

/* Whether the ask is to be answered now, pipe_unread being what the pipe
 * holds (FIONREAD); then it is no longer unanswered. */
static inline int ljmp_wake_due(struct ljmp_wake *w, uint64_t pipe_unread)
{
    if (!w->asked || pipe_unread > w->level)
        return 0;
    w->asked = 0;
    return 1;
}

/* Answers the unanswered ask, if the pipe (pipe_rd, its read end) is as
 * empty as it asked: LJMP_WAKE on sock.  1 once answered, 0 if not due,
 * -1 if the answer could not be sent. */
static inline int ljmp_wake_answer(struct ljmp_wake *w, int pipe_rd, int sock)
{
    int unread = 0;
    uint8_t wake = LJMP_WAKE;

    if (!w->asked || ioctl(pipe_rd, FIONREAD, &unread) != 0 ||
        !ljmp_wake_due(w, unread > 0 ? (uint64_t)unread : 0))
        return 0;
    return send(sock, &wake, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 1 : -1;
}

/* Writes a trailer into out (LJMP_TRAILER_SIZE bytes). */
static inline void ljmp_trailer_encode(uint8_t *out, uint64_t events,
                                       uint64_t stream_bytes)
{
    memcpy(out, LJMP_TRAILER_MAGIC, 4);
    ljmp_put_u64le(out + 4, events);
    ljmp_put_u64le(out + 12, stream_bytes);
}

/* Reads a trailer; 0, or -1 if the magic is wrong. */
static inline int ljmp_trailer_decode(const uint8_t *in, uint64_t *events,
                                      uint64_t *stream_bytes)
{
    if (memcmp(in, LJMP_TRAILER_MAGIC, 4) != 0)
        return -1;
    *events = ljmp_get_u64le(in + 4);
    *stream_bytes = ljmp_get_u64le(in + 12);
    return 0;
}

#endif
