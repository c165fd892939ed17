/* The patched VM end to end: Lua scripts profile themselves, the core
 * library decodes their streams, and allocations are counted by site. */
#define _GNU_SOURCE /* struct ucred */
#include <CUnit/Basic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ljmp_ingest.h"
#include "lm_report.h"
#include "lm_profile.h"
#include "lm_state.h"
#include "test_support.h"

#ifndef LUAJIT_BIN
#error "LUAJIT_BIN must name the patched luajit"
#endif
#ifndef VM_SCRIPTS
#error "VM_SCRIPTS must name tests/vm"
#endif
#ifndef VM_FLAVOUR
#define VM_FLAVOUR LJMP_VM_LUAJIT
#endif

static int setup(void)
{
    return test_dir_make("vm");
}

static int teardown(void)
{
    return test_dir_remove();
}

/* Runs luajit FLAGS tests/vm/SCRIPT.lua [MODE] [OUT]; returns its exit
 * status and stdout. */
static int run_script_with(const char *flags, const char *script,
                           const char *mode, const char *out, char **output)
{
    char cmd[1024], name[128];

    snprintf(name, sizeof(name), "%s.stdout", script);
    snprintf(cmd, sizeof(cmd), "%s %s %s/%s.lua %s %s%s%s >%s/%s", LUAJIT_BIN,
             flags, VM_SCRIPTS, script, mode ? mode : "", out ? test_dir : "",
             out ? "/" : "", out ? out : "", test_dir, name);
    int st = system(cmd);
    *output = test_slurp(name);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_script_flags(const char *flags, const char *script,
                            const char *out, char **output)
{
    return run_script_with(flags, script, NULL, out, output);
}

static int run_script_in(const char *script, const char *mode, const char *out,
                         char **output)
{
    return run_script_with("", script, mode, out, output);
}

static int run_script(const char *script, const char *out, char **output)
{
    return run_script_with("", script, NULL, out, output);
}

/* Decodes DIR/NAME into p; returns how the stream ended. */
static enum lm_status decode(const char *name, struct lm_profile *p)
{
    char path[512];
    uint8_t buf[65536];
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    lm_profile_init(p, NULL, NULL);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return LM_ERROR;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        if (lm_profile_feed(p, buf, n, NULL) == LM_ERROR)
            break;
    fclose(f);
    return lm_decoder_finish(&p->dec);
}

/* Alloc events at locations whose name ends with suffix (and, when not
 * NULL, starts with prefix). */
static uint64_t allocs_at(const struct lm_state *s, const char *prefix,
                          const char *suffix)
{
    char name[1024];
    uint64_t n = 0;
    size_t ls = strlen(suffix);

    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, name, sizeof(name));
        size_t ln = strlen(name);
        if (ln >= ls && strcmp(name + ln - ls, suffix) == 0 &&
            (prefix == NULL || strncmp(name, prefix, strlen(prefix)) == 0))
            n += s->locs[i].ev.alloc_events;
    }
    return n;
}

static char *report_of(const struct lm_state *s)
{
    struct lm_report_opts o = {0};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    lm_report_write(f, s, &o);
    fclose(f);
    return text;
}

/* The seed's check: a chunk loaded while profiling has its allocations at
 * its own lines, one event each. */
static void test_new_prototypes_are_announced(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("enrich", "enrich.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("enrich.bin", &p), LM_DONE);
    CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, "str_chunk:6"), 1);
    CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, "str_chunk:2"), 1);
    CU_ASSERT(p.state.totals.symtab_events >= 2);
    lm_profile_free(&p);
    free(out);
}

/* The review's request: the bytecode reader announces prototypes too. */
static void test_bytecode_prototypes_are_announced(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("bytecode", "bytecode.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("bytecode.bin", &p), LM_DONE);
    CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, "dumped_chunk:2"), 1);
    lm_profile_free(&p);
    free(out);
}

/* An unnamed multi-line chunk: an alias, its last line listed. */
static void test_unnamed_chunk_alias(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("alias", "alias.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("alias.bin", &p), LM_DONE);
    /* The string, and whatever the VM grows on its behalf meanwhile. */
    CU_ASSERT(allocs_at(&p.state, NULL, "function_alias_1:2") >= 1);
    char *rep = report_of(&p.state);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep, "ALIASES:\nfunction_alias_1:\n"
                                       "1\t| local s = ...\n"
                                       "2\t| local r = string.rep(s, 200)\n"
                                       "3\t| return r\n"));
    free(rep);
    lm_profile_free(&p);
    free(out);
}

/* A compiled loop allocates on its trace, named after where it starts. */
static void test_trace_allocations(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("jit", "jit.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("jit.bin", &p), LM_DONE);
    uint64_t on_trace = allocs_at(&p.state, "TRACE [", "jit.lua:7") +
                        allocs_at(&p.state, "TRACE [", "jit.lua:8");
    uint64_t at_line = allocs_at(&p.state, "@", "jit.lua:8");
    /* Every {i} is one allocation at its line, on the trace (x86-64, the
     * line compiled code stores) as in the interpreter. */
    CU_ASSERT_EQUAL(on_trace, 0);
    CU_ASSERT(at_line >= 2000);
    CU_ASSERT(p.state.totals.trace_symbols >= 1);
    lm_profile_free(&p);
    free(out);
}

/* The counters of the locations whose by-trace name ends with suffix
 * and starts with prefix, summed. */
static struct lm_counters by_trace_at(const struct lm_state *s,
                                      const char *prefix, const char *suffix)
{
    struct lm_counters sum = {0}, c;
    char name[1024];
    size_t ls = strlen(suffix);

    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_trace_name(s, i, name, sizeof(name));
        size_t ln = strlen(name);
        if (ln >= ls && strcmp(name + ln - ls, suffix) == 0 &&
            strncmp(name, prefix, strlen(prefix)) == 0) {
            lm_state_counters(s, i, &c);
            lm_counters_add(&sum, &c);
        }
    }
    return sum;
}

/* Line 9 of jit_trace.lua allocates 1000 tables in a compiled loop, then
 * 500 with the JIT off.  The default report has one row for the line; by
 * trace, what the trace made is the trace's row, named after where it
 * starts (line 8), live bytes included, and the rest stays the line's. */
static void test_trace_rows(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("jit_trace", "jit_trace.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("jit_trace.bin", &p), LM_DONE);
    uint64_t line = allocs_at(&p.state, "@", "jit_trace.lua:9");
    CU_ASSERT(line >= 1500 && line <= 1502);
    char *text = report_of(&p.state), want[64];
    snprintf(want, sizeof(want), "jit_trace.lua:9: %" PRIu64 " events", line);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
    CU_ASSERT_PTR_NULL(strstr(text, "TRACE ["));
    free(text);

    struct lm_counters tr = by_trace_at(&p.state, "TRACE [", "jit_trace.lua:8");
    struct lm_counters in = by_trace_at(&p.state, "@", "jit_trace.lua:9");
    /* The loop's first iterations (and the one recorded) are the
     * interpreter's. */
    CU_ASSERT(tr.alloc_events >= 990 && tr.alloc_events < 1000);
    CU_ASSERT_EQUAL(tr.alloc_events + in.alloc_events, line);
    CU_ASSERT_EQUAL(tr.live_blocks, tr.alloc_events); /* all kept */
    CU_ASSERT_EQUAL(tr.live_bytes, tr.alloc_bytes);
    CU_ASSERT(in.alloc_events >= 500);
    lm_profile_free(&p);
    free(out);
}

/* A trace compiled before the stream starts, and one made after a flush:
 * what each makes at the line is the line's (no trace markers: the VM
 * writes it at stand-ins for the prototype on each trace, announced in
 * the symbol table and when the second trace is made), and by trace it is
 * each trace's, two epochs. */
static void test_trace_standins(void)
{
    struct lm_profile p;
    char *out, name[1024];

    CU_ASSERT_EQUAL(run_script("jit_standins", "jit_standins.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("jit_standins.bin", &p), LM_DONE);
    uint64_t line = allocs_at(&p.state, "@", "jit_standins.lua:11");
    CU_ASSERT(line >= 2000 && line <= 2002);
    CU_ASSERT_EQUAL(p.dec.nrecords[LM_REC_TRACE_MARK], 0);
    CU_ASSERT(p.dec.nrecords[LM_REC_STANDIN] >= 2);
    struct lm_counters tr =
        by_trace_at(&p.state, "TRACE [", "jit_standins.lua:10");
    /* The new trace's first iterations are the interpreter's. */
    CU_ASSERT(tr.alloc_events >= 1990 && tr.alloc_events <= 2000);
    uint32_t epochs[2] = {LM_NONE, LM_NONE}, nepochs = 0;
    for (uint32_t i = 0; i < p.state.nlocs; i++) {
        const struct lm_loc *l = &p.state.locs[i];
        lm_state_loc_trace_name(&p.state, i, name, sizeof(name));
        if (strncmp(name, "TRACE [", 7) != 0 || l->ev.alloc_events == 0 ||
            l->trace_sym == epochs[0] || l->trace_sym == epochs[1])
            continue;
        if (nepochs < 2)
            epochs[nepochs] = l->trace_sym;
        nepochs++;
    }
    CU_ASSERT_EQUAL(nepochs, 2);
    lm_profile_free(&p);
    free(out);
}

/* Tarantool's jit-output case: a loop compiled after 10 iterations makes
 * 20 strings; the 11th, made while the JIT records its instruction, is the
 * interpreter's, on its line, not the recorder's (INTERNAL), and the 9 the
 * trace makes are on that line too. */
static void test_recorded_iteration_on_its_line(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("jit_output", "jit_output.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("jit_output.bin", &p), LM_DONE);
    CU_ASSERT_EQUAL(allocs_at(&p.state, "@", "jit_output.lua:11"), 20);
    CU_ASSERT_EQUAL(allocs_at(&p.state, "TRACE [", "jit_output.lua:10"), 0);
    lm_profile_free(&p);
    free(out);
}

/* Events of kind `realloc` (else alloc) at the locations named exactly. */
static uint64_t events_named(const struct lm_state *s, const char *loc,
                             int realloc)
{
    char name[1024];

    uint64_t n = 0;

    /* Summed: what traces made at a line are locations of their own. */
    for (uint32_t i = 0; i < s->nlocs; i++) {
        lm_state_loc_name(s, i, name, sizeof(name));
        if (strcmp(name, loc) == 0)
            n += realloc ? s->locs[i].ev.realloc_events
                         : s->locs[i].ev.alloc_events;
    }
    return n;
}

/* Lines of jit_lines.lua (and its module) that allocate on every pass of
 * their loops, whichever way the loop runs. */
static const char *const jit_lines_hot[] = {
    "jit_lines.lua:21",   "jit_lines.lua:22", "jit_lines.lua:28",
    "jit_lines.lua:29",   "jit_lines.lua:42", "jit_lines.lua:43",
    "jit_lines.lua:57",   "jit_lines.lua:59", "jit_lines.lua:68",
    "jit_lines.lua:70",   "jit_lines.lua:78", "jit_lines.lua:80",
    "jit_lines.lua:86",   "jit_lines.lua:88", "jit_lines_mod.lua:5",
    "jit_lines_mod.lua:9"};

/* Compares the alloc and realloc events of each line of jit_lines.lua (and
 * its module) in `a` with the same line's in `b`; returns the lines. */
static uint32_t compare_jit_lines(const struct lm_state *a,
                                  const struct lm_state *b)
{
    char name[1024];
    uint32_t compared = 0;

    for (uint32_t i = 0; i < a->nlocs; i++) {
        lm_state_loc_name(a, i, name, sizeof(name));
        if (name[0] != '@' || strstr(name, "/jit_lines") == NULL)
            continue;
        for (int r = 0; r <= 1; r++) {
            uint64_t na = events_named(a, name, r);
            uint64_t nb = events_named(b, name, r);
            if (na != nb)
                fprintf(stderr, "%s: %s %llu against %llu\n", name,
                        r ? "reallocs" : "allocs", (unsigned long long)na,
                        (unsigned long long)nb);
            CU_ASSERT_EQUAL(na, nb);
        }
        compared++;
    }
    return compared;
}

/* Every kind of allocation compiled code makes is named by its line, as
 * often as the interpreter makes it there: the same workload with the JIT
 * on and off gives the same events line by line, and none is left on a
 * trace.  Through inlined calls into another module, side traces, exits in
 * the middle of a loop, an inner loop with a tail, and stitched traces. */
static void test_lines_inside_compiled_code(void)
{
    struct lm_profile off, on;
    char *out_off, *out_on, name[1024];
    uint64_t on_trace = 0;

    CU_ASSERT_EQUAL(
        run_script_in("jit_lines", "off", "jit_lines_off.bin", &out_off), 0);
    CU_ASSERT_EQUAL(
        run_script_in("jit_lines", "on", "jit_lines_on.bin", &out_on), 0);
    CU_ASSERT_EQUAL_FATAL(decode("jit_lines_off.bin", &off), LM_DONE);
    CU_ASSERT_EQUAL_FATAL(decode("jit_lines_on.bin", &on), LM_DONE);
    CU_ASSERT(on.state.totals.trace_symbols >= 8);
    for (size_t k = 0; k < sizeof(jit_lines_hot) / sizeof(*jit_lines_hot); k++)
        CU_ASSERT(allocs_at(&off.state, "@", jit_lines_hot[k]) >= 40);
    /* Both ways: a line only one run names counts too. */
    CU_ASSERT(compare_jit_lines(&off.state, &on.state) >= 16);
    CU_ASSERT(compare_jit_lines(&on.state, &off.state) >= 16);
    for (uint32_t i = 0; i < on.state.nlocs; i++) {
        lm_state_loc_name(&on.state, i, name, sizeof(name));
        if (strncmp(name, "TRACE [", 7) == 0 && strstr(name, "/jit_lines"))
            on_trace += on.state.locs[i].ev.alloc_events;
    }
    CU_ASSERT_EQUAL(on_trace, 0);
    lm_profile_free(&off);
    lm_profile_free(&on);
    free(out_off);
    free(out_on);
}

/* Tables the JIT sinks are made only when one escapes: at a trace exit
 * (snapshot restore), or on the side trace compiled for that exit.  Both
 * are named by the table's own line, as the interpreted iterations are:
 * 6 of those (5 to get hot, 1 recorded) and the 12 that escape. */
static void test_sunk_allocations_on_their_line(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("jit_sunk", "jit_sunk.bin", &out), 0);
    CU_ASSERT_STRING_EQUAL(out, "12\n");
    CU_ASSERT_EQUAL_FATAL(decode("jit_sunk.bin", &p), LM_DONE);
    CU_ASSERT_EQUAL(allocs_at(&p.state, "@", "jit_sunk.lua:10"), 18);
    CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, "jit_sunk.lua:11"), 0);
    CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, "jit_sunk.lua:12"), 0);
    CU_ASSERT_EQUAL(allocs_at(&p.state, "TRACE [", ""), 0);
    lm_profile_free(&p);
    free(out);
}

/* Runs tests/vm/stacks.lua in a JIT mode with a scenario, depth and
 * sampling mean, and decodes its stream into p. */
static void run_stacks(const char *mode, const char *scenario, int depth,
                       unsigned sample, struct lm_profile *p)
{
    char flags[64], name[64], args[64];
    char *out;

    snprintf(flags, sizeof(flags), "STACKS_DEPTH=%d STACKS_SAMPLE=%u", depth,
             sample);
    snprintf(name, sizeof(name), "stacks_%s_%s.bin", mode, scenario);
    snprintf(args, sizeof(args), "%s %s", mode, scenario);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "%s %s %s/stacks.lua %s %s/%s >/dev/null", flags,
             LUAJIT_BIN, VM_SCRIPTS, args, test_dir, name);
    CU_ASSERT_EQUAL(system(cmd), 0);
    (void)out;
    CU_ASSERT_EQUAL_FATAL(decode(name, p), LM_DONE);
    CU_ASSERT_EQUAL(p->state.revision, LM_REV_R3S);
}

/* Whether location i's stack begins (innermost first) with frames named
 * so: each name ends with its want (a suffix, "stacks.lua:13"). */
static int stack_begins(const struct lm_state *s, uint32_t i,
                        const char *const *want, size_t n)
{
    uint32_t nf;
    char name[512];

    if (s->locs[i].stack == 0)
        return 0;
    const struct lm_sframe *f =
        lm_stacks_frames(&s->stacks, s->locs[i].stack, &nf);
    if (nf < n)
        return 0;
    for (size_t k = 0; k < n; k++) {
        size_t lw = strlen(want[k]);
        lm_state_frame_name(s, &f[k], name, sizeof(name));
        size_t ln = strlen(name);
        if (ln < lw || strcmp(name + ln - lw, want[k]) != 0)
            return 0;
    }
    return 1;
}

/* Alloc events (or live blocks) whose stacks begin with want[0..n). */
static uint64_t allocs_by_stack(const struct lm_state *s, int live,
                                const char *const *want, size_t n)
{
    uint64_t total = 0;

    for (uint32_t i = 0; i < s->nlocs; i++)
        if (stack_begins(s, i, want, n)) {
            struct lm_counters c;
            lm_state_counters(s, i, &c);
            total += live ? c.live_blocks : c.alloc_events;
        }
    return total;
}

#define STACK_FRAMES(...)                                                      \
    (const char *const[]){__VA_ARGS__},                                        \
        sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)
#define BY_STACK(s, ...)   allocs_by_stack(s, 0, STACK_FRAMES(__VA_ARGS__))
#define LIVE_STACK(s, ...) allocs_by_stack(s, 1, STACK_FRAMES(__VA_ARGS__))

/* One line reached from two callers at known counts: two stacks with
 * exactly those counts, interpreted and compiled (the JIT inlines the
 * line into each caller's loop). */
static void test_stacks_two_callers(void)
{
    static const char *const modes[] = {"off", "on"};

    for (int m = 0; m < 2; m++) {
        struct lm_profile p;
        run_stacks(modes[m], "callers", 8, 0, &p);
        CU_ASSERT_EQUAL(p.state.stacks.depth, 8);
        CU_ASSERT_EQUAL(BY_STACK(&p.state, "stacks.lua:13", "stacks.lua:14",
                                 "stacks.lua:27"),
                        300);
        CU_ASSERT_EQUAL(BY_STACK(&p.state, "stacks.lua:13", "stacks.lua:15",
                                 "stacks.lua:27"),
                        700);
        CU_ASSERT_EQUAL(allocs_at(&p.state, "@", "stacks.lua:13"), 1000);
        CU_ASSERT_EQUAL(p.state.stacks.folded, 0);
        lm_profile_free(&p);
    }
}

/* The kinds of frames: a recursion cut at the depth with its marker, a
 * builtin (pcall) between two Lua frames, a metamethod under its caller,
 * a coroutine's own frames over its marker, a builtin that allocates.
 * Each holds the 50 tables it made.  (Compiled code may make a few more
 * that die: an exit resumes the interpreter at the snapshot before an
 * allocation the trace made already, and the program makes it again.)
 * Every allocation at the line carries a stack. */
static void test_stacks_frame_kinds(void)
{
    static const char *const modes[] = {"off", "on"};

    for (int m = 0; m < 2; m++) {
        struct lm_profile p;
        run_stacks(modes[m], "kinds", 8, 0, &p);
        /* deep() reaches hot() by a tail call: the mark takes a frame. */
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "[tail call]",
                                   "stacks.lua:16", "stacks.lua:16",
                                   "stacks.lua:16", "stacks.lua:16",
                                   "stacks.lua:16", "stacks.lua:16",
                                   "[truncated]"),
                        50);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "pcall",
                                   "stacks.lua:17", "stacks.lua:31"),
                        50);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "stacks.lua:18",
                                   "stacks.lua:19", "stacks.lua:32"),
                        50);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "stacks.lua:21",
                                   "[coroutine]"),
                        50);
        CU_ASSERT_EQUAL(BY_STACK(&p.state, "stacks.lua:13"),
                        allocs_at(&p.state, "@", "stacks.lua:13"));
        CU_ASSERT(BY_STACK(&p.state, "string.rep", "stacks.lua:24",
                           "stacks.lua:34") >= 1);
        lm_profile_free(&p);
    }
}

/* Tail calls, marked below the function they entered: the frames they
 * replaced are gone (two tail calls make one mark), a plain call keeps
 * its frame below the mark, a builtin can be entered so too.  Each stack
 * holds the 100 blocks it made, interpreted and compiled (the loop's
 * trace inlines them all, and a trace starts at tail_hot, which replaces
 * its own frame), and no stack without its mark does. */
static void test_stacks_tail_calls(void)
{
    /* tails_late: the loop compiled before the stream began (the start
     * flushes the traces, which did not know their tail calls). */
    static const char *const modes[] = {"off", "on", "on"};
    static const char *const scenarios[] = {"tails", "tails", "tails_late"};

    for (int m = 0; m < 3; m++) {
        struct lm_profile p;
        run_stacks(modes[m], scenarios[m], 8, 0, &p);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "[tail call]",
                                   "stacks.lua:62"),
                        100);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "[tail call]",
                                   "stacks.lua:58", "stacks.lua:63"),
                        100);
        /* Interpreted only: compiled code names a builtin's allocations
         * by the Lua line that called it, without the builtin's frame
         * (after a tail call, the line that made it).  Its buffer's
         * growth holds a block more. */
        if (m == 0)
            CU_ASSERT(LIVE_STACK(&p.state, "string.rep", "[tail call]",
                                 "stacks.lua:64") >= 100);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "stacks.lua:62"),
                        0);
        CU_ASSERT_EQUAL(LIVE_STACK(&p.state, "stacks.lua:13", "stacks.lua:58"),
                        0);
        lm_profile_free(&p);
    }
}

/* More distinct stacks than the VM's table holds: it resets and defines
 * them again, and each of the 40000 calls still counts once at a stack
 * of its own line. */
static void test_stacks_table_bound(void)
{
    struct lm_profile p;
    char want[32];
    uint64_t lines = 0;

    run_stacks("on", "many", 8, 0, &p);
    CU_ASSERT(p.state.stacks.resets >= 1);
    CU_ASSERT_EQUAL(p.state.stacks.folded, 0);
    for (int line = 2; line <= 40001; line += 4999) {
        snprintf(want, sizeof(want), "many:%d", line);
        lines += BY_STACK(&p.state, "stacks.lua:13", want);
    }
    CU_ASSERT_EQUAL(lines, 9); /* lines 2, 5001, ..., 40001: one each */
    CU_ASSERT_EQUAL(BY_STACK(&p.state, "stacks.lua:13"), 40000);
    lm_profile_free(&p);
}

/* Sampled stacks: estimates of the line's bytes and events, within 10% of
 * the exact counts, which stay exact. */
static void test_stacks_sampled(void)
{
    struct lm_profile p;
    double est_bytes = 0, est_events = 0;
    uint64_t bytes = 0, events = 0;

    run_stacks("on", "sampled", 8, 16384, &p);
    CU_ASSERT_EQUAL(p.state.stacks.sample_bytes, 16384);
    for (uint32_t i = 0; i < p.state.nlocs; i++) {
        char name[512];
        lm_state_loc_name(&p.state, i, name, sizeof(name));
        if (strstr(name, "stacks.lua:50") == NULL)
            continue;
        bytes += p.state.locs[i].ev.alloc_bytes;
        events += p.state.locs[i].ev.alloc_events;
        if (p.state.locs[i].stack != 0 &&
            i < p.state.stacks.est_room / sizeof(*p.state.stacks.est)) {
            est_bytes += p.state.stacks.est[i].bytes;
            est_events += p.state.stacks.est[i].events;
        }
    }
    CU_ASSERT(events > 100000);
    CU_ASSERT(est_bytes > 0.9 * (double)bytes &&
              est_bytes < 1.1 * (double)bytes);
    CU_ASSERT(est_events > 0.9 * (double)events &&
              est_events < 1.1 * (double)events);
    lm_profile_free(&p);
}

static void test_lua_api(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("api", "api.bin", &out), 0);
    CU_ASSERT_STRING_EQUAL(out, "api ok\n");
    CU_ASSERT_EQUAL(decode("api.bin", &p), LM_DONE);
    /* In the interpreter, then on a trace started there. */
    CU_ASSERT(allocs_at(&p.state, NULL, "api.lua:15") >= 100);
    lm_profile_free(&p);
    free(out);
}

/* lua_close with the profiler running ends the stream cleanly. */
static void test_close_while_profiling(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("close", "close.bin", &out), 0);
    CU_ASSERT_EQUAL(decode("close.bin", &p), LM_DONE);
    CU_ASSERT(allocs_at(&p.state, NULL, "close.lua:5") >= 100);
    lm_profile_free(&p);
    free(out);
}

static void test_output_unchanged(void)
{
    struct lm_profile p;
    char *plain, *profiled;

    CU_ASSERT_EQUAL(run_script("output", NULL, &plain), 0);
    CU_ASSERT_EQUAL(run_script("output", "output.bin", &profiled), 0);
    CU_ASSERT(strlen(plain) > 50);
    CU_ASSERT_STRING_EQUAL(plain, profiled);
    CU_ASSERT_EQUAL(decode("output.bin", &p), LM_DONE);
    CU_ASSERT(p.state.totals.alloc_events > 100);
    lm_profile_free(&p);
    free(plain);
    free(profiled);
}

/* Prototype addresses reused within one session: every chunk keeps its own
 * allocation under its own name (symbol epochs). */
static void test_reused_prototype_addresses(void)
{
    struct lm_profile p;
    char *out, name[16];
    uint32_t reused = 0;

    CU_ASSERT_EQUAL(run_script("reuse", "reuse.bin", &out), 0);
    CU_ASSERT_EQUAL_FATAL(decode("reuse.bin", &p), LM_DONE);
    for (int i = 1; i <= 40; i++) {
        snprintf(name, sizeof(name), "c%02d:1", i);
        CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, name), 1);
    }
    /* The same address announced under two chunks at least once. */
    const struct lm_symtab *t = &p.state.sym;
    for (uint32_t a = 0; a < t->nprotos; a++)
        for (uint32_t b = a + 1; b < t->nprotos; b++)
            if (t->protos[a].addr == t->protos[b].addr &&
                t->protos[a].chunk != t->protos[b].chunk)
                reused++;
    CU_ASSERT(reused > 0);
    lm_profile_free(&p);
    free(out);
}

/* Whether symbol string id names a chunk that ends with name. */
static int chunk_is(const struct lm_symtab *t, uint32_t id, const char *name)
{
    size_t len, ln = strlen(name);

    if (id == LM_NONE)
        return 0;
    const char *s = lm_symtab_str(t, id, &len);
    return len >= ln && memcmp(s + len - ln, name, ln) == 0;
}

/* Prototypes announced under chunk name. */
static int protos_of(const struct lm_symtab *t, const char *name)
{
    int n = 0;

    for (uint32_t i = 0; i < t->nprotos; i++)
        n += chunk_is(t, t->protos[i].chunk, name);
    return n;
}

/* Traces announced that start in chunk name. */
static int traces_in(const struct lm_symtab *t, const char *name)
{
    int n = 0;

    for (uint32_t i = 0; i < t->ntraces; i++) {
        uint32_t pt = t->traces[i].start_proto;
        n += t->traces[i].known && pt != LM_NONE &&
             chunk_is(t, t->protos[pt].chunk, name);
    }
    return n;
}

/* Checks one stream of start_symtab.lua: chunks first..30 live (two
 * prototypes each, one allocation at line 2 of each), the others not
 * announced; the trace in "hot" when the JIT is on. */
static void check_start_symtab(const char *file, int first, int jit)
{
    struct lm_profile p;
    char name[32];

    CU_ASSERT_EQUAL_FATAL(decode(file, &p), LM_DONE);
    const struct lm_symtab *t = &p.state.sym;
    for (int i = 1; i <= 30; i++) {
        snprintf(name, sizeof(name), "live%02d", i);
        CU_ASSERT_EQUAL(protos_of(t, name), i >= first ? 2 : 0);
        snprintf(name, sizeof(name), "live%02d:2", i);
        CU_ASSERT_EQUAL(allocs_at(&p.state, NULL, name), i >= first ? 1 : 0);
        snprintf(name, sizeof(name), "dead%02d", i);
        CU_ASSERT_EQUAL(protos_of(t, name), 0);
    }
    if (jit) {
        CU_ASSERT(traces_in(t, "hot") >= 1);
    } else {
        CU_ASSERT_EQUAL(p.state.totals.trace_symbols, 0);
    }
    lm_profile_free(&p);
}

/* A start in a running VM announces what lives then, found without a
 * walk of the heap: prototypes loaded before it, not those collected,
 * and not those freed during an earlier stream; traces too. */
static void check_start_in_running_vm(const char *flags, int jit)
{
    char *out;

    CU_ASSERT_EQUAL(
        run_script_flags(flags, "start_symtab", "start_symtab.bin", &out), 0);
    free(out);
    check_start_symtab("start_symtab.bin.1", 1, jit);
    check_start_symtab("start_symtab.bin.2", 11, jit);
}

/* -- The census ---------------------------------------------------------- */

/* The VMs that census.lua runs on: the build's, then each flavour built
 * with ASan, the system allocator and LuaJIT's assertions (LJMP_VM_ASAN),
 * which catch a census read of freed memory or a broken invariant. */
static const char *const census_vms[] = {LUAJIT_BIN,
#ifdef LUAJIT_ASAN_BINS
                                         LUAJIT_ASAN_BINS
#endif
};

/* Runs VM FLAGS tests/vm/SCRIPT.lua ARGS > stdout; returns its exit
 * status and stdout. */
static int run_vm(const char *vm, const char *flags, const char *script,
                  const char *args, char **output)
{
    char cmd[2048], name[128];

    snprintf(name, sizeof(name), "%s.stdout", script);
    snprintf(cmd, sizeof(cmd),
             "ASAN_OPTIONS=detect_leaks=0 %s %s %s/%s.lua %s >%s/%s", vm, flags,
             VM_SCRIPTS, script, args, test_dir, name);
    int st = system(cmd);
    *output = test_slurp(name);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One census of census.lua's heap, started with the collector in phase:
 * complete, what no walk placed under 1% of the VM's heap, no block
 * announced outside the census twice, every old object freed after it
 * matched, and every userdata of the named metatable counted once. */
static void check_census(const char *vm, const char *flags, const char *phase)
{
    struct lm_profile p;
    char args[256], *out;

    snprintf(args, sizeof(args), "%s/census.bin %s 2000", test_dir, phase);
    int rc = run_vm(vm, flags, "census", args, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", "census complete"));
    if (rc != 0 || out == NULL || strstr(out, "census complete") == NULL)
        fprintf(stderr, "\n%s %s census.lua %s: %s\n", vm, flags, phase,
                out ? out : "(no output)");
    free(out);
    CU_ASSERT_EQUAL_FATAL(decode("census.bin", &p), LM_DONE);
    const struct lm_census *c = &p.state.census;
    const struct lm_totals *t = &p.state.totals;
    CU_ASSERT_EQUAL(c->state, LM_CENSUS_DONE);
    CU_ASSERT(c->complete_total > 0);
    CU_ASSERT(c->remainder * 100 <= c->complete_total);
    CU_ASSERT_EQUAL(c->over, 0);
    CU_ASSERT_EQUAL(t->unknown_frees, 0);
    CU_ASSERT_EQUAL(t->overwritten_blocks, 0);
    CU_ASSERT_EQUAL(allocs_at(&p.state,
                              "[before profiling] userdata CensusUdata",
                              "CensusUdata"),
                    2001);
    CU_ASSERT(allocs_at(&p.state, "[before profiling] thread", "thread") >= 20);
    if (c->remainder * 100 > c->complete_total || t->unknown_frees != 0)
        fprintf(stderr, "\n%s %s %s: remainder %llu of %llu, %llu unknown\n",
                vm, flags, phase, (unsigned long long)c->remainder,
                (unsigned long long)c->complete_total,
                (unsigned long long)t->unknown_frees);
    lm_profile_free(&p);
}

/* Every VM, the JIT on and off, the collector in each phase it can be
 * seen in between two steps (the atomic phase is one step). */
static void test_census_in_every_phase(void)
{
    static const char *const phases[] = {"pause", "propagate", "sweepstring",
                                         "sweep", "finalize"};

    for (size_t v = 0; v < sizeof(census_vms) / sizeof(census_vms[0]); v++)
        for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
            check_census(census_vms[v], "", phases[i]);
            check_census(census_vms[v], "-joff", phases[i]);
        }
}

/* A stream stopped before its census completed leaves it partial (begun,
 * never complete); the next stream's census completes. */
static void test_census_partial(void)
{
    struct lm_profile p;
    char *out;

    CU_ASSERT_EQUAL(run_script("census_partial", "census_partial", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", "first partial"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", "second complete"));
    free(out);
    CU_ASSERT_EQUAL_FATAL(decode("census_partial.1", &p), LM_DONE);
    CU_ASSERT_EQUAL(p.state.census.state, LM_CENSUS_RUNNING);
    lm_profile_free(&p);
    CU_ASSERT_EQUAL_FATAL(decode("census_partial.2", &p), LM_DONE);
    CU_ASSERT_EQUAL(p.state.census.state, LM_CENSUS_DONE);
    CU_ASSERT_EQUAL(p.state.totals.unknown_frees, 0);
    lm_profile_free(&p);
}

static void test_start_announces_live_symbols(void)
{
    check_start_in_running_vm("", 1);
}

static void test_start_announces_live_symbols_nojit(void)
{
    check_start_in_running_vm("-joff", 0);
}

/* A listening Unix socket at DIR/NAME. */
static int listen_at(const char *name, char *path, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    snprintf(path, len, "%s/%s", test_dir, name);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    unlink(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CU_ASSERT_FATAL(listen(fd, 4) == 0);
    return fd;
}

/* A VM's ingest connection as a test reads it: its hello, then its
 * stream and trailer, in buf. */
struct conn {
    int fd; /* where the stream comes: the VM's pipe, or sock */
    int sock;
    pid_t pid; /* SO_PEERCRED */
    uint8_t *buf;
    size_t len, cap;
};

/* Accepts a VM within ms, reads its hello into c, and answers it as
 * ljmpd does if answer (the VM waits for that before it streams; through
 * a pipe, with word that wake-asks are answered); -1 if none came. */
static int accept_vm(int lfd, int ms, int answer, struct conn *c)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    uint8_t ack[2] = {LJMP_HELLO_ACK, LJMP_WAKE};
    struct ucred cr;
    socklen_t crlen = sizeof(cr);

    memset(c, 0, sizeof(*c));
    c->fd = c->sock = -1;
    if (poll(&p, 1, ms) != 1 || (c->sock = accept(lfd, NULL, NULL)) < 0)
        return -1;
    if (getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
        c->pid = cr.pid;
    c->buf = malloc(c->cap = 1 << 16);
    c->fd = test_take_hello(c->sock, c->buf, &c->len);
    CU_ASSERT(c->fd >= 0);
    size_t n = c->fd != c->sock ? 2 : 1;
    if (answer && c->fd >= 0)
        CU_ASSERT_EQUAL(write(c->sock, ack, n), (ssize_t)n);
    return c->fd >= 0 ? 0 : -1;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0 && c->fd != c->sock)
        close(c->fd);
    if (c->sock >= 0)
        close(c->sock);
    c->fd = c->sock = -1;
}

/* Starts `env ENV luajit tests/vm/SCRIPT.lua ARG ARG2` (ENV: NAME=VALUE
 * words; the arguments up to the first NULL), its stdout to
 * DIR/SCRIPT.out. */
static pid_t spawn_args(const char *script, const char *env, const char *arg,
                        const char *arg2)
{
    char lua[512], out[512];
    pid_t pid;

    snprintf(lua, sizeof(lua), "%s/%s.lua", VM_SCRIPTS, script);
    snprintf(out, sizeof(out), "%s/%s.out", test_dir, script);
    pid = fork();
    if (pid == 0) {
        FILE *f = freopen(out, "w", stdout);
        (void)f;
        for (char *w = env ? strtok(strdup(env), " ") : NULL; w != NULL;
             w = strtok(NULL, " "))
            putenv(w);
        execl(LUAJIT_BIN, LUAJIT_BIN, lua, arg, arg2, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pid_t spawn(const char *script, const char *env, const char *arg)
{
    return spawn_args(script, env, arg, NULL);
}

static int wait_exit(pid_t pid)
{
    int st;

    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *script_output(const char *script)
{
    char name[128];

    snprintf(name, sizeof(name), "%s.out", script);
    return test_slurp(name);
}

/* The script ran to a clean exit and printed want. */
static void expect_exit_output(pid_t pid, const char *script, const char *want)
{
    CU_ASSERT_EQUAL(wait_exit(pid), 0);
    char *out = script_output(script);
    CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
}

/*
 * Stacks under stress (stacks_stress.lua): random programs of tail calls,
 * errors, coroutines and metamethods, the profiler started and stopped
 * with stacks at random depths while they run, JIT on and off: each runs
 * to its end with the results it has without the profiler.
 */
static void test_stacks_stress(void)
{
    static const char *const env[] = {NULL, "LJMP_STRESS_JOFF=1"};

    for (int seed = 1; seed <= 6; seed++) {
        char arg[16];
        snprintf(arg, sizeof(arg), "%d", seed);
        CU_ASSERT_EQUAL(
            wait_exit(spawn_args("stacks_stress", NULL, arg, "off")), 0);
        char *want = script_output("stacks_stress");
        CU_ASSERT_FATAL(want != NULL && want[0] != '\0');
        for (int j = 0; j < 2; j++) {
            CU_ASSERT_EQUAL(
                wait_exit(spawn_args("stacks_stress", env[j], arg, "on")), 0);
            char *out = script_output("stacks_stress");
            CU_ASSERT_STRING_EQUAL(out, want);
            free(out);
        }
        free(want);
    }
}

#ifdef LUAJIT_ASAN_BINS
/* One run of a checked VM: it ends well, and prints what it should (or
 * something, if want is empty). */
static void check_checked_run(const char *vm, const char *flags,
                              const char *script, const char *args,
                              const char *want)
{
    char *out;
    int rc = run_vm(vm, flags, script, args, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(out != NULL && out[0] != '\0' && strstr(out, want) != NULL);
    if (rc != 0)
        fprintf(stderr, "\n%s %s %s.lua %s: exit %d\n", vm, flags, script, args,
                rc);
    free(out);
}
#endif

/*
 * Stacks joined to the last one walked (lj_memprof_stacks.h, StackKept),
 * on each VM built with LuaJIT's assertions (LJMP_VM_ASAN): such a VM
 * compares every stack it sends with a walk of the whole stack to the
 * depth, and aborts on a difference.  The interpreter's frames
 * (stacks_kept.lua) at depths that cut its recursion and one that does
 * not; the frames compiled code makes (stacks_kept_traces.lua), also with
 * traces made at once, and with the stream started in a finalizer, where
 * the traces cannot be flushed; walks on traces below finalizers, hooks
 * and error handlers (stacks_kept_hooks.lua); a tail call's mark taken by
 * another base (stacks_kept_evict.lua); and the stress programs.
 */
static void test_stacks_kept_checked(void)
{
#ifdef LUAJIT_ASAN_BINS
    static const char *const vms[] = {LUAJIT_ASAN_BINS};
    static const char *const flags[] = {"", "-joff", "-Ohotloop=1"};
    static const char *const depths[] = {"1", "3", "16", "64"};
    static const char *const seeds[] = {"1 on", "2 on", "3 on"};

    for (size_t v = 0; v < sizeof(vms) / sizeof(vms[0]); v++) {
        for (int j = 0; j < 3; j++) {
            for (size_t d = 0; d < 4; d++) {
                if (j < 2)
                    check_checked_run(vms[v], flags[j], "stacks_kept",
                                      depths[d], "ok");
                check_checked_run(vms[v], flags[j], "stacks_kept_traces",
                                  depths[d], "ok");
            }
            for (size_t s = 0; j < 2 && s < 3; s++)
                check_checked_run(vms[v], flags[j], "stacks_stress", seeds[s],
                                  "");
        }
        check_checked_run(vms[v], "", "stacks_kept_traces", "3 gc", "ok");
        check_checked_run(vms[v], "", "stacks_kept_traces", "16 gc", "ok");
        check_checked_run(vms[v], "", "stacks_kept_hooks", "3", "ok");
        check_checked_run(vms[v], "", "stacks_kept_hooks", "16", "ok");
        check_checked_run(vms[v], "-joff", "stacks_kept_evict", "", "ok");
    }
#else
    fprintf(stderr, "(no VM with LuaJIT's assertions: LJMP_VM_ASAN is off) ");
#endif
}

/* One read into c, its buffer grown as needed; whether bytes came. */
static int read_some(struct conn *c)
{
    if (c->len == c->cap)
        c->buf = realloc(c->buf, c->cap = c->cap ? 2 * c->cap : 1 << 16);
    ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (n > 0)
        c->len += (size_t)n;
    return n > 0;
}

/* Reads a connection to its end. */
static void read_all(struct conn *c)
{
    while (read_some(c))
        ;
}

/*
 * LJMP_SOCKET profiles a VM from its start: hello, a complete stream with
 * the script's own allocations, and a trailer whose totals match.  A
 * reader that does not answer the hello (an ljmpd of protocol 1) gets the
 * same stream, a second later.
 */
/* Decodes what a VM sent on an ingest connection into p: a hello, a
 * complete stream, and a trailer whose totals match it; 0 if so. */
static int decode_session(const uint8_t *buf, size_t len, struct lm_profile *p)
{
    size_t used;
    uint64_t events, bytes;

    lm_profile_init(p, NULL, NULL);
    /* The hello. */
    CU_ASSERT_FATAL(len > 7 + LJMP_TRAILER_SIZE);
    CU_ASSERT(memcmp(buf, LJMP_HELLO_MAGIC, 4) == 0);
    CU_ASSERT_EQUAL(buf[4], LJMP_INGEST_STACKS_VERSION);
    CU_ASSERT_EQUAL(buf[5], VM_FLAVOUR);
    CU_ASSERT(buf[6] > 0 && memcmp(buf + 7, "LuaJIT 2.1", 10) == 0);
    size_t hello = ljmp_hello_size(buf, len);
    /* The stream, then the trailer. */
    if (lm_profile_feed(p, buf + hello, len - hello, &used) != LM_DONE ||
        len - hello - used != LJMP_TRAILER_SIZE ||
        ljmp_trailer_decode(buf + hello + used, &events, &bytes) != 0)
        return -1;
    CU_ASSERT_EQUAL(events, lm_totals_events(&p->state.totals));
    CU_ASSERT_EQUAL(bytes, used);
    return 0;
}

static void check_env_socket_stream(int answer, int pipe)
{
    char path[512], env[600];
    int lfd = listen_at("ingest.sock", path, sizeof(path));
    snprintf(env, sizeof(env), "LJMP_SOCKET=%s%s", path,
             pipe ? " LJMP_PIPE=1" : "");
    pid_t pid = spawn("env_socket", env, NULL);
    struct conn c;
    struct lm_profile p;

    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 10000, answer, &c), 0);
    /* Through a pipe with LJMP_PIPE=1, else on the socket. */
    CU_ASSERT_EQUAL(c.buf[4], LJMP_INGEST_STACKS_VERSION);
    CU_ASSERT_EQUAL(c.fd != c.sock, pipe);
    read_all(&c);
    conn_close(&c);
    close(lfd);
    expect_exit_output(pid, "env_socket", "true\n");
    CU_ASSERT_EQUAL_FATAL(decode_session(c.buf, c.len, &p), 0);
    /* From the start: the chunk itself was announced as it was loaded. */
    CU_ASSERT(p.state.totals.symtab_events >= 1);
    /* The loop's line, in the interpreter and on the trace of the loop. */
    CU_ASSERT(allocs_at(&p.state, "@", "env_socket.lua:5") +
                  allocs_at(&p.state, "TRACE [", "env_socket.lua:4") >=
              300);
    /* VM start-up: the standard libraries' C functions allocate. */
    CU_ASSERT(allocs_at(&p.state, "CFUNC ", "") > 0);
    lm_profile_free(&p);
    free(c.buf);
}

static void test_env_socket_stream(void)
{
    check_env_socket_stream(1, 0);
}

static void test_env_socket_unanswered(void)
{
    check_env_socket_stream(0, 0);
}

static void test_env_socket_through_pipe(void)
{
    check_env_socket_stream(1, 1);
}

static void test_env_socket_pipe_unanswered(void)
{
    check_env_socket_stream(0, 1);
}

/* A program that exits without stopping its profile (and without
 * lua_close): the stream still ends whole, with its trailer. */
static void test_exit_while_streaming(void)
{
    char path[512], env[600];
    int lfd = listen_at("exit.sock", path, sizeof(path));
    snprintf(env, sizeof(env), "LJMP_SOCKET=%s", path);
    pid_t pid = spawn("exit", env, NULL);
    struct conn c;
    struct lm_profile p;

    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 10000, 1, &c), 0);
    read_all(&c);
    conn_close(&c);
    close(lfd);
    CU_ASSERT_EQUAL(wait_exit(pid), 3);
    CU_ASSERT_EQUAL_FATAL(decode_session(c.buf, c.len, &p), 0);
    CU_ASSERT_EQUAL(allocs_at(&p.state, "@", "exit.lua:5"), 100);
    lm_profile_free(&p);
    free(c.buf);
}

/* A reader that hangs up after the hello (ljmpd refusing it): the start
 * fails and says so; the program goes on. */
static void test_env_socket_refused(void)
{
    char path[512], env[600], hello[LJMP_HELLO_MAX];
    int lfd = listen_at("refuse.sock", path, sizeof(path));
    snprintf(env, sizeof(env), "LJMP_SOCKET=%s", path);
    pid_t pid = spawn("env_socket", env, NULL);
    int cfd = accept(lfd, NULL, NULL);
    size_t got = 0;
    ssize_t n;

    CU_ASSERT_FATAL(cfd >= 0);
    while (got < ljmp_hello_size((const uint8_t *)hello, got) &&
           (n = read(cfd, hello + got, sizeof(hello) - got)) > 0)
        got += (size_t)n;
    CU_ASSERT(got >= 7);
    close(cfd);
    close(lfd);
    expect_exit_output(pid, "env_socket",
                       "false\tConnection reset by peer\t104\n");
}

/* No listener: start says so, status() tells why, the script goes on. */
static void test_socket_absent(void)
{
    char *out;

    CU_ASSERT_EQUAL(run_script("socket_absent", NULL, &out), 0);
    CU_ASSERT_STRING_EQUAL(
        out, "nil\t/nonexistent-dir/ingest.sock: No such file or directory\t2\n"
             "false\n"
             "100\n");
    free(out);
    /* The same through the environment: the program does not notice. */
    pid_t pid =
        spawn("env_socket", "LJMP_SOCKET=/nonexistent-dir/x.sock", NULL);
    expect_exit_output(pid, "env_socket",
                       "false\tNo such file or directory\t2\n");
}

/* The reader goes away mid-stream: profiling stops, the script exits 0
 * and learns why (EPIPE), once. */
static void check_socket_peer_gone(const char *env)
{
    char path[512], head[4096];
    int lfd = listen_at("gone.sock", path, sizeof(path));
    char arg[520];
    snprintf(arg, sizeof(arg), "socket:%s", path);
    pid_t pid = spawn("reader_gone", env, arg);
    struct conn c;

    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 10000, 1, &c), 0);
    CU_ASSERT_EQUAL(c.fd != c.sock, env != NULL); /* the pipe, if asked */
    /* Past the start (symbol table and prologue), into the events. */
    size_t got = 0;
    ssize_t n;
    while (got < 64 * 1024 && (n = read(c.fd, head, sizeof(head))) > 0)
        got += (size_t)n;
    CU_ASSERT(got >= 64 * 1024);
    conn_close(&c);
    free(c.buf);
    close(lfd);
    expect_exit_output(pid, "reader_gone",
                       "false\tBroken pipe\t32\n"
                       "nil\tBroken pipe\t32\n"
                       "nil\tprofiler is not running\t22\n");
}

static void test_socket_peer_gone(void)
{
    check_socket_peer_gone(NULL);
}

/* The same through a pipe: a reader gone raises no SIGPIPE either. */
static void test_pipe_peer_gone(void)
{
    check_socket_peer_gone("LJMP_PIPE=1");
}

/* Does PID catch signal SIG?  (SigCgt in /proc/PID/status.) */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    unsigned long long mask = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "SigCgt:", 7) == 0)
            mask = strtoull(line + 7, NULL, 16);
    fclose(f);
    return (mask >> (sig - 1)) & 1;
}

/* Waits until PID catches SIG (its VM is up), at most 5 s. */
static int wait_catches(pid_t pid, int sig)
{
    for (int i = 0; i < 500; i++) {
        if (catches(pid, sig))
            return 1;
        usleep(10000);
    }
    return 0;
}

/*
 * ljmpd's attach, by hand: the agent catches its signal; an attach request
 * makes the VM connect and stream at its next safe point; a detach ends the
 * stream with its trailer; the program runs on and ends by itself.
 */
static void test_attach_and_detach(void)
{
    char path[512], env[600], stop[512];
    int sig = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;
    int lfd = listen_at("attach.sock", path, sizeof(path));
    union sigval v;

    snprintf(env, sizeof(env), "LJMP_INGEST=%s", path);
    snprintf(stop, sizeof(stop), "%s/attach.stop", test_dir);
    pid_t pid = spawn("attach_target", env, stop);
    CU_ASSERT_FATAL(wait_catches(pid, sig));
    v.sival_int = LJMP_REQ_ATTACH;
    CU_ASSERT_FATAL(sigqueue(pid, sig, v) == 0);
    struct conn c;
    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 5000, 1, &c), 0);

    /* Stream a while, then detach, and read to the end. */
    int detached = 0;
    while (read_some(&c)) {
        if (!detached && c.len > 64 * 1024) {
            v.sival_int = LJMP_REQ_DETACH;
            sigqueue(pid, sig, v);
            detached = 1;
        }
    }
    conn_close(&c);
    close(lfd);
    uint8_t *buf = c.buf;
    size_t len = c.len, used;
    fclose(fopen(stop, "w"));
    expect_exit_output(pid, "attach_target", "false\n");

    struct lm_profile p;
    CU_ASSERT_FATAL(len > 7 && memcmp(buf, LJMP_HELLO_MAGIC, 4) == 0);
    size_t hello = ljmp_hello_size(buf, len);
    lm_profile_init(&p, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(lm_profile_feed(&p, buf + hello, len - hello, &used),
                          LM_DONE);
    CU_ASSERT_EQUAL(len - hello - used, LJMP_TRAILER_SIZE);
    uint64_t events, bytes;
    CU_ASSERT_EQUAL(ljmp_trailer_decode(buf + hello + used, &events, &bytes),
                    0);
    CU_ASSERT_EQUAL(events, lm_totals_events(&p.state.totals));
    CU_ASSERT(allocs_at(&p.state, NULL, "attach_target.lua:8") +
                  allocs_at(&p.state, "TRACE [", "attach_target.lua:7") >
              0);
    lm_profile_free(&p);
    free(buf);
}

/* A FIFO whose reader leaves: writes must not raise SIGPIPE in the host
 * (which would kill it); the profile stops with EPIPE. */
static void test_fifo_reader_gone(void)
{
    char path[512], buf[1000];

    snprintf(path, sizeof(path), "%s/profile.fifo", test_dir);
    CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
    char arg[520];
    snprintf(arg, sizeof(arg), "fifo:%s", path);
    pid_t pid = spawn("reader_gone", NULL, arg);
    int fd = open(path, O_RDONLY);
    CU_ASSERT(read(fd, buf, sizeof(buf)) > 0);
    close(fd);
    expect_exit_output(pid, "reader_gone",
                       "false\tBroken pipe\t32\n"
                       "nil\tBroken pipe\t32\n"
                       "nil\tprofiler is not running\t22\n");
}

/* A reader that never reads, and a bound on the stall: the profile stops
 * after a write blocked that long (EAGAIN); the script runs to its end. */
static void check_socket_stall_bound(const char *env)
{
    char path[512];
    int lfd = listen_at("stall.sock", path, sizeof(path));
    pid_t pid = spawn("socket_stall", env, path);
    struct conn c;
    struct lm_profile p;
    size_t used;

    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 5000, 1, &c), 0);
    CU_ASSERT_EQUAL(c.fd != c.sock, env != NULL); /* the pipe, if asked */
    expect_exit_output(pid, "socket_stall",
                       "false\tResource temporarily unavailable\t11\n");
    /* Read late, what the VM sent before it gave up is a whole prefix of
     * its stream: nothing it wrote after (its epilogue, say) reached
     * pages the pipe still held. */
    read_all(&c);
    lm_profile_init(&p, NULL, NULL);
    size_t hello = ljmp_hello_size(c.buf, c.len);
    CU_ASSERT_EQUAL(lm_profile_feed(&p, c.buf + hello, c.len - hello, &used),
                    LM_NEED_MORE);
    CU_ASSERT_EQUAL(used, c.len - hello);
    lm_profile_free(&p);
    conn_close(&c);
    free(c.buf);
    close(lfd);
}

static void test_socket_stall_bound(void)
{
    check_socket_stall_bound(NULL);
}

static void test_pipe_stall_bound(void)
{
    check_socket_stall_bound("LJMP_PIPE=1");
}

/* The CPU time pid has used (user and system), in milliseconds. */
static long cpu_ms_of(pid_t pid)
{
    char path[64], line[1024];
    unsigned long utime = 0, stime = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    CU_ASSERT_FATAL((f = fopen(path, "r")) != NULL);
    char *end = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
    fclose(f);
    /* After the name: state and 10 fields, then utime and stime. */
    CU_ASSERT_FATAL(end != NULL &&
                    sscanf(end + 2,
                           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                           "%*u %lu %lu",
                           &utime, &stime) == 2);
    return (long)((utime + stime) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* The pipe's unread bytes. */
static int pipe_unread(int fd)
{
    int n = -1;

    CU_ASSERT(ioctl(fd, FIONREAD, &n) == 0);
    return n;
}

/*
 * Through a pipe, a VM that has filled it asks to be woken once ljmpd has
 * read it down to a quarter (ljmp_ingest.h), then sleeps: no second ask,
 * nothing more in the pipe, until the answer.  Served as ljmpd serves it
 * after that, it runs to its end with a whole stream.
 */
static void test_pipe_waits_for_answer(void)
{
    char path[512];
    int lfd = listen_at("wake.sock", path, sizeof(path));
    pid_t pid = spawn("pipe_wake", "LJMP_PIPE=1", path);
    struct ljmp_wake w = {0};
    struct conn c;
    struct lm_profile p;
    uint8_t in[64], bad;

    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 5000, 1, &c), 0);
    CU_ASSERT_FATAL(c.fd != c.sock);
    int room = fcntl(c.fd, F_GETPIPE_SZ);
    struct pollfd pf[2] = {{.fd = c.sock, .events = POLLIN},
                           {.fd = c.fd, .events = POLLIN}};
    CU_ASSERT_EQUAL_FATAL(poll(pf, 1, 10000), 1);
    ssize_t n = recv(c.sock, in, sizeof(in), 0);
    CU_ASSERT_EQUAL_FATAL(n, LJMP_WAKE_ASK_SIZE);
    CU_ASSERT_FATAL(ljmp_wake_take(&w, in, (size_t)n, &bad) == 0 && w.asked);
    CU_ASSERT(w.level <= (uint32_t)room / 4);
    int full = pipe_unread(c.fd);
    CU_ASSERT((uint32_t)full > w.level);
    long cpu = cpu_ms_of(pid);
    usleep(2 * LJMP_WAKE_LOOK_MS * 1000);
    CU_ASSERT_EQUAL(pipe_unread(c.fd), full);
    CU_ASSERT(cpu_ms_of(pid) - cpu < 50); /* asleep, not looking in a loop */
    CU_ASSERT_EQUAL(recv(c.sock, in, sizeof(in), MSG_DONTWAIT), -1);
    for (;;) {
        CU_ASSERT(ljmp_wake_answer(&w, c.fd, c.sock) >= 0);
        CU_ASSERT_FATAL(poll(pf, 2, 10000) > 0);
        if (pf[0].revents & POLLIN) {
            n = recv(c.sock, in, sizeof(in), MSG_DONTWAIT);
            if (n > 0) {
                CU_ASSERT(ljmp_wake_take(&w, in, (size_t)n, &bad) == 0);
            } else {
                pf[0].fd = -1; /* the VM closed its socket */
            }
        }
        if ((pf[1].revents & (POLLIN | POLLHUP)) && !read_some(&c))
            break;
    }
    conn_close(&c);
    close(lfd);
    expect_exit_output(pid, "pipe_wake", "done\n");
    CU_ASSERT_EQUAL_FATAL(decode_session(c.buf, c.len, &p), 0);
    CU_ASSERT(p.state.totals.alloc_events >= 800000);
    lm_profile_free(&p);
    free(c.buf);
}

/* memprof's buffer (LJ_MEMPROF_BUFSZ). */
#define VM_BUFSZ (256 * 1024)

/* memprof's buffers for a VM of this user streaming through a pipe, as
 * lj_ljmp.c's open_pipe sizes it: what the pipe holds, and one. */
static int pipe_buffers(void)
{
    int p[2], n;

    CU_ASSERT_FATAL(pipe(p) == 0);
    if (fcntl(p[1], F_SETPIPE_SZ, 8 * VM_BUFSZ) < 0)
        fcntl(p[1], F_SETPIPE_SZ, 4 * VM_BUFSZ);
    n = fcntl(p[1], F_GETPIPE_SZ) / VM_BUFSZ + 1;
    close(p[0]);
    close(p[1]);
    return n > 9 ? 9 : n;
}

/*
 * Through a pipe read late, the stop's flush lends the last buffer that
 * was free: it needs no other after it, so the stream ends whole, with
 * its trailer, however long the reader takes (a wait for a free buffer
 * there ran into the stall bound and lost the trailer).
 */
static void test_pipe_last_flush(void)
{
    char path[512], rounds[16];
    int lfd = listen_at("last.sock", path, sizeof(path));
    struct conn c;
    struct lm_profile p;

    snprintf(rounds, sizeof(rounds), "%d", pipe_buffers());
    pid_t pid = spawn_args("pipe_last_flush", "LJMP_PIPE=1", path, rounds);
    CU_ASSERT_EQUAL_FATAL(accept_vm(lfd, 5000, 1, &c), 0);
    CU_ASSERT_FATAL(c.fd != c.sock);
    expect_exit_output(pid, "pipe_last_flush", "true\n");
    read_all(&c);
    conn_close(&c);
    close(lfd);
    CU_ASSERT_EQUAL(decode_session(c.buf, c.len, &p), 0);
    lm_profile_free(&p);
    free(c.buf);
}

/* Accepts up to n connections on lfd, answers their hellos as ljmpd does
 * and reads each to its end, all at once (a VM may wait for another);
 * gives up after ms without news.  Returns the connections made. */
static int serve_vms(int lfd, struct conn *c, int n, int ms)
{
    struct pollfd p[9];
    int made = 0, open = 0;

    CU_ASSERT_FATAL(n < 9);
    for (;;) {
        int np = 0;
        if (made < n)
            p[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < made; i++)
            if (c[i].fd >= 0)
                p[np++] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        if ((made == n && open == 0) || poll(p, (nfds_t)np, ms) <= 0)
            break;
        for (int i = 0; i < np; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            if (p[i].fd == lfd) {
                if (accept_vm(lfd, 0, 1, &c[made]) == 0) {
                    made++;
                    open++;
                }
                continue;
            }
            for (int k = 0; k < made; k++)
                if (c[k].fd == p[i].fd && !read_some(&c[k])) {
                    conn_close(&c[k]);
                    open--;
                }
        }
    }
    return made;
}

/* fork.lua's lines: allocations before the fork, in the child, after it. */
#define FORK_BEFORE "fork.lua:18"
#define FORK_CHILD  "fork.lua:22"
#define FORK_AFTER  "fork.lua:28"

/* Allocation counts at fork.lua's three lines. */
static void expect_fork_counts(const struct lm_state *s, uint64_t before,
                               uint64_t child, uint64_t after)
{
    CU_ASSERT_EQUAL(allocs_at(s, "@", FORK_BEFORE), before);
    CU_ASSERT_EQUAL(allocs_at(s, "@", FORK_CHILD), child);
    CU_ASSERT_EQUAL(allocs_at(s, "@", FORK_AFTER), after);
}

/*
 * A fork while streaming: the child's copy of the profile ends without a
 * write, so the parent's stream holds the parent's events only, and the
 * child streams a session of its own, from its next safe point.
 */
static void test_fork_while_streaming(void)
{
    char path[512], arg[520], want[256];
    int lfd = listen_at("fork.sock", path, sizeof(path));
    struct conn c[2];
    struct lm_profile p;

    snprintf(arg, sizeof(arg), "socket:%s", path);
    pid_t pid = spawn("fork", NULL, arg);
    CU_ASSERT_EQUAL_FATAL(serve_vms(lfd, c, 2, 10000), 2);
    close(lfd);
    CU_ASSERT_EQUAL(c[0].pid, pid);
    CU_ASSERT(c[1].pid != pid && c[1].pid > 0);
    snprintf(want, sizeof(want), "child\t%d\ttrue\nparent\ttrue\n",
             (int)c[1].pid);
    expect_exit_output(pid, "fork", want);
    /* The parent's stream: whole, with its trailer, and its lines only. */
    CU_ASSERT_EQUAL(decode_session(c[0].buf, c[0].len, &p), 0);
    expect_fork_counts(&p.state, 100, 0, 300);
    lm_profile_free(&p);
    /* The child's, resolved by its own symbol table, and ended at its
     * exit. */
    CU_ASSERT_EQUAL(decode_session(c[1].buf, c[1].len, &p), 0);
    expect_fork_counts(&p.state, 0, 200, 0);
    lm_profile_free(&p);
    free(c[0].buf);
    free(c[1].buf);
}

/* A child that execs at once (spawning through the FFI) opens no session:
 * it starts its own only after a thousand bytecodes. */
static void test_fork_and_exec(void)
{
    char path[512];
    int lfd = listen_at("fork_exec.sock", path, sizeof(path));
    struct conn c[1];
    struct lm_profile p;
    struct pollfd more = {.fd = lfd, .events = POLLIN};

    pid_t pid = spawn("fork_exec", NULL, path);
    CU_ASSERT_EQUAL_FATAL(serve_vms(lfd, c, 1, 10000), 1);
    expect_exit_output(pid, "fork_exec", "parent\ttrue\n");
    CU_ASSERT_EQUAL(poll(&more, 1, 0), 0); /* no other connection */
    close(lfd);
    CU_ASSERT_EQUAL(c[0].pid, pid);
    CU_ASSERT_EQUAL(decode_session(c[0].buf, c[0].len, &p), 0);
    lm_profile_free(&p);
    free(c[0].buf);
}

/* A fork while profiling to a file: the child stops, and the file holds
 * the parent's events only. */
static void test_fork_while_writing_a_file(void)
{
    char arg[520], *after_pid = NULL;
    struct lm_profile p;

    snprintf(arg, sizeof(arg), "file:%s/fork.bin", test_dir);
    pid_t pid = spawn("fork", NULL, arg);
    CU_ASSERT_EQUAL(wait_exit(pid), 0);
    /* "child PID false": the child's copy of the profile has ended. */
    char *out = script_output("fork");
    CU_ASSERT_FATAL(strncmp(out, "child\t", 6) == 0 &&
                    strtol(out + 6, &after_pid, 10) > 0);
    CU_ASSERT_STRING_EQUAL(after_pid, "\tfalse\nparent\ttrue\n");
    free(out);
    CU_ASSERT_EQUAL_FATAL(decode("fork.bin", &p), LM_DONE);
    expect_fork_counts(&p.state, 100, 0, 300);
    lm_profile_free(&p);
}

/* LJMP_AGENT=0: no handler, so ljmpd can tell the agent is off. */
static void test_agent_disabled(void)
{
    char stop[512];
    int sig = SIGRTMIN + LJMP_DEFAULT_SIGNAL_OFFSET;

    snprintf(stop, sizeof(stop), "%s/noagent.stop", test_dir);
    pid_t pid = spawn("attach_target", "LJMP_AGENT=0", stop);
    usleep(300000);
    CU_ASSERT(!catches(pid, sig));
    fclose(fopen(stop, "w"));
    CU_ASSERT_EQUAL(wait_exit(pid), 0);
}

int main(void)
{
    /* Streams with no stall bound unless a test sets one: a test's reader
     * on a busy host may keep a VM waiting past the default's 100 ms. */
    setenv("LJMP_MAX_STALL_MS", "0", 1);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("patched VM", setup, teardown);
    CU_add_test(s, "new prototypes are announced",
                test_new_prototypes_are_announced);
    CU_add_test(s, "bytecode prototypes are announced",
                test_bytecode_prototypes_are_announced);
    CU_add_test(s, "unnamed chunk alias", test_unnamed_chunk_alias);
    CU_add_test(s, "trace allocations", test_trace_allocations);
    CU_add_test(s, "trace rows", test_trace_rows);
    CU_add_test(s, "trace stand-ins", test_trace_standins);
    CU_add_test(s, "recorded iteration on its line",
                test_recorded_iteration_on_its_line);
    CU_add_test(s, "lines inside compiled code",
                test_lines_inside_compiled_code);
    CU_add_test(s, "sunk allocations on their line",
                test_sunk_allocations_on_their_line);
    CU_add_test(s, "Lua API", test_lua_api);
    CU_add_test(s, "stacks: two callers", test_stacks_two_callers);
    CU_add_test(s, "stacks: kinds of frames", test_stacks_frame_kinds);
    CU_add_test(s, "stacks: tail calls", test_stacks_tail_calls);
    CU_add_test(s, "stacks: under stress", test_stacks_stress);
    CU_add_test(s, "stacks: joined to the last, checked",
                test_stacks_kept_checked);
    CU_add_test(s, "stacks: the VM's table bound", test_stacks_table_bound);
    CU_add_test(s, "stacks: sampled", test_stacks_sampled);
    CU_add_test(s, "lua_close while profiling", test_close_while_profiling);
    CU_add_test(s, "output unchanged", test_output_unchanged);
    CU_add_test(s, "reused prototype addresses",
                test_reused_prototype_addresses);
    CU_add_test(s, "a start announces live symbols",
                test_start_announces_live_symbols);
    CU_add_test(s, "a start announces live symbols, JIT off",
                test_start_announces_live_symbols_nojit);
    CU_add_test(s, "LJMP_SOCKET stream", test_env_socket_stream);
    CU_add_test(s, "LJMP_SOCKET, hello unanswered", test_env_socket_unanswered);
    CU_add_test(s, "LJMP_SOCKET, LJMP_PIPE=1", test_env_socket_through_pipe);
    CU_add_test(s, "LJMP_SOCKET, LJMP_PIPE=1, hello unanswered",
                test_env_socket_pipe_unanswered);
    CU_add_test(s, "LJMP_SOCKET, hello refused", test_env_socket_refused);
    CU_add_test(s, "socket absent", test_socket_absent);
    CU_add_test(s, "socket reader gone", test_socket_peer_gone);
    CU_add_test(s, "pipe reader gone", test_pipe_peer_gone);
    CU_add_test(s, "socket stall bound", test_socket_stall_bound);
    CU_add_test(s, "pipe stall bound", test_pipe_stall_bound);
    CU_add_test(s, "pipe waits for the answer", test_pipe_waits_for_answer);
    CU_add_test(s, "pipe last flush", test_pipe_last_flush);
    CU_add_test(s, "FIFO reader gone", test_fifo_reader_gone);
    CU_add_test(s, "exit while streaming", test_exit_while_streaming);
    CU_add_test(s, "fork while streaming", test_fork_while_streaming);
    CU_add_test(s, "fork and exec", test_fork_and_exec);
    CU_add_test(s, "fork while writing a file", test_fork_while_writing_a_file);
    CU_add_test(s, "attach and detach by signal", test_attach_and_detach);
    CU_add_test(s, "agent disabled", test_agent_disabled);
    CU_add_test(s, "census in every phase", test_census_in_every_phase);
    CU_add_test(s, "census partial", test_census_partial);
    return test_run_all();
}
