/* ljmpctl plot's pieces: the chart's ticks, units and text, the SVG of a
 * chart, a recording's series replayed through the core, and the command. */
#define _GNU_SOURCE
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chart.h"
#include "svgtext.h"
#include "recseries.h"
#include "test_support.h"
#include "test_util.h"

#ifndef LJMPCTL_PATH
#error "LJMPCTL_PATH must name the ljmpctl binary"
#endif

#define KiB 1024.0
#define MiB (1024.0 * 1024)

static int setup(void)
{
    return test_dir_make("chart");
}

static int teardown(void)
{
    return test_dir_remove();
}

/* -- Axes ---------------------------------------------------------------- */

static void test_nice_steps(void)
{
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(10, 5), 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(37, 5), 10, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(1.5, 5), 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(100, 4), 50, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(0.03, 3), 0.01, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(1000, 10), 100, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(chart_nice_step(0, 5), 1, 1e-12);
}

/* Units of 1024: a step of 1, 2 or 5 in the largest unit under the top,
 * the top a whole number of steps, decimals only for steps under 1. */
static void test_byte_axis(void)
{
    struct chart_axis a;
    char label[32];

    chart_byte_axis((uint64_t)(37 * MiB), 5, &a);
    CU_ASSERT_EQUAL(a.unit, 2);
    CU_ASSERT_DOUBLE_EQUAL(a.step, 10 * MiB, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(a.top, 40 * MiB, 1e-3);
    CU_ASSERT_EQUAL(a.decimals, 0);
    chart_byte_label(label, sizeof(label), 20 * MiB, &a);
    CU_ASSERT_STRING_EQUAL(label, "20 MiB");
    chart_byte_label(label, sizeof(label), 0, &a);
    CU_ASSERT_STRING_EQUAL(label, "0");

    chart_byte_axis((uint64_t)(1.5 * MiB), 5, &a);
    CU_ASSERT_EQUAL(a.unit, 2);
    CU_ASSERT_DOUBLE_EQUAL(a.step, 0.5 * MiB, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(a.top, 1.5 * MiB, 1e-3);
    CU_ASSERT_EQUAL(a.decimals, 1);
    chart_byte_label(label, sizeof(label), 0.5 * MiB, &a);
    CU_ASSERT_STRING_EQUAL(label, "0.5 MiB");

    /* A top just past a step rounds up to the next. */
    chart_byte_axis((uint64_t)(40 * KiB) + 1, 5, &a);
    CU_ASSERT_EQUAL(a.unit, 1);
    CU_ASSERT_DOUBLE_EQUAL(a.top, 50 * KiB, 1e-6);

    /* Bytes never in fractions; an empty heap still has an axis. */
    chart_byte_axis(3, 10, &a);
    CU_ASSERT_EQUAL(a.unit, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.step, 1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(a.top, 3, 1e-12);
    chart_byte_axis(0, 5, &a);
    CU_ASSERT(a.top >= 1 && a.step >= 1);
    chart_byte_axis((uint64_t)2 << 40, 5, &a);
    CU_ASSERT_EQUAL(a.unit, 4);
    chart_byte_label(label, sizeof(label), a.step, &a);
    CU_ASSERT_STRING_EQUAL(label, "0.5 TiB");
}

static void test_time_steps(void)
{
    CU_ASSERT_EQUAL(chart_time_step(60000, 6), 10000);
    CU_ASSERT_EQUAL(chart_time_step(61000, 6), 15000);
    CU_ASSERT_EQUAL(chart_time_step(3600000, 6), 600000);
    CU_ASSERT_EQUAL(chart_time_step(3000, 10), 1000);
    CU_ASSERT_EQUAL(chart_time_step(10ull * 86400000, 5), 172800000);
    CU_ASSERT_EQUAL(chart_time_step(1000ull * 86400000, 5), 604800000);
}

static void test_sizes(void)
{
    char s[32];

    svg_format_size(s, sizeof(s), 512);
    CU_ASSERT_STRING_EQUAL(s, "512 B");
    svg_format_size(s, sizeof(s), 1536);
    CU_ASSERT_STRING_EQUAL(s, "1.5 KiB");
    svg_format_size(s, sizeof(s), 3.25 * MiB);
    CU_ASSERT_STRING_EQUAL(s, "3.2 MiB");
}

/* -- Text ---------------------------------------------------------------- */

/* svg_put_text's output as a string (malloc'd). */
static char *text_of(const char *s, size_t max, enum svg_keep keep)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    svg_put_text(f, s, max, keep);
    fclose(f);
    return buf;
}

static int text_is(const char *s, size_t max, enum svg_keep keep,
                   const char *want)
{
    char *got = text_of(s, max, keep);
    int same = strcmp(got, want) == 0;

    if (!same)
        fprintf(stderr, "\n    '%s' gave '%s', not '%s'", s, got, want);
    free(got);
    return same;
}

#define FFFD "\xef\xbf\xbd"

/* A site's name is any bytes: markup escaped, whatever is not UTF-8 or
 * not a character XML allows replaced, never dropped silently. */
static void test_text_escaped(void)
{
    CU_ASSERT(text_is("a<b>&\"c'", 100, SVG_KEEP_TAIL,
                      "a&lt;b&gt;&amp;&quot;c&apos;"));
    CU_ASSERT(text_is("@x.lua:12", 100, SVG_KEEP_TAIL, "@x.lua:12"));
    CU_ASSERT(text_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 100,
                      SVG_KEEP_TAIL,
                      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    CU_ASSERT(text_is("a\xff"
                      "b",
                      100, SVG_KEEP_TAIL, "a" FFFD "b"));
    /* Overlong, surrogate, past U+10FFFF, cut short. */
    CU_ASSERT(text_is("\xc0\xaf", 100, SVG_KEEP_TAIL, FFFD FFFD));
    CU_ASSERT(text_is("\xed\xa0\x80", 100, SVG_KEEP_TAIL, FFFD FFFD FFFD));
    CU_ASSERT(
        text_is("\xf4\x90\x80\x80", 100, SVG_KEEP_TAIL, FFFD FFFD FFFD FFFD));
    CU_ASSERT(text_is("x\xe2\x82", 100, SVG_KEEP_TAIL, "x" FFFD FFFD));
    /* Controls XML forbids; white space shown as spaces; U+FFFE. */
    CU_ASSERT(text_is("a\x01"
                      "b\tc\nd",
                      100, SVG_KEEP_TAIL, "a" FFFD "b c d"));
    CU_ASSERT(text_is("\xef\xbf\xbe", 100, SVG_KEEP_TAIL, FFFD));
}

#define ELLIPSIS "\xe2\x80\xa6"

/* A long name keeps its end (file and line), a title its start; a
 * character is one however many bytes it takes. */
static void test_text_cut(void)
{
    CU_ASSERT(text_is("abcdef", 4, SVG_KEEP_TAIL, ELLIPSIS "def"));
    CU_ASSERT(text_is("abcdef", 4, SVG_KEEP_HEAD, "abc" ELLIPSIS));
    CU_ASSERT(text_is("abcdef", 6, SVG_KEEP_TAIL, "abcdef"));
    CU_ASSERT(text_is("abcdef", 6, SVG_KEEP_HEAD, "abcdef"));
    CU_ASSERT(text_is("\xc3\xa9\xc3\xa9\xc3\xa9", 2, SVG_KEEP_TAIL,
                      ELLIPSIS "\xc3\xa9"));
    CU_ASSERT(text_is("a&b&c", 3, SVG_KEEP_TAIL, ELLIPSIS "&amp;c"));
    CU_ASSERT(text_is("abc", 1, SVG_KEEP_HEAD, ELLIPSIS));
    CU_ASSERT(text_is("abc", 0, SVG_KEEP_HEAD, ""));
}

static void test_colours_apart(void)
{
    char c[20][8];

    for (unsigned i = 0; i < 20; i++) {
        chart_colour(i, c[i]);
        CU_ASSERT_EQUAL(strlen(c[i]), 7);
        CU_ASSERT_EQUAL(c[i][0], '#');
        CU_ASSERT_EQUAL(strspn(c[i] + 1, "0123456789abcdef"), 6);
        for (unsigned j = 0; j < i; j++)
            CU_ASSERT(strcmp(c[i], c[j]) != 0);
    }
}

/* -- The SVG ------------------------------------------------------------- */

/* c as an SVG document (malloc'd). */
static char *svg_of(const struct chart *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(chart_write_svg(f, c), 0);
    fclose(f);
    return buf;
}

static unsigned count_of(const char *s, const char *what)
{
    unsigned n = 0;

    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* Two series and the rest over three points of time: a band each, the
 * legend naming them (escaped), the size asked, the peak marked. */
static void test_svg_of_a_chart(void)
{
    struct chart_data d;
    struct chart c = {.data = &d,
                      .x_kind = CHART_X_TIME,
                      .title = "heap <of> test",
                      .subtitle = "sub",
                      .other_name = "other sites",
                      .has_peak = 1,
                      .peak_x = 1700000001000,
                      .peak_bytes = 3000,
                      .width = 800,
                      .height = 400};

    CU_ASSERT_EQUAL_FATAL(chart_data_alloc(&d, 3, 2), 0);
    for (uint32_t j = 0; j < 3; j++) {
        d.x[j] = 1700000000000 + j * 1000;
        d.total[j] = 1000 * (j + 1);
        d.values[j] = 500 * (j + 1);     /* series 0 */
        d.values[3 + j] = 100 * (j + 1); /* series 1 */
    }
    d.names[0] = strdup("@app.lua:12");
    d.names[1] = strdup("@<odd> & 'name'.lua:3");
    char *svg = svg_of(&c);
    CU_ASSERT_EQUAL(
        strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 38), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"800\" height=\"400\""));
    CU_ASSERT_EQUAL(count_of(svg, "<polygon"), 3);
    CU_ASSERT(count_of(svg, ">@app.lua:12<") >= 1);
    CU_ASSERT(count_of(svg, "@&lt;odd&gt; &amp; &apos;name&apos;.lua:3") >= 2);
    CU_ASSERT_PTR_NULL(strstr(svg, "<odd>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">other sites<"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "heap &lt;of&gt; test"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "stroke-dasharray"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "peak 2.9 KiB at "));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "local time ("));
    CU_ASSERT_PTR_NULL(strstr(svg, "<script"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "</svg>\n"));
    free(svg);
    /* A peak outside the points (before a live window) is said, not
     * drawn. */
    c.peak_x = 1600000000000;
    svg = svg_of(&c);
    CU_ASSERT_PTR_NULL(strstr(svg, "stroke-dasharray"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "before this window"));
    free(svg);
    /* A live peak after the last sample and above every point (ljmpd
     * keeps the peak at each tick, the sites' samples sparser): drawn,
     * inside the plot, the axes stretched to it. */
    c.peak_x = 1700000005000;
    c.peak_bytes = 300u << 20;
    svg = svg_of(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "stroke-dasharray"));
    CU_ASSERT_PTR_NULL(strstr(svg, "before this window"));
    CU_ASSERT_PTR_NULL(strstr(svg, "cy=\"-"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "peak 300.0 MiB at "));
    free(svg);
    chart_data_free(&d);
}

/* No points: no bands, no legend, the note across the plot. */
static void test_svg_of_nothing(void)
{
    struct chart_data d;
    struct chart c = {.data = &d,
                      .x_kind = CHART_X_TIME,
                      .title = "empty",
                      .other_name = "other sites",
                      .note = "no samples yet",
                      .width = 640,
                      .height = 300};

    CU_ASSERT_EQUAL_FATAL(chart_data_alloc(&d, 0, 0), 0);
    char *svg = svg_of(&c);
    CU_ASSERT_EQUAL(count_of(svg, "<polygon"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">no samples yet<"));
    CU_ASSERT_PTR_NULL(strstr(svg, "other sites"));
    free(svg);
    chart_data_free(&d);
}

/* -- A recording's series ------------------------------------------------ */

enum { ROUNDS = 1000, KEPT = 100, TRANSIENT = 1000 };

/* A program that keeps 100 bytes a round at @<k&p>\xff.lua:1 and makes
 * and frees 1000 at line 2: its heap peaks in the last round, with the
 * transient block live. */
static void keeper_stream(struct lm_buf *b, int complete)
{
    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x100, "@<k&p>\xff.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
    struct lm_loc_ref keep = loc_lua(0x100, 1), transient = loc_lua(0x100, 2);
    for (uint64_t i = 0; i < ROUNDS; i++) {
        lm_enc_alloc(b, LM_REV_R3, &keep, 0x100000 + i * 0x100, KEPT);
        lm_enc_alloc(b, LM_REV_R3, &transient, 0x10, TRANSIENT);
        lm_enc_free(b, LM_REV_R3, &transient, 0x10, TRANSIENT);
    }
    if (complete)
        lm_enc_epilogue(b);
}

/* Replayed through the core: points at regular steps of bytes allocated
 * (200 to 400, from 0), the kept line first, each point's sites summing
 * to its heap, and the peak exactly where it was. */
static void test_recording_series(void)
{
    struct lm_buf b = {0};
    struct recseries r;
    struct chart_data d;

    keeper_stream(&b, 1);
    CU_ASSERT_EQUAL_FATAL(recseries_init(&r, NULL), 0);
    /* In pieces, as a file is read. */
    for (size_t at = 0; at < b.len; at += 4096) {
        size_t n = b.len - at < 4096 ? b.len - at : 4096, used;
        CU_ASSERT_NOT_EQUAL(recseries_feed(&r, b.data + at, n, &used),
                            LM_ERROR);
    }
    CU_ASSERT_EQUAL(recseries_finish(&r), LM_DONE);
    CU_ASSERT_EQUAL(r.peak_bytes, ROUNDS * KEPT + TRANSIENT);
    CU_ASSERT_EQUAL(r.peak_x, (uint64_t)ROUNDS * (KEPT + TRANSIENT));
    CU_ASSERT_EQUAL_FATAL(recseries_chart(&r, 8, &d), 0);
    CU_ASSERT(d.npoints >= RECSERIES_MAX_POINTS / 2 + 1 &&
              d.npoints <= RECSERIES_MAX_POINTS + 2);
    CU_ASSERT_EQUAL_FATAL(d.nseries, 2);
    /* The kept line held the most; its name as the report prints it. */
    CU_ASSERT_STRING_EQUAL(d.names[0], "@<k&p>\xff.lua:1");
    CU_ASSERT_EQUAL(d.x[0], 0);
    CU_ASSERT_EQUAL(d.total[0], 0);
    CU_ASSERT_EQUAL(d.x[d.npoints - 1], (uint64_t)ROUNDS * (KEPT + TRANSIENT));
    CU_ASSERT_EQUAL(chart_value(&d, 0, d.npoints - 1), ROUNDS * KEPT);
    uint64_t least = UINT64_MAX, most = 0;
    for (uint32_t j = 1; j < d.npoints; j++) {
        CU_ASSERT(d.x[j] > d.x[j - 1]);
        CU_ASSERT_EQUAL(chart_value(&d, 0, j) + chart_value(&d, 1, j),
                        d.total[j]);
        /* What was kept by then: a round's 100 bytes each 1100. */
        CU_ASSERT(chart_value(&d, 0, j) >= d.x[j] / (KEPT + TRANSIENT) * KEPT);
        if (j + 1 < d.npoints && j > 1) {
            uint64_t gap = d.x[j] - d.x[j - 1];
            least = gap < least ? gap : least;
            most = gap > most ? gap : most;
        }
    }
    /* Regular steps, give or take the event that crossed each. */
    CU_ASSERT(most - least <= 2 * TRANSIENT);
    CU_ASSERT(least > 0);
    chart_data_free(&d);
    recseries_free(&r);
    lm_buf_free(&b);
}

/* -- The command --------------------------------------------------------- */

static void write_file(const char *name, const void *data, size_t len)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static int file_exists(const char *name)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    return access(path, F_OK) == 0;
}

/* A recording charted: exit 0, the SVG in the file with the kept line
 * named (escaped) in its legend; truncated, drawn up to its end with exit
 * 2; garbage refused with its offset and no file; options of a live
 * session refused for a file. */
static void test_plot_command(void)
{
    struct lm_buf b = {0};
    char *err, *svg;

    keeper_stream(&b, 1);
    write_file("keep.bin", b.data, b.len);
    CU_ASSERT_EQUAL(run_ljmpctl("plot keep.bin -o keep.svg --peak --sites 3 "
                                "--width 700 --height 420",
                                NULL, &err),
                    0);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(err);
    svg = test_slurp("keep.svg");
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"700\" height=\"420\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "@&lt;k&amp;p&gt;" FFFD ".lua:1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "bytes allocated so far"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "peak 98.6 KiB after 1.0 MiB"));
    CU_ASSERT_EQUAL(count_of(svg, "<polygon"), 3);
    free(svg);

    /* Cut short: what it holds, and exit 2. */
    write_file("short.bin", b.data, b.len / 2);
    CU_ASSERT_EQUAL(run_ljmpctl("plot short.bin -o short.svg", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "short.bin"));
    free(err);
    svg = test_slurp("short.svg");
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "</svg>"));
    free(svg);

    /* Not a stream: exit 3, and no file. */
    write_file("junk.bin", "not a memprof stream at all", 27);
    CU_ASSERT_EQUAL(run_ljmpctl("plot junk.bin -o junk.svg", NULL, &err), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "malformed stream at offset"));
    free(err);
    CU_ASSERT_FALSE(file_exists("junk.svg"));

    CU_ASSERT_EQUAL(run_ljmpctl("plot keep.bin --window 60", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--window is for a live session"));
    free(err);
    CU_ASSERT_EQUAL(
        run_ljmpctl("plot keep.bin --sites 20 --height 300", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs --height"));
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("plot keep.bin --sites 21", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--sites wants a number from 1 to 20"));
    free(err);
    lm_buf_free(&b);
}

/* Every live option gets past the command line to find no ljmpd (exit
 * 4) and leaves no file; -h prints the help. */
static void test_plot_live_options(void)
{
    char *err;

    CU_ASSERT_EQUAL(
        run_ljmpctl("-s none.sock plot 1 --window 60 --sites 3 --peak "
                    "--session 2 --width 800 --height 500 --title T "
                    "-o live.svg",
                    NULL, &err),
        4);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "ljmpd is not running"));
    free(err);
    CU_ASSERT_FALSE(file_exists("live.svg"));
    CU_ASSERT_EQUAL(run_ljmpctl("-s none.sock plot --session 7", NULL, &err),
                    4);
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("plot 1 --window 5", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "--window wants a number of seconds from 10 to 604800"));
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("plot 1 --width 100", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--width wants a number of pixels"));
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("plot 1 2", NULL, &err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected at most one PID or FILE"));
    free(err);
    CU_ASSERT_EQUAL(run_ljmpctl("plot -h", NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    free(err);
    char *out = test_slurp("out.txt");
    CU_ASSERT_EQUAL(strncmp(out, "usage: ljmpctl plot ", 20), 0);
    free(out);
}

void register_chart_tests(void)
{
    CU_pSuite s = CU_add_suite("ljmpctl plot", setup, teardown);

    CU_add_test(s, "steps of 1, 2 or 5", test_nice_steps);
    CU_add_test(s, "a byte axis in units of 1024", test_byte_axis);
    CU_add_test(s, "steps of clock time", test_time_steps);
    CU_add_test(s, "sizes for people", test_sizes);
    CU_add_test(s, "names escaped for XML", test_text_escaped);
    CU_add_test(s, "long names cut", test_text_cut);
    CU_add_test(s, "colours apart", test_colours_apart);
    CU_add_test(s, "the SVG of a chart", test_svg_of_a_chart);
    CU_add_test(s, "the SVG of no samples", test_svg_of_nothing);
    CU_add_test(s, "a recording's series", test_recording_series);
    CU_add_test(s, "the plot command on files", test_plot_command);
    CU_add_test(s, "the plot command's live options", test_plot_live_options);
}
