/* Text and JSON reports of a profile state, or of several merged, in
 * Tarantool's parser layout. */
#ifndef LM_REPORT_H
#define LM_REPORT_H

#include <stdio.h>

#include "lm_state.h"

struct lm_report_opts {
    int leak_only;      /* only the heap summary and the aliases */
    int human_readable; /* KiB/MiB/GiB instead of bytes */
    int json;           /* one JSON object instead of text */
    int by_process;     /* merged: each heap summary line's share per process */
    /* The stream goes on (a live session): a census begun and not
     * complete is running, not partial. */
    int streaming;
    /* What traces' compiled code allocated is named by the trace, not
     * the line (lm_state_loc_trace_name). */
    int by_trace;
    /* Each site's callers (R3S): the STACKS section (docs/report.md). */
    int stacks;
    /* Not a report but an export to another tool (lm_export.h): 0, or
     * 1 + enum lm_export_format; export_value is its enum lm_export_value.
     * The report's writers ignore both; whoever calls them dispatches. */
    int export_format;
    int export_value;
};

/* A process whose state a merged report sums. */
struct lm_report_member {
    uint32_t pid;
    uint64_t session_id;
    const char *cmdline;
};

/*
 * Writes the report of s to out.  Returns 0, or -1 when out of memory or
 * when writing failed (errno tells).
 */
int lm_report_write(FILE *out, const struct lm_state *s,
                    const struct lm_report_opts *opts);

/*
 * Writes one report of n states merged: locations that print the same name
 * in any of them are one line, their counters summed.  The report starts
 * with its members (PROCESSES, or "members" in JSON), one per state; by
 * its options, each heap summary line can say what each process holds of
 * it.  Chunks loaded from strings keep each process's function_alias_N;
 * ALIASES lists a number's source once where the processes agree.
 */
int lm_report_write_merged(FILE *out, const struct lm_state *const *states,
                           const struct lm_report_member *members, size_t n,
                           const struct lm_report_opts *opts);

/* The census's state as reports name it: "none", "running", "complete"
 * or "partial" (begun, and the stream ended first). */
const char *lm_census_state_name(const struct lm_census *c, int streaming);

/*
 * Writes bytes as a JSON string: valid UTF-8 passes through, any other
 * byte becomes the code point of the same value, so the output is always
 * valid JSON.
 */
void lm_json_string(FILE *out, const char *str, size_t len);

/* A size with one decimal in the largest unit it fills ("14.0 MiB"),
 * whatever the options: the census's figures are a VM's heap, read as a
 * whole, not a column to add up. */
void lm_report_put_size(FILE *out, uint64_t bytes);

#endif
