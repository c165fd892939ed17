/* Report tests: text and JSON output against expected files. */
#include <stdlib.h>
#include <string.h>

#include "lm_report.h"
#include "test_util.h"

/* Compares a report of the sample stream with tests/expected/<file>. */
static void check_sample(enum lm_revision rev, int leak_only, int json,
                         const char *file)
{
    struct lm_buf b = {0};
    struct lm_profile p;

    sample_stream(&b, rev);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    char *got = report_string(&p.state, leak_only, 0, json);
    char *want = read_expected(file);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n--- expected %s\n%s--- got\n%s", file, want, got);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
    free(want);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static void test_r1_report(void)
{
    check_sample(LM_REV_R1, 0, 0, "sample-r1.txt");
}

static void test_r2_report(void)
{
    check_sample(LM_REV_R2, 0, 0, "sample-r2.txt");
}

static void test_r3_seed_report(void)
{
    check_sample(LM_REV_R3_SEED, 0, 0, "sample-r3-seed.txt");
}

static void test_r3_report(void)
{
    check_sample(LM_REV_R3, 0, 0, "sample-r3.txt");
}

static void test_r3_leak_only(void)
{
    check_sample(LM_REV_R3, 1, 0, "sample-r3-leak-only.txt");
}

static void test_r3_json(void)
{
    check_sample(LM_REV_R3, 0, 1, "sample-r3.json");
}

/* Ties by count are broken by name; sizes in KiB/MiB/GiB. */
static void test_ties_and_human_sizes(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    static const uint64_t sizes[] = {1536, 1048576, 3221225472ULL + 1024, 1000};

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@z.lua", 0);
    lm_enc_sym_lfunc(&b, 0x200, "@a.lua", 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (int i = 0; i < 4; i++) {
        struct lm_loc_ref l = loc_lua(i % 2 ? 0x200 : 0x100, 1 + (i >= 2));
        lm_enc_alloc(&b, LM_REV_R3, &l, 0x1000 * (i + 1), sizes[i]);
    }
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    char *got = report_string(&p.state, 0, 1, 0);
    CU_ASSERT_STRING_EQUAL(got, "ALLOCATIONS\n"
                                "@a.lua:1: 1 events\t+1MiB\t-0B\n"
                                "@a.lua:2: 1 events\t+1000B\t-0B\n"
                                "@z.lua:1: 1 events\t+1.50KiB\t-0B\n"
                                "@z.lua:2: 1 events\t+3.00GiB\t-0B\n"
                                "\n"
                                "REALLOCATIONS\n"
                                "\n"
                                "DEALLOCATIONS\n"
                                "\n"
                                "HEAP SUMMARY:\n"
                                "@z.lua:2 holds 3.00GiB: 1 allocs, 0 frees\n"
                                "@a.lua:1 holds 1MiB: 1 allocs, 0 frees\n"
                                "@z.lua:1 holds 1.50KiB: 1 allocs, 0 frees\n"
                                "@a.lua:2 holds 1000B: 1 allocs, 0 frees\n"
                                "\n");
    free(got);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* Alias listing: every line numbered, the last one without a newline. */
static void test_alias_listing(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x300, 3);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_event_lfunc(&b, 0x300, "local t = {}\n\nreturn {t}", 0);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x1000, 56);
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    char *got = report_string(&p.state, 1, 0, 0);
    CU_ASSERT_STRING_EQUAL(got, "HEAP SUMMARY:\n"
                                "function_alias_1:3 holds 56B: 1 allocs, "
                                "0 frees\n"
                                "\n"
                                "ALIASES:\n"
                                "function_alias_1:\n"
                                "1\t| local t = {}\n"
                                "2\t| \n"
                                "3\t| return {t}\n"
                                "\n\n");
    free(got);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/*
 * One line per name: a module loaded twice (two prototypes, one name) and
 * reloaded at a reused address (two epochs, one name) are one site; a
 * reused address under another name is another site.
 */
static void test_same_name_is_one_line(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref a = loc_lua(0x100, 3), c = loc_lua(0x200, 3);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@m.lua", 1);
    lm_enc_sym_lfunc(&b, 0x200, "@m.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &a, 0x1000, 10);
    lm_enc_alloc(&b, LM_REV_R3, &c, 0x2000, 20);
    lm_enc_event_lfunc(&b, 0x100, "@m.lua", 1);
    lm_enc_alloc(&b, LM_REV_R3, &a, 0x3000, 30);
    lm_enc_event_lfunc(&b, 0x100, "@n.lua", 1);
    lm_enc_alloc(&b, LM_REV_R3, &a, 0x4000, 40);
    lm_enc_free(&b, LM_REV_R3, &a, 0x1000, 10);
    lm_enc_free(&b, LM_REV_R3, &a, 0x3000, 30);
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    CU_ASSERT_EQUAL(p.state.nlocs, 4);
    char *got = report_string(&p.state, 0, 0, 0);
    CU_ASSERT_STRING_EQUAL(got, "ALLOCATIONS\n"
                                "@m.lua:3: 3 events\t+60B\t-0B\n"
                                "@n.lua:3: 1 events\t+40B\t-0B\n"
                                "\n"
                                "REALLOCATIONS\n"
                                "\n"
                                "DEALLOCATIONS\n"
                                "@n.lua:3: 2 events\t+0B\t-40B\n"
                                "\tOverrides:\n"
                                "\t\t@m.lua:3\n"
                                "\n"
                                "\n"
                                "HEAP SUMMARY:\n"
                                "@n.lua:3 holds 40B: 1 allocs, 0 frees\n"
                                "@m.lua:3 holds 20B: 3 allocs, 2 frees\n"
                                "\n");
    free(got);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A process's stream for the merged report: one module, and a chunk from a
 * string (an alias) whose source is src. */
static void merged_member(struct lm_profile *p, uint64_t base, unsigned n,
                          const char *src)
{
    struct lm_buf b = {0};
    struct lm_loc_ref m = loc_lua(0x100, 3), f = loc_lua(0x100, 7),
                      a = loc_lua(0x300, 1);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@m.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_event_lfunc(&b, 0x300, src, 0);
    for (unsigned i = 0; i < n; i++)
        lm_enc_alloc(&b, LM_REV_R3, &m, base + i * 0x100, 10);
    lm_enc_free(&b, LM_REV_R3, &f, base, 10);
    lm_enc_alloc(&b, LM_REV_R3, &a, base + 0x8000, 5);
    CU_ASSERT_FATAL(lm_profile_init(p, NULL, NULL) == 0);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(p, b.data, b.len, 0), LM_NEED_MORE);
    lm_buf_free(&b);
}

/*
 * Several processes' states as one report: a name's counters summed over
 * them, overrides across them by name, the members first, each held
 * line's shares on request, and an alias whose source differs between
 * processes listed for each.
 */
static void test_merged_report(void)
{
    struct lm_profile p[3];
    const struct lm_state *states[3];
    const struct lm_report_member who[3] = {
        {101, 7, "nginx: worker"}, {102, 8, "nginx: worker"}, {103, 9, "x"}};
    struct lm_report_opts o = {.by_process = 1};
    char *got = NULL;
    size_t len = 0;

    merged_member(&p[0], 0x10000, 2, "return 1\n");
    merged_member(&p[1], 0x20000, 3, "return 1\n");
    merged_member(&p[2], 0x30000, 1, "return 2\n");
    for (int i = 0; i < 3; i++)
        states[i] = &p[i].state;
    FILE *f = open_memstream(&got, &len);
    CU_ASSERT_EQUAL(lm_report_write_merged(f, states, who, 3, &o), 0);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(got, "PROCESSES:\n"
                                "pid 101 (session 7): nginx: worker\n"
                                "pid 102 (session 8): nginx: worker\n"
                                "pid 103 (session 9): x\n"
                                "\n"
                                "ALLOCATIONS\n"
                                "@m.lua:3: 6 events\t+60B\t-0B\n"
                                "function_alias_1:1: 3 events\t+15B\t-0B\n"
                                "\n"
                                "REALLOCATIONS\n"
                                "\n"
                                "DEALLOCATIONS\n"
                                "@m.lua:7: 3 events\t+0B\t-30B\n"
                                "\tOverrides:\n"
                                "\t\t@m.lua:3\n"
                                "\n"
                                "\n"
                                "HEAP SUMMARY:\n"
                                "@m.lua:3 holds 30B: 6 allocs, 3 frees\n"
                                "\tpid 101: 10B live in 1 blocks\n"
                                "\tpid 102: 20B live in 2 blocks\n"
                                "function_alias_1:1 holds 15B: 3 allocs, "
                                "0 frees\n"
                                "\tpid 101: 5B live in 1 blocks\n"
                                "\tpid 102: 5B live in 1 blocks\n"
                                "\tpid 103: 5B live in 1 blocks\n"
                                "\n"
                                "ALIASES:\n"
                                "function_alias_1:\n"
                                "1\t| return 1\n"
                                "\n\n"
                                "function_alias_1:\n"
                                "(in pid 103)\n"
                                "1\t| return 2\n"
                                "\n\n");
    free(got);
    /* The same as JSON: totals summed, members and shares named. */
    o.json = 1;
    got = NULL;
    f = open_memstream(&got, &len);
    CU_ASSERT_EQUAL(lm_report_write_merged(f, states, who, 3, &o), 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\"alloc_events\":9,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "\"members\":[{\"pid\":101,"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "\"by_process\":[{\"pid\":101,\"live_bytes\":10,"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "\"source\":\"return 2\\n\",\"pid\":103"));
    free(got);
    for (int i = 0; i < 3; i++)
        lm_profile_free(&p[i]);
}

/* JSON stays valid for any chunk bytes: UTF-8 kept, others escaped. */
static void test_json_strings(void)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref l = loc_lua(0x100, 1);

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, 0x100, "@caf\xc3\xa9\xff\"q\".lua", 0);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    lm_enc_alloc(&b, LM_REV_R3, &l, 0x1000, 8);
    lm_enc_epilogue(&b);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    char *got = report_string(&p.state, 1, 0, 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "\"location\":\"@caf\xc3\xa9\\u00ff\\\"q\\\".lua:1\""));
    free(got);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

/* A census stream's report: the census line first, census names without
 * a line, the VM internals held. */
static void census_report(int complete, int streaming, int json, char **out)
{
    struct lm_buf b = {0};
    struct lm_profile p;
    struct lm_loc_ref table = loc_lua(LM_CENSUS_TYPE_FIRST, 0);
    struct lm_report_opts o = {.json = json, .streaming = streaming};
    size_t len = 0;

    census_begin(&b, 12900000);
    lm_enc_alloc(&b, LM_REV_R3, &table, 0x2000, 2000000);
    if (complete)
        census_complete(&b, 14680064);
    lm_enc_epilogue(&b);
    CU_ASSERT_FATAL(!b.oom);
    CU_ASSERT_FATAL(lm_profile_init(&p, NULL, NULL) == 0);
    CU_ASSERT_EQUAL(feed_chunked(&p, b.data, b.len, 0), LM_DONE);
    FILE *f = open_memstream(out, &len);
    CU_ASSERT_EQUAL(lm_report_write(f, &p.state, &o), 0);
    fclose(f);
    lm_profile_free(&p);
    lm_buf_free(&b);
}

static void test_census_report(void)
{
    char *got = NULL;

    census_report(1, 0, 0, &got);
    CU_ASSERT_STRING_EQUAL(
        got, "Census: complete, 12.3 MiB at start, 14.0 MiB at completion, "
             "VM internals 12.1 MiB; 0 duplicates, 0 frees of older blocks\n"
             "\n"
             "ALLOCATIONS\n"
             "[before profiling] VM internals: 1 events\t+12680064B\t-0B\n"
             "[before profiling] table: 1 events\t+2000000B\t-0B\n"
             "\n"
             "REALLOCATIONS\n"
             "\n"
             "DEALLOCATIONS\n"
             "\n"
             "HEAP SUMMARY:\n"
             "[before profiling] VM internals holds 12680064B: 1 allocs, "
             "0 frees\n"
             "[before profiling] table holds 2000000B: 1 allocs, 0 frees\n"
             "\n");
    free(got);
    census_report(0, 0, 0, &got);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "Census: partial, 12.3 MiB at start; the stream ended "
                    "before it completed; 0 duplicates"));
    free(got);
    census_report(0, 1, 0, &got);
    CU_ASSERT_PTR_NOT_NULL(strstr(got, "Census: running, 12.3 MiB at start; "));
    free(got);
    census_report(1, 0, 1, &got);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(got, "\"census\":{\"state\":\"complete\",\"begin_total\":"
                    "12900000,\"complete_total\":14680064,\"remainder\":"
                    "12680064,\"over\":0,"));
    CU_ASSERT_PTR_NULL(strstr(got, ":0\""));
    free(got);
}

void register_report_tests(void)
{
    CU_pSuite s = CU_add_suite("report", NULL, NULL);
    CU_add_test(s, "R1 sample", test_r1_report);
    CU_add_test(s, "R2 sample", test_r2_report);
    CU_add_test(s, "R3-seed sample", test_r3_seed_report);
    CU_add_test(s, "R3 sample", test_r3_report);
    CU_add_test(s, "R3 sample, leak only", test_r3_leak_only);
    CU_add_test(s, "census report", test_census_report);
    CU_add_test(s, "R3 sample, JSON", test_r3_json);
    CU_add_test(s, "ties and human-readable sizes", test_ties_and_human_sizes);
    CU_add_test(s, "alias listing", test_alias_listing);
    CU_add_test(s, "same name, one line", test_same_name_is_one_line);
    CU_add_test(s, "JSON strings", test_json_strings);
    CU_add_test(s, "several states, one report", test_merged_report);
}
