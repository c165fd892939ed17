/* Flame graphs of allocations' call stacks: a tree of frames, as SVG. */
#ifndef LJMPCTL_FLAME_H
#define LJMPCTL_FLAME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What a stack holds, or a frame with everything called from it. */
struct flame_figures {
    uint64_t live_bytes, live_blocks;
    uint64_t alloc_bytes, alloc_count; /* allocations and reallocations */
};

/* A frame: the stacks that went through it, merged by name along their
 * path from the root. */
struct flame_node {
    struct flame_figures fig;     /* its own stacks' and its children's */
    struct flame_node **children; /* by name, in strcmp's (byte) order */
    size_t nchildren, cap;
    char name[]; /* any bytes, as the caller named the frame */
};

struct flame {
    struct flame_node *root; /* "all" */
    int estimated;           /* the figures are estimates from sampled stacks */
};

/* An empty flame graph: 0, or -1 out of memory. */
int flame_init(struct flame *f);
void flame_free(struct flame *f);

/*
 * Adds a stack of n frames, root first (the outermost caller, then what
 * it called, down to the allocating frame), and its figures: to every
 * frame on its path, and to the root.  A stack of no frames counts in
 * the root alone.  0, or -1 out of memory (f's figures unchanged).
 */
int flame_add(struct flame *f, const char *const *frames, size_t n,
              const struct flame_figures *fig);

/* node's child named name, or NULL. */
const struct flame_node *flame_child(const struct flame_node *node,
                                     const char *name);

/* What sets a frame's width. */
enum flame_by {
    FLAME_BY_LIVE,  /* live bytes */
    FLAME_BY_ALLOC, /* bytes allocated */
};

/* Figures a caller does not have (flame_opts.unknown): left out of the
 * frames' tooltips. */
enum {
    FLAME_FIG_LIVE_BYTES = 1,
    FLAME_FIG_LIVE_BLOCKS = 2,
    FLAME_FIG_ALLOC_BYTES = 4,
    FLAME_FIG_ALLOC_COUNT = 8,
};

/* How a flame graph is drawn; zero picks each default. */
struct flame_opts {
    const char *title;
    const char *subtitle; /* under the title, e.g. what the widths are */
    enum flame_by by;
    unsigned unknown;      /* FLAME_FIG_* */
    unsigned width;        /* pixels; default 1200 */
    unsigned frame_height; /* pixels; default 16 */
    double min_width;      /* pixels: narrower frames are not drawn, their
                            * weight stays in their parent's; default 0.1 */
};

/* Writes f as an SVG document with the root at the bottom: 0, or -1 with
 * errno when out failed or memory ran out. */
int flame_write_svg(FILE *out, const struct flame *f,
                    const struct flame_opts *o);

/* -- The pieces, exported for their tests ------------------------------ */

/* A frame drawn: its box in pixels, its depth (the root's is 0). */
struct flame_rect {
    const struct flame_node *node;
    unsigned depth;
    double x, y, w, h;
};

/* Where a flame graph's frames go. */
struct flame_layout {
    struct flame_rect *rects; /* parents before their children */
    size_t n;
    unsigned width, height; /* the document's */
};

/* Lays out f's frames as o says: 0, or -1 out of memory. */
int flame_lay_out(const struct flame *f, const struct flame_opts *o,
                  struct flame_layout *L);
void flame_layout_free(struct flame_layout *L);

/* The figure that sizes frames. */
uint64_t flame_value(const struct flame_figures *fig, enum flame_by by);

/* What a frame's name says it is, which picks its hue. */
enum flame_kind {
    FLAME_LUA,    /* a Lua function at a line: "@app.lua:12" */
    FLAME_C,      /* a builtin or a C function: "string.rep" */
    FLAME_MARKER, /* no function: "[truncated]" */
};
enum flame_kind flame_kind_of(const char *name);

/* A frame's fill colour, "#rrggbb", from its name alone: the same name
 * has the same colour in every graph. */
void flame_colour(const char *name, char out[8]);

#endif
