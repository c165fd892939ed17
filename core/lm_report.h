/* Text and JSON reports of a profile state, in Tarantool's parser layout. */
#ifndef LM_REPORT_H
#define LM_REPORT_H

#include <stdio.h>

#include "lm_state.h"

struct lm_report_opts {
    int leak_only;      /* only the heap summary and the aliases */
    int human_readable; /* KiB/MiB/GiB instead of bytes */
    int json;           /* one JSON object instead of text */
};

/*
 * Writes the report of s to out.  Returns 0, or -1 when out of memory or
 * when writing failed (errno tells).
 */
int lm_report_write(FILE *out, const struct lm_state *s,
                    const struct lm_report_opts *opts);

/*
 * Writes bytes as a JSON string: valid UTF-8 passes through, any other
 * byte becomes the code point of the same value, so the output is always
 * valid JSON.
 */
void lm_json_string(FILE *out, const char *str, size_t len);

#endif
