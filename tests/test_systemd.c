/* systemd integration: the units verify, ljmpd runs on sockets passed by
 * socket activation, and tells a NOTIFY_SOCKET of readiness, status,
 * watchdog and stopping. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static int run(const char *cmd)
{
    int st = system(cmd);

    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int connectable(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* The units as installed (with this build's ljmpd) pass verification
 * without a word. */
static void test_units_verify(void)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "cd '%s' && systemd-analyze verify ljmpd.service ljmpd.socket "
             "ljmpd-control.socket >'%s/verify.out' 2>&1",
             UNITS_DIR, test_dir);
    CU_ASSERT_EQUAL(run(cmd), 0);
    char *out = test_slurp("verify.out");
    CU_ASSERT_STRING_EQUAL(out, "");
    if (out[0] != '\0')
        fprintf(stderr, "\n%s", out);
    free(out);
}

/* A VM that makes n tables streams into ingest; 1 once ljmpd, asked on
 * control, lists its session as complete. */
static int stream_one(const char *ingest, const char *control, unsigned n)
{
    char cmd[1024];
    int complete = 0;

    snprintf(cmd, sizeof(cmd),
             "LJMP_SOCKET='%s' %s -e 'local t = {} for i = 1, %u do "
             "t[i %% 1000] = {i} end'",
             ingest, LUAJIT_BIN, n);
    if (run(cmd) != 0)
        return 0;
    snprintf(cmd, sizeof(cmd), "%s -s '%s' list --all >'%s/list.out' 2>&1",
             LJMPCTL_PATH, control, test_dir);
    for (int i = 0; i < 100 && !complete; i++) {
        if (run(cmd) == 0) {
            char *out = test_slurp("list.out");
            complete = strstr(out, "complete") != NULL;
            free(out);
        }
        if (!complete)
            sleep_ms(50);
    }
    return complete;
}

/* ljmpd started by systemd-socket-activate with the two named sockets:
 * a VM streams into one, ljmpctl asks on the other. */
static void activation_case(const char *fdnames)
{
    char ingest[100], control[100], log[160];

    snprintf(ingest, sizeof(ingest), "%s/a-ingest.sock", test_dir);
    snprintf(control, sizeof(control), "%s/a-control.sock", test_dir);
    snprintf(log, sizeof(log), "%s/activate.log", test_dir);
    unlink(ingest);
    unlink(control);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDERR_FILENO);
        execlp("systemd-socket-activate", "systemd-socket-activate", "-l",
               ingest, "-l", control, fdnames, LJMPD_PATH, "-v", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300 && !connectable(control); i++)
        sleep_ms(10);
    /* The first connection starts ljmpd on the passed sockets, and it
     * reads the session. */
    CU_ASSERT_TRUE(stream_one(ingest, control, 1000));
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *text = test_slurp("activate.log");
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "sockets from the service manager"));
    free(text);
}

static void test_socket_activation(void)
{
    activation_case("--fdname=ingest:control");
}

/* One socket unit names both alike: they are taken in order. */
static void test_socket_activation_one_unit(void)
{
    activation_case("--fdname=ljmpd:ljmpd");
}

/* A set of system call names. */
struct names {
    char **v;
    size_t n, cap;
};

static int names_has(const struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return 1;
    return 0;
}

static void names_add(struct names *s, const char *name)
{
    if (names_has(s, name))
        return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = strdup(name);
}

static void names_remove(struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0) {
            free(s->v[i]);
            s->v[i] = s->v[--s->n];
            return;
        }
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* The system calls a filter item names (a call, or a @group expanded by
 * systemd-analyze, nested groups too), into out. */
static void expand(const char *item, struct names *out)
{
    char cmd[256], line[256];

    if (item[0] != '@') {
        names_add(out, item);
        return;
    }
    snprintf(cmd, sizeof(cmd), "systemd-analyze syscall-filter --no-pager %s",
             item);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int first = 1, found = 0;
    while (fgets(line, sizeof(line), p) != NULL) {
        char name[128];
        if (sscanf(line, "%127s", name) != 1 || name[0] == '#')
            continue;
        if (first) { /* the group's own name */
            first = 0;
            continue;
        }
        found = 1;
        expand(name, out);
    }
    CU_ASSERT_EQUAL(pclose(p), 0);
    CU_ASSERT_TRUE(found);
}

/*
 * What the unit's SystemCallFilter= lines allow, in their order: the
 * first is an allow list (checked), "~" lines take calls away and later
 * plain lines give them back.
 */
static void unit_allowed(struct names *allowed)
{
    char path[512], line[1024];

    snprintf(path, sizeof(path), "%s/ljmpd.service", UNITS_DIR);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int lines = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "SystemCallFilter=", 17) != 0)
            continue;
        char *v = line + 17;
        int deny = *v == '~';
        CU_ASSERT_FALSE(deny && lines == 0);
        v += deny;
        for (char *tok = strtok(v, " \t\n"); tok != NULL;
             tok = strtok(NULL, " \t\n")) {
            struct names set = {0};
            expand(tok, &set);
            for (size_t i = 0; i < set.n; i++) {
                if (deny)
                    names_remove(allowed, set.v[i]);
                else
                    names_add(allowed, set.v[i]);
            }
            names_free(&set);
        }
        lines++;
    }
    fclose(f);
    CU_ASSERT_TRUE(lines > 0);
}

/* A running script attached and detached by ljmpd (signals, /proc). */
static void attach_under_filter(const char *ingest, const char *control)
{
    char stop[160], cmd[512];

    snprintf(stop, sizeof(stop), "%s/sandbox.stop", test_dir);
    pid_t vm = fork();
    if (vm == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        setenv("LJMP_INGEST", ingest, 1);
        execl(LUAJIT_BIN, LUAJIT_BIN, VM_SCRIPTS "/busy.lua", stop, "30",
              (char *)NULL);
        _exit(127);
    }
    sleep_ms(300); /* the VM's agent is installed at its start */
    snprintf(cmd, sizeof(cmd), "%s -s '%s' attach %d >/dev/null", LJMPCTL_PATH,
             control, (int)vm);
    CU_ASSERT_EQUAL(run(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s -s '%s' detach %d >/dev/null", LJMPCTL_PATH,
             control, (int)vm);
    CU_ASSERT_EQUAL(run(cmd), 0);
    fclose(fopen(stop, "w"));
    int st;
    waitpid(vm, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* A VM's session recorded from its start into a file (a writer thread,
 * the file's type read with statx), until it ends. */
static void record_under_filter(const char *ingest, const char *control)
{
    char out[160], cmd[512];
    struct stat st;

    snprintf(out, sizeof(out), "%s/sandbox-rec.bin", test_dir);
    pid_t vm = fork();
    if (vm == 0) {
        sleep_ms(300); /* the record request waits for it first */
        setenv("LJMP_SOCKET", ingest, 1);
        execl(LUAJIT_BIN, LUAJIT_BIN, "-e",
              "local t = {} for i = 1, 100000 do t[i % 1000] = {i} end",
              (char *)NULL);
        _exit(127);
    }
    snprintf(cmd, sizeof(cmd),
             "%s -s '%s' record %d -o '%s' --wait 10 2>/dev/null", LJMPCTL_PATH,
             control, (int)vm, out);
    CU_ASSERT_EQUAL(run(cmd), 0);
    int status;
    waitpid(vm, &status, 0);
    CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_TRUE(stat(out, &st) == 0 && st.st_size > 100000);
}

/*
 * ljmpd at work (feed threads, a VM streaming, a snapshot, attach and
 * detach, a recording, a clean stop) makes no system call its unit refuses:
 * under the unit, a refused call is an error at best and the daemon's death at
 * worst.  The filter is applied by sandbox_exec, which kills on any call not
 * allowed.
 */
static void test_unit_syscall_filter(void)
{
#ifdef LJMP_SANITIZED
    test_skip("sanitized build: the sanitizers' runtimes make calls of "
              "their own");
    return;
#endif
    struct names allowed = {0};
    char list[160], ingest[100], control[100], cmd[1024], log[160];

    unit_allowed(&allowed);
    CU_ASSERT_TRUE(names_has(&allowed, "read") &&
                   !names_has(&allowed, "reboot"));
    snprintf(list, sizeof(list), "%s/allowed.txt", test_dir);
    FILE *f = fopen(list, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (size_t i = 0; i < allowed.n; i++)
        fprintf(f, "%s\n", allowed.v[i]);
    fclose(f);
    names_free(&allowed);

    snprintf(ingest, sizeof(ingest), "%s/s-ingest.sock", test_dir);
    snprintf(control, sizeof(control), "%s/s-control.sock", test_dir);
    snprintf(log, sizeof(log), "%s/sandbox.log", test_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDERR_FILENO);
        execl(SANDBOX_EXEC, SANDBOX_EXEC, list, LJMPD_PATH, "-v", "-i", ingest,
              "-c", control, "--feed-threads", "2", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300 && !connectable(control); i++)
        sleep_ms(10);
    CU_ASSERT_TRUE(stream_one(ingest, control, 100000));
    snprintf(cmd, sizeof(cmd), "%s -s '%s' snapshot --json >/dev/null",
             LJMPCTL_PATH, control);
    CU_ASSERT_EQUAL(run(cmd), 0);
    attach_under_filter(ingest, control);
    record_under_filter(ingest, control);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (WIFSIGNALED(st))
        fprintf(stderr, "\nljmpd died of signal %d under the unit's filter\n",
                WTERMSIG(st));
}

/* Reads datagrams from the notify socket until one contains want. */
static int notified(int fd, const char *want, int timeout_ms, char *all,
                    size_t len)
{
    struct pollfd p = {fd, POLLIN, 0};

    while (poll(&p, 1, timeout_ms) > 0) {
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
            return 0;
        buf[n] = '\0';
        strncat(all, buf, len - strlen(all) - 2);
        strcat(all, "|");
        if (strstr(buf, want) != NULL)
            return 1;
    }
    return 0;
}

/* READY with the main pid, STATUS with session counts, WATCHDOG pings at
 * half the deadline, STOPPING on SIGTERM. */
static void test_notify(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char ingest[100], control[100], all[8192] = "";
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify.sock", test_dir);
    CU_ASSERT_EQUAL_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    snprintf(ingest, sizeof(ingest), "%s/n-ingest.sock", test_dir);
    snprintf(control, sizeof(control), "%s/n-control.sock", test_dir);
    pid_t pid = fork();
    if (pid == 0) {
        char me[32];
        snprintf(me, sizeof(me), "%d", (int)getpid());
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        setenv("WATCHDOG_USEC", "400000", 1);
        setenv("WATCHDOG_PID", me, 1);
        execl(LJMPD_PATH, LJMPD_PATH, "-q", "-i", ingest, "-c", control,
              (char *)NULL);
        _exit(127);
    }
    char mainpid[32];
    snprintf(mainpid, sizeof(mainpid), "MAINPID=%d", (int)pid);
    CU_ASSERT_TRUE(notified(fd, "READY=1", 5000, all, sizeof(all)));
    CU_ASSERT_PTR_NOT_NULL(strstr(all, mainpid));
    CU_ASSERT_TRUE(notified(fd, "STATUS=0 streaming", 3000, all, sizeof(all)));
    CU_ASSERT_TRUE(notified(fd, "WATCHDOG=1", 1000, all, sizeof(all)));
    kill(pid, SIGTERM);
    CU_ASSERT_TRUE(notified(fd, "STOPPING=1", 3000, all, sizeof(all)));
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd);
}

int main(void)
{
    CU_pSuite s;

    if (CU_initialize_registry() != CUE_SUCCESS || test_dir_make("systemd"))
        return 1;
    s = CU_add_suite("systemd", NULL, NULL);
    CU_add_test(s, "units verify", test_units_verify);
    CU_add_test(s, "the unit's system call filter", test_unit_syscall_filter);
    CU_add_test(s, "socket activation", test_socket_activation);
    CU_add_test(s, "socket activation, one unit",
                test_socket_activation_one_unit);
    CU_add_test(s, "notify socket", test_notify);
    int rc = test_run_all();
    test_dir_remove();
    return rc;
}
