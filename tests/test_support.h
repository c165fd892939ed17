/* Scaffolding shared by the test programs: a scratch directory, reading a
 * file whole, running the registered CUnit suites. */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

/* The scratch directory of a suite ("/tmp/ljmp-<name>-XXXXXX"), made by
 * test_dir_make and removed with its contents by test_dir_remove. */
extern char test_dir[64];
int test_dir_make(const char *name);
int test_dir_remove(void);

/* test_dir/NAME as a malloc'd string ("" when empty or missing). */
char *test_slurp(const char *name);

/* Runs every registered suite verbosely; returns the exit status. */
int test_run_all(void);

#endif
