/* Scaffolding shared by the test programs: scratch directory, files, run. */
#include "test_support.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
