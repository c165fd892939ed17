/* Scaffolding shared by the test programs: scratch directory, files, a
 * run that tells skipped tests from passed ones, a VM's hello. */
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

/* A test that said it could not run here, whole or in part.  CUnit has
 * no such state: it counts the test as passed, so the run lists these. */
struct skip {
    CU_pTest test;
    char name[160]; /* "suite: test", kept past the registry's cleanup */
    char why[200];
    int in_part;
};

enum { MAX_SKIPS = 256 }; /* more than any program's tests */
static struct skip skips[MAX_SKIPS];
static unsigned nskips;

static void skip(const char *why, int in_part)
{
    CU_pTest test = CU_get_current_test();
    CU_pSuite suite = CU_get_current_suite();

    /* A test is listed once, with its first reason. */
    if (nskips > 0 && skips[nskips - 1].test == test)
        return;
    printf("skipped%s (%s), which CUnit counts as ", in_part ? " in part" : "",
           why);
    fflush(stdout);
    if (nskips == MAX_SKIPS || test == NULL || suite == NULL)
        return;
    struct skip *s = &skips[nskips++];
    s->test = test;
    s->in_part = in_part;
    snprintf(s->name, sizeof(s->name), "%s: %s", suite->pName, test->pName);
    snprintf(s->why, sizeof(s->why), "%s", why);
}

void test_skip(const char *why)
{
    skip(why, 0);
}

void test_skip_rest(const char *why)
{
    skip(why, 1);
}

/* Whether name is one of list's names ('|' between them). */
static int listed(const char *list, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, "|");
        if (n == len && strncmp(p, name, n) == 0)
            return 1;
        p += n + (p[n] == '|');
    }
    return 0;
}

/* Whether a registered test is called name (n bytes). */
static int registered(const char *name, size_t n)
{
    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        for (CU_pTest t = s->pTest; t != NULL; t = t->pNext)
            if (strlen(t->pName) == n && strncmp(t->pName, name, n) == 0)
                return 1;
    return 0;
}

/* Leaves active the tests LJMP_TEST_ONLY names, or those LJMP_TEST_EXCEPT
 * does not; -1 after a message if a name in either matches no test (a
 * test renamed would otherwise run nowhere). */
static int select_tests(void)
{
    const char *only = getenv("LJMP_TEST_ONLY");
    const char *except = getenv("LJMP_TEST_EXCEPT");
    const char *list = only ? only : except;

    if (list == NULL)
        return 0;
    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, "|");
        if (!registered(p, n)) {
            fprintf(stderr, "%s names no test here: '%.*s'\n",
                    only ? "LJMP_TEST_ONLY" : "LJMP_TEST_EXCEPT", (int)n, p);
            return -1;
        }
        p += n + (p[n] == '|');
    }
    /* Tests left out are counted as inactive, not as failed. */
    CU_set_fail_on_inactive(CU_FALSE);
    for (CU_pSuite s = CU_get_registry()->pSuite; s != NULL; s = s->pNext)
        for (CU_pTest t = s->pTest; t != NULL; t = t->pNext)
            if (listed(list, t->pName) != (only != NULL))
                CU_set_test_active(t, CU_FALSE);
    return 0;
}

/* Lists the tests skipped after CUnit's summary, one line each, then
 * their count; returns how many were skipped whole. */
static unsigned list_skips(unsigned ran)
{
    unsigned whole = 0;

    if (nskips == 0)
        return 0;
    for (unsigned i = 0; i < nskips; i++) {
        printf("skipped: %s%s: %s\n", skips[i].name,
               skips[i].in_part ? ", in part" : "", skips[i].why);
        whole += !skips[i].in_part;
    }
    printf("tests skipped: %u of %u run (%u in part)\n", nskips, ran,
           nskips - whole);
    return whole;
}

int test_run_all(void)
{
    if (select_tests() != 0) {
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned int failed =
        CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned int ran = CU_get_number_of_tests_run();
    unsigned int skipped_whole = list_skips(ran);
    CU_cleanup_registry();
    if (failed)
        return 1;
    return ran > 0 && skipped_whole == ran ? TEST_ALL_SKIPPED : 0;
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
        want = ljmp_hello_size(hello, got);
    }
    *len = got;
    if (in < 0)
        in = sock;
    if (hello[4] == LJMP_INGEST_PIPE_VERSION
            ? in == sock
            : hello[4] < LJMP_INGEST_PIPE_VERSION && in != sock) {
        if (in != sock)
            close(in);
        return -1; /* a pipe without version 3 or later, or none with 3 */
    }
    return in;
}
