/* Scaffolding shared by the test programs: scratch directory, files, run,
 * a VM's hello. */
#include "test_support.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ljmp_ingest.h"

char test_dir[64];

int test_dir_make(const char *name)
{
    snprintf(test_dir, sizeof(test_dir), "/tmp/ljmp-%s-XXXXXX", name);
    return mkdtemp(test_dir) == NULL;
}

int test_dir_remove(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", test_dir);
    return system(cmd) != 0;
}

char *test_slurp(const char *name)
{
    char path[512], *s = NULL;
    size_t cap = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    if ((f = fopen(path, "rb")) != NULL) {
        if (getdelim(&s, &cap, '\0', f) < 0) {
            free(s);
            s = NULL;
        }
        fclose(f);
    }
    return s ? s : strdup("");
}

int test_run_all(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned int failed =
        CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

int test_take_hello(int sock, unsigned char *hello, size_t *len)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    size_t got = 0, want = 7;
    int in = sock;

    /* The pipe comes with the hello's first bytes. */
    while (got < want) {
        struct iovec iov = {hello + got, want - got};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (got == 0) {
            msg.msg_control = ctl.buf;
            msg.msg_controllen = sizeof(ctl.buf);
        }
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0)
            return -1;
        struct cmsghdr *c = got == 0 ? CMSG_FIRSTHDR(&msg) : NULL;
        if (c != NULL && c->cmsg_type == SCM_RIGHTS)
            memcpy(&in, CMSG_DATA(c), sizeof(int));
        got += (size_t)n;
        if (got == 7)
            want = 7 + hello[6];
    }
    *len = got;
    if ((hello[4] >= LJMP_INGEST_PIPE_VERSION) != (in != sock)) {
        if (in != sock)
            close(in);
        return -1; /* a pipe without version 3, or the other way round */
    }
    return in;
}
