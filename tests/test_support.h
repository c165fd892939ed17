/* Scaffolding shared by the test programs: a scratch directory, reading a
 * file whole, running the registered CUnit suites, a VM's hello. */
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

/* Runs every registered suite verbosely; returns the exit status. */
int test_run_all(void);

#endif
