/* Recordings in R3 without sockets: hand-made sessions, files read back. */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lm_encoder.h"
#include "lm_profile.h"
#include "log.h"
#include "recorder.h"
#include "session.h"
#include "test_support.h"
#include "test_units.h"

static struct server srv;

/* A server with no socket: a loop for the writers' bell, a recorder. */
static void setup(void)
{
    memset(&srv, 0, sizeof(srv));
    TAILQ_INIT(&srv.sessions);
    srv.base = event_base_new();
    CU_ASSERT_FATAL(srv.base != NULL);
    CU_ASSERT_FATAL(event_base_priority_init(srv.base, PRIO_LEVELS) == 0);
    CU_ASSERT_FATAL(recorder_start(&srv) == 0);
    CU_ASSERT_FATAL(session_observe(&srv, &recorder_observer) == 0);
}

/* The recorder's stop waits for the writers: the files are whole after. */
static void teardown(void)
{
    recorder_free(&srv);
    event_base_free(srv.base);
}

/* A session before its first byte, as session_accept makes one. */
static struct session *session_new(void)
{
    struct session *s = calloc(1, sizeof(*s));
    struct lm_limits limits = {1 << 16, (1 << 16) + 64};
    struct lm_state_limits state_limits = {1 << 16, 0};

    CU_ASSERT_FATAL(s != NULL);
    s->srv = &srv;
    s->id = 1;
    s->pid = 100;
    s->fd = s->pipe_fd = -1;
    s->phase = SESSION_STREAM;
    s->state = LJMP__SESSION_STATE__STREAMING;
    CU_ASSERT_FATAL(lm_profile_init(&s->prof, &limits, &state_limits) == 0);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void session_gone(struct session *s)
{
    lm_profile_free(&s->prof);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* A recording in R3 of s into test_dir/name, from s's first byte. */
static struct recording *record_r3(struct session *s, const char *name)
{
    char path[300], why[192];
    struct recording *rec = calloc(1, sizeof(*rec));

    CU_ASSERT_FATAL(rec != NULL);
    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CU_ASSERT_FATAL(fd >= 0);
    rec->r3 = 1;
    CU_ASSERT_FATAL(recorder_open(&srv, rec, fd, getuid(), why, sizeof(why)) ==
                    0);
    CU_ASSERT_FATAL(recorder_attach(s, rec) == 0);
    CU_ASSERT(rec->from_start);
    return rec;
}

/* Bytes the session decoded, told to its observers as session.c does. */
static void told(struct session *s, const uint8_t *p, size_t n)
{
    recorder_observer.fed(s, s->stream_bytes, p, n, NULL);
    s->stream_bytes += n;
}

/* The session takes the stream in chunks of `step` bytes, to its end. */
static void take_stream(struct session *s, const struct lm_buf *b, size_t step)
{
    for (size_t at = 0; at < b->len; at += step) {
        size_t n = b->len - at < step ? b->len - at : step, used = 0;
        CU_ASSERT_NOT_EQUAL_FATAL(
            lm_profile_feed(&s->prof, b->data + at, n, &used), LM_ERROR);
        told(s, b->data + at, used);
    }
    s->phase = SESSION_ENDED;
    s->state = LJMP__SESSION_STATE__COMPLETE;
    recorder_observer.ended(s, NULL);
}

/* A stream of rev: n allocations at @app.lua:3, and in R3S their stack
 * (its configuration and definition first); whole if `end`, else cut
 * after the last allocation. */
static void sample(struct lm_buf *b, enum lm_revision rev, uint64_t n, int end)
{
    struct lm_loc_ref at = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 3};
    struct lm_stack_frame f = {LM_FRAME_LUA, 0x100, 3};

    lm_enc_begin(b, rev);
    lm_enc_sym_lfunc(b, 0x100, "@app.lua", 1);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, rev);
    if (rev == LM_REV_R3S) {
        lm_enc_stack_config(b, 8, 0);
        lm_enc_stack_def(b, 1, &f, 1);
    }
    for (uint64_t i = 0; i < n; i++)
        if (rev == LM_REV_R3S)
            lm_enc_alloc_stack(b, rev, &at, 0x1000 + 16 * i, 16, 1);
        else
            lm_enc_alloc(b, rev, &at, 0x1000 + 16 * i, 16);
    if (end)
        lm_enc_epilogue(b);
    CU_ASSERT_FATAL(!b->oom);
}

/* Whether test_dir/name holds the n bytes at p, and no more. */
static int file_is(const char *name, const uint8_t *p, size_t n)
{
    char path[300];
    uint8_t *got = malloc(n + 1);
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", test_dir, name);
    if (got == NULL || (f = fopen(path, "rb")) == NULL) {
        free(got);
        return 0;
    }
    size_t len = fread(got, 1, n + 1, f);
    fclose(f);
    int same = len == n && memcmp(got, p, n) == 0;
    free(got);
    return same;
}

/* An R3S stream recorded in R3, however its reads cut it: the file is
 * the R3 stream of the same events byte for byte, the stripper gone
 * with the session's end. */
static void test_r3s_recorded_in_r3(void)
{
    static const size_t steps[] = {1, 7, 64, 1 << 20};
    struct lm_buf r3s = {0}, r3 = {0};

    sample(&r3s, LM_REV_R3S, 100, 1);
    sample(&r3, LM_REV_R3, 100, 1);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        setup();
        struct session *s = session_new();
        struct recording *rec = record_r3(s, "r3s.bin");
        take_stream(s, &r3s, steps[i]);
        CU_ASSERT_PTR_NULL(recorder_of(s));
        CU_ASSERT_PTR_NULL(rec->strip);
        CU_ASSERT(rec->stacks_stripped);
        CU_ASSERT_STRING_EQUAL(rec->error, "");
        teardown();
        CU_ASSERT(file_is("r3s.bin", r3.data, r3.len));
        session_gone(s);
    }
    lm_buf_free(&r3s);
    lm_buf_free(&r3);
}

/* A stream without stacks recorded in R3 is written as it came. */
static void test_r3_recorded_as_is(void)
{
    struct lm_buf r3 = {0};

    sample(&r3, LM_REV_R3, 100, 1);
    setup();
    struct session *s = session_new();
    struct recording *rec = record_r3(s, "r3.bin");
    take_stream(s, &r3, 100);
    CU_ASSERT_FALSE(rec->stacks_stripped);
    teardown();
    CU_ASSERT(file_is("r3.bin", r3.data, r3.len));
    session_gone(s);
    lm_buf_free(&r3);
}

/*
 * Bytes the stripper finds malformed, though the session took them: the
 * recording stops with an error that says so, its stripper freed, and
 * the session goes on; the file holds the stream stripped up to them.
 */
static void test_stripper_error_ends_the_recording(void)
{
    static const uint8_t bad[] = {0x7f, 0x7f, 0x7f, 0x7f};
    struct lm_buf r3s = {0}, r3 = {0};
    size_t used = 0;

    sample(&r3s, LM_REV_R3S, 10, 0);
    sample(&r3, LM_REV_R3, 10, 0);
    setup();
    struct session *s = session_new();
    struct recording *rec = record_r3(s, "bad.bin");
    CU_ASSERT_EQUAL(lm_profile_feed(&s->prof, r3s.data, r3s.len, &used),
                    LM_NEED_MORE);
    told(s, r3s.data, used);
    CU_ASSERT_PTR_EQUAL(recorder_of(s), rec);
    told(s, bad, sizeof(bad));
    CU_ASSERT_PTR_NULL(recorder_of(s));
    CU_ASSERT_PTR_NULL(rec->strip);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(rec->error, "cannot be stripped of its stacks"));
    CU_ASSERT_FALSE(rec->io_error);
    CU_ASSERT_EQUAL(s->phase, SESSION_STREAM);
    teardown();
    CU_ASSERT(file_is("bad.bin", r3.data, r3.len));
    session_gone(s);
    lm_buf_free(&r3s);
    lm_buf_free(&r3);
}

/* ljmpd's log is quiet but for errors (a recording stopped warns). */
static int suite_init(void)
{
    log_init(LOG_ERROR);
    return test_dir_make("recorder");
}

static int suite_clean(void)
{
    return getenv("KEEP_TEST_DIR") == NULL ? test_dir_remove() : 0;
}

void register_recorder_tests(void)
{
    CU_pSuite s = CU_add_suite("recorder", suite_init, suite_clean);

    CU_add_test(s, "an R3S stream recorded in R3", test_r3s_recorded_in_r3);
    CU_add_test(s, "a stream without stacks recorded in R3 as is",
                test_r3_recorded_as_is);
    CU_add_test(s, "a stripper's error ends the recording only",
                test_stripper_error_ends_the_recording);
}
