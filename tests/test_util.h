/* Helpers shared by the CUnit suites: sample streams and a recording sink. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdint.h>

#include "lm_decoder.h"
#include "lm_encoder.h"
#include "lm_profile.h"
#include "lm_state.h"

/* A record as the sink saw it, with its string copied. */
struct saved_record {
    struct lm_record rec;
    char str[256];
    struct lm_stack_frame frames[LM_STACK_MAX_DEPTH + 1]; /* a definition's */
};

struct recorder {
    struct saved_record *recs;
    size_t n, cap;
};

int recorder_sink(void *ctx, const struct lm_record *recs, size_t n,
                  size_t *failed_at, char *errbuf, size_t errlen);
void recorder_free(struct recorder *r);

/* Locations by source. */
struct lm_loc_ref loc_internal(void);
struct lm_loc_ref loc_lua(uint64_t proto, uint64_t line);
struct lm_loc_ref loc_c(uint64_t addr);
struct lm_loc_ref loc_trace(uint64_t traceno, uint64_t trace_addr);

/* Whether n frames are the same, field by field (not their padding). */
int same_frames(const struct lm_stack_frame *a, const struct lm_stack_frame *b,
                size_t n);

/* Frames of a stack definition (R3S). */
struct lm_stack_frame frame_lua(uint64_t proto, uint64_t line);
struct lm_stack_frame frame_c(uint64_t addr);
struct lm_stack_frame frame_marker(uint64_t marker);

/* An alloc or realloc naming stack (0: none); with a stack only in
 * R3S. */
void enc_alloc_at(struct lm_buf *b, enum lm_revision rev,
                  const struct lm_loc_ref *l, uint64_t naddr, uint64_t nsize,
                  uint64_t stack);
void enc_realloc_at(struct lm_buf *b, enum lm_revision rev,
                    const struct lm_loc_ref *l, uint64_t oaddr, uint64_t osize,
                    uint64_t naddr, uint64_t nsize, uint64_t stack);

/*
 * A stream of revision rev exercising every record type it has: symbols
 * at start, symbols announced while running, alloc/realloc/free from every
 * source.  The same events in every revision where they exist: R3S's is
 * R3's with stacks (a configuration, definitions, a reset, events that
 * name them), which stripped is R3's byte for byte.
 */
void sample_stream(struct lm_buf *b, enum lm_revision rev);

/* Runs `ljmpctl ARGS` in the test's directory: its exit status; its
 * stdout and stderr in *out and *err (malloc'd), when not NULL. */
int run_ljmpctl(const char *args, char **out, char **err);

/* The prototype of @h.lua in census streams: above the census's names. */
#define CENSUS_PROTO 0x10000

/* The start of an R3 stream whose VM announces a census (docs/format.md,
 * "Census") of a heap of begin_total bytes: @h.lua at CENSUS_PROTO, the census
 * begun, its names "[before profiling] VM internals" (3) and
 * "[before profiling] table" (16) announced. */
void census_begin(struct lm_buf *b, uint64_t begin_total);
/* The census's completion, with the VM holding total bytes. */
void census_complete(struct lm_buf *b, uint64_t total);

/* Decodes buf in chunks of `chunk` bytes (0: whole) into a fresh profile. */
enum lm_status feed_chunked(struct lm_profile *p, const uint8_t *buf,
                            size_t len, size_t chunk);

struct lm_report_opts;
/* The report of a state as a malloc'd string, with options o. */
char *report_with(const struct lm_state *s, const struct lm_report_opts *o);
/* The text report of a state as a malloc'd string. */
char *report_string(const struct lm_state *s, int leak_only, int human,
                    int json);

/* Reads a file under tests/expected/ into a malloc'd string. */
char *read_expected(const char *name);

/* Registration of each suite. */
void register_decoder_tests(void);
void register_state_tests(void);
void register_report_tests(void);
void register_export_tests(void);
void register_cli_tests(void);
void register_chart_tests(void);
void register_flame_tests(void);
void register_diff_tests(void);
void register_stacks_tests(void);

#endif
