/* Flame graphs' pieces: stacks merged into a tree, the frames' layout, their
 * colours, and the SVG's text and tooltips. */
#define _GNU_SOURCE
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "test_util.h"

#define EPS 1e-6

/* Adds a stack given as a string of frames, root first, ";" between them
 * (the empty string: no frames), with live_bytes v and the other figures
 * made from it. */
static void add(struct flame *f, const char *stack, uint64_t v)
{
    char *copy = strdup(stack), *save = NULL;
    const char *frames[64];
    size_t n = 0;
    struct flame_figures fig = {.live_bytes = v,
                                .live_blocks = 1,
                                .alloc_bytes = 2 * v,
                                .alloc_count = 3};

    CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
    for (char *t = strtok_r(copy, ";", &save); t != NULL && n < 64;
         t = strtok_r(NULL, ";", &save))
        frames[n++] = t;
    CU_ASSERT_EQUAL_FATAL(flame_add(f, frames, n, &fig), 0);
    free(copy);
}

/* The node at a path from the root ("a;b"), or NULL. */
static const struct flame_node *at(const struct flame *f, const char *path)
{
    char *copy = strdup(path), *save = NULL;
    const struct flame_node *n = f->root;

    for (char *t = strtok_r(copy, ";", &save); t != NULL && n != NULL;
         t = strtok_r(NULL, ";", &save))
        n = flame_child(n, t);
    free(copy);
    return n;
}

static uint64_t live_at(const struct flame *f, const char *path)
{
    const struct flame_node *n = at(f, path);

    return n != NULL ? n->fig.live_bytes : UINT64_MAX;
}

/* -- The tree ------------------------------------------------------------ */

/* A frame is the same frame only along the same path: g called by f and
 * g called by main are two. */
static void test_merged_along_paths(void)
{
    struct flame f;

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;f;g", 10);
    add(&f, "main;f;h", 5);
    add(&f, "main;g", 3);
    add(&f, "main;f;g", 7);
    add(&f, "other", 2);
    CU_ASSERT_STRING_EQUAL(f.root->name, "all");
    CU_ASSERT_EQUAL(live_at(&f, ""), 27);
    CU_ASSERT_EQUAL(live_at(&f, "main"), 25);
    CU_ASSERT_EQUAL(live_at(&f, "main;f"), 22);
    CU_ASSERT_EQUAL(live_at(&f, "main;f;g"), 17);
    CU_ASSERT_EQUAL(live_at(&f, "main;f;h"), 5);
    CU_ASSERT_EQUAL(live_at(&f, "main;g"), 3);
    CU_ASSERT_EQUAL(live_at(&f, "other"), 2);
    CU_ASSERT_PTR_NULL(at(&f, "g"));
    CU_ASSERT_PTR_NULL(at(&f, "main;h"));
    CU_ASSERT_EQUAL(f.root->nchildren, 2);
    CU_ASSERT_EQUAL(at(&f, "main")->nchildren, 2);
    CU_ASSERT_EQUAL(at(&f, "main;f;g")->nchildren, 0);
    flame_free(&f);
}

/* Every figure is summed, not the sizing one alone. */
static void test_figures_summed(void)
{
    struct flame f;

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;f", 100);
    add(&f, "main;f", 50);
    add(&f, "main", 1);
    const struct flame_node *n = at(&f, "main;f");
    CU_ASSERT_EQUAL(n->fig.live_bytes, 150);
    CU_ASSERT_EQUAL(n->fig.live_blocks, 2);
    CU_ASSERT_EQUAL(n->fig.alloc_bytes, 300);
    CU_ASSERT_EQUAL(n->fig.alloc_count, 6);
    CU_ASSERT_EQUAL(f.root->fig.live_blocks, 3);
    CU_ASSERT_EQUAL(f.root->fig.alloc_bytes, 302);
    CU_ASSERT_EQUAL(flame_value(&n->fig, FLAME_BY_LIVE), 150);
    CU_ASSERT_EQUAL(flame_value(&n->fig, FLAME_BY_ALLOC), 300);
    flame_free(&f);
}

/* A stack of no frames counts in the root alone; names are any bytes,
 * compared whole. */
static void test_empty_stacks_and_odd_names(void)
{
    struct flame f;

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "", 4);
    CU_ASSERT_EQUAL(f.root->fig.live_bytes, 4);
    CU_ASSERT_EQUAL(f.root->nchildren, 0);
    add(&f, "\xff\xfe", 1);
    add(&f, "\xff", 1);
    add(&f, "\xff\xfe", 1);
    CU_ASSERT_EQUAL(live_at(&f, "\xff\xfe"), 2);
    CU_ASSERT_EQUAL(live_at(&f, "\xff"), 1);
    CU_ASSERT_EQUAL(f.root->fig.live_bytes, 7);
    flame_free(&f);
}

/* Children stay in strcmp's order whatever order they came in. */
static void test_children_sorted(void)
{
    static const char *const names[] = {
        "m", "b", "z", "a", "B", "@x.lua:2", "@x.lua:10", "string.rep"};
    size_t n = sizeof(names) / sizeof(names[0]);
    struct flame f;

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    for (size_t i = 0; i < n; i++)
        add(&f, names[i], i + 1);
    CU_ASSERT_EQUAL_FATAL(f.root->nchildren, n);
    for (size_t i = 1; i < n; i++)
        CU_ASSERT(strcmp(f.root->children[i - 1]->name,
                         f.root->children[i]->name) < 0);
    flame_free(&f);
}

/* -- Layout -------------------------------------------------------------- */

/* The rect of node in L, or NULL when it is not drawn. */
static const struct flame_rect *rect_of(const struct flame_layout *L,
                                        const struct flame_node *node)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->rects[i].node == node)
            return &L->rects[i];
    return NULL;
}

/* Checks the layout's invariants for every frame: its width is its value
 * at the root's scale, it lies within its parent, one row above it, and
 * after its previous sibling. */
static void check_geometry(const struct flame *f, const struct flame_opts *o,
                           const struct flame_layout *L)
{
    const struct flame_rect *root = &L->rects[0];
    double scale = root->w / (double)flame_value(&f->root->fig, o->by);
    unsigned fh = o->frame_height > 0 ? o->frame_height : 16;

    CU_ASSERT_PTR_EQUAL(root->node, f->root);
    for (size_t i = 1; i < L->n; i++) {
        const struct flame_rect *r = &L->rects[i], *p = NULL;
        for (size_t j = i; j-- > 0;)
            if (L->rects[j].depth + 1 == r->depth) {
                p = &L->rects[j]; /* parents come before their children */
                break;
            }
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_PTR_NOT_NULL(flame_child(p->node, r->node->name));
        CU_ASSERT_DOUBLE_EQUAL(
            r->w, (double)flame_value(&r->node->fig, o->by) * scale, EPS);
        CU_ASSERT(r->x >= p->x - EPS);
        CU_ASSERT(r->x + r->w <= p->x + p->w + EPS);
        CU_ASSERT_DOUBLE_EQUAL(r->y, p->y - fh, EPS);
        CU_ASSERT(r->y >= 0);
        const struct flame_rect *prev = &L->rects[i - 1];
        if (prev->depth == r->depth)
            CU_ASSERT(prev->x + prev->w <= r->x + EPS);
    }
}

/* A frame's width is its part of the root's, the root spans the width
 * less the margins, at the bottom of the document; children sit within
 * their parent, one row up. */
static void test_geometry(void)
{
    struct flame f;
    struct flame_layout L;
    struct flame_opts o = {
        .width = 1000, .frame_height = 20, .subtitle = "live bytes"};

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;f;g", 400);
    add(&f, "main;f;h", 100);
    add(&f, "main;k", 250);
    add(&f, "main", 50);
    add(&f, "other;x;y;z", 200);
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    CU_ASSERT_EQUAL(L.n, 10);
    CU_ASSERT_EQUAL(L.width, 1000);
    check_geometry(&f, &o, &L);

    const struct flame_rect *root = rect_of(&L, f.root);
    const struct flame_rect *main = rect_of(&L, at(&f, "main"));
    const struct flame_rect *g = rect_of(&L, at(&f, "main;f;g"));
    const struct flame_rect *z = rect_of(&L, at(&f, "other;x;y;z"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_PTR_NOT_NULL_FATAL(main);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    CU_ASSERT_DOUBLE_EQUAL(root->w + 2 * root->x, 1000, EPS);
    CU_ASSERT_DOUBLE_EQUAL(main->w, root->w * 0.8, EPS);
    CU_ASSERT_DOUBLE_EQUAL(g->w, root->w * 0.4, EPS);
    CU_ASSERT_DOUBLE_EQUAL(main->x, root->x, EPS); /* "main" < "other" */
    CU_ASSERT_DOUBLE_EQUAL(rect_of(&L, at(&f, "other"))->x, root->x + main->w,
                           EPS);
    /* The root at the bottom, the deepest frame at the top, rows apart. */
    CU_ASSERT_DOUBLE_EQUAL(root->y + root->h + 1 + 10, L.height, EPS);
    CU_ASSERT_DOUBLE_EQUAL(z->y, root->y - 4 * 20, EPS);
    for (size_t i = 0; i < L.n; i++) {
        CU_ASSERT(L.rects[i].y >= z->y - EPS);
        CU_ASSERT(L.rects[i].y <= root->y + EPS);
        CU_ASSERT_DOUBLE_EQUAL(L.rects[i].h, 19, EPS);
    }
    flame_layout_free(&L);

    /* Sized by the bytes allocated instead. */
    add(&f, "other", 0);
    struct flame_figures big = {.alloc_bytes = 3000};
    const char *frames[] = {"other"};
    CU_ASSERT_EQUAL_FATAL(flame_add(&f, frames, 1, &big), 0);
    o.by = FLAME_BY_ALLOC;
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    check_geometry(&f, &o, &L);
    root = rect_of(&L, f.root);
    CU_ASSERT_DOUBLE_EQUAL(rect_of(&L, at(&f, "other"))->w,
                           root->w * 3400 / 5000, EPS);
    flame_layout_free(&L);
    flame_free(&f);
}

/* Frames too narrow to see are left out with everything above them, and
 * their weight stays in their parent: its width, and the root's, are
 * what they were. */
static void test_tiny_frames_folded(void)
{
    struct flame f;
    struct flame_layout L;
    struct flame_opts o = {.width = 1200};
    char name[32], stack[64];

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;big", 1000000000);
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "@tiny.lua:%d", i);
        snprintf(stack, sizeof(stack), "main;%s;deeper", name);
        add(&f, stack, 10);
    }
    CU_ASSERT_EQUAL(at(&f, "main")->nchildren, 5001);
    CU_ASSERT_EQUAL(live_at(&f, "main"), 1000050000);
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    /* all, main, big: each tiny frame is 1.2e-5 px. */
    CU_ASSERT_EQUAL(L.n, 3);
    check_geometry(&f, &o, &L);
    const struct flame_rect *root = rect_of(&L, f.root);
    const struct flame_rect *main = rect_of(&L, at(&f, "main"));
    const struct flame_rect *big = rect_of(&L, at(&f, "main;big"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    CU_ASSERT_DOUBLE_EQUAL(main->w, root->w, EPS);
    CU_ASSERT_DOUBLE_EQUAL(big->w, main->w * 1e9 / 1000050000, EPS);
    /* The tiny ones come before "big" in order ("@" < "b"): "big" sits
     * after their gap. */
    CU_ASSERT_DOUBLE_EQUAL(big->x + big->w, main->x + main->w, EPS);
    flame_layout_free(&L);

    /* With no threshold to speak of, every frame is drawn. */
    o.min_width = 1e-9;
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    CU_ASSERT_EQUAL(L.n, 3 + 2 * 5000);
    check_geometry(&f, &o, &L);
    flame_layout_free(&L);
    flame_free(&f);
}

/* An empty graph has its root across the width, and no more. */
static void test_empty_graph(void)
{
    struct flame f;
    struct flame_layout L;
    struct flame_opts o = {0};

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;f", 0);
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    CU_ASSERT_EQUAL(L.n, 1);
    CU_ASSERT_EQUAL(L.width, 1200);
    CU_ASSERT_DOUBLE_EQUAL(L.rects[0].w + 2 * L.rects[0].x, 1200, EPS);
    CU_ASSERT_DOUBLE_EQUAL(L.rects[0].h, 15, EPS);
    flame_layout_free(&L);
    flame_free(&f);
}

/* -- Colours ------------------------------------------------------------- */

static void rgb(const char *c, unsigned *r, unsigned *g, unsigned *b)
{
    CU_ASSERT_EQUAL(sscanf(c, "#%2x%2x%2x", r, g, b), 3);
}

static void test_kinds_and_colours(void)
{
    static const char *const lua[] = {"@app.lua:12", "=stdin:1",
                                      "[string \"x\"]:3", "@a:b.lua:7"};
    static const char *const c[] = {"string.rep", "CFUNC 0x55d0c0ffee", "all",
                                    "@app.lua:", ":12x"};
    static const char *const markers[] = {"[truncated]", "[tail call]",
                                          "[coroutine]"};
    char one[8], two[8];
    unsigned r, g, b;

    for (size_t i = 0; i < sizeof(lua) / sizeof(lua[0]); i++) {
        CU_ASSERT_EQUAL(flame_kind_of(lua[i]), FLAME_LUA);
        flame_colour(lua[i], one);
        rgb(one, &r, &g, &b);
        CU_ASSERT(r > g && g > b); /* warm */
    }
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        CU_ASSERT_EQUAL(flame_kind_of(c[i]), FLAME_C);
        flame_colour(c[i], one);
        rgb(one, &r, &g, &b);
        CU_ASSERT(b > r && g > r); /* cool */
    }
    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
        CU_ASSERT_EQUAL(flame_kind_of(markers[i]), FLAME_MARKER);
        flame_colour(markers[i], one);
        rgb(one, &r, &g, &b);
        CU_ASSERT(r == g && g == b); /* grey */
    }
    /* The name alone decides: the same in every graph, others differ. */
    flame_colour("@app.lua:12", one);
    flame_colour("@app.lua:12", two);
    CU_ASSERT_STRING_EQUAL(one, two);
    flame_colour("@app.lua:13", two);
    CU_ASSERT_STRING_NOT_EQUAL(one, two);
}

/* -- The SVG ------------------------------------------------------------- */

/* f's SVG as o says, as a string (malloc'd). */
static char *svg_of(const struct flame *f, const struct flame_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);

    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_EQUAL(flame_write_svg(out, f, o), 0);
    fclose(out);
    return buf;
}

/* How many times needle is in hay. */
static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL;
         p = strstr(p + 1, needle))
        n++;
    return n;
}

#define FFFD "\xef\xbf\xbd"

/* Names are any bytes: markup and quotes escaped, bytes that are not
 * UTF-8 replaced, in the tooltips, the frames' text and the titles. */
static void test_names_escaped(void)
{
    struct flame f;
    struct flame_opts o = {.title = "a <b> & 'c'", .subtitle = "\"live\""};

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "<odd> & \"name\" 'q';bad\xff\xfe byte", 100);
    char *svg = svg_of(&f, &o);
    CU_ASSERT_PTR_NOT_NULL(strstr(
        svg, "<title>&lt;odd&gt; &amp; &quot;name&quot; &apos;q&apos;\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">&lt;odd&gt; &amp; &quot;name&quot; "
                                       "&apos;q&apos;</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>bad" FFFD FFFD " byte\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">bad" FFFD FFFD " byte</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>a &lt;b&gt; &amp; "
                                       "&apos;c&apos;</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "&quot;live&quot;</text>"));
    CU_ASSERT_PTR_NULL(strstr(svg, "<odd"));
    CU_ASSERT_PTR_NULL(strstr(svg, "\xff"));
    CU_ASSERT_PTR_NULL(strstr(svg, "href"));
    CU_ASSERT_PTR_NULL(strstr(svg, "<script"));
    CU_ASSERT_PTR_NULL(strstr(svg, "url("));
    free(svg);
    flame_free(&f);
}

/* A Lua frame's name longer than its frame keeps its end (the file and
 * line) after an ellipsis, others their start; a frame too narrow for a
 * few characters shows none, its tooltip still the whole name. */
static void test_text_cut_to_frame(void)
{
    struct flame f;
    struct flame_opts o = {.width = 220};

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    /* 200 px of frames: the wide one 190 px, room for 27 characters. */
    add(&f, "@/usr/share/lua/5.1/some/long/module.lua:1234", 95);
    add(&f, "@narrow.lua:1", 5);
    char *svg = svg_of(&f, &o);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(svg, ">\xe2\x80\xa6/some/long/module.lua:1234</text>"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(svg, "<title>@/usr/share/lua/5.1/some/long/module.lua:1234\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>@narrow.lua:1\n"));
    CU_ASSERT_PTR_NULL(strstr(svg, "narrow.lua:1</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">all</text>"));
    CU_ASSERT_EQUAL(count_of(svg, "<rect"), 4); /* the background's too */
    free(svg);
    flame_free(&f);

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "[a marker of a long name]", 1);
    add(&f, "CFUNC 0x55d0c0ffee00", 1);
    o.width = 140; /* 60 px a frame: room for 8 characters */
    svg = svg_of(&f, &o);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">[a mark\xe2\x80\xa6</text>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">CFUNC 0\xe2\x80\xa6</text>"));
    free(svg);
    flame_free(&f);
}

/* Each frame's tooltip: its figures in binary units, bytes with their part
 * of all; figures the caller lacks left out; estimates said so. */
static void test_tooltips(void)
{
    struct flame f;
    struct flame_opts o = {0};

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;f", 1536);
    add(&f, "main", 512);
    char *svg = svg_of(&f, &o);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>f\nlive 1.5 KiB (75.0%) in 1 "
                                       "blocks\nallocated 3.0 KiB (75.0%) in "
                                       "3 allocations</title>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>all\nlive 2.0 KiB (100.0%) in "
                                       "2 blocks\nallocated 4.0 KiB (100.0%) "
                                       "in 6 allocations</title>"));
    free(svg);

    o.unknown =
        FLAME_FIG_LIVE_BYTES | FLAME_FIG_LIVE_BLOCKS | FLAME_FIG_ALLOC_COUNT;
    o.by = FLAME_BY_ALLOC;
    f.estimated = 1;
    svg = svg_of(&f, &o);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>f\nallocated ~3.0 KiB (75.0%)"
                                       "\nestimated from sampled "
                                       "stacks</title>"));
    CU_ASSERT_PTR_NULL(strstr(svg, "live"));
    CU_ASSERT_PTR_NULL(strstr(svg, "allocations"));
    free(svg);
    flame_free(&f);
}

/* The document's size is the layout's, and a big input stays small: the
 * frames too narrow to draw are not written. */
static void test_svg_size(void)
{
    struct flame f;
    struct flame_opts o = {.width = 800, .frame_height = 18};
    struct flame_layout L;
    char stack[64], want[64];

    CU_ASSERT_EQUAL_FATAL(flame_init(&f), 0);
    add(&f, "main;big", 1000000000);
    for (int i = 0; i < 20000; i++) {
        snprintf(stack, sizeof(stack), "main;@t.lua:%d;x;y", i);
        add(&f, stack, 1);
    }
    CU_ASSERT_EQUAL_FATAL(flame_lay_out(&f, &o, &L), 0);
    char *svg = svg_of(&f, &o);
    snprintf(want, sizeof(want), "width=\"800\" height=\"%u\"", L.height);
    CU_ASSERT_PTR_NOT_NULL(strstr(svg, want));
    CU_ASSERT_EQUAL(count_of(svg, "<g>"), L.n);
    CU_ASSERT(strlen(svg) < 4096);
    CU_ASSERT_PTR_NULL(strstr(svg, "@t.lua"));
    free(svg);
    flame_layout_free(&L);
    flame_free(&f);
}

void register_flame_tests(void)
{
    CU_pSuite s = CU_add_suite("flame graphs", NULL, NULL);

    CU_add_test(s, "stacks merged by name along their paths",
                test_merged_along_paths);
    CU_add_test(s, "every figure summed", test_figures_summed);
    CU_add_test(s, "empty stacks and odd names",
                test_empty_stacks_and_odd_names);
    CU_add_test(s, "children in byte order", test_children_sorted);
    CU_add_test(s, "frames' widths and places", test_geometry);
    CU_add_test(s, "tiny frames folded into their parent",
                test_tiny_frames_folded);
    CU_add_test(s, "an empty flame graph", test_empty_graph);
    CU_add_test(s, "frames' kinds and colours", test_kinds_and_colours);
    CU_add_test(s, "frames' names escaped", test_names_escaped);
    CU_add_test(s, "names cut to their frame", test_text_cut_to_frame);
    CU_add_test(s, "frames' tooltips", test_tooltips);
    CU_add_test(s, "a big input's SVG stays small", test_svg_size);
}
