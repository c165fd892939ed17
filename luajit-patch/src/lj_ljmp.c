/*
** ljmp: where memprof streams go (a file, or ljmpd: its ingest socket, or
** a pipe passed over it), and LJMP_SOCKET, which profiles a VM from its
** start.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#define lj_ljmp_c
#define LUA_CORE
/* pipe2, vmsplice, memfd_create (ljamalg.c defines it for the amalgamated
** build; built file by file, this file needs it itself). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lj_obj.h"
#include "lj_state.h"
#include "lj_ljmp.h"
#include "lj_memprof.h"
#include "luajit.h"
#include "lmemprof.h"
#include "ljmp_ingest.h"
#include "lm_format.h"

static void vm_set_error(global_State *g, int err);

/*
** The pipe to ljmpd holds up to SINK_PIPE_BUFS of memprof's buffers
** while the VM fills one more: ljmpd reads them meanwhile.  2 MiB where
** allowed, else pipe-max-size (1 MiB by default for users): beside many
** busy VMs, ljmpd takes a while to come back to each, and the deeper
** pipe makes a VM wait for it less often (see wait_room; the depth was
** chosen with VMS=32 LJMP_PIPE=1 bench/daemon.sh).  Buffers are
** filled lowest free first, so a VM that ljmpd keeps up with touches
** two of them, not all.
*/
#define SINK_PIPE_BUFS 8
#define SINK_NBUFS (SINK_PIPE_BUFS + 1)
/* A smaller write is copied into the pipe: its pages are not worth
** pinning, and a stale buffer's few bytes need no wait for the reader. */
#define SINK_LEND_MIN (16 * 1024)

/* A file descriptor the stream goes to; for ljmpd, the trailer too. */
typedef struct Sink {
  int fd;
  int is_socket;
  int is_pipe;       /* a FIFO: a write to a closed one raises SIGPIPE */
  int conn;          /* ljmpd's socket when fd is the pipe it reads, or -1 */
  int wakes;         /* ljmpd answers wake-asks (see ljmp_ingest.h) */
  int ack_due;       /* the hello's answer is read at the writes (attach) */
  int max_stall_ms;  /* bound on one write, 0 for none */
  uint64_t piped;    /* bytes put into the pipe */
  uint64_t sent;     /* bytes of the stream written, for a stall notice */
  uint64_t pipe_room;  /* what the pipe holds, in bytes */
  /* By memprof's buffer: piped once its pages were lent to the pipe, 0
  ** if they were copied; the buffer is free once ljmpd read that far. */
  uint64_t lent_until[SINK_NBUFS];
  uint32_t nbufs;    /* memprof's buffers: what the pipe holds, and one */
  uint32_t filling;  /* the buffer memprof fills */
  lua_State *L;      /* main thread of the VM profiled */
  char path[108];    /* the socket's, for a forked child's own session */
  LjmpWant want;     /* what the stream carries; a child's asks the same */
} Sink;

static void follow_fork(lua_State *L, const Sink *sk);

/* write(2) to a pipe, or vmsplice(2) into it (lend), with SIGPIPE
** blocked, and the one it raised, if any, taken back: the host's
** disposition of SIGPIPE is not ours to use. */
static ssize_t write_pipe(int fd, const void *p, size_t len, int lend,
			  int nonblock)
{
  sigset_t pipe_set, old, pending;
  int was_pending, e;
  ssize_t n;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  if (lend) {
    struct iovec iov;
    iov.iov_base = (void *)p;
    iov.iov_len = len;
    n = vmsplice(fd, &iov, 1, nonblock ? SPLICE_F_NONBLOCK : 0);
  } else {
    n = write(fd, p, len);
  }
  e = errno;
  /* Linux raises it even for a short write cut by the reader's close. */
  sigpending(&pending);
  if (!was_pending && sigismember(&pending, SIGPIPE)) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = e;
  return n;
}

static int64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Bytes of the pipe that ljmpd has not read yet; if the pipe cannot
** say, none read at all. */
static uint64_t pipe_unread(Sink *sk)
{
  int n = 0;
  if (ioctl(sk->fd, FIONREAD, &n) != 0) return sk->piped;
  return n > 0 ? (uint64_t)n : 0;
}

/*
** Waits until the pipe holds at most level unread bytes, asking ljmpd to
** say when (LJMP_WAKE_ASK, see ljmp_ingest.h): a pipe wakes its writer
** for every page read, and beside many busy VMs writers woken that
** often, or napping to look, take the CPU from ljmpd's threads.  0 once
** it does, or why not: EPIPE once ljmpd is gone, EAGAIN at the deadline.
*/
static int wait_for_reader(Sink *sk, int64_t deadline, uint64_t level)
{
  int asked = !sk->wakes;  /* An older ljmpd: look in naps instead. */
  int look = sk->wakes ? LJMP_WAKE_LOOK_MS : 2;
  for (;;) {
    struct pollfd pfd[2];
    int timeout = look;
    uint8_t in[16];
    if (pipe_unread(sk) <= level) return 0;
    if (!asked) {
      uint8_t ask[LJMP_WAKE_ASK_SIZE];
      ljmp_wake_ask_encode(ask, level > 0xffffffffu ? 0xffffffffu :
					   (uint32_t)level);
      /* Five bytes into a socket that carries nothing else: if they do
      ** not fit, ljmpd reads nothing there, and the looks below serve. */
      send(sk->conn, ask, sizeof(ask), MSG_NOSIGNAL | MSG_DONTWAIT);
      asked = 1;
    }
    if (deadline != 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) return EAGAIN;
      if (left < timeout) timeout = (int)left;
    }
    pfd[0].fd = sk->conn;
    pfd[0].events = POLLIN;
    pfd[1].fd = sk->fd;  /* POLLERR once ljmpd closed the read end */
    pfd[1].events = 0;
    pfd[0].revents = pfd[1].revents = 0;
    if (poll(pfd, 2, timeout) < 0 && errno != EINTR) return errno;
    if (pfd[1].revents & POLLERR) return EPIPE;
    /* The answer, or the hello's late one: either way, look again. */
    if ((pfd[0].revents & POLLIN) &&
	recv(sk->conn, in, sizeof(in), MSG_DONTWAIT) == 0)
      return EPIPE;  /* ljmpd ended the session */
    if (!sk->wakes && look < 16) look *= 2;
  }
}

/*
** A full pipe, while lending: wait until ljmpd has read three quarters
** of it, as a Unix socket wakes its writer once that much of its buffer
** is free: fewer, longer waits.  A pipe of partly filled pages is full
** with fewer bytes: then until it holds a quarter as many.
*/
static int wait_room(Sink *sk, int64_t deadline, int *retried)
{
  uint64_t unread = pipe_unread(sk), level = sk->pipe_room / 4;
  if (unread <= level && !*retried) {
    *retried = 1;  /* ljmpd read it meanwhile: try again first */
    return 0;
  }
  return wait_for_reader(sk, deadline, level < unread ? level : unread / 4);
}

/* A pipe's write end is non-blocking under a stall bound only: then a
** full pipe is waited for here, until the deadline (EAGAIN). */
static int wait_writable(Sink *sk, int64_t deadline)
{
  struct pollfd pfd;
  int64_t left = deadline - now_ms();
  if (left <= 0) return EAGAIN;
  pfd.fd = sk->fd;
  pfd.events = POLLOUT;
  pfd.revents = 0;
  if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) return errno;
  return 0;  /* The write says what changed (EPIPE, room, or nothing). */
}

/* Writes until done, retrying EINTR and short writes, never raising
** SIGPIPE; with a stall bound, gives up (EAGAIN) once it is spent.
** lend: a pipe may keep the pages of buf (see sink_write). */
static int write_some_all(Sink *sk, const void *buf, size_t len, int lend)
{
  const char *p = (const char *)buf;
  int64_t deadline = sk->max_stall_ms > 0 ? now_ms() + sk->max_stall_ms : 0;
  int retried = 0;
  while (len > 0) {
    ssize_t n = sk->is_socket ? send(sk->fd, p, len, MSG_NOSIGNAL) :
		sk->is_pipe ? write_pipe(sk->fd, p, len, lend,
					 lend || deadline != 0) :
		write(sk->fd, p, len);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      retried = 0;
      if (sk->conn >= 0) sk->piped += (uint64_t)n;
      sk->sent += (uint64_t)n;
    } else if (n < 0 && errno == EAGAIN && sk->is_pipe &&
	       (lend || deadline != 0)) {
      int e = lend ? wait_room(sk, deadline, &retried) :
		     wait_writable(sk, deadline);
      if (e != 0) return e;
    } else if (n == 0 || errno != EINTR) {
      return n < 0 ? errno : EIO;
    }
    if (len > 0 && deadline != 0 && now_ms() >= deadline) return EAGAIN;
  }
  return 0;
}

static int write_all(Sink *sk, const void *buf, size_t len)
{
  return write_some_all(sk, buf, len, 0);
}

/*
** A buffer whose pages the pipe holds is memprof's to fill again only
** once ljmpd has read them: the next one memprof fills is the lowest
** that is free.  The pipe has no room for more than nbufs - 1 buffers,
** so one is nearly always free; else the VM waits (lossless), or gives
** up at its stall bound.
*/
static int choose_next_buffer(Sink *sk)
{
  int64_t deadline = sk->max_stall_ms > 0 ? now_ms() + sk->max_stall_ms : 0;
  for (;;) {
    uint64_t read = sk->piped - pipe_unread(sk), first = sk->piped;
    uint32_t i;
    int e;
    for (i = 0; i < sk->nbufs; i++) {
      if (sk->lent_until[i] <= read) {
	sk->filling = i;
	return 0;
      }
      if (sk->lent_until[i] < first) first = sk->lent_until[i];
    }
    /* Until ljmpd has read the buffer lent first. */
    if ((e = wait_for_reader(sk, deadline, sk->piped - first)) != 0) return e;
  }
}

/* After each write but the stream's last: a final flush that ljmpd
** takes need not wait for a buffer, and its trailer follows it. */
static int sink_next_buf(void *ctx)
{
  Sink *sk = (Sink *)ctx;
  int e = choose_next_buffer(sk);
  return e != 0 ? -e : (int)sk->filling;
}

/* Waits for ljmpd's answer to the hello (see ljmp_ingest.h): 0 once it
** came or the wait ran out (an old or busy daemon: stream anyway), else
** why the daemon refused.  A stall bound shorter than the usual wait
** bounds it too: the program asked not to be held up longer. */
static int wait_hello_ack(Sink *sk)
{
  int wait_ms = sk->max_stall_ms > 0 && sk->max_stall_ms < LJMP_ACK_WAIT_MS ?
		sk->max_stall_ms : LJMP_ACK_WAIT_MS;
  int64_t deadline = now_ms() + wait_ms;
  for (;;) {
    struct pollfd pfd;
    int64_t left = deadline - now_ms();
    uint8_t ack[2];
    ssize_t n;
    if (left <= 0) return 0;
    pfd.fd = sk->conn >= 0 ? sk->conn : sk->fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    n = poll(&pfd, 1, (int)left);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    n = recv(pfd.fd, ack, sk->conn >= 0 ? 2 : 1, MSG_DONTWAIT);
    if (n >= 1) {
      sk->wakes = n == 2 && ack[1] == LJMP_WAKE;
      return ack[0] == LJMP_HELLO_ACK ? 0 : EPROTO;
    }
    if (n == 0) return ECONNRESET;  /* The daemon refused the hello. */
    if (errno != EINTR && errno != EAGAIN) return errno;
  }
}

/* Whether the stream goes to ljmpd, by its socket or its pipe. */
static int sink_is_ljmpd(const Sink *sk)
{
  return sk->is_socket || sk->conn >= 0;
}

/*
** To ljmpd's pipe, memprof's writes of SINK_LEND_MIN bytes or more are
** lent, not copied: vmsplice hands the pipe their buffer's pages, and
** ljmpd reads them from there (one copy fewer, and no socket buffers to
** allocate).
*/
/* An attach's stream does not wait for the hello's answer: it is looked
** for at each write until it comes.  ljmpd holds what comes meanwhile in
** the socket until it has read the process's C symbols; a refusal (the
** socket closed) ends the profile as a failed write would. */
static int take_due_ack(Sink *sk)
{
  uint8_t ack;
  ssize_t n;
  do {
    n = recv(sk->fd, &ack, 1, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n == 1) {
    sk->ack_due = 0;
    return ack == LJMP_HELLO_ACK ? 0 : EPROTO;
  }
  if (n == 0) return ECONNRESET;
  return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
}

static int sink_write(void *ctx, const void *buf, size_t len)
{
  Sink *sk = (Sink *)ctx;
  int lend = sk->conn >= 0 && len >= SINK_LEND_MIN;
  int e = sk->ack_due ? take_due_ack(sk) : 0;
  if (e != 0) return e;
  e = write_some_all(sk, buf, len, lend);
  if (e == 0 && sk->conn >= 0)
    sk->lent_until[sk->filling] = lend ? sk->piped : 0;
  return e;
}

/* How full the way to ljmpd is, in percent (the census paces itself by
** it): the pipe's unread bytes, or the socket's unsent ones against its
** buffer (both counted as the kernel charges them); -1 for a file. */
static int sink_backlog(void *ctx)
{
  Sink *sk = (Sink *)ctx;
  if (sk->conn >= 0 && sk->pipe_room > 0)
    return (int)(pipe_unread(sk) * 100 / sk->pipe_room);
  if (sk->is_socket) {
    int queued = 0, size = 0;
    socklen_t len = sizeof(size);
    if (ioctl(sk->fd, SIOCOUTQ, &queued) != 0 ||
	getsockopt(sk->fd, SOL_SOCKET, SO_SNDBUF, &size, &len) != 0 ||
	size <= 0)
      return -1;
    return (int)((int64_t)queued * 100 / size);
  }
  return -1;
}

/* A profile that ended because ljmpd stalled past the bound says so on
** a connection of its own (the stream's socket is full): without it, the
** session would look like a VM that died.  It never waits. */
static void notice_gave_up(const Sink *sk)
{
  struct sockaddr_un sa;
  uint8_t notice[LJMP_NOTICE_SIZE];
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, sk->path);
  ljmp_notice_encode(notice, LJMP_GAVE_UP_STALLED, sk->sent);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
    (void)send(fd, notice, sizeof(notice), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

static void sink_stop(void *ctx, const MemprofResult *res)
{
  Sink *sk = (Sink *)ctx;
  if (res->err == EAGAIN && sink_is_ljmpd(sk) && sk->path[0] != '\0')
    notice_gave_up(sk);
  if (res->err == ECHILD) {
    /* A forked child's copy: the connection is the parent's to end. */
    if (sink_is_ljmpd(sk)) follow_fork(sk->L, sk);
  } else if (sink_is_ljmpd(sk) && res->err == 0 && res->stream_bytes > 0) {
    uint8_t t[LJMP_TRAILER_SIZE];
    ljmp_trailer_encode(t, res->events, res->stream_bytes);
    write_all(sk, t, sizeof(t));
  }
  close(sk->fd);
  if (sk->conn >= 0) close(sk->conn);
  free(sk);
}

/* At exit, the last writes wait for the reader at most EXIT_STALL_MS (or
** the profile's own bound, if shorter): a stopped ljmpd must not keep a
** program that ends from ending. */
#define EXIT_STALL_MS 1000

static void sink_at_exit(void *ctx)
{
  Sink *sk = (Sink *)ctx;
  if (sk->max_stall_ms > 0 && sk->max_stall_ms <= EXIT_STALL_MS) return;
  sk->max_stall_ms = EXIT_STALL_MS;
  if (sk->is_pipe)  /* Waits for room are bounded by poll (write_some_all). */
    fcntl(sk->fd, F_SETFL, fcntl(sk->fd, F_GETFL) | O_NONBLOCK);
  if (sk->is_socket) {
    struct timeval tv;
    tv.tv_sec = EXIT_STALL_MS / 1000;
    tv.tv_usec = (EXIT_STALL_MS % 1000) * 1000;
    setsockopt(sk->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
}

static int start_sink(lua_State *L, Sink *sk, LjmpError *e)
{
  MemprofOptions opt;
  int r;
  opt.write = sink_write;
  opt.ctx = sk;
  opt.on_stop = sink_stop;
  opt.at_exit = sink_at_exit;
  opt.nbufs = sk->conn >= 0 ? sk->nbufs : 1;
  opt.next_buf = sink_next_buf;
  opt.census = sk->want.census;
  opt.stacks = sk->want.stacks;
  opt.stack_sample = sk->want.stack_sample;
  opt.backlog = sink_backlog;
  sk->L = mainthread(G(L));
  r = lj_memprof_start(L, &opt);  /* on_stop frees sk if this fails. */
  if (r == LJ_MEMPROF_OK) {
    vm_set_error(G(L), 0);  /* A working profile: the old failure is history. */
    return 0;
  }
  e->err = r == LJ_MEMPROF_ERRRUN ? EINVAL :
	   r == LJ_MEMPROF_ERRMEM ? ENOMEM : errno;
  e->running = r == LJ_MEMPROF_ERRRUN;
  return -1;
}

static Sink *new_sink(int fd, int is_socket, int max_stall_ms,
		      const LjmpWant *want)
{
  Sink *sk = (Sink *)malloc(sizeof(*sk));
  struct stat st;
  if (sk == NULL) {
    close(fd);
    return NULL;
  }
  sk->fd = fd;
  sk->is_socket = is_socket;
  sk->is_pipe = !is_socket && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  sk->max_stall_ms = max_stall_ms;
  sk->conn = -1;
  sk->wakes = 0;
  sk->ack_due = 0;
  sk->piped = sk->pipe_room = sk->sent = 0;
  memset(sk->lent_until, 0, sizeof(sk->lent_until));
  sk->nbufs = 1;
  sk->filling = 0;
  sk->L = NULL;
  sk->path[0] = '\0';
  sk->want = *want;
  return sk;
}

/* Clears *e; says whether a profile runs already (a start must fail
** before it touches anything: a file, a connection). */
static int running_already(lua_State *L, LjmpError *e)
{
  memset(e, 0, sizeof(*e));
  if (!lj_memprof_running(G(L))) return 0;
  e->err = EINVAL;
  e->running = 1;
  return 1;
}

int lj_ljmp_start_file(lua_State *L, const char *path, const LjmpWant *want,
		       LjmpError *e)
{
  Sink *sk;
  int fd;
  if (running_already(L, e)) return -1;
  fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || (sk = new_sink(fd, 0, 0, want)) == NULL) {
    e->err = fd < 0 ? errno : ENOMEM;
    return -1;
  }
  return start_sink(L, sk, e);
}

#ifdef OPENRESTY_LUAJIT
#define VM_FLAVOUR LJMP_VM_OPENRESTY
#else
#define VM_FLAVOUR LJMP_VM_LUAJIT
#endif

/*
** The pipe the stream goes through (see ljmp_ingest.h), its write end in
** sk->fd from now on, the socket in sk->conn; 0, or -1 if none is to be
** used.  Only with LJMP_PIPE=1 (see ljmp_ingest.h): a lone VM streams a
** little cheaper through a pipe, but beside many busy VMs ljmpd ingests
** less through pipes than through sockets, and its snapshots come later
** (bench/vm.sh and bench/daemon.sh measure both ways).
*/
static int open_pipe(Sink *sk, int *read_end)
{
  const char *want = getenv("LJMP_PIPE");
  int p[2], room;
  if (want == NULL || strcmp(want, "1") != 0 || pipe2(p, O_CLOEXEC) != 0)
    return -1;
  /* Room for the buffers memprof lends.  A user past the kernel's share
  ** of pipe pages (fs.pipe-user-pages-soft: 64 MiB, 64 such VMs) gets
  ** pipes of two pages, which would cut every write into 8 KiB waits:
  ** with less than a buffer's room, the socket serves better. */
  if (fcntl(p[1], F_SETPIPE_SZ, SINK_PIPE_BUFS * LJ_MEMPROF_BUFSZ) < 0)
    fcntl(p[1], F_SETPIPE_SZ, SINK_PIPE_BUFS / 2 * LJ_MEMPROF_BUFSZ);
  room = fcntl(p[1], F_GETPIPE_SZ);
  if (room < LJ_MEMPROF_BUFSZ) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  sk->pipe_room = (uint64_t)room;
  sk->nbufs = (uint32_t)(room / LJ_MEMPROF_BUFSZ) + 1;
  if (sk->nbufs > SINK_NBUFS) sk->nbufs = SINK_NBUFS;
  if (sk->max_stall_ms > 0)
    fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
  sk->conn = sk->fd;
  sk->fd = p[1];
  sk->is_socket = 0;
  sk->is_pipe = 1;
  *read_end = p[0];
  return 0;
}

/* The hello (version 4: with a pipe's read end, or without), which says
** the stacks the stream carries. */
static size_t make_hello(const Sink *sk, uint8_t *hello)
{
  size_t n = ljmp_hello_encode(hello, LJMP_INGEST_STACKS_VERSION, VM_FLAVOUR,
			       LUAJIT_VERSION);
  hello[n] = (uint8_t)sk->want.stacks;
  ljmp_put_u64le(hello + n + 1, sk->want.stacks ? sk->want.stack_sample : 0);
  return n + LJMP_HELLO_STACKS_SIZE;
}

static int send_hello(Sink *sk, uint8_t *hello)
{
  int rd;
  size_t n;
  struct msghdr msg;
  struct iovec iov;
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct cmsghdr *cm;
  ssize_t sent;
  n = make_hello(sk, hello);
  if (open_pipe(sk, &rd) != 0) return write_all(sk, hello, n);
  memset(&msg, 0, sizeof(msg));
  memset(&ctl, 0, sizeof(ctl));
  iov.iov_base = hello;
  iov.iov_len = n;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl.buf;
  msg.msg_controllen = sizeof(ctl.buf);
  cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &rd, sizeof(int));
  do {
    sent = sendmsg(sk->conn, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  close(rd);  /* ljmpd's now, or nobody's */
  if (sent < 0) return errno;
  /* The rest of a short send, if any, without the pipe. */
  for (; (size_t)sent < n; ) {
    ssize_t k = send(sk->conn, hello + sent, n - (size_t)sent, MSG_NOSIGNAL);
    if (k < 0 && errno != EINTR) return errno;
    if (k > 0) sent += k;
  }
  return 0;
}

/* A stream to ljmpd's socket at path; defer_ack: the hello's answer is
** not waited for (see take_due_ack), unless the stream goes by a pipe,
** whose wakes the answer tells of. */
static int start_socket(lua_State *L, const char *path, int max_stall_ms,
			int defer_ack, const LjmpWant *want, LjmpError *e)
{
  struct sockaddr_un sa;
  uint8_t hello[LJMP_HELLO_MAX];
  Sink *sk;
  int fd;
  if (running_already(L, e)) return -1;
  if (strlen(path) >= sizeof(sa.sun_path)) {
    e->err = ENAMETOOLONG;
    return -1;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    e->err = errno;
    return -1;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, path);
  /* With a bound (the default), a connect or a write that stalls longer
  ** fails, and the profile stops (write_all bounds the whole write, not
  ** each call); without one, a slow reader slows the VM (lossless). */
  if (max_stall_ms > 0) {
    struct timeval tv;
    tv.tv_sec = max_stall_ms / 1000;
    tv.tv_usec = (max_stall_ms % 1000) * 1000;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  {
    /* Room for a few buffers in flight, so the VM seldom waits for the
    ** reader to be scheduled (the kernel caps it at net.core.wmem_max).
    ** Safe with the hello's answer: however much a short program's
    ** stream the socket holds, ljmpd has read its C symbols first. */
    int sndbuf = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  }
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    e->err = errno;
    close(fd);
    return -1;
  }
  if ((sk = new_sink(fd, 1, max_stall_ms, want)) == NULL) {
    e->err = ENOMEM;
    return -1;
  }
  strcpy(sk->path, path);
  e->err = send_hello(sk, hello);
  sk->sent = 0;  /* The stream's bytes, as ljmpd counts them. */
  if (e->err == 0 && defer_ack && sk->conn < 0)
    sk->ack_due = 1;
  else if (e->err == 0)
    e->err = wait_hello_ack(sk);
  if (e->err != 0) {
    if (sk->conn >= 0) close(sk->conn);
    close(sk->fd);
    free(sk);
    return -1;
  }
  return start_sink(L, sk, e);
}

int lj_ljmp_start_socket(lua_State *L, const char *path, int max_stall_ms,
			 const LjmpWant *want, LjmpError *e)
{
  return start_socket(L, path, lj_ljmp_stall_bound(max_stall_ms), 0, want,
		      e);
}

/* A number from the environment, or 0. */
static uint64_t env_number(const char *name)
{
  const char *v = getenv(name);
  char *end;
  unsigned long long n;
  if (v == NULL || *v == '\0') return 0;
  errno = 0;
  n = strtoull(v, &end, 10);
  return errno != 0 || *end != '\0' ? 0 : (uint64_t)n;
}

void lj_ljmp_env_stacks(LjmpWant *want)
{
  uint64_t depth = env_number("LJMP_STACKS");
  want->stacks = depth > LM_STACK_MAX_DEPTH ? LM_STACK_MAX_DEPTH
					    : (uint32_t)depth;
  want->stack_sample = want->stacks ? env_number("LJMP_STACK_SAMPLE") : 0;
}

int lj_ljmp_stall_bound(int asked)
{
  const char *env;
  if (asked >= 0) return asked;
  env = getenv("LJMP_MAX_STALL_MS");
  if (env != NULL && *env != '\0') {
    int ms = atoi(env);
    return ms > 0 ? ms : 0;
  }
  return LJMP_DEFAULT_STALL_MS;
}

/* -- The attach agent ----------------------------------------------------- */

/*
** ljmpd attaches to a running program by a real-time signal whose value
** says what to do (LJMP_REQ_ATTACH, LJMP_REQ_DETACH).  A signal handler
** may do almost nothing, so it only arms a one-shot count hook on every
** VM of the process; each VM's profiler starts or stops in its own hook,
** at its next safe point.  An idle VM or a long compiled loop delays it
** until Lua runs in the interpreter again: the request stays armed until
** then.
**
** A process may hold several VMs, made and closed in any order: nginx
** makes the new one of a reload before it closes the old one, and its
** workers forked afterwards inherit only the new one; a host may embed
** several.  Each streams a session of its own.  The agent serves up to
** AGENT_VMS of them and stays installed while any lives.
*/

/* Not a signal's request: a forked child starts a session of its own. */
#define REQ_FOLLOW_FORK 0x80
#define AGENT_VMS 16

typedef struct AgentVM {
  lua_State *volatile L;  /* main thread; NULL: a free slot */
  /* The request's value (LJMP_REQ_* or REQ_FOLLOW_FORK, with an attach's
  ** stacks, see ljmp_ingest.h), or 0. */
  volatile uint64_t request;
  lua_Hook saved_hook;  /* the program's own hook, given back */
  int saved_mask, saved_count;
  char follow[108];  /* where a forked child connects */
  int follow_stall_ms;
  LjmpWant follow_want;  /* the stacks its parent's stream carried */
  int err;  /* why its last LJMP_SOCKET or attach start failed, for status() */
} AgentVM;

typedef struct Agent {
  int installed;  /* the signal's handler */
  int sig;
  char ingest[108];  /* where attach connects */
  int max_stall_ms;
  int ignoring;  /* we set SIG_IGN when our last VM closed: ours to take */
  void *named;  /* the mapping that names the agent in /proc/PID/maps */
  AgentVM vm[AGENT_VMS];
} Agent;

static Agent agent;
/* VMs may be made and closed on several threads at once: their slots are
** taken and given back under this lock (the handler only reads them). */
static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;

static AgentVM *agent_vm(global_State *g)
{
  int i;
  for (i = 0; i < AGENT_VMS; i++)
    if (agent.vm[i].L != NULL && G(agent.vm[i].L) == g) return &agent.vm[i];
  return NULL;
}

static void vm_set_error(global_State *g, int err)
{
  AgentVM *v = agent_vm(g);
  if (v != NULL) v->err = err;
}

static void agent_hook(lua_State *L, lua_Debug *ar)
{
  AgentVM *v = agent_vm(G(L));
  int req, running = lj_memprof_running(G(L));
  uint64_t value;
  LjmpWant want;
  LjmpError e;
  UNUSED(ar);
  if (v == NULL) {
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  lua_sethook(L, v->saved_hook, v->saved_mask, v->saved_count);
  /* A signal may come between the two: the exchange keeps it. */
  value = __atomic_exchange_n(&v->request, 0, __ATOMIC_SEQ_CST);
  req = (int)(value & LJMP_REQ_MASK);
  if ((req == LJMP_REQ_ATTACH || req == LJMP_REQ_ATTACH_NO_CENSUS) &&
      !running) {
    uint32_t depth = (uint32_t)(value >> LJMP_REQ_STACKS_SHIFT) & 0xff;
    want.census = req == LJMP_REQ_ATTACH;
    want.stacks = depth > LM_STACK_MAX_DEPTH ? LM_STACK_MAX_DEPTH : depth;
    want.stack_sample = value >> LJMP_REQ_SAMPLE_SHIFT;
    /* ljmpd asked for it and waits: the program need not wait for it. */
    if (start_socket(L, agent.ingest, agent.max_stall_ms, 1, &want, &e) != 0)
      v->err = e.err;
  } else if (req == REQ_FOLLOW_FORK && !running) {
    /* A forked child's heap was made before: a census shows it. */
    want = v->follow_want;
    want.census = 1;
    if (lj_ljmp_start_socket(L, v->follow, v->follow_stall_ms, &want, &e) != 0)
      v->err = e.err;
  } else if (req == LJMP_REQ_DETACH && running) {
    lj_memprof_stop(L);
  }
}

/* Arms the one-shot hook that serves v->request (mask and count as
** lua_sethook takes them): from a signal handler, or in a forked
** child. */
static void agent_arm(AgentVM *v, int mask, int count)
{
  lua_State *L = v->L;
  /* The program's own hook is saved unless ours is in place already (a
  ** request still waiting): then only when it fires changes, so that a
  ** child forked while its parent's request waited follows after
  ** FOLLOW_AFTER_INS bytecodes, not at the first. */
  if (lua_gethook(L) != agent_hook) {
    v->saved_hook = lua_gethook(L);
    v->saved_mask = lua_gethookmask(L);
    v->saved_count = lua_gethookcount(L);
  }
  /* lua_sethook is the one VM call meant to be made asynchronously. */
  lua_sethook(L, agent_hook, mask, count);
}

/* Every VM of the process is asked: each that runs Lua serves it.  A
** detach while an attach still waits disarms it: the hook then finds
** nothing running, and stops nothing. */
static void agent_signal(int sig, siginfo_t *si, void *uc)
{
  uint64_t value = si->si_code == SI_QUEUE
		   ? (uint64_t)(uintptr_t)si->si_value.sival_ptr
		   : LJMP_REQ_ATTACH;
  int req = (int)(value & LJMP_REQ_MASK), i;
  UNUSED(sig); UNUSED(uc);
  if (req != LJMP_REQ_ATTACH && req != LJMP_REQ_ATTACH_NO_CENSUS &&
      req != LJMP_REQ_DETACH)
    return;
  for (i = 0; i < AGENT_VMS; i++) {
    AgentVM *v = &agent.vm[i];
    if (v->L == NULL) continue;
    v->request = value;
    agent_arm(v, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  }
}

/*
** A child forked while its parent streamed to a socket is a process of
** its own (an nginx worker forked by a master that LJMP_SOCKET profiles):
** ljmpd should see it as one, with SO_PEERCRED naming it.  Its copy of
** each of the parent's profiles has ended without a write; each such VM
** connects anew, as an attach would, whether or not the agent's signal
** handler is installed, once it has run FOLLOW_AFTER_INS bytecodes: a
** child that only builds an argument list and execs (through the FFI)
** opens no session, and one that starts a profile of its own at once
** keeps it.  Runs in pthread_atfork's child handler.
*/
#define FOLLOW_AFTER_INS 1000

static void follow_fork(lua_State *L, const Sink *sk)
{
  AgentVM *v = L != NULL ? agent_vm(G(L)) : NULL;
  if (v == NULL) return;  /* a VM past the AGENT_VMS the agent serves */
  strcpy(v->follow, sk->path);
  v->follow_stall_ms = sk->max_stall_ms;
  v->follow_want = sk->want;
  v->request = REQ_FOLLOW_FORK;
  agent_arm(v, LUA_MASKCOUNT, FOLLOW_AFTER_INS);
}

/* Where attach connects: $LJMP_INGEST, else ljmpd's default socket. */
static void agent_ingest_path(char *out, size_t len)
{
  const char *p = getenv("LJMP_INGEST");
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (p != NULL && *p != '\0')
    snprintf(out, len, "%s", p);
  else if (getuid() != 0 && xdg != NULL && *xdg != '\0')
    snprintf(out, len, "%s/ljmp/ingest.sock", xdg);
  else
    snprintf(out, len, "/run/ljmp/ingest.sock");
}

/*
** The agent names itself, its signal and where attach connects in
** /proc/PID/maps, through a page mapped from an empty memfd of that name
** (LJMP_AGENT_NAME_FMT): ljmpd reads it there, since a program may
** overwrite the environment /proc/PID/environ shows (nginx writes its
** process titles over it).  The page holds nothing and is never touched;
** forked children inherit it with the agent, exec drops both.  Without
** memfd_create (an old kernel, a seccomp filter), ljmpd reads the
** environment instead.
*/
static void agent_publish(void)
{
  char name[sizeof(LJMP_AGENT_NAME_PREFIX) + 32 + sizeof(agent.ingest)];
  void *p;
  int fd;
  snprintf(name, sizeof(name), LJMP_AGENT_NAME_FMT, agent.sig, agent.ingest);
  if ((fd = memfd_create(name, MFD_CLOEXEC)) < 0) return;
  p = mmap(NULL, 4096, PROT_NONE, MAP_SHARED, fd, 0);
  close(fd);
  agent.named = p == MAP_FAILED ? NULL : p;
}

static void agent_unpublish(void)
{
  if (agent.named != NULL) munmap(agent.named, 4096);
  agent.named = NULL;
}

/* A request signalled to the parent is not its child's: a child forked
** while one waits for a safe point drops it (the parent still serves
** it).  A request to follow a profile (follow_fork, from the profiler's
** own fork handler, which runs after this one) is the child's.  The
** slots' lock, taken before the fork, is released in the parent and made
** anew in the child. */
static void agent_forking(void)
{
  pthread_mutex_lock(&agent_lock);
}

static void agent_forked_parent(void)
{
  pthread_mutex_unlock(&agent_lock);
}

static void agent_forked(void)
{
  int i;
  for (i = 0; i < AGENT_VMS; i++)
    if (agent.vm[i].request != REQ_FOLLOW_FORK) agent.vm[i].request = 0;
  pthread_mutex_init(&agent_lock, NULL);  /* the forking thread's: anew */
}

/* Takes the signal for the process: 0, or -1 if the agent is off or the
** host handles that signal itself. */
static int agent_take_signal(void)
{
  const char *sig = getenv("LJMP_SIGNAL");
  struct sigaction sa, cur;
  {
    /* An offset from SIGRTMIN; out of range (or not a number), no agent. */
    char *end = NULL;
    long k = sig ? strtol(sig, &end, 10) : LJMP_DEFAULT_SIGNAL_OFFSET;
    if ((sig && end == sig) || k < 0 || k > SIGRTMAX - SIGRTMIN) return -1;
    agent.sig = SIGRTMIN + (int)k;
  }
  /* A signal the host handles already is the host's: no agent then. */
  if (sigaction(agent.sig, NULL, &cur) != 0) return -1;
  if (((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) &&
      !(cur.sa_handler == SIG_IGN && agent.ignoring))
    return -1;
  agent_ingest_path(agent.ingest, sizeof(agent.ingest));
  agent.max_stall_ms = lj_ljmp_stall_bound(-1);
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = agent_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGPROF);  /* jit.profile arms hooks too */
  if (sigaction(agent.sig, &sa, NULL) != 0) return -1;
  agent_publish();
  return 0;
}

/* A new VM takes a slot (its forked children follow its streams, and its
** status tells its errors), and the signal's handler is installed for
** the process unless LJMP_AGENT=0. */
static void agent_install(lua_State *L)
{
  static int fork_handled;
  const char *on = getenv("LJMP_AGENT");
  AgentVM *v;
  pthread_mutex_lock(&agent_lock);
  /* Before the profiler's (the first VM is made before any stream). */
  if (!fork_handled)
    fork_handled = pthread_atfork(agent_forking, agent_forked_parent,
				  agent_forked) == 0;
  for (v = agent.vm; v < agent.vm + AGENT_VMS && v->L != NULL; v++) ;
  if (v < agent.vm + AGENT_VMS) {  /* else more VMs than it serves */
    v->request = 0;
    v->saved_hook = NULL;
    v->saved_mask = v->saved_count = 0;
    v->err = 0;
    v->L = mainthread(G(L));  /* last: the handler may run at any point */
  }
  if (!agent.installed && !(on != NULL && strcmp(on, "0") == 0))
    agent.installed = agent_take_signal() == 0;
  pthread_mutex_unlock(&agent_lock);
}

void lj_ljmp_vm_closing(global_State *g)
{
  AgentVM *v;
  int i;
  pthread_mutex_lock(&agent_lock);
  /* The handler may run between any two of these: it reads the slots. */
  if ((v = agent_vm(g)) != NULL) v->L = NULL;
  for (i = 0; i < AGENT_VMS && agent.vm[i].L == NULL; i++) ;
  if (i == AGENT_VMS && agent.installed) {
    signal(agent.sig, SIG_IGN);  /* its default would end the process */
    agent.ignoring = 1;
    agent.installed = 0;
    agent_unpublish();
  }
  pthread_mutex_unlock(&agent_lock);
}

/*
** LJMP_SOCKET profiles a process from its start: each VM streams from
** its making (no census: it holds next to nothing yet), in a session of
** its own (nginx's reload makes a new VM beside the old one, whose
** session ends when it closes), and forked children follow.  Failing to
** connect is not the program's problem; status() tells why.
*/
void lj_ljmp_env_start(lua_State *L)
{
  const char *path = getenv("LJMP_SOCKET");
  LjmpWant want = {0, 0, 0};
  LjmpError e;
  agent_install(L);
  if (path == NULL || *path == '\0') return;
  lj_ljmp_env_stacks(&want);
  if (lj_ljmp_start_socket(L, path, -1, &want, &e) != 0)
    vm_set_error(G(L), e.err);
}

int lj_ljmp_env_error(global_State *g)
{
  AgentVM *v = agent_vm(g);
  return v != NULL ? v->err : 0;
}

/* -- The C API (lmemprof.h) ------------------------------------------------ */

/* What the API's starts carry (ljmp_memprof_set_census, _set_stacks). */
static LjmpWant api_want = {1, 0, 0};

LUA_API void ljmp_memprof_set_census(int on)
{
  api_want.census = on != 0;
}

LUA_API void ljmp_memprof_set_stacks(int depth, size_t sample_bytes)
{
  api_want.stacks = depth <= 0 ? 0 :
		    depth > LM_STACK_MAX_DEPTH ? LM_STACK_MAX_DEPTH :
		    (uint32_t)depth;
  api_want.stack_sample = api_want.stacks ? (uint64_t)sample_bytes : 0;
}

typedef struct ApiSink {
  ljmp_memprof_writer writer;
  ljmp_memprof_done done;
  void *ctx;
} ApiSink;

static int api_write(void *ctx, const void *buf, size_t len)
{
  ApiSink *a = (ApiSink *)ctx;
  return a->writer(a->ctx, buf, len);
}

static void api_stop(void *ctx, const MemprofResult *res)
{
  ApiSink *a = (ApiSink *)ctx;
  if (a->done) a->done(a->ctx, res->err);
  free(a);
}

static int api_result(int r)
{
  switch (r) {
  case LJ_MEMPROF_OK: return LJMP_MEMPROF_OK;
  case LJ_MEMPROF_ERRRUN: return LJMP_MEMPROF_ERRRUN;
  case LJ_MEMPROF_ERRUSE: return LJMP_MEMPROF_ERRUSE;
  case LJ_MEMPROF_ERRMEM: return LJMP_MEMPROF_ERRMEM;
  default: return LJMP_MEMPROF_ERRIO;
  }
}

LUA_API int ljmp_memprof_start(lua_State *L, ljmp_memprof_writer writer,
			       ljmp_memprof_done done, void *ctx)
{
  MemprofOptions opt;
  ApiSink *a = (ApiSink *)malloc(sizeof(*a));
  if (a == NULL) return LJMP_MEMPROF_ERRMEM;
  a->writer = writer;
  a->done = done;
  a->ctx = ctx;
  opt.write = api_write;
  opt.ctx = a;
  opt.on_stop = api_stop;
  opt.at_exit = NULL;  /* the host's writer may be gone by then */
  opt.nbufs = 1;  /* the host's writer may reuse nothing */
  opt.next_buf = NULL;
  opt.census = api_want.census;
  opt.stacks = api_want.stacks;
  opt.stack_sample = api_want.stack_sample;
  opt.backlog = NULL;
  return api_result(lj_memprof_start(L, &opt));  /* api_stop frees a */
}

LUA_API int ljmp_memprof_start_socket(lua_State *L, const char *path,
				      int max_stall_ms)
{
  LjmpError e;
  if (lj_ljmp_start_socket(L, path, max_stall_ms, &api_want, &e) == 0)
    return LJMP_MEMPROF_OK;
  errno = e.err;
  return e.running ? LJMP_MEMPROF_ERRRUN :
	 e.err == ENOMEM ? LJMP_MEMPROF_ERRMEM : LJMP_MEMPROF_ERRIO;
}

LUA_API int ljmp_memprof_stop(lua_State *L)
{
  return api_result(lj_memprof_stop(L));
}
