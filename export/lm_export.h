/* Profile states written for other tools: pprof, folded stacks, speedscope. */
#ifndef LM_EXPORT_H
#define LM_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "lm_report.h"
#include "lm_state.h"

enum lm_export_format {
    LM_EXPORT_PPROF,      /* a gzipped profile.proto message */
    LM_EXPORT_FOLDED,     /* "frame;frame VALUE" lines (flamegraph.pl) */
    LM_EXPORT_SPEEDSCOPE, /* speedscope's JSON file format */
};

/* The values a sample carries, in pprof's order of sample types. */
enum lm_export_value {
    LM_VALUE_ALLOC_OBJECTS, /* blocks made: allocations and reallocations */
    LM_VALUE_ALLOC_SPACE,   /* their bytes */
    LM_VALUE_INUSE_OBJECTS, /* live blocks */
    LM_VALUE_INUSE_SPACE,   /* live bytes */
    LM_VALUE_COUNT,
};

struct lm_export_opts {
    enum lm_export_format format;
    /* pprof: the default sample type; the others: the one value written. */
    enum lm_export_value value;
    /* When the profile's data began (Unix ms) and over how long it was
     * gathered; 0 when unknown (a recording has no clock). */
    uint64_t time_ms, duration_ms;
};

/* The value's name as pprof's sample types say it ("inuse_space"). */
const char *lm_export_value_name(enum lm_export_value v);
/* The value named so, or LM_VALUE_COUNT for no such name. */
enum lm_export_value lm_export_value_named(const char *name);

/*
 * Writes the n states (one process each, described by members[i]; members
 * may be NULL for a recording) as one profile in o's format.  One sample
 * per named place and process: a Lua line (its function named by chunk
 * and definition line), a C function, a trace by the line it starts at,
 * the VM's internals; with call stacks (R3S), one per place, stack and
 * process, its frames the place and then the stack's callers (estimates
 * when the stacks were sampled, and then no sample of the events without
 * a stack).  Samples of a merged profile carry their process as labels
 * (pprof) or as a root frame (folded) or profile (speedscope).
 * Returns 0, or -1 when out of memory or writing failed.
 */
int lm_export_write(FILE *out, const struct lm_state *const *states,
                    const struct lm_report_member *members, size_t n,
                    const struct lm_export_opts *o);

/* How pprof's comment on sampled stacks begins (the mean follows). */
#define LM_EXPORT_SAMPLED_NOTE "call stacks sampled every "

/* A sample as lm_export_samples hands it. */
struct lm_export_sample {
    /* Its frames' names as reports print them (but bytes that are not
     * UTF-8, '?' as in every export), root first: the outermost caller,
     * ..., its place (one frame without a stack). */
    const char *const *frames;
    uint32_t nframes;
    uint32_t member;     /* which of the states (or processes read back) */
    uint32_t pid;        /* its process's, when known; else 0 */
    const char *command; /* its process's command line, or NULL */
    uint64_t trace;      /* the trace whose compiled code made it, or 0 */
    uint64_t v[LM_VALUE_COUNT];
    int estimated; /* values estimated from sampled stacks */
};

/* Takes one sample; nonzero stops the walk. */
typedef int (*lm_export_sample_fn)(void *ctx, const struct lm_export_sample *s);

/*
 * Hands fn, in no particular order, the samples lm_export_write writes
 * of the same states (and members, which may be NULL) as pprof's
 * (estimates rounded to counts), so that a caller may draw them without
 * a format in between.  Returns 0, -1 when out of memory, or what fn
 * returned when it stopped the walk.
 */
int lm_export_samples(const struct lm_state *const *states,
                      const struct lm_report_member *members, size_t n,
                      lm_export_sample_fn fn, void *ctx);

/*
 * Reads back a pprof export lm_export_write wrote (gzipped, len bytes):
 * hands fn each of its samples as lm_export_samples would, the frames
 * named from pprof's functions and lines as the export named them;
 * member counts the processes in the order of their first sample, pid
 * and command are its labels, estimated is said by the profile's
 * comment on sampling (of every sample: a merged profile does not say
 * which processes sampled).  Returns 0, -1 when it is not such a
 * profile or memory ran out, or what fn returned when it stopped the
 * walk.
 */
int lm_export_read_pprof(const uint8_t *data, size_t len,
                         lm_export_sample_fn fn, void *ctx);

/* gunzip of gz[0..len) (a pprof file) into a malloc'd buffer of *out_len
 * bytes; NULL when it is not gzip, is cut short, or memory ran out. */
uint8_t *lm_export_gunzip(const uint8_t *gz, size_t len, size_t *out_len);

#endif
