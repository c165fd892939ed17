/* The C API for embedders (lmemprof.h): a host program profiles its VM
 * into its own writer, and the core library reads what it wrote. */
#define _GNU_SOURCE /* struct ucred */
#include <CUnit/Basic.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lauxlib.h"
#include "lmemprof.h"
#include "lua.h"
#include "lualib.h"

#include "ljmp_ingest.h"
#include "lm_encoder.h"
#include "lm_profile.h"
#include "lm_state.h"
#include "test_support.h"

static int setup(void)
{
    return test_dir_make("embed");
}

static int teardown(void)
{
    return test_dir_remove();
}

struct capture {
    struct lm_buf buf;
    int done_calls, done_err;
};

static int capture_write(void *ctx, const void *buf, size_t len)
{
    struct capture *c = ctx;

    lm_buf_bytes(&c->buf, buf, len);
    return c->buf.oom ? 12 : 0;
}

static void capture_done(void *ctx, int err)
{
    struct capture *c = ctx;

    c->done_calls++;
    c->done_err = err;
}

static uint64_t allocs_named(const struct lm_state *s, const char *name)
{
    char buf[256];
    uint64_t n = 0;

    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, buf, sizeof(buf));
        if (strcmp(buf, name) == 0)
            n += s->locs[i].ev.alloc_events;
    }
    return n;
}

/* Stops L's profile and closes L: done() was called once, cleanly, and
 * the capture holds a whole stream, decoded into p (the caller frees
 * it). */
static void stop_and_decode(lua_State *L, struct capture *c,
                            struct lm_profile *p)
{
    CU_ASSERT_EQUAL(ljmp_memprof_stop(L), LJMP_MEMPROF_OK);
    CU_ASSERT_EQUAL(c->done_calls, 1);
    CU_ASSERT_EQUAL(c->done_err, 0);
    lua_close(L);
    lm_profile_init(p, NULL, NULL);
    CU_ASSERT_EQUAL(lm_profile_feed(p, c->buf.data, c->buf.len, NULL), LM_DONE);
}

static void test_writer_api(void)
{
    static const char code[] = "local t = {}\n"
                               "for i = 1, 50 do t[i] = {i} end\n"
                               "return #t\n";
    struct capture c = {{0}, 0, 0};
    lua_State *L = luaL_newstate();
    struct lm_profile p;

    luaL_openlibs(L);
    CU_ASSERT_EQUAL(ljmp_memprof_stop(L), LJMP_MEMPROF_ERRRUN);
    CU_ASSERT_EQUAL(ljmp_memprof_start(L, capture_write, capture_done, &c),
                    LJMP_MEMPROF_OK);
    /* A second start fails and ends only its own stream. */
    struct capture other = {{0}, 0, 0};
    CU_ASSERT_EQUAL(ljmp_memprof_start(L, capture_write, capture_done, &other),
                    LJMP_MEMPROF_ERRRUN);
    CU_ASSERT_EQUAL(other.done_calls, 1);
    CU_ASSERT_EQUAL(other.buf.len, 0);
    CU_ASSERT_EQUAL(luaL_loadbuffer(L, code, sizeof(code) - 1, "embedded"), 0);
    CU_ASSERT_EQUAL(lua_pcall(L, 0, 1, 0), 0);
    CU_ASSERT_EQUAL(lua_tointeger(L, -1), 50);
    stop_and_decode(L, &c, &p);
    /* The loop's tables, in the interpreter or on a trace of it. */
    CU_ASSERT(allocs_named(&p.state, "embedded:2") >= 1);
    CU_ASSERT(p.state.totals.alloc_events >= 50);
    lm_profile_free(&p);
    lm_buf_free(&c.buf);
}

/* A host's own allocator: every call counted. */
struct host_heap {
    uint64_t calls;
};

static void *host_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct host_heap *h = ud;

    (void)osize;
    h->calls++;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

/*
 * A VM made with the host's allocator: the profiler wraps that one, not
 * LuaJIT's, records every call to it once, and gives it back at the end.
 */
static void test_host_allocator(void)
{
    static const char code[] = "local keep = {}\n"
                               "for i = 1, 300 do\n"
                               "  local t = {i, tostring(i)}\n"
                               "  if i % 3 == 0 then keep[#keep + 1] = t end\n"
                               "end\n"
                               "collectgarbage()\n"
                               "return #keep\n";
    struct host_heap h = {0};
    struct capture c = {{0}, 0, 0};
    struct lm_profile p;
    void *ud = NULL;
    lua_State *L = lua_newstate(host_alloc, &h);

    CU_ASSERT_FATAL(L != NULL); /* GC64 builds take any allocator */
    luaL_openlibs(L);
    CU_ASSERT_EQUAL(luaL_loadbuffer(L, code, sizeof(code) - 1, "hosted"), 0);
    uint64_t before = h.calls;
    /* Every event an allocator call: no census announcements. */
    ljmp_memprof_set_census(0);
    CU_ASSERT_EQUAL(ljmp_memprof_start(L, capture_write, capture_done, &c),
                    LJMP_MEMPROF_OK);
    ljmp_memprof_set_census(1);
    CU_ASSERT_EQUAL(lua_pcall(L, 0, 1, 0), 0);
    CU_ASSERT_EQUAL(lua_tointeger(L, -1), 100);
    CU_ASSERT_EQUAL(ljmp_memprof_stop(L), LJMP_MEMPROF_OK);
    uint64_t during = h.calls - before;
    CU_ASSERT(lua_getallocf(L, &ud) == host_alloc && ud == &h);
    lua_close(L);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL(lm_profile_feed(&p, c.buf.data, c.buf.len, NULL), LM_DONE);
    const struct lm_totals *t = &p.state.totals;
    CU_ASSERT(t->alloc_events >= 300);
    CU_ASSERT(t->free_events >= 200); /* the tables the loop dropped */
    CU_ASSERT_EQUAL(t->alloc_events + t->free_events + t->realloc_events,
                    during);
    lm_profile_free(&p);
    lm_buf_free(&c.buf);
}

/* lua_close with a profile running ends it: the writer sees the end. */
static void test_close_ends_stream(void)
{
    struct capture c = {{0}, 0, 0};
    lua_State *L = luaL_newstate();
    struct lm_profile p;

    luaL_openlibs(L);
    CU_ASSERT_EQUAL(ljmp_memprof_start(L, capture_write, capture_done, &c),
                    LJMP_MEMPROF_OK);
    CU_ASSERT_EQUAL(luaL_dostring(L, "x = {} for i = 1, 10 do x[i] = {} end"),
                    0);
    lua_close(L);
    CU_ASSERT_EQUAL(c.done_calls, 1);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL(lm_profile_feed(&p, c.buf.data, c.buf.len, NULL), LM_DONE);
    lm_profile_free(&p);
    lm_buf_free(&c.buf);
}

/*
 * What a child forked while profiling sees: done() called once, with
 * ECHILD, and no write after the fork, however much it allocates; the
 * profiler is free for a start of its own.  Exit status 0 if so, else
 * the number of the check that failed.
 */
static int forked_child_checks(lua_State *L, struct capture *c)
{
    size_t written = c->buf.len;

    if (c->done_calls != 1 || c->done_err != ECHILD)
        return 1;
    if (luaL_dostring(L, "local t = {} for i = 1, 1000 do t[i] = {i} end"))
        return 2;
    if (c->buf.len != written)
        return 3;
    if (ljmp_memprof_stop(L) != LJMP_MEMPROF_ERRRUN)
        return 4;
    struct capture own = {{0}, 0, 0};
    if (ljmp_memprof_start(L, capture_write, capture_done, &own) !=
            LJMP_MEMPROF_OK ||
        ljmp_memprof_stop(L) != LJMP_MEMPROF_OK || own.done_err != 0)
        return 5;
    return 0;
}

/* A fork while profiling: the parent's stream goes on, whole. */
static void test_fork_leaves_parent_stream(void)
{
    struct capture c = {{0}, 0, 0};
    lua_State *L = luaL_newstate();
    struct lm_profile p;
    int st;

    luaL_openlibs(L);
    CU_ASSERT_EQUAL(ljmp_memprof_start(L, capture_write, capture_done, &c),
                    LJMP_MEMPROF_OK);
    pid_t pid = fork();
    if (pid == 0)
        _exit(forked_child_checks(L, &c));
    CU_ASSERT_FATAL(pid > 0);
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFEXITED(st));
    CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
    CU_ASSERT_EQUAL(c.done_calls, 0);
    CU_ASSERT_EQUAL(luaL_dostring(L, "y = {} for i = 1, 10 do y[i] = {} end"),
                    0);
    stop_and_decode(L, &c, &p);
    lm_profile_free(&p);
    lm_buf_free(&c.buf);
}

static void done_marks_fd(void *ctx, int err)
{
    (void)err;
    if (write(*(int *)ctx, "d", 1) != 1)
        _exit(3);
}

static int discard_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return 0;
}

/* Runs body in a child process; its exit status, or -1 if it died. */
static int in_child(void (*body)(int fd), int fd)
{
    int st;
    pid_t pid = fork();

    if (pid == 0) {
        body(fd);
        _exit(100); /* body exits itself */
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A host that exits with its writer's profile running: exit() does not
 * call the host's writer or done(), whose state may be gone by then. */
static void exit_with_api_profile(int fd)
{
    lua_State *L = luaL_newstate();

    luaL_openlibs(L);
    if (ljmp_memprof_start(L, discard_write, done_marks_fd, &fd) !=
        LJMP_MEMPROF_OK)
        _exit(2);
    (void)luaL_dostring(L, "local t = {} for i = 1, 100 do t[i] = {} end");
    exit(0);
}

static void test_exit_leaves_api_profile(void)
{
    int p[2];
    char buf[8];

    CU_ASSERT_FATAL(pipe(p) == 0);
    CU_ASSERT_EQUAL(in_child(exit_with_api_profile, p[1]), 0);
    close(p[1]);
    CU_ASSERT_EQUAL(read(p[0], buf, sizeof(buf)), 0); /* done() not called */
    close(p[0]);
}

static void *exit_now(void *arg)
{
    (void)arg;
    exit(0);
}

/* exit() on a thread other than the profile's: the stream is not ended
 * there (the VM's thread might be inside the allocator), so the file is
 * left without its end, as if the program had died. */
static void exit_on_another_thread(int fd)
{
    char code[256];
    pthread_t t;
    lua_State *L = luaL_newstate();

    (void)fd;
    luaL_openlibs(L);
    snprintf(code, sizeof(code), "assert(misc.memprof.start('%s/other.bin'))",
             test_dir);
    if (luaL_dostring(L, code) != 0)
        _exit(2);
    pthread_create(&t, NULL, exit_now, NULL);
    pthread_join(t, NULL);
    _exit(4);
}

static void test_exit_on_another_thread(void)
{
    struct lm_profile p;
    char path[256];

    CU_ASSERT_EQUAL(in_child(exit_on_another_thread, -1), 0);
    snprintf(path, sizeof(path), "%s/other.bin", test_dir);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL(lm_profile_feed(&p, buf, n, NULL), LM_NEED_MORE);
    lm_profile_free(&p);
}

/*
 * An attach signalled to a VM that runs no Lua waits for its next safe
 * point; a child forked meanwhile does not inherit it (ljmpd asked for
 * the parent), while the parent still attaches.
 */
/* Queues an agent request (attach or detach) to this process, then forks
 * a child that runs a few hundred bytecodes of L and exits; waits for it.
 * The request is still waiting for its safe point in both. */
static void signal_then_fork(lua_State *L, int req)
{
    union sigval v = {.sival_int = req};
    int st;

    CU_ASSERT_FATAL(
        sigqueue(getpid(), SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET, v) == 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(luaL_dostring(L, "local n = 0 for i = 1, 100 do n = n + i end"));
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_fork_drops_pending_attach(void)
{
    char path[256];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct pollfd came = {.fd = lfd, .events = POLLIN};

    CU_ASSERT_FATAL(snprintf(path, sizeof(sa.sun_path), "%s/agent.sock",
                             test_dir) < (int)sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(lfd, 4) == 0);
    setenv("LJMP_INGEST", path, 1); /* read as the agent is installed */
    lua_State *L = luaL_newstate();
    unsetenv("LJMP_INGEST");
    luaL_openlibs(L);
    signal_then_fork(L, LJMP_REQ_ATTACH);
    CU_ASSERT_EQUAL(poll(&came, 1, 0), 0); /* no connection from the child */
    /* The parent's request is still there: it attaches at its next Lua. */
    uint8_t ack = LJMP_HELLO_ACK;
    CU_ASSERT_EQUAL(luaL_dostring(L, "x = 1"), 0);
    int fd = accept(lfd, NULL, NULL);
    CU_ASSERT(fd >= 0);
    if (fd >= 0) {
        CU_ASSERT_EQUAL(send(fd, &ack, 1, MSG_NOSIGNAL), 1);
        close(fd);
    }
    lua_close(L);
    close(lfd);
}

/* The agent's name in /proc/self/maps (ljmp_ingest.h), or "" if it has
 * none: what ljmpd reads to learn its signal and ingest socket. */
static void agent_name(char *out, size_t len)
{
    char line[1024];
    FILE *f = fopen("/proc/self/maps", "r");

    out[0] = '\0';
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char *p = strstr(line, "/memfd:" LJMP_AGENT_NAME_PREFIX);
        if (p != NULL) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, len, "%s", p + 7);
        }
    }
    if (f != NULL)
        fclose(f);
}

/* Whether the agent's signal is handled (its handler is in place). */
static int agent_handles_signal(void)
{
    struct sigaction cur;

    return sigaction(SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET, NULL, &cur) == 0 &&
           (cur.sa_flags & SA_SIGINFO);
}

/* Accepts one VM's connection within ms and acknowledges its hello: 1 if
 * one came. */
static int accept_vm(int lfd, int ms)
{
    struct pollfd came = {.fd = lfd, .events = POLLIN};
    uint8_t ack = LJMP_HELLO_ACK;

    if (poll(&came, 1, ms) != 1)
        return 0;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        return 0;
    CU_ASSERT_EQUAL(send(fd, &ack, 1, MSG_NOSIGNAL), 1);
    close(fd);
    return 1;
}

/*
 * nginx's reload makes the new VM before it closes the old one, and the
 * workers it forks then run only the new one: the agent serves every VM
 * of the process and stays while any lives.  It names itself, its signal
 * and its ingest socket in /proc/PID/maps while installed, and only then.
 */
static void test_agent_outlives_first_vm(void)
{
    char path[256], name[512], want[512];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);

    CU_ASSERT_FATAL(snprintf(path, sizeof(sa.sun_path), "%s/reload.sock",
                             test_dir) < (int)sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(lfd, 4) == 0);
    snprintf(want, sizeof(want), LJMP_AGENT_NAME_FMT " (deleted)",
             SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET, path);
    setenv("LJMP_INGEST", path, 1);
    lua_State *old = luaL_newstate();
    unsetenv("LJMP_INGEST");
    agent_name(name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, want);
    lua_State *young = luaL_newstate();
    luaL_openlibs(young);
    lua_close(old);
    /* The VM that installed the agent is gone; the agent is not. */
    CU_ASSERT(agent_handles_signal());
    agent_name(name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, want);
    union sigval v = {.sival_int = LJMP_REQ_ATTACH};
    CU_ASSERT_FATAL(
        sigqueue(getpid(), SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET, v) == 0);
    CU_ASSERT_EQUAL(luaL_dostring(young, "local t = {} t[1] = {}"), 0);
    CU_ASSERT(accept_vm(lfd, 2000));
    lua_close(young);
    /* No VM left: no agent, and nothing named. */
    CU_ASSERT(!agent_handles_signal());
    agent_name(name, sizeof(name));
    CU_ASSERT_STRING_EQUAL(name, "");
    /* A VM made later installs it again. */
    lua_State *later = luaL_newstate();
    CU_ASSERT(agent_handles_signal());
    agent_name(name, sizeof(name));
    CU_ASSERT_NOT_EQUAL(name[0], '\0');
    CU_ASSERT_PTR_NULL(strstr(name, path)); /* LJMP_INGEST was unset */
    lua_close(later);
    close(lfd);
}

/* A listener that acknowledges every VM's hello and reads its stream (from
 * the pipe the hello brings), noting each peer's pid, until told to stop. */
struct fake_ingest {
    int lfd;
    volatile int stop;
    pid_t peers[8];
    volatile int npeers;
    pthread_t thread;
};

static void *fake_ingest_run(void *arg)
{
    struct fake_ingest *f = arg;
    struct pollfd fds[9] = {{.fd = f->lfd, .events = POLLIN}};
    int socks[9], nfds = 1;
    char buf[65536];

    while (!f->stop || nfds > 1) {
        if (poll(fds, (nfds_t)nfds, 20) <= 0)
            continue;
        if ((fds[0].revents & POLLIN) && nfds < 9) {
            int fd = accept(f->lfd, NULL, NULL);
            struct ucred cred;
            socklen_t len = sizeof(cred);
            uint8_t ack = LJMP_HELLO_ACK, hello[LJMP_HELLO_MAX];
            size_t hl;
            int in = -1;
            if (fd >= 0 && f->npeers < 8 &&
                getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                send(fd, &ack, 1, MSG_NOSIGNAL) == 1 &&
                (in = test_take_hello(fd, hello, &hl)) >= 0) {
                f->peers[f->npeers++] = cred.pid;
                socks[nfds] = fd;
                fds[nfds++] = (struct pollfd){.fd = in, .events = POLLIN};
            } else if (fd >= 0) {
                close(fd);
            }
        }
        for (int i = 1; i < nfds; i++)
            if (fds[i].revents && read(fds[i].fd, buf, sizeof(buf)) <= 0) {
                if (fds[i].fd != socks[i])
                    close(fds[i].fd);
                close(socks[i]);
                socks[i] = socks[nfds - 1];
                fds[i--] = fds[--nfds];
            }
    }
    return NULL;
}

/* Waits up to 2 s for the listener to have taken n peers: it takes them
 * in its own time, and stops taking them once told to stop. */
static void fake_ingest_await(struct fake_ingest *f, int n)
{
    for (int i = 0; i < 200 && f->npeers < n; i++)
        usleep(10000);
}

/*
 * A detach signalled to a VM streaming to a socket, still waiting for its
 * safe point when the VM forks: the child follows its parent's profile,
 * as any child of a socket profile does, only once it has run a thousand
 * bytecodes (a short run opens no session), and the parent detaches.
 */
static void test_fork_with_pending_detach(void)
{
    struct fake_ingest f = {.lfd = socket(AF_UNIX, SOCK_STREAM, 0)};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char code[512];

    CU_ASSERT_FATAL(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/follow.sock",
                             test_dir) < (int)sizeof(sa.sun_path));
    CU_ASSERT_FATAL(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(f.lfd, 4) == 0);
    CU_ASSERT_FATAL(pthread_create(&f.thread, NULL, fake_ingest_run, &f) == 0);
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    snprintf(code, sizeof(code), "assert(misc.memprof.start{socket = '%s'})",
             sa.sun_path);
    CU_ASSERT_EQUAL(luaL_dostring(L, code), 0);
    signal_then_fork(L, LJMP_REQ_DETACH);
    /* The parent serves its detach at its next Lua. */
    CU_ASSERT_EQUAL(luaL_dostring(L, "x = 1"), 0);
    CU_ASSERT_EQUAL(luaL_dostring(L, "return misc.memprof.status()"), 0);
    CU_ASSERT(!lua_toboolean(L, -1));
    lua_close(L);
    f.stop = 1;
    pthread_join(f.thread, NULL);
    close(f.lfd);
    CU_ASSERT_EQUAL(f.npeers, 1); /* the parent's connection only */
    CU_ASSERT_EQUAL(f.peers[0], getpid());
}

/*
 * LJMP_SOCKET profiles every VM of the process from its making, each in a
 * session of its own (nginx's reload makes a new VM beside the old one),
 * and each child forked afterwards follows once it has run Lua a while
 * (the new workers).
 */
static void test_env_streams_every_vm(void)
{
    struct fake_ingest f = {.lfd = socket(AF_UNIX, SOCK_STREAM, 0)};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int st;

    CU_ASSERT_FATAL(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/env.sock",
                             test_dir) < (int)sizeof(sa.sun_path));
    CU_ASSERT_FATAL(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(f.lfd, 4) == 0);
    CU_ASSERT_FATAL(pthread_create(&f.thread, NULL, fake_ingest_run, &f) == 0);
    setenv("LJMP_SOCKET", sa.sun_path, 1);
    lua_State *old = luaL_newstate();
    lua_State *young = luaL_newstate();
    unsetenv("LJMP_SOCKET");
    luaL_openlibs(old);
    luaL_openlibs(young);
    CU_ASSERT_EQUAL(luaL_dostring(old, "return misc.memprof.status()"), 0);
    CU_ASSERT(lua_toboolean(old, -1));
    CU_ASSERT_EQUAL(luaL_dostring(young, "return misc.memprof.status()"), 0);
    CU_ASSERT(lua_toboolean(young, -1));
    lua_close(old);
    pid_t child = fork();
    if (child == 0)
        _exit(luaL_dostring(young, "jit.off() local t = {}\n"
                                   "for i = 1, 2000 do t[i] = i end\n"
                                   "return misc.memprof.status()") != 0 ||
              !lua_toboolean(young, -1));
    CU_ASSERT_EQUAL(waitpid(child, &st, 0), child);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_EQUAL(luaL_dostring(young, "return misc.memprof.status()"), 0);
    CU_ASSERT(lua_toboolean(young, -1));
    lua_close(young);
    fake_ingest_await(&f, 3);
    f.stop = 1;
    pthread_join(f.thread, NULL);
    close(f.lfd);
    /* old's stream and young's in this process, then the child's. */
    CU_ASSERT_EQUAL_FATAL(f.npeers, 3);
    CU_ASSERT_EQUAL(f.peers[0], getpid());
    CU_ASSERT_EQUAL(f.peers[1], getpid());
    CU_ASSERT_EQUAL(f.peers[2], child);
}

/* Runs code in L: 0 if it ran. */
static int run(lua_State *L, const char *code, const char *chunk)
{
    return luaL_loadbuffer(L, code, strlen(code), chunk) != 0 ||
           lua_pcall(L, 0, 0, 0) != 0;
}

/*
 * Two VMs of one process stream at once, each into its own writer: each
 * stream holds its own VM's allocations only, and one ends while the
 * other goes on.
 */
static void test_two_vms_stream_at_once(void)
{
    static const char code[] = "t = t or {}\n"
                               "for i = 1, 200 do t[#t + 1] = {i} end\n";
    struct capture ca = {{0}, 0, 0}, cb = {{0}, 0, 0};
    lua_State *a = luaL_newstate(), *b = luaL_newstate();
    struct lm_profile pa, pb;

    luaL_openlibs(a);
    luaL_openlibs(b);
    CU_ASSERT_EQUAL(ljmp_memprof_start(a, capture_write, capture_done, &ca),
                    LJMP_MEMPROF_OK);
    CU_ASSERT_EQUAL(ljmp_memprof_start(b, capture_write, capture_done, &cb),
                    LJMP_MEMPROF_OK);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(run(a, code, "=vm_a"), 0);
        CU_ASSERT_EQUAL(run(b, code, "=vm_b"), 0);
    }
    stop_and_decode(a, &ca, &pa);
    /* b streams on after a's stream ended and a closed. */
    CU_ASSERT_EQUAL(run(b, code, "=vm_b"), 0);
    stop_and_decode(b, &cb, &pb);
    CU_ASSERT(allocs_named(&pa.state, "=vm_a:2") >= 600);
    CU_ASSERT_EQUAL(allocs_named(&pa.state, "=vm_b:2"), 0);
    CU_ASSERT(allocs_named(&pb.state, "=vm_b:2") >= 800);
    CU_ASSERT_EQUAL(allocs_named(&pb.state, "=vm_a:2"), 0);
    lm_profile_free(&pa);
    lm_profile_free(&pb);
    lm_buf_free(&ca.buf);
    lm_buf_free(&cb.buf);
}

/* A host thread with a VM of its own, streaming into its own writer. */
struct vm_thread {
    struct capture c;
    const char *chunk;
    int ok;
    struct lm_profile p;
};

static void *vm_thread_run(void *arg)
{
    static const char code[] =
        "local keep = {}\n"
        "for i = 1, 20000 do keep[i % 500 + 1] = {i, tostring(i)} end\n";
    struct vm_thread *t = arg;
    lua_State *L = luaL_newstate();

    luaL_openlibs(L);
    t->ok = ljmp_memprof_start(L, capture_write, capture_done, &t->c) ==
                LJMP_MEMPROF_OK &&
            run(L, code, t->chunk) == 0 && ljmp_memprof_stop(L) == 0;
    lua_close(L);
    return NULL;
}

/*
 * A host that runs a VM on each of two threads profiles both at once:
 * each stream is whole and holds its own VM's allocations only.
 */
static void test_vms_on_two_threads(void)
{
    struct vm_thread t[2] = {{.chunk = "=thread_a"}, {.chunk = "=thread_b"}};
    pthread_t th[2];

    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(pthread_create(&th[i], NULL, vm_thread_run, &t[i]) ==
                        0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT(t[i].ok);
        CU_ASSERT_EQUAL(t[i].c.done_calls, 1);
        lm_profile_init(&t[i].p, NULL, NULL);
        CU_ASSERT_EQUAL(
            lm_profile_feed(&t[i].p, t[i].c.buf.data, t[i].c.buf.len, NULL),
            LM_DONE);
        /* Each table and its string, wherever the JIT names them. */
        char mine[32], other[32];
        snprintf(mine, sizeof(mine), "%s:2", t[i].chunk);
        snprintf(other, sizeof(other), "%s:2", t[1 - i].chunk);
        CU_ASSERT(allocs_named(&t[i].p.state, mine) >= 20000);
        CU_ASSERT_EQUAL(allocs_named(&t[i].p.state, other), 0);
        lm_profile_free(&t[i].p);
        lm_buf_free(&t[i].c.buf);
    }
}

/*
 * An attach reaches every VM of the process that runs Lua: each streams
 * a session of its own, from its own next Lua call; a detach ends both.
 */
static void test_attach_reaches_every_vm(void)
{
    struct fake_ingest f = {.lfd = socket(AF_UNIX, SOCK_STREAM, 0)};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    union sigval v = {.sival_int = LJMP_REQ_ATTACH};
    int sig = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;
    lua_State *vm[2];

    CU_ASSERT_FATAL(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/both.sock",
                             test_dir) < (int)sizeof(sa.sun_path));
    CU_ASSERT_FATAL(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(f.lfd, 4) == 0);
    CU_ASSERT_FATAL(pthread_create(&f.thread, NULL, fake_ingest_run, &f) == 0);
    setenv("LJMP_INGEST", sa.sun_path, 1); /* read as the agent is installed */
    for (int i = 0; i < 2; i++) {
        vm[i] = luaL_newstate();
        luaL_openlibs(vm[i]);
    }
    unsetenv("LJMP_INGEST");
    CU_ASSERT_FATAL(sigqueue(getpid(), sig, v) == 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(run(vm[i], "x = {}", "=attach"), 0);
        CU_ASSERT_EQUAL(luaL_dostring(vm[i], "return misc.memprof.status()"),
                        0);
        CU_ASSERT(lua_toboolean(vm[i], -1));
        lua_pop(vm[i], lua_gettop(vm[i]));
    }
    fake_ingest_await(&f, 2);
    v.sival_int = LJMP_REQ_DETACH;
    CU_ASSERT_FATAL(sigqueue(getpid(), sig, v) == 0);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(run(vm[i], "x = {}", "=detach"), 0);
        CU_ASSERT_EQUAL(luaL_dostring(vm[i], "return misc.memprof.status()"),
                        0);
        CU_ASSERT(!lua_toboolean(vm[i], -1));
        lua_close(vm[i]);
    }
    f.stop = 1;
    pthread_join(f.thread, NULL);
    close(f.lfd);
    CU_ASSERT_EQUAL_FATAL(f.npeers, 2);
    CU_ASSERT_EQUAL(f.peers[0], getpid());
    CU_ASSERT_EQUAL(f.peers[1], getpid());
}

static void host_handler(int sig)
{
    (void)sig;
}

/* A host that handles the agent's signal itself keeps its handler. */
static void test_host_signal_kept(void)
{
    int sig = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;
    struct sigaction sa, cur;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = host_handler;
    CU_ASSERT_FATAL(sigaction(sig, &sa, NULL) == 0);
    lua_State *L = luaL_newstate();
    CU_ASSERT_FATAL(L != NULL);
    CU_ASSERT(sigaction(sig, NULL, &cur) == 0);
    CU_ASSERT(!(cur.sa_flags & SA_SIGINFO));
    CU_ASSERT(cur.sa_handler == host_handler);
    lua_close(L);
}

int main(void)
{
    /* Streams with no stall bound unless a test sets one: a test's reader
     * on a busy host may keep a VM waiting past the default's 100 ms. */
    setenv("LJMP_MAX_STALL_MS", "0", 1);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("embedding API", setup, teardown);
    CU_add_test(s, "writer API", test_writer_api);
    CU_add_test(s, "lua_close ends the stream", test_close_ends_stream);
    CU_add_test(s, "a host's allocator is wrapped and given back",
                test_host_allocator);
    CU_add_test(s, "a fork leaves the parent's stream whole",
                test_fork_leaves_parent_stream);
    CU_add_test(s, "exit leaves a host's writer alone",
                test_exit_leaves_api_profile);
    CU_add_test(s, "exit on another thread leaves the stream",
                test_exit_on_another_thread);
    CU_add_test(s, "a fork with a detach pending",
                test_fork_with_pending_detach);
    CU_add_test(s, "a fork drops a pending attach",
                test_fork_drops_pending_attach);
    CU_add_test(s, "the agent outlives the VM that installed it",
                test_agent_outlives_first_vm);
    CU_add_test(s, "LJMP_SOCKET streams every VM", test_env_streams_every_vm);
    CU_add_test(s, "two VMs stream at once", test_two_vms_stream_at_once);
    CU_add_test(s, "VMs on two threads stream at once",
                test_vms_on_two_threads);
    CU_add_test(s, "an attach reaches every VM", test_attach_reaches_every_vm);
    CU_add_test(s, "a host's own signal handler is kept",
                test_host_signal_kept);
    return test_run_all();
}
