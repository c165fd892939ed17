/*
** ljmp: where memprof streams go (a file, or ljmpd's ingest socket), and
** LJMP_SOCKET, which profiles a VM from its start.
** New VM file of ljmp's luajit-patch (not part of LuaJIT).
*/

#define lj_ljmp_c
#define LUA_CORE

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lj_obj.h"
#include "lj_ljmp.h"
#include "lj_memprof.h"
#include "luajit.h"
#include "ljmp_ingest.h"

/* A file descriptor the stream goes to; for a socket, the trailer too. */
typedef struct Sink {
  int fd;
  int is_socket;
} Sink;

/* write(2) until done; EINTR retried.  Never raises SIGPIPE. */
static int write_all(Sink *sk, const void *buf, size_t len)
{
  const char *p = (const char *)buf;
  while (len > 0) {
    ssize_t n = sk->is_socket ? send(sk->fd, p, len, MSG_NOSIGNAL)
			      : write(sk->fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int sink_write(void *ctx, const void *buf, size_t len)
{
  return write_all((Sink *)ctx, buf, len);
}

static void sink_stop(void *ctx, const MemprofResult *res)
{
  Sink *sk = (Sink *)ctx;
  if (sk->is_socket && res->err == 0 && res->stream_bytes > 0) {
    uint8_t t[LJMP_TRAILER_SIZE];
    ljmp_trailer_encode(t, res->events, res->stream_bytes);
    write_all(sk, t, sizeof(t));
  }
  close(sk->fd);
  free(sk);
}

static int start_sink(lua_State *L, Sink *sk, LjmpError *e)
{
  MemprofOptions opt;
  int r;
  opt.write = sink_write;
  opt.ctx = sk;
  opt.on_stop = sink_stop;
  r = lj_memprof_start(L, &opt);  /* on_stop frees sk if this fails. */
  if (r == LJ_MEMPROF_OK) return 0;
  e->err = r == LJ_MEMPROF_ERRRUN ? EINVAL :
	   r == LJ_MEMPROF_ERRMEM ? ENOMEM : errno;
  e->running = r == LJ_MEMPROF_ERRRUN;
  return -1;
}

static Sink *new_sink(int fd, int is_socket)
{
  Sink *sk = (Sink *)malloc(sizeof(*sk));
  if (sk == NULL) {
    close(fd);
    return NULL;
  }
  sk->fd = fd;
  sk->is_socket = is_socket;
  return sk;
}

int lj_ljmp_start_file(lua_State *L, const char *path, LjmpError *e)
{
  Sink *sk;
  int fd;
  memset(e, 0, sizeof(*e));
  /* Checked first: a second start must not truncate the running file. */
  if (lj_memprof_running()) {
    e->err = EINVAL;
    e->running = 1;
    return -1;
  }
  fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || (sk = new_sink(fd, 0)) == NULL) {
    e->err = fd < 0 ? errno : ENOMEM;
    return -1;
  }
  return start_sink(L, sk, e);
}

int lj_ljmp_start_socket(lua_State *L, const char *path, int max_stall_ms,
			 LjmpError *e)
{
  struct sockaddr_un sa;
  uint8_t hello[LJMP_HELLO_MAX];
  size_t n;
  Sink *sk;
  int fd;
  memset(e, 0, sizeof(*e));
  if (lj_memprof_running()) {
    e->err = EINVAL;
    e->running = 1;
    return -1;
  }
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
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    e->err = errno;
    close(fd);
    return -1;
  }
  /* Lossless by default: a slow reader slows the VM.  With a bound, a
  ** write that stalls longer fails, and the profile stops instead. */
  if (max_stall_ms > 0) {
    struct timeval tv;
    tv.tv_sec = max_stall_ms / 1000;
    tv.tv_usec = (max_stall_ms % 1000) * 1000;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  if ((sk = new_sink(fd, 1)) == NULL) {
    e->err = ENOMEM;
    return -1;
  }
#ifdef OPENRESTY_LUAJIT
  n = ljmp_hello_encode(hello, LJMP_VM_OPENRESTY, LUAJIT_VERSION);
#else
  n = ljmp_hello_encode(hello, LJMP_VM_LUAJIT, LUAJIT_VERSION);
#endif
  if ((e->err = write_all(sk, hello, n)) != 0) {
    close(fd);
    free(sk);
    return -1;
  }
  return start_sink(L, sk, e);
}

static int env_err;

void lj_ljmp_env_start(lua_State *L)
{
  const char *path = getenv("LJMP_SOCKET");
  const char *stall = getenv("LJMP_MAX_STALL_MS");
  LjmpError e;
  if (path == NULL || *path == '\0') return;
  /* Only the first VM of a process: memprof is process-wide.  Failing
  ** to connect is not the program's problem; status() tells why. */
  if (lj_ljmp_start_socket(L, path, stall ? atoi(stall) : 0, &e) != 0)
    env_err = e.err;
}

int lj_ljmp_env_error(void)
{
  return env_err;
}
