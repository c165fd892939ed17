/* ljmpctl end to end: `report`'s output, stderr and exit status by input,
 * and each command's command line holding to its own options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void test_clean_stream(void)
{
    struct lm_buf b = {0};
    char *out, *err;

    sample_stream(&b, LM_REV_R3);
    write_file("clean.bin", b.data, b.len);
    char *want = read_expected("sample-r3.txt");
    CU_ASSERT_EQUAL(run_ljmpctl("report clean.bin", &out, &err), 0);
    CU_ASSERT_STRING_EQUAL(out, want);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(out);
    free(err);
    /* Standard input, and a unique prefix of the command. */
    CU_ASSERT_EQUAL(run_ljmpctl("rep - <clean.bin", &out, &err), 0);
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
    CU_ASSERT_EQUAL(run_ljmpctl("report cut.bin", &out, &err), 2);
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
    CU_ASSERT_EQUAL(run_ljmpctl("report bad.bin", &out, &err), 3);
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

    CU_ASSERT_EQUAL(run_ljmpctl("report missing.bin", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot open missing.bin"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("report", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected one FILE"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("frobnicate", &out, &err), 1);
    CU_ASSERT_STRING_EQUAL(err, "ljmpctl: unknown command 'frobnicate'; try "
                                "'ljmpctl --help'\n");
    free(out);
    free(err);
    /* A prefix of several commands names them. */
    CU_ASSERT_EQUAL(run_ljmpctl("d 1", &out, &err), 1);
    CU_ASSERT_STRING_EQUAL(err,
                           "ljmpctl: ambiguous command 'd': detach, diff\n");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("help s", &out, &err), 1);
    CU_ASSERT_STRING_EQUAL(err, "ljmpctl: ambiguous command 's': snapshot, "
                                "subscribe\n");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(
        run_ljmpctl("report --max-string 12x missing.bin", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "ljmpctl report: --max-string wants a number up to "));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("report --threads 3 missing.bin", &out, &err),
                    1);
    CU_ASSERT_STRING_EQUAL(err,
                           "ljmpctl report: --threads wants 1 or 2, not '3'\n");
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("report --help", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Exit status: 0 complete stream"));
    free(out);
    free(err);
}

/* Whether `ljmpctl ARGS` is refused as a usage error, stdout empty and
 * stderr the one line `want`. */
static int refused_with(const char *args, const char *want)
{
    char *out, *err;
    int st = run_ljmpctl(args, &out, &err);
    int ok = st == 1 && strcmp(out, "") == 0 && strcmp(err, want) == 0;

    if (!ok)
        fprintf(stderr, "\n`ljmpctl %s`: status %d, stderr: %s", args, st, err);
    free(out);
    free(err);
    return ok;
}

/* An option another command takes is refused, named with the command. */
static void test_options_of_other_commands(void)
{
    static const char *const cases[][2] = {
        {"list --force", "list: option --force is not an option of list"},
        {"list --sort alloc-bytes",
         "list: option --sort is not an option of list"},
        {"list -n 3", "list: option -n is not an option of list"},
        {"snapshot 1 --interval 200",
         "snapshot: option --interval is not an option of snapshot"},
        {"snapshot --force", "snapshot: option --force is not an option of "
                             "snapshot"},
        {"watch --once", "watch: option --once is not an option of watch"},
        {"subscribe --no-wait",
         "subscribe: option --no-wait is not an option of subscribe"},
        {"record 1 -o x.bin --json",
         "record: option --json is not an option of record"},
        {"record 1 -o x.bin -n 5",
         "record: option -n is not an option of record"},
        {"top --json", "top: option --json is not an option of top"},
        {"top 1 -o x.bin", "top: option -o is not an option of top"},
        {"attach 1 --sort live-bytes",
         "attach: option --sort is not an option of attach"},
        {"detach 1 --wait 3", "detach: option --wait is not an option of "
                              "detach"},
        {"report --top 3 x.bin",
         "report: option --top is not an option of report"},
        {"report --session 1 1", "report: option --session is not an option "
                                 "of report"},
        {"rep --force x.bin", "report: option --force is not an option of "
                              "report"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[256];
        size_t cmd_len = strcspn(cases[i][1], ":");
        snprintf(want, sizeof(want), "ljmpctl %s (see ljmpctl help %.*s)\n",
                 cases[i][1], (int)cmd_len, cases[i][1]);
        CU_ASSERT(refused_with(cases[i][0], want));
    }
}

/* An option a command takes, wrongly written, is refused in one line. */
static void test_options_miswritten(void)
{
    CU_ASSERT(refused_with("top --interval", "ljmpctl top: option --interval "
                                             "needs a value (see ljmpctl help "
                                             "top)\n"));
    CU_ASSERT(refused_with("snapshot -n", "ljmpctl snapshot: option -n needs "
                                          "a value (see ljmpctl help "
                                          "snapshot)\n"));
    CU_ASSERT(refused_with("list --json=yes",
                           "ljmpctl list: option --json takes no value (see "
                           "ljmpctl help list)\n"));
    CU_ASSERT(refused_with("top --s 1", "ljmpctl top: option --s is ambiguous "
                                        "(see ljmpctl help top)\n"));
    CU_ASSERT(refused_with("list --bogus",
                           "ljmpctl list: option --bogus is not "
                           "an option of list (see ljmpctl "
                           "help list)\n"));
    CU_ASSERT(refused_with("top --interval 10",
                           "ljmpctl top: --interval wants a number of ms from "
                           "50 to 3600000, not '10'\n"));
    CU_ASSERT(refused_with("top --interval 3600001",
                           "ljmpctl top: --interval wants a number of ms from "
                           "50 to 3600000, not '3600001'\n"));
    CU_ASSERT(refused_with("watch --interval 3600001",
                           "ljmpctl watch: --interval wants a number of ms up "
                           "to 3600000, not '3600001'\n"));
    CU_ASSERT(refused_with("list 1", "ljmpctl list: unexpected '1': expected "
                                     "no operand (see ljmpctl help list)\n"));
    CU_ASSERT(refused_with("attach", "ljmpctl attach: expected one PID (see "
                                     "ljmpctl help attach)\n"));
    CU_ASSERT(refused_with("leaks --window 5",
                           "ljmpctl leaks: --window wants a number of seconds "
                           "from 10 to 604800, not '5'\n"));
    CU_ASSERT(refused_with("leaks --tree 1",
                           "ljmpctl leaks: option --tree is not an option of "
                           "leaks (see ljmpctl help leaks)\n"));
}

/* Every option each command takes, as its help gives them, still gets
 * past the command line: the live commands go on to find no ljmpd. */
static void test_own_options_accepted(void)
{
    static const char *const live[] = {
        "list --json",
        "snapshot 1 -n 3 --sort alloc-bytes --session 2 --json",
        "snap --top=1000 --sess 2",
        "watch 1 --interval 200 --count 1 -n 0 --sort event-rate "
        "--session 2 --json",
        "subscribe --count 1 --top 5",
        "record 1 --output rec.bin --wait 1 --force --no-wait",
        "record 1 -o rec2.bin --r3",
        "attach 1 --timeout 300",
        "detach 1 --timeout=60000",
        "top 1 --once --count 1 -n 5000 --interval 50 --sort free-bytes "
        "--session 2",
        "report --leak-only --human-readable --json 1",
        "leaks 1 --window 60 -n 5 --session 2 --json",
        "mark 1 before --session 2 --json",
        "mark --list --json",
        "mark 1 --delete before",
        "diff 1 before after --sort change -n 5 --session 2 --json",
        "diff before --sort alloc-bytes",
    };
    char *out, *err, args[512];

    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
        snprintf(args, sizeof(args), "-s '%s/none.sock' %s", test_dir, live[i]);
        CU_ASSERT_EQUAL(run_ljmpctl(args, &out, &err), 4);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "ljmpd is not running"));
        free(out);
        free(err);
    }
    /* And for a file, `report` reads it with them. */
    struct lm_buf b = {0};
    sample_stream(&b, LM_REV_R3);
    write_file("opts.bin", b.data, b.len);
    lm_buf_free(&b);
    CU_ASSERT_EQUAL(run_ljmpctl("report --leak-only --human-readable --json "
                                "--max-string 4096 --threads 1 opts.bin",
                                &out, &err),
                    0);
    CU_ASSERT_STRING_EQUAL(err, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"totals\""));
    free(out);
    free(err);
}

/*
 * A run of a program as a recording: kept blocks of 32 bytes at line 3,
 * as many freed at line 4, and blocks of 100 bytes at line 9 (if any) or
 * of 16 at line 7, in a chunk loaded at proto (two runs load it at two
 * addresses: sites are matched by name).
 */
static void run_recording(const char *name, uint64_t proto, unsigned kept,
                          unsigned at7, unsigned at9)
{
    struct lm_buf b = {0};
    struct lm_loc_ref l;
    uint64_t addr = 0x100000;

    lm_enc_begin(&b, LM_REV_R3);
    lm_enc_sym_lfunc(&b, proto, "@app.lua", 1);
    lm_enc_symtab_end(&b);
    lm_enc_begin_events(&b, LM_REV_R3);
    for (unsigned i = 0; i < kept; i++) {
        l = loc_lua(proto, 3);
        lm_enc_alloc(&b, LM_REV_R3, &l, addr += 64, 32);
        l = loc_lua(proto, 4);
        lm_enc_alloc(&b, LM_REV_R3, &l, addr += 64, 32);
        l = loc_internal();
        lm_enc_free(&b, LM_REV_R3, &l, addr, 32);
    }
    for (unsigned i = 0; i < at7 + at9; i++) {
        l = loc_lua(proto, i < at7 ? 7 : 9);
        lm_enc_alloc(&b, LM_REV_R3, &l, addr += 256, i < at7 ? 16 : 100);
    }
    lm_enc_epilogue(&b);
    write_file(name, b.data, b.len);
    lm_buf_free(&b);
}

/* The value of "key": N in the JSON object that follows at, or -1. */
static long long json_number(const char *at, const char *key)
{
    char want[64];
    const char *p;

    snprintf(want, sizeof(want), "\"%s\":", key);
    if (at == NULL || (p = strstr(at, want)) == NULL)
        return -1;
    return strtoll(p + strlen(want), NULL, 10);
}

/*
 * The diff of two runs' recordings: each site's change between their
 * ends, matched by name (the chunk at another address), a site of one
 * run only counted against zeros, ranked by growth; the same as JSON;
 * and a recording cut short still diffed, with its exit status.
 */
static void test_diff_of_recordings(void)
{
    char *out, *err;

    run_recording("old.bin", 0x100, 10, 3, 0);
    run_recording("new.bin", 0x900, 25, 0, 2);
    CU_ASSERT_EQUAL(run_ljmpctl("diff old.bin new.bin", &out, &err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "from old.bin to new.bin: 5 sites changed, by growth"));
    char *l3 = strstr(out, "@app.lua:3"), *l9 = strstr(out, "@app.lua:9");
    char *l7 = strstr(out, "@app.lua:7"), *l4 = strstr(out, "@app.lua:4");
    CU_ASSERT(l3 != NULL && l9 != NULL && l7 != NULL && l4 != NULL);
    CU_ASSERT(l3 < l9 && l9 < l7); /* +480 B, +200 B, -48 B */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "   +480 B        +15        +15"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "   +200 B         +2         +2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "    -48 B         -3         -3"));
    /* Line 4 made 15 more blocks and kept none; the collector freed them. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "      0 B         +0        +15"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "+15          0 B  INTERNAL"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(
        run_ljmpctl("diff old.bin new.bin --json --sort allocs -n 1", &out,
                    &err),
        0);
    const char *first = strstr(out, "\"sites\":[");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"name\":\"@app.lua:3\""));
    CU_ASSERT_EQUAL(json_number(first, "live_blocks"), 15);
    CU_ASSERT_EQUAL(json_number(first, "alloc_events"), 15);
    CU_ASSERT_EQUAL(json_number(first, "live_bytes_to"), 800);
    CU_ASSERT_EQUAL(json_number(out, "changed"), 5);
    const char *total = strstr(out, "\"total\":");
    CU_ASSERT_EQUAL(json_number(total, "live_bytes"), 480 + 200 - 48);
    CU_ASSERT_PTR_NULL(strstr(out, "@app.lua:9")); /* -n 1 */
    free(out);
    free(err);
    /* Reversed: losses first by change. */
    CU_ASSERT_EQUAL(
        run_ljmpctl("diff new.bin old.bin --sort change -n 2", &out, &err), 0);
    l3 = strstr(out, "@app.lua:3");
    l9 = strstr(out, "@app.lua:9");
    CU_ASSERT(l3 != NULL && l9 != NULL && l3 < l9);
    CU_ASSERT_PTR_NULL(strstr(out, "@app.lua:7"));
    free(out);
    free(err);
    /* The new run cut short: what it holds, and exit status 2. */
    char path[300];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/new.bin", test_dir);
    CU_ASSERT_FATAL(stat(path, &sb) == 0);
    CU_ASSERT_EQUAL(truncate(path, sb.st_size - 3), 0);
    CU_ASSERT_EQUAL(run_ljmpctl("diff old.bin new.bin", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "@app.lua:3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "new.bin: stream truncated"));
    free(out);
    free(err);
}

/* What diff and mark refuse before asking anyone. */
static void test_diff_and_mark_usage(void)
{
    char *out, *err;

    run_recording("one.bin", 0x100, 1, 0, 0);
    CU_ASSERT(refused_with("diff one.bin",
                           "ljmpctl diff: a diff of recordings needs two "
                           "files: OLD.bin NEW.bin\n"));
    CU_ASSERT(refused_with("diff one.bin 1234",
                           "ljmpctl diff: a diff of recordings needs two "
                           "files: OLD.bin NEW.bin\n"));
    CU_ASSERT(refused_with("diff one.bin missing.bin",
                           "ljmpctl diff: cannot open missing.bin: No such "
                           "file or directory\n"));
    CU_ASSERT(refused_with("diff 12 m1 --sort bogus",
                           "ljmpctl diff: unknown sort key 'bogus' (growth, "
                           "change, blocks, allocs, alloc-bytes)\n"));
    CU_ASSERT(refused_with("diff a b c",
                           "ljmpctl diff: expected [PID] FROM [TO] (see "
                           "ljmpctl help diff)\n"));
    CU_ASSERT(refused_with("diff", "ljmpctl diff: expected [PID] FROM [TO], "
                                   "or two recordings (see ljmpctl help "
                                   "diff)\n"));
    CU_ASSERT(refused_with("diff --session 2 one.bin one.bin",
                           "ljmpctl diff: --session is for a diff of a "
                           "session, not of recordings\n"));
    CU_ASSERT(refused_with("mark 12 before after",
                           "ljmpctl mark: unexpected 'after': expected "
                           "[PID] [NAME] (see ljmpctl help mark)\n"));
    CU_ASSERT(refused_with("mark --list --delete x",
                           "ljmpctl mark: --list or --delete, not both\n"));
    CU_ASSERT(refused_with("mark 12 x --list",
                           "ljmpctl mark: --list and --delete take no NAME "
                           "operand\n"));
    /* Two recordings of the same run: nothing changed. */
    CU_ASSERT_EQUAL(run_ljmpctl("diff one.bin one.bin", &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 sites changed"));
    free(out);
    free(err);
}

/* Each command's -h and --help print its help and succeed. */
static void test_help_of_each_command(void)
{
    static const char *const names[] = {
        "list",   "snapshot", "watch",  "subscribe", "record", "top",
        "attach", "detach",   "report", "leaks",     "mark",   "diff",
    };
    char *out, *err, args[64], usage[64];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(args, sizeof(args), "%s %s", names[i],
                 i % 2 ? "-h" : "--help");
        /* subscribe shares watch's help, whose second line names it. */
        snprintf(usage, sizeof(usage), "ljmpctl %s ", names[i]);
        CU_ASSERT_EQUAL(run_ljmpctl(args, &out, &err), 0);
        CU_ASSERT_EQUAL(strncmp(out, "usage: ljmpctl ", 15), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, usage));
        CU_ASSERT_STRING_EQUAL(err, "");
        free(out);
        free(err);
    }
}

/* record never follows a symbolic link to the file it writes: without
 * --force the file must be new, and with it a link is refused, its
 * target untouched (all before ljmpd is asked: none runs here). */
static void test_record_file_not_followed(void)
{
    char path[300], *out, *err;

    write_file("target.bin", "keep", 4);
    snprintf(path, sizeof(path), "%s/link.bin", test_dir);
    CU_ASSERT_EQUAL_FATAL(symlink("target.bin", path), 0);
    CU_ASSERT_EQUAL(
        run_ljmpctl("-s none.sock record 1 -o link.bin --force", &out, &err),
        1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "link.bin"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "symbolic link, not followed"));
    free(out);
    free(err);
    CU_ASSERT_EQUAL(
        run_ljmpctl("-s none.sock record 1 -o link.bin", &out, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--force overwrites"));
    free(out);
    free(err);
    char *kept = test_slurp("target.bin");
    CU_ASSERT_STRING_EQUAL(kept, "keep");
    free(kept);
}

void register_cli_tests(void)
{
    CU_pSuite s = CU_add_suite("ljmpctl report", setup, teardown);

    CU_add_test(s, "clean stream", test_clean_stream);
    CU_add_test(s, "truncated stream", test_truncated_stream);
    CU_add_test(s, "malformed stream", test_malformed_stream);
    CU_add_test(s, "usage errors", test_usage_errors);
    CU_add_test(s, "diff of two recordings", test_diff_of_recordings);
    s = CU_add_suite("ljmpctl command lines", setup, teardown);
    CU_add_test(s, "options of other commands", test_options_of_other_commands);
    CU_add_test(s, "options miswritten", test_options_miswritten);
    CU_add_test(s, "own options accepted", test_own_options_accepted);
    CU_add_test(s, "help of each command", test_help_of_each_command);
    CU_add_test(s, "record follows no link", test_record_file_not_followed);
    CU_add_test(s, "diff and mark usage", test_diff_and_mark_usage);
}
