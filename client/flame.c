/* Flame graphs: stacks merged into a tree of frames by name, laid out with
 * the root at the bottom and written as SVG that needs nothing else. */
#include "flame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "svgtext.h"

/* -- The tree ------------------------------------------------------------ */

static struct flame_node *node_new(const char *name)
{
    size_t len = strlen(name);
    struct flame_node *n = calloc(1, sizeof(*n) + len + 1);

    if (n != NULL)
        memcpy(n->name, name, len + 1);
    return n;
}

/* Frees node and everything above it: recursion as deep as the deepest
 * stack (a stream's are at most 65 frames). */
static void node_free(struct flame_node *node)
{
    for (size_t i = 0; i < node->nchildren; i++)
        node_free(node->children[i]);
    free(node->children);
    free(node);
}

int flame_init(struct flame *f)
{
    memset(f, 0, sizeof(*f));
    f->root = node_new("all");
    return f->root != NULL ? 0 : -1;
}

void flame_free(struct flame *f)
{
    if (f->root != NULL)
        node_free(f->root);
    memset(f, 0, sizeof(*f));
}

/* Where name is among node's children, or would go: children stay
 * sorted, so that lookups are binary searches and drawing needs no sort. */
static size_t child_slot(const struct flame_node *node, const char *name,
                         int *found)
{
    size_t lo = 0, hi = node->nchildren;

    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(node->children[mid]->name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const struct flame_node *flame_child(const struct flame_node *node,
                                     const char *name)
{
    int found;
    size_t i = child_slot(node, name, &found);

    return found ? node->children[i] : NULL;
}

/* node's child named name, made (with no figures) if it has none. */
static struct flame_node *child_get(struct flame_node *node, const char *name)
{
    int found;
    size_t i = child_slot(node, name, &found);

    if (found)
        return node->children[i];
    if (node->nchildren == node->cap) {
        size_t cap = node->cap > 0 ? node->cap * 2 : 4;
        struct flame_node **c =
            realloc(node->children, cap * sizeof(*node->children));
        if (c == NULL)
            return NULL;
        node->children = c;
        node->cap = cap;
    }
    struct flame_node *child = node_new(name);
    if (child == NULL)
        return NULL;
    memmove(node->children + i + 1, node->children + i,
            (node->nchildren - i) * sizeof(*node->children));
    node->children[i] = child;
    node->nchildren++;
    return child;
}

static void figures_add(struct flame_figures *to,
                        const struct flame_figures *fig)
{
    to->live_bytes += fig->live_bytes;
    to->live_blocks += fig->live_blocks;
    to->alloc_bytes += fig->alloc_bytes;
    to->alloc_count += fig->alloc_count;
}

int flame_add(struct flame *f, const char *const *frames, size_t n,
              const struct flame_figures *fig)
{
    struct flame_node *node = f->root;

    /* The whole path first, the figures after: memory that runs out
     * leaves at worst frames of no weight, which are never drawn. */
    for (size_t i = 0; i < n; i++)
        if ((node = child_get(node, frames[i])) == NULL)
            return -1;
    node = f->root;
    figures_add(&node->fig, fig);
    for (size_t i = 0; i < n; i++) {
        node = child_get(node, frames[i]); /* found: made above */
        figures_add(&node->fig, fig);
    }
    return 0;
}

/* -- Layout -------------------------------------------------------------- */

/* Pixels.  Names are monospace, so that a name cut to fit its frame by
 * counting characters does fit. */
#define DEFAULT_WIDTH        1200
#define DEFAULT_FRAME_HEIGHT 16
#define DEFAULT_MIN_WIDTH    0.1
#define MARGIN               10
#define TOP_TITLE            40 /* the frames' top under a title alone */
#define TOP_SUBTITLE         58 /* ... and under a subtitle */
#define MARGIN_BOTTOM        10
#define FONT_SIZE            11
#define MONO_CHAR            6.7 /* a monospace character at 11 px, and some */
#define TEXT_PAD             3   /* between a frame's edge and its name */
#define MIN_CHARS            3   /* fewer would say nothing */

uint64_t flame_value(const struct flame_figures *fig, enum flame_by by)
{
    return by == FLAME_BY_ALLOC ? fig->alloc_bytes : fig->live_bytes;
}

/* o with its defaults filled in. */
static struct flame_opts opts_of(const struct flame_opts *o)
{
    struct flame_opts d = *o;

    if (d.width == 0)
        d.width = DEFAULT_WIDTH;
    if (d.width < 2 * MARGIN + 1)
        d.width = 2 * MARGIN + 1;
    if (d.frame_height == 0)
        d.frame_height = DEFAULT_FRAME_HEIGHT;
    if (!(d.min_width > 0))
        d.min_width = DEFAULT_MIN_WIDTH;
    return d;
}

static int rect_push(struct flame_layout *L, size_t *cap,
                     const struct flame_node *node, unsigned depth, double x,
                     double w)
{
    if (L->n == *cap) {
        size_t c = *cap > 0 ? *cap * 2 : 64;
        struct flame_rect *r = realloc(L->rects, c * sizeof(*r));
        if (r == NULL)
            return -1;
        L->rects = r;
        *cap = c;
    }
    L->rects[L->n++] =
        (struct flame_rect){.node = node, .depth = depth, .x = x, .w = w};
    return 0;
}

/* What placing frames needs besides the layout. */
struct placing {
    const struct flame_opts *o;
    double scale;   /* pixels per unit of the sizing figure */
    size_t cap;     /* of the layout's rects */
    unsigned depth; /* the deepest placed */
};

/* node's box at depth from x, w wide, and its children's side by side in
 * their order from its left edge.  A child narrower than the smallest
 * frame drawn is left out with everything above it; the gap it leaves in
 * its parent keeps its weight there. */
static int place(struct flame_layout *L, struct placing *p,
                 const struct flame_node *node, unsigned depth, double x,
                 double w)
{
    if (rect_push(L, &p->cap, node, depth, x, w) != 0)
        return -1;
    if (depth > p->depth)
        p->depth = depth;
    for (size_t i = 0; i < node->nchildren; i++) {
        const struct flame_node *c = node->children[i];
        double cw = (double)flame_value(&c->fig, p->o->by) * p->scale;
        if (cw >= p->o->min_width && place(L, p, c, depth + 1, x, cw) != 0)
            return -1;
        x += cw;
    }
    return 0;
}

int flame_lay_out(const struct flame *f, const struct flame_opts *o,
                  struct flame_layout *L)
{
    struct flame_opts d = opts_of(o);
    struct placing p = {.o = &d};
    double full = (double)d.width - 2 * MARGIN;
    uint64_t total = flame_value(&f->root->fig, d.by);
    double top = d.subtitle != NULL ? TOP_SUBTITLE : TOP_TITLE;

    memset(L, 0, sizeof(*L));
    /* An empty graph still has its root, across the whole width. */
    p.scale = total > 0 ? full / (double)total : 0;
    if (place(L, &p, f->root, 0, MARGIN, full) != 0) {
        flame_layout_free(L);
        return -1;
    }
    /* The root at the bottom: a frame's row counts down from the
     * deepest. */
    for (size_t i = 0; i < L->n; i++) {
        struct flame_rect *r = &L->rects[i];
        r->y = top + (double)(p.depth - r->depth) * d.frame_height;
        r->h = d.frame_height - 1; /* a line between rows */
    }
    L->width = d.width;
    L->height = (unsigned)top + (p.depth + 1) * d.frame_height + MARGIN_BOTTOM;
    return 0;
}

void flame_layout_free(struct flame_layout *L)
{
    free(L->rects);
    memset(L, 0, sizeof(*L));
}

/* -- Colours ------------------------------------------------------------- */

/* Whether name ends in ":" and a line number. */
static int ends_in_line(const char *name)
{
    size_t len = strlen(name), digits = 0;

    while (digits < len && name[len - 1 - digits] >= '0' &&
           name[len - 1 - digits] <= '9')
        digits++;
    return digits > 0 && digits < len && name[len - 1 - digits] == ':';
}

enum flame_kind flame_kind_of(const char *name)
{
    size_t len = strlen(name);

    /* A chunk's name may begin with "[" too ("[string \"...\"]:3"); it
     * ends in its line. */
    if (len >= 2 && name[0] == '[' && name[len - 1] == ']')
        return FLAME_MARKER;
    return ends_in_line(name) ? FLAME_LUA : FLAME_C;
}

/* FNV-1a: well spread over short names, the same on every host. */
static uint32_t name_hash(const char *name)
{
    uint32_t h = 2166136261u;

    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

void flame_colour(const char *name, char out[8])
{
    uint32_t h = name_hash(name);
    unsigned a = h & 0xFF, b = h >> 8 & 0xFF, c = h >> 16 & 0xFF;
    unsigned r, g, bl;

    switch (flame_kind_of(name)) {
    case FLAME_LUA: /* warm: red to yellow, little blue */
        r = 210 + a * 45 / 255;
        g = 80 + b * 140 / 255;
        bl = 30 + c * 50 / 255;
        break;
    case FLAME_C: /* cool: teal to sky blue, apart from the Lua frames */
        r = 70 + a * 50 / 255;
        g = 170 + b * 50 / 255;
        bl = 180 + c * 60 / 255;
        break;
    default: /* a marker names no code: grey */
        r = g = bl = 185 + a * 25 / 255;
        break;
    }
    snprintf(out, 8, "#%02x%02x%02x", r, g, bl);
}

#define ROOT_COLOUR "#d8d8d8"

/* -- Drawing ------------------------------------------------------------- */

static void header(FILE *out, const struct flame_opts *o, unsigned height)
{
    const char *title = o->title != NULL ? o->title : "flame graph";

    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            "width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<title>",
            o->width, height, o->width, height);
    svg_put_text(out, title, 1000, SVG_KEEP_HEAD);
    fprintf(out,
            "</title>\n<rect width=\"%u\" height=\"%u\" "
            "fill=\"#fbfaf7\"/>\n"
            "<text x=\"%.1f\" y=\"26\" font-size=\"16\" font-weight=\"bold\" "
            "text-anchor=\"middle\">",
            o->width, height, o->width / 2.0);
    svg_put_text(out, title, (size_t)((o->width - 2 * MARGIN) / 9.5),
                 SVG_KEEP_HEAD);
    fputs("</text>\n", out);
    if (o->subtitle == NULL)
        return;
    fprintf(out,
            "<text x=\"%.1f\" y=\"44\" font-size=\"11\" fill=\"#555555\" "
            "text-anchor=\"middle\">",
            o->width / 2.0);
    svg_put_text(out, o->subtitle, (size_t)((o->width - 2 * MARGIN) / 6),
                 SVG_KEEP_HEAD);
    fputs("</text>\n", out);
}

/* "1.5 MiB (42.0%)", "~" first for an estimate. */
static void put_bytes(FILE *out, uint64_t v, uint64_t all, int estimated)
{
    char size[32];

    svg_format_size(size, sizeof(size), (double)v);
    fprintf(out, "%s%s (%.1f%%)", estimated ? "~" : "", size,
            all > 0 ? 100.0 * (double)v / (double)all : 0.0);
}

/* A count, "~" first for an estimate, and what it counts. */
static void put_count(FILE *out, uint64_t v, const char *what, int estimated)
{
    fprintf(out, "%s%llu %s", estimated ? "~" : "", (unsigned long long)v,
            what);
}

/* One line of a tooltip: "live" or "allocated", the bytes and count the
 * caller has of the two, and nothing when it has neither. */
static void figure_line(FILE *out, const char *label, int has_bytes,
                        uint64_t bytes, uint64_t all, int has_count,
                        uint64_t count, const char *what, int estimated)
{
    if (!has_bytes && !has_count)
        return;
    fprintf(out, "\n%s ", label);
    if (has_bytes)
        put_bytes(out, bytes, all, estimated);
    if (has_bytes && has_count)
        fputs(" in ", out);
    if (has_count)
        put_count(out, count, what, estimated);
}

/* A frame's tooltip: its whole name and its figures, a line each. */
static void tooltip(FILE *out, const struct flame *f,
                    const struct flame_opts *o, const struct flame_node *node)
{
    const struct flame_figures *fig = &node->fig, *all = &f->root->fig;
    unsigned u = o->unknown;

    fputs("<title>", out);
    svg_put_text(out, node->name, 4096, SVG_KEEP_TAIL);
    figure_line(out, "live", !(u & FLAME_FIG_LIVE_BYTES), fig->live_bytes,
                all->live_bytes, !(u & FLAME_FIG_LIVE_BLOCKS), fig->live_blocks,
                "blocks", f->estimated);
    figure_line(out, "allocated", !(u & FLAME_FIG_ALLOC_BYTES),
                fig->alloc_bytes, all->alloc_bytes,
                !(u & FLAME_FIG_ALLOC_COUNT), fig->alloc_count, "allocations",
                f->estimated);
    if (f->estimated)
        fputs("\nestimated from sampled stacks", out);
    fputs("</title>", out);
}

/* A frame: its box, its name cut to the box (none in a box too narrow
 * for a few characters), its tooltip over both. */
static void frame(FILE *out, const struct flame *f, const struct flame_opts *o,
                  const struct flame_rect *r)
{
    char colour[8];
    double room = (r->w - 2 * TEXT_PAD) / MONO_CHAR;

    if (r->depth == 0)
        snprintf(colour, sizeof(colour), "%s", ROOT_COLOUR);
    else
        flame_colour(r->node->name, colour);
    fputs("<g>", out);
    tooltip(out, f, o, r->node);
    fprintf(out,
            "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
            "rx=\"2\" fill=\"%s\"/>",
            r->x, r->y, r->w, r->h, colour);
    if (room >= MIN_CHARS) {
        fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">", r->x + TEXT_PAD,
                r->y + (r->h + FONT_SIZE * 0.7) / 2);
        /* A Lua frame's name ends in its file and line, which say the
         * most; other names begin with what they are. */
        svg_put_text(out, r->node->name, (size_t)room,
                     flame_kind_of(r->node->name) == FLAME_LUA ? SVG_KEEP_TAIL
                                                               : SVG_KEEP_HEAD);
        fputs("</text>", out);
    }
    fputs("</g>\n", out);
}

int flame_write_svg(FILE *out, const struct flame *f,
                    const struct flame_opts *o)
{
    struct flame_opts d = opts_of(o);
    struct flame_layout L;

    if (flame_lay_out(f, &d, &L) != 0) {
        errno = ENOMEM;
        return -1;
    }
    header(out, &d, L.height);
    fprintf(out,
            "<g font-family=\"monospace\" font-size=\"%d\" "
            "fill=\"#000000\">\n",
            FONT_SIZE);
    for (size_t i = 0; i < L.n; i++)
        frame(out, f, &d, &L.rects[i]);
    fputs("</g>\n</svg>\n", out);
    flame_layout_free(&L);
    return ferror(out) ? -1 : 0;
}
