/* Scaffolding shared by the test programs: a scratch directory, reading a
 * file whole, running the registered CUnit suites and telling the tests
 * skipped from those passed, a VM's hello. */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <stddef.h>

/* The scratch directory of a suite ("/tmp/ljmp-<name>-XXXXXX"), made by
 * test_dir_make and removed with its contents by test_dir_remove. */
extern char test_dir[64];
int test_dir_make(const char *name);
int test_dir_remove(void);

/* test_dir/NAME as a malloc'd string ("" when empty or missing). */
char *test_slurp(const char *name);

/* Reads a VM's hello from an ingest socket as ljmpd does, and no byte
 * past it, into hello (LJMP_HELLO_MAX bytes; *len its size).  Returns
 * the descriptor its stream comes on: the pipe a version 3 hello brings
 * (see ljmp_ingest.h), or sock; -1 if no whole hello came. */
int test_take_hello(int sock, unsigned char *hello, size_t *len);

/* The exit status of a test program whose every test that ran was
 * skipped: ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt) counts it as
 * not run. */
#define TEST_ALL_SKIPPED 77

/* The running test cannot run here (why: "not root", "no tmux"...) and
 * returns at once: it is listed as skipped, not counted as passed.
 * test_skip_rest: it has checked something, and the rest cannot run here
 * (listed as skipped in part). */
void test_skip(const char *why);
void test_skip_rest(const char *why);

/* Runs the registered suites verbosely, then lists, after CUnit's
 * summary, each test skipped and why ("skipped: SUITE: TEST: WHY") and
 * their count.  With LJMP_TEST_ONLY set (test names, '|' between them),
 * only those tests run; with LJMP_TEST_EXCEPT, all but those: a test
 * that may not be able to run gets a ctest entry of its own.  Returns the
 * exit status: 1 if a test failed (or a name matched none),
 * TEST_ALL_SKIPPED if every test that ran was skipped whole, else 0. */
int test_run_all(void);

#endif
