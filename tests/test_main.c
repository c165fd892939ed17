/* Runs every CUnit suite of the core; the exit status counts failures. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include "test_support.h"

/* Writes the sample stream of each revision into dir (fuzz seeds, and
 * cross-checks against other parsers). */
static int write_samples(const char *dir)
{
    static const char *const names[] = {NULL,      "r1", "r2",
                                        "r3-seed", "r3", "r3s"};

    for (int rev = LM_REV_R1; rev <= LM_REV_R3S; rev++) {
        struct lm_buf b = {0};
        char path[512];
        sample_stream(&b, (enum lm_revision)rev);
        snprintf(path, sizeof(path), "%s/sample-%s.bin", dir, names[rev]);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(b.data, 1, b.len, f) != b.len) {
            perror(path);
            return 1;
        }
        fclose(f);
        lm_buf_free(&b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-samples") == 0)
        return write_samples(argv[2]);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    register_decoder_tests();
    register_state_tests();
    register_report_tests();
    register_stacks_tests();
    register_export_tests();
    register_diff_tests();
    register_cli_tests();
    register_chart_tests();
    register_flame_tests();
    return test_run_all();
}
