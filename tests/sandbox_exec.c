/* Runs a command under a seccomp filter that allows only the system calls
 * named in a file and kills the process on any other: how the tests hold
 * ljmpd to its unit's SystemCallFilter= without systemd. */
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char name[128];
    FILE *f;

    if (argc < 3) {
        fputs("usage: sandbox_exec ALLOWED-FILE COMMAND [ARG...]\n"
              "ALLOWED-FILE names one system call per line.\n",
              stderr);
        return 2;
    }
    if ((f = fopen(argv[1], "r")) == NULL) {
        perror(argv[1]);
        return 2;
    }
    /* The unit's LimitNOFILE= gives ljmpd soft and hard limits alike, and
     * ljmpd then raises nothing (the filter refuses it). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Stricter than a unit with SystemCallErrorNumber=: a call the unit
     * would refuse ends the process, so a test cannot miss it. */
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (ctx == NULL) {
        fputs("sandbox_exec: seccomp_init failed\n", stderr);
        return 2;
    }
    while (fscanf(f, "%127s", name) == 1) {
        int nr = seccomp_syscall_resolve_name(name);
        /* Names this architecture lacks (or libseccomp does not know). */
        if (nr != __NR_SCMP_ERROR && nr >= 0 &&
            seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) != 0) {
            fprintf(stderr, "sandbox_exec: cannot allow %s\n", name);
            return 2;
        }
    }
    fclose(f);
    if (seccomp_load(ctx) != 0) {
        fputs("sandbox_exec: seccomp_load failed\n", stderr);
        return 2;
    }
    seccomp_release(ctx);
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
