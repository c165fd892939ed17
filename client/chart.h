/* Stacked area charts of the live heap by site, as self-contained SVG. */
#ifndef LJMPCTL_CHART_H
#define LJMPCTL_CHART_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the x axis counts. */
enum chart_x {
    CHART_X_TIME,  /* Unix ms, labelled in local clock time */
    CHART_X_BYTES, /* bytes allocated so far (a recording has no clock) */
};

/* The numbers a chart draws: the heap's live bytes at each point, and
 * each series' part of them (the rest is one band of its own). */
struct chart_data {
    uint32_t npoints, nseries;
    uint64_t *x;      /* per point, ascending */
    uint64_t *total;  /* per point: the heap's live bytes */
    uint64_t *values; /* series i at point j: values[i * npoints + j] */
    char **names;     /* per series, malloc'd */
};

/* Room for npoints points of nseries series, zeroed; -1 out of memory. */
int chart_data_alloc(struct chart_data *d, uint32_t npoints, uint32_t nseries);
void chart_data_free(struct chart_data *d);

/* Series i's value at point j. */
static inline uint64_t chart_value(const struct chart_data *d, uint32_t i,
                                   uint32_t j)
{
    return d->values[(size_t)i * d->npoints + j];
}

struct chart {
    const struct chart_data *data;
    enum chart_x x_kind;
    const char *title;
    const char *subtitle;   /* under the title; NULL for none */
    const char *other_name; /* the band of the rest, e.g. "other sites" */
    const char *note;       /* said across an empty chart; NULL for none */
    int has_peak;           /* mark the peak: */
    uint64_t peak_x, peak_bytes;
    unsigned width, height; /* pixels */
};

/* The smallest height that leaves a chart of nseries series (and the
 * rest) as wide as width a plot area. */
unsigned chart_min_height(unsigned width, uint32_t nseries);

/* Writes c as an SVG document: 0, or -1 with errno when out failed. */
int chart_write_svg(FILE *out, const struct chart *c);

/* -- The pieces, exported for their tests ------------------------------ */

/* A step of 1, 2 or 5 times a power of ten that cuts span into at most
 * about target parts. */
double chart_nice_step(double span, unsigned target);

/* A byte axis from 0: its unit (1024^unit bytes: B, KiB, MiB, GiB, TiB),
 * its step and its top (a whole number of steps, at least max), and the
 * decimals its labels need. */
struct chart_axis {
    double step, top;
    unsigned unit;
    int decimals;
};
void chart_byte_axis(uint64_t max, unsigned target, struct chart_axis *a);

/* v's label on axis a: "0", "20 MiB", "2.5 KiB". */
void chart_byte_label(char *out, size_t len, double v,
                      const struct chart_axis *a);

/* A step of clock time (ms), from a second to a week, of whole seconds,
 * minutes, hours or days, that cuts span_ms into at most target parts
 * (a week when none does). */
uint64_t chart_time_step(uint64_t span_ms, unsigned target);

/* Series i's fill colour, "#rrggbb": hues far apart for neighbours. */
void chart_colour(unsigned i, char out[8]);

#endif
