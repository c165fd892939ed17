/* Scaffolding shared by the test programs: scratch directory, files, run,
 * a VM's hello. */
#include "test_support.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    size_t got = 0, want = 7;
    int in = -1;

    /* The pipe comes with the hello's first bytes. */
    while (got < want) {
        ssize_t n = ljmp_recv_with_fd(sock, hello + got, want - got,
                                      got == 0 ? &in : NULL);
        if (n <= 0) {
            if (in >= 0)
                close(in);
            return -1;
        }
        got += (size_t)n;
        if (got == 7)
            want = 7 + hello[6];
    }
    *len = got;
    if (in < 0)
        in = sock;
    if ((hello[4] >= LJMP_INGEST_PIPE_VERSION) != (in != sock)) {
        if (in != sock)
            close(in);
        return -1; /* a pipe without version 3, or the other way round */
    }
    return in;
}
