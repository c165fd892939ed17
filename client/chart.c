/* Stacked area charts of the live heap by site as SVG documents that need
 * nothing else: no scripts, no fonts or files but the viewer's own. */
#define _GNU_SOURCE /* tm_gmtoff */
#include "chart.h"
#include "svgtext.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -- Data ---------------------------------------------------------------- */

int chart_data_alloc(struct chart_data *d, uint32_t npoints, uint32_t nseries)
{
    memset(d, 0, sizeof(*d));
    d->x = calloc((size_t)npoints + 1, sizeof(*d->x));
    d->total = calloc((size_t)npoints + 1, sizeof(*d->total));
    d->values = calloc((size_t)npoints * nseries + 1, sizeof(*d->values));
    d->names = calloc((size_t)nseries + 1, sizeof(*d->names));
    if (d->x == NULL || d->total == NULL || d->values == NULL ||
        d->names == NULL) {
        chart_data_free(d);
        return -1;
    }
    d->npoints = npoints;
    d->nseries = nseries;
    return 0;
}

void chart_data_free(struct chart_data *d)
{
    for (uint32_t i = 0; d->names != NULL && i < d->nseries; i++)
        free(d->names[i]);
    free(d->names);
    free(d->x);
    free(d->total);
    free(d->values);
    memset(d, 0, sizeof(*d));
}

/* -- Axes ---------------------------------------------------------------- */

/* Slack for steps that land on 1, 2 or 5 but for rounding. */
#define STEP_SLACK 1e-9

double chart_nice_step(double span, unsigned target)
{
    if (!(span > 0))
        return 1;
    double raw = span / (target > 0 ? target : 1);
    double mag = pow(10, floor(log10(raw)));
    double r = raw / mag;

    if (r <= 1 + STEP_SLACK)
        return mag;
    if (r <= 2 + STEP_SLACK)
        return 2 * mag;
    if (r <= 5 + STEP_SLACK)
        return 5 * mag;
    return 10 * mag;
}

static const char *const unit_names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
#define NUNITS (sizeof(unit_names) / sizeof(unit_names[0]))

void chart_byte_axis(uint64_t max, unsigned target, struct chart_axis *a)
{
    double m = max > 0 ? (double)max : 1, scale = 1;
    unsigned unit = 0;

    while (unit + 1 < NUNITS && m >= scale * 1024) {
        scale *= 1024;
        unit++;
    }
    double step = chart_nice_step(m / scale, target);
    if (unit == 0 && step < 1)
        step = 1; /* no fractions of a byte */
    a->unit = unit;
    a->step = step * scale;
    a->top = ceil(m / a->step - STEP_SLACK) * a->step;
    a->decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - STEP_SLACK);
}

void chart_byte_label(char *out, size_t len, double v,
                      const struct chart_axis *a)
{
    if (v == 0) {
        snprintf(out, len, "0");
        return;
    }
    snprintf(out, len, "%.*f %s", a->decimals, v / pow(1024, a->unit),
             unit_names[a->unit]);
}

uint64_t chart_time_step(uint64_t span_ms, unsigned target)
{
    static const uint32_t steps_s[] = {
        1,   2,    5,    10,   15,    30,    60,    120,   300,    600,
        900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
    };
    size_t n = sizeof(steps_s) / sizeof(steps_s[0]);

    if (target == 0)
        target = 1;
    for (size_t i = 0; i < n; i++)
        if ((uint64_t)steps_s[i] * 1000 * target >= span_ms)
            return (uint64_t)steps_s[i] * 1000;
    return (uint64_t)steps_s[n - 1] * 1000;
}

/* -- Colours ------------------------------------------------------------- */

void chart_colour(unsigned i, char out[8])
{
    /* Hues a golden angle apart, two brightnesses in turn: neighbours in
     * the stack stay apart however many there are. */
    double h = fmod(0.58 + i * 0.618033988749895, 1.0) * 6;
    double s = 0.55, v = i % 2 ? 0.76 : 0.93;
    double c = v * s, x = c * (1 - fabs(fmod(h, 2) - 1)), m = v - c;
    double rgb[3];
    int sector = (int)h;

    switch (sector) {
    case 0:
        rgb[0] = c, rgb[1] = x, rgb[2] = 0;
        break;
    case 1:
        rgb[0] = x, rgb[1] = c, rgb[2] = 0;
        break;
    case 2:
        rgb[0] = 0, rgb[1] = c, rgb[2] = x;
        break;
    case 3:
        rgb[0] = 0, rgb[1] = x, rgb[2] = c;
        break;
    case 4:
        rgb[0] = x, rgb[1] = 0, rgb[2] = c;
        break;
    default:
        rgb[0] = c, rgb[1] = 0, rgb[2] = x;
        break;
    }
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround((rgb[0] + m) * 255),
             (unsigned)lround((rgb[1] + m) * 255),
             (unsigned)lround((rgb[2] + m) * 255));
}

#define OTHER_COLOUR "#c9c9c9"

/* -- Layout -------------------------------------------------------------- */

/* Pixels.  The legend's names are monospace, so that a name cut to fit
 * its column does fit. */
#define MARGIN_LEFT   84
#define MARGIN_RIGHT  24
#define TOP_TITLE     40 /* the plot's top under a title alone */
#define TOP_SUBTITLE  58 /* ... and under a subtitle */
#define BELOW_PLOT    52 /* tick labels and the axis's title */
#define LEGEND_ROW    18
#define MARGIN_BOTTOM 10
#define MIN_PLOT      80
#define LEGEND_COLUMN 380 /* the narrowest column of the legend */
#define MONO_CHAR     6.7 /* a monospace character at 11 px, and some */
#define SANS_CHAR     6.5 /* an average sans-serif one at 12 px */

struct layout {
    double left, right, top, bottom; /* the plot area */
    unsigned cols, rows;
    double col_w;
    double xmin, xmax; /* what the plot's width shows */
    struct chart_axis y;
};

static unsigned legend_cols(unsigned width)
{
    unsigned w = width > MARGIN_LEFT + MARGIN_RIGHT
                     ? width - MARGIN_LEFT - MARGIN_RIGHT
                     : 1;
    unsigned cols = w / LEGEND_COLUMN;

    return cols < 1 ? 1 : cols > 3 ? 3 : cols;
}

unsigned chart_min_height(unsigned width, uint32_t nseries)
{
    unsigned cols = legend_cols(width);
    unsigned rows = (nseries + 1 + cols - 1) / cols;

    return TOP_SUBTITLE + MIN_PLOT + BELOW_PLOT + rows * LEGEND_ROW +
           MARGIN_BOTTOM;
}

/* The highest stack of a point: its total, or its series' sum if more. */
static uint64_t stack_height(const struct chart_data *d, uint32_t j)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < d->nseries; i++)
        sum += chart_value(d, i, j);
    return sum > d->total[j] ? sum : d->total[j];
}

static void lay_out(const struct chart *c, struct layout *L)
{
    const struct chart_data *d = c->data;
    uint64_t most = 0;

    L->cols = legend_cols(c->width);
    L->rows = d->npoints > 0 ? (d->nseries + 1 + L->cols - 1) / L->cols : 0;
    L->left = MARGIN_LEFT;
    L->right = c->width - MARGIN_RIGHT;
    L->top = c->subtitle != NULL ? TOP_SUBTITLE : TOP_TITLE;
    L->bottom =
        (double)c->height - MARGIN_BOTTOM - L->rows * LEGEND_ROW - BELOW_PLOT;
    if (L->bottom < L->top + 1)
        L->bottom = L->top + 1;
    L->col_w = (L->right - L->left) / L->cols;
    for (uint32_t j = 0; j < d->npoints; j++)
        if (stack_height(d, j) > most)
            most = stack_height(d, j);
    L->xmin = c->x_kind == CHART_X_BYTES || d->npoints == 0 ? 0 : d->x[0];
    L->xmax = d->npoints > 0 ? d->x[d->npoints - 1] : 1;
    /* A peak between two samples may be higher than both, and a live
     * one after the last sample (ljmpd keeps it at every tick, samples
     * the sites more sparsely): the axes reach it. */
    if (c->has_peak && d->npoints > 0 && (double)c->peak_x >= L->xmin) {
        L->xmax = (double)c->peak_x > L->xmax ? (double)c->peak_x : L->xmax;
        most = c->peak_bytes > most ? c->peak_bytes : most;
    }
    chart_byte_axis(most, (unsigned)((L->bottom - L->top) / 45) + 2, &L->y);
    if (L->xmax <= L->xmin)
        L->xmax = L->xmin + (c->x_kind == CHART_X_TIME ? 1000 : 1);
}

static double px(const struct layout *L, double x)
{
    return L->left + (x - L->xmin) / (L->xmax - L->xmin) * (L->right - L->left);
}

static double py(const struct layout *L, double bytes)
{
    return L->bottom - bytes / L->y.top * (L->bottom - L->top);
}

/* -- Drawing ------------------------------------------------------------- */

static void header(FILE *out, const struct chart *c)
{
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            "width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<title>",
            c->width, c->height, c->width, c->height);
    svg_put_text(out, c->title, 1000, SVG_KEEP_HEAD);
    fprintf(out,
            "</title>\n<rect width=\"%u\" height=\"%u\" "
            "fill=\"#ffffff\"/>\n",
            c->width, c->height);
    fputs("<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\">",
          out);
    svg_put_text(out, c->title, (size_t)((c->width - 32) / 9.5), SVG_KEEP_HEAD);
    fputs("</text>\n", out);
    if (c->subtitle != NULL) {
        fputs("<text x=\"16\" y=\"44\" font-size=\"11\" fill=\"#555555\">",
              out);
        svg_put_text(out, c->subtitle, (size_t)((c->width - 32) / 6),
                     SVG_KEEP_HEAD);
        fputs("</text>\n", out);
    }
}

/* A horizontal grid line and its label at each step of the y axis (none
 * on an empty chart), and the axis's title. */
static void y_axis(FILE *out, const struct layout *L, int empty)
{
    char label[32];

    fprintf(out,
            "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 18 %.1f)\">live bytes</text>\n",
            (L->top + L->bottom) / 2, (L->top + L->bottom) / 2);
    if (empty)
        return;
    fputs("<g stroke=\"#e2e2e2\">\n", out);
    for (double v = L->y.step; v <= L->y.top * (1 + STEP_SLACK); v += L->y.step)
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                L->left, py(L, v), L->right, py(L, v));
    fputs("</g>\n<g text-anchor=\"end\" fill=\"#333333\">\n", out);
    for (double v = 0; v <= L->y.top * (1 + STEP_SLACK); v += L->y.step) {
        chart_byte_label(label, sizeof(label), v, &L->y);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", L->left - 6,
                py(L, v) + 4, label);
    }
    fputs("</g>\n", out);
}

/* A tick and its label at x (px), text already escaped. */
static void x_tick(FILE *out, const struct layout *L, double x,
                   const char *label)
{
    fprintf(out,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"#e2e2e2\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" "
            "x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "fill=\"#333333\">%s</text>\n",
            x, L->top, x, L->bottom, x, L->bottom, x, L->bottom + 5, x,
            L->bottom + 18, label);
}

/* Local time's offset from UTC at ms, in seconds. */
static long utc_offset_s(uint64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    return localtime_r(&t, &tm) != NULL ? tm.tm_gmtoff : 0;
}

/* How a clock time is labelled. */
enum clock_form {
    CLOCK_SECONDS, /* 12:03:04 */
    CLOCK_MINUTES, /* 12:03 */
    CLOCK_DAY,     /* 05-31 */
    CLOCK_DATE,    /* 2024-05-31 */
};

static void clock_label(char *out, size_t len, uint64_t ms, enum clock_form f)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    size_t n = 0;

    if (localtime_r(&t, &tm) != NULL) {
        switch (f) {
        case CLOCK_SECONDS:
            n = strftime(out, len, "%H:%M:%S", &tm);
            break;
        case CLOCK_MINUTES:
            n = strftime(out, len, "%H:%M", &tm);
            break;
        case CLOCK_DAY:
            n = strftime(out, len, "%m-%d", &tm);
            break;
        case CLOCK_DATE:
            n = strftime(out, len, "%Y-%m-%d", &tm);
            break;
        }
    }
    if (n == 0)
        snprintf(out, len, "?");
}

/* Ticks at whole steps of local clock time, and the axis's title with the
 * dates it spans. */
static void x_time_axis(FILE *out, const struct layout *L)
{
    uint64_t span = (uint64_t)(L->xmax - L->xmin);
    uint64_t step =
        chart_time_step(span, (unsigned)((L->right - L->left) / 90));
    long off_ms = utc_offset_s((uint64_t)L->xmin) * 1000;
    enum clock_form form = step < 60000      ? CLOCK_SECONDS
                           : step < 86400000 ? CLOCK_MINUTES
                                             : CLOCK_DAY;
    char label[32], from[16], to[16];
    /* The first whole step after xmin, in local time. */
    int64_t local = (int64_t)L->xmin + off_ms;
    int64_t first =
        (local + (int64_t)step - 1) / (int64_t)step * (int64_t)step - off_ms;

    for (int64_t t = first; t <= (int64_t)L->xmax; t += (int64_t)step) {
        clock_label(label, sizeof(label), (uint64_t)t, form);
        x_tick(out, L, px(L, (double)t), label);
    }
    clock_label(from, sizeof(from), (uint64_t)L->xmin, CLOCK_DATE);
    clock_label(to, sizeof(to), (uint64_t)L->xmax, CLOCK_DATE);
    fprintf(out,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">local time "
            "(%s%s%s)</text>\n",
            (L->left + L->right) / 2, L->bottom + 36, from,
            strcmp(from, to) ? " to " : "", strcmp(from, to) ? to : "");
}

/* Ticks at whole steps of bytes allocated. */
static void x_bytes_axis(FILE *out, const struct layout *L)
{
    struct chart_axis a;
    char label[32];

    chart_byte_axis((uint64_t)L->xmax, (unsigned)((L->right - L->left) / 90),
                    &a);
    for (double v = 0; v <= L->xmax; v += a.step) {
        chart_byte_label(label, sizeof(label), v, &a);
        x_tick(out, L, px(L, v), label);
    }
    fprintf(out,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">bytes "
            "allocated so far (a recording has no clock)</text>\n",
            (L->left + L->right) / 2, L->bottom + 36);
}

static void frame_lines(FILE *out, const struct layout *L)
{
    fprintf(out,
            "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" "
            "stroke=\"#333333\"/>\n",
            L->left, L->top, L->bottom, L->right);
}

/* The pixels of the points drawn: one point stretched across the plot. */
struct draw_points {
    uint32_t n;
    double *x;
    uint32_t *index; /* the data's point */
};

static int draw_points_of(const struct chart *c, const struct layout *L,
                          struct draw_points *p)
{
    const struct chart_data *d = c->data;

    p->n = d->npoints == 1 ? 2 : d->npoints;
    p->x = malloc((p->n + 1) * sizeof(*p->x));
    p->index = malloc((p->n + 1) * sizeof(*p->index));
    if (p->x == NULL || p->index == NULL) {
        free(p->x);
        free(p->index);
        return -1;
    }
    for (uint32_t j = 0; j < p->n; j++) {
        p->index[j] = d->npoints == 1 ? 0 : j;
        p->x[j] = d->npoints == 1 ? (j == 0 ? L->left : L->right)
                                  : px(L, (double)d->x[j]);
    }
    return 0;
}

/* A band's top at the data's point k over base: base plus the series'
 * value there, or, for the rest (series -1), the total (base if more). */
static uint64_t band_top(const struct chart_data *d, int series, uint32_t k,
                         uint64_t base)
{
    if (series >= 0)
        return base + chart_value(d, (uint32_t)series, k);
    return d->total[k] > base ? d->total[k] : base;
}

/* One band: its top forward, its base back; base becomes its top.  series
 * is -1 for the rest, up to the total. */
static void band(FILE *out, const struct chart *c, const struct layout *L,
                 const struct draw_points *p, uint64_t *base, int series,
                 const char *colour)
{
    const struct chart_data *d = c->data;

    fprintf(out, "<polygon fill=\"%s\" stroke=\"%s\" points=\"", colour,
            colour);
    for (uint32_t j = 0; j < p->n; j++)
        fprintf(out, "%.1f,%.1f ", p->x[j],
                py(L, (double)band_top(d, series, p->index[j], base[j])));
    for (uint32_t j = p->n; j-- > 0;)
        fprintf(out, "%.1f,%.1f ", p->x[j], py(L, (double)base[j]));
    fputs("\"><title>", out);
    svg_put_text(out, series >= 0 ? d->names[series] : c->other_name, 4096,
                 SVG_KEEP_TAIL);
    fputs("</title></polygon>\n", out);
    for (uint32_t j = 0; j < p->n; j++)
        base[j] = band_top(d, series, p->index[j], base[j]);
}

/* The series stacked, the biggest at the bottom, the rest on top. */
static int bands(FILE *out, const struct chart *c, const struct layout *L)
{
    struct draw_points p;
    char colour[8];

    if (draw_points_of(c, L, &p) != 0)
        return -1;
    uint64_t *base = calloc(p.n + 1, sizeof(*base));
    if (base == NULL) {
        free(p.x);
        free(p.index);
        return -1;
    }
    fputs("<g stroke-width=\"0.5\" stroke-linejoin=\"round\">\n", out);
    for (uint32_t i = 0; i < c->data->nseries; i++) {
        chart_colour(i, colour);
        band(out, c, L, &p, base, (int)i, colour);
    }
    band(out, c, L, &p, base, -1, OTHER_COLOUR);
    fputs("</g>\n", out);
    free(base);
    free(p.x);
    free(p.index);
    return 0;
}

/* The most the rest (series -1) or a series held at a point. */
static uint64_t band_max(const struct chart_data *d, int series)
{
    uint64_t most = 0;

    for (uint32_t j = 0; j < d->npoints; j++) {
        uint64_t v = series >= 0 ? chart_value(d, (uint32_t)series, j) : 0;
        if (series < 0) {
            uint64_t sum = 0;
            for (uint32_t i = 0; i < d->nseries; i++)
                sum += chart_value(d, i, j);
            v = d->total[j] > sum ? d->total[j] - sum : 0;
        }
        most = v > most ? v : most;
    }
    return most;
}

/* Legend entry k (series k, or the rest after them): a swatch, the most
 * it held, its name cut to its column. */
static void legend_entry(FILE *out, const struct chart *c,
                         const struct layout *L, uint32_t k)
{
    const struct chart_data *d = c->data;
    int series = k < d->nseries ? (int)k : -1;
    double x = L->left + (k % L->cols) * L->col_w;
    double y = L->bottom + BELOW_PLOT + (k / L->cols) * LEGEND_ROW + 4;
    char colour[8], most[32];
    double room = L->col_w - 100;

    if (series >= 0)
        chart_colour(k, colour);
    else
        snprintf(colour, sizeof(colour), "%s", OTHER_COLOUR);
    svg_format_size(most, sizeof(most), (double)band_max(d, series));
    fprintf(out,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
            "fill=\"%s\" stroke=\"#666666\" stroke-width=\"0.5\"/>\n"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n"
            "<text x=\"%.1f\" y=\"%.1f\" font-family=\"monospace\" "
            "font-size=\"11\">",
            x, y, colour, x + 84, y + 10, most, x + 92, y + 10);
    svg_put_text(out, series >= 0 ? d->names[series] : c->other_name,
                 room > MONO_CHAR ? (size_t)(room / MONO_CHAR) : 1,
                 SVG_KEEP_TAIL);
    fputs("<title>", out);
    svg_put_text(out, series >= 0 ? d->names[series] : c->other_name, 4096,
                 SVG_KEEP_TAIL);
    fputs("</title></text>\n", out);
}

static void legend(FILE *out, const struct chart *c, const struct layout *L)
{
    fputs("<g>\n", out);
    for (uint32_t k = 0; k <= c->data->nseries; k++)
        legend_entry(out, c, L, k);
    fputs("</g>\n", out);
}

/* Where the peak was, in words: "at 12:03:04" or "after 1.2 GiB". */
static void peak_when(char *out, size_t len, const struct chart *c)
{
    char t[32];

    if (c->x_kind == CHART_X_TIME) {
        clock_label(t, sizeof(t), c->peak_x, CLOCK_SECONDS);
        snprintf(out, len, "at %s", t);
    } else {
        svg_format_size(t, sizeof(t), (double)c->peak_x);
        snprintf(out, len, "after %s allocated", t);
    }
}

/* A dashed line at the peak with its size and when; a note in the corner
 * when the peak came before a live window (lay_out stretches the axes to
 * a peak after the last sample). */
static void peak(FILE *out, const struct chart *c, const struct layout *L)
{
    char size[32], when[64];

    svg_format_size(size, sizeof(size), (double)c->peak_bytes);
    peak_when(when, sizeof(when), c);
    if ((double)c->peak_x < L->xmin) {
        fprintf(out,
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                "fill=\"#b00020\">peak %s %s, before this window</text>\n",
                L->right - 4, L->top + 14, size, when);
        return;
    }
    double x = px(L, (double)c->peak_x);
    int right_half = x > (L->left + L->right) / 2;
    fprintf(out,
            "<g fill=\"#b00020\" stroke=\"#b00020\">\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke-width=\"1.5\" stroke-dasharray=\"5,4\"/>\n"
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" stroke=\"none\" "
            "font-weight=\"bold\">peak %s %s</text>\n</g>\n",
            x, L->top, x, L->bottom, x, py(L, (double)c->peak_bytes),
            right_half ? x - 5 : x + 5, L->top + 14,
            right_half ? "end" : "start", size, when);
}

/* What an empty chart says, across its plot. */
static void note(FILE *out, const struct chart *c, const struct layout *L)
{
    fprintf(out,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
            "font-size=\"14\" fill=\"#555555\">",
            (L->left + L->right) / 2, (L->top + L->bottom) / 2);
    svg_put_text(out, c->note, (size_t)((L->right - L->left) / 8),
                 SVG_KEEP_HEAD);
    fputs("</text>\n", out);
}

int chart_write_svg(FILE *out, const struct chart *c)
{
    struct layout L;

    lay_out(c, &L);
    header(out, c);
    y_axis(out, &L, c->data->npoints == 0);
    if (c->data->npoints > 0) {
        if (c->x_kind == CHART_X_TIME)
            x_time_axis(out, &L);
        else
            x_bytes_axis(out, &L);
        if (bands(out, c, &L) != 0) {
            errno = ENOMEM;
            return -1;
        }
        legend(out, c, &L);
        if (c->has_peak)
            peak(out, c, &L);
    }
    if (c->note != NULL)
        note(out, c, &L);
    frame_lines(out, &L);
    fputs("</svg>\n", out);
    return ferror(out) ? -1 : 0;
}
