/* `ljmpctl report` end to end: output, stderr and exit status by input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"
#include "test_util.h"

#ifndef LJMPCTL_PATH
#error "LJMPCTL_PATH must name the ljmpctl binary"
#endif

static int setup(void)
{
    return test_dir_make("cli");
}

static int teardown(void)
{
    return test_dir_remove();
}

static void write_file(const char *name, const void *data, size_t len)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(data, 1, len, f) == len);
    fclose(f);
}

/* Runs `ljmpctl ARGS` in dir; returns the exit status, captures output. */
static int ljmpctl(const char *args, char **out, char **err)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cd %s && %s %s >out.txt 2>err.txt", test_dir,
             LJMPCTL_PATH, args);
    int st = system(cmd);
    *out = test_slurp("out.txt");
    *err = test_slurp("err.txt");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_clean_stream(void)
{
    struct lm_buf b = {0};
    char *out, *err;

    sample_stream(&b, LM_REV_R3);
    write_file("clean.bin", b.data, b.len);
    char *want = read_expected("sample-r3.txt");
    CU_ASSERT_EQUAL(ljmpctl("report clean.bin", &out, &err), 0);
    CU_ASSERT_STRING_EQUAL(out, want);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(out);
    free(err);
    /* Standard input, and a unique prefix of the command. */
    CU_ASSERT_EQUAL(ljmpctl("rep - <clean.bin", &out, &err), 0);
    CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
    free(err);
    free(want);
    lm_buf_free(&b);
}

static void test_truncated_stream(void)
{
    struct lm_buf b = {0};
    char *out, *err;

    sample_stream(&b, LM_REV_R3);
    write_file("cut.bin", b.data, b.len - 5);
    CU_ASSERT_EQUAL(ljmpctl("report cut.bin", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "HEAP SUMMARY:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cut.bin: stream truncated"));
    free(out);
    free(err);
    lm_buf_free(&b);
}

static void test_malformed_stream(void)
{
    struct lm_buf b = {0};
    char *out, *err;

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_buf_byte(&b, 0x7f);
    write_file("bad.bin", b.data, b.len);
    CU_ASSERT_EQUAL(ljmpctl("report bad.bin", &out, &err), 3);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_STRING_EQUAL(err, "ljmpctl report: bad.bin: malformed stream "
                                "at offset 15: unknown event header 0x7f "
                                "(realloc event, source 7) in revision R3\n");
    free(out);
    free(err);
    lm_buf_free(&b);
}

static void test_usage_errors(void)
{
    char *out, *err;

    CU_ASSERT_EQUAL(ljmpctl("report missing.bin", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot open missing.bin"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(ljmpctl("report", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected one FILE"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(ljmpctl("frobnicate", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown or ambiguous command"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(ljmpctl("report --max-string 12x missing.bin", &out, &err),
                    1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "ljmpctl report: --max-string wants a number up to "));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(ljmpctl("report --threads 3 missing.bin", &out, &err), 1);
    CU_ASSERT_STRING_EQUAL(err,
                           "ljmpctl report: --threads wants 1 or 2, not '3'\n");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(ljmpctl("report --help", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Exit status: 0 complete stream"));
    free(out);
    free(err);
}

void register_cli_tests(void)
{
    CU_pSuite s = CU_add_suite("ljmpctl report", setup, teardown);

    CU_add_test(s, "clean stream", test_clean_stream);
    CU_add_test(s, "truncated stream", test_truncated_stream);
    CU_add_test(s, "malformed stream", test_malformed_stream);
    CU_add_test(s, "usage errors", test_usage_errors);
}
