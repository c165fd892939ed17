/* Ingest sessions over a socket pair, without a VM or a daemon: the hello,
 * observers told in order, a hold before the first byte is decoded, the
 * decoded bytes told in stream order, the trailer and the end. */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "feed.h"
#include "lm_encoder.h"
#include "log.h"
#include "peerfd.h"
#include "session.h"
#include "test_units.h"

static struct server srv;

/* What an observer saw: a letter per call, and the bytes it was told. */
struct watcher {
    char started, ended, freed; /* its letters */
    int hold_on_start;
    struct session *held;
    uint64_t next_at, fed_bytes;
    int out_of_order;
};

static char seen[64];
static size_t nseen;

static void note(char c)
{
    if (nseen + 1 < sizeof(seen))
        seen[nseen++] = c;
}

static void on_started(struct session *s, void *arg)
{
    struct watcher *w = arg;

    note(w->started);
    if (w->hold_on_start) {
        w->held = s;
        session_hold(s);
    }
}

static void on_fed(struct session *s, uint64_t at, const uint8_t *p, size_t n,
                   void *arg)
{
    struct watcher *w = arg;

    (void)s;
    (void)p;
    w->out_of_order += at != w->next_at;
    w->next_at = at + n;
    w->fed_bytes += n;
}

static void on_ended(struct session *s, void *arg)
{
    struct watcher *w = arg;

    CU_ASSERT_EQUAL(s->phase, SESSION_ENDED);
    note(w->ended);
}

static void on_freed(struct session *s, void *arg)
{
    struct watcher *w = arg;

    (void)s;
    note(w->freed);
}

static struct watcher first = {'a', 'A', 'x', 0, NULL, 0, 0, 0};
static struct watcher second = {'b', 'B', 'y', 0, NULL, 0, 0, 0};
static const struct session_observer first_observer = {.started = on_started,
                                                       .fed = on_fed,
                                                       .ended = on_ended,
                                                       .freed = on_freed,
                                                       .arg = &first};
static const struct session_observer second_observer = {.started = on_started,
                                                        .fed = on_fed,
                                                        .ended = on_ended,
                                                        .freed = on_freed,
                                                        .arg = &second};

/* A daemon without listeners: a loop, a feed on it, two observers. */
static void setup(void)
{
    memset(&srv, 0, sizeof(srv));
    memset(seen, 0, sizeof(seen));
    nseen = 0;
    first = (struct watcher){'a', 'A', 'x', 0, NULL, 0, 0, 0};
    second = (struct watcher){'b', 'B', 'y', 0, NULL, 0, 0, 0};
    TAILQ_INIT(&srv.sessions);
    TAILQ_INIT(&srv.peers);
    srv.cfg.max_sessions = 8;
    srv.cfg.hello_timeout_ms = 5000;
    srv.cfg.read_budget = 64 << 10;
    srv.cfg.max_string = 1 << 16;
    srv.cfg.max_locations = 1 << 16;
    srv.base = event_base_new();
    CU_ASSERT_FATAL(srv.base != NULL);
    CU_ASSERT_FATAL(event_base_priority_init(srv.base, PRIO_LEVELS) == 0);
    srv.feed = feed_new(srv.base, PRIO_DEFAULT, 0, 0);
    CU_ASSERT_FATAL(srv.feed != NULL);
    CU_ASSERT_FATAL(session_observe(&srv, &first_observer) == 0);
    CU_ASSERT_FATAL(session_observe(&srv, &second_observer) == 0);
}

static void teardown(void)
{
    struct session *s;

    while ((s = TAILQ_FIRST(&srv.sessions)) != NULL) {
        TAILQ_REMOVE(&srv.sessions, s, link);
        session_free(s);
    }
    feed_free(srv.feed);
    event_base_free(srv.base);
}

/* A session accepted on one end of a socket pair; the VM's end in *vm. */
static struct session *connect_vm(int *vm)
{
    int sv[2];

    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ==
                    0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    session_accept(&srv, sv[0]);
    *vm = sv[1];
    CU_ASSERT_FATAL(!TAILQ_EMPTY(&srv.sessions));
    return TAILQ_LAST(&srv.sessions, session_list);
}

static void send_all(int fd, const void *p, size_t n)
{
    CU_ASSERT_EQUAL_FATAL(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void loop_a_while(void)
{
    for (int i = 0; i < 20; i++) {
        event_base_loop(srv.base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
}

/* Turns of the loop until s ended, for a few seconds at most. */
static void loop_until_ended(const struct session *s)
{
    for (int i = 0; i < 200 && s->phase != SESSION_ENDED; i++)
        loop_a_while();
}

/* A session whose hello was taken and which the first observer holds;
 * the VM's end in *vm. */
static struct session *held_session(int *vm)
{
    uint8_t hello[LJMP_HELLO_MAX];

    first.hold_on_start = 1;
    struct session *s = connect_vm(vm);
    size_t n = ljmp_hello_encode(hello, LJMP_INGEST_ACK_VERSION, 1, "test VM");
    send_all(*vm, hello, n);
    for (int i = 0; i < 200 && first.held == NULL; i++)
        loop_a_while();
    CU_ASSERT_FATAL(first.held == s);
    return s;
}

/* One allocation at @t.lua:1, then its free. */
static void events(struct lm_buf *b, unsigned n)
{
    struct lm_loc_ref loc = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 1};

    for (unsigned i = 0; i < n; i++) {
        lm_enc_alloc(b, LM_REV_R3, &loc, 0x10000 + i * 64, 32);
        lm_enc_free(b, LM_REV_R3, &loc, 0x10000 + i * 64, 32);
    }
}

static uint64_t decoded(const struct session *s)
{
    return lm_totals_events(&s->prof.state.totals);
}

/* The hello is taken and observers told in order; one holds the stream:
 * the bytes that came with the hello wait, undecoded, the VM is not told
 * to stream; once released, the VM is told, the bytes are decoded and
 * told to every observer in stream order; the trailer matches; the VM
 * hangs up and the session is complete. */
static void test_hold_then_stream(void)
{
    uint8_t hello[LJMP_HELLO_MAX], trailer[LJMP_TRAILER_SIZE], ack;
    struct lm_buf head = {0}, rest = {0};
    int vm;

    setup();
    first.hold_on_start = 1;
    struct session *s = connect_vm(&vm);
    lm_enc_begin(&head, LM_REV_R3);
    lm_enc_sym_lfunc(&head, 0x100, "@t.lua", 1);
    lm_enc_symtab_end(&head);
    lm_enc_begin_events(&head, LM_REV_R3);
    events(&head, 10);
    events(&rest, 15);
    lm_enc_epilogue(&rest);
    size_t n = ljmp_hello_encode(hello, LJMP_INGEST_ACK_VERSION, 1, "test VM");
    uint8_t *first_write = malloc(n + head.len);
    memcpy(first_write, hello, n);
    memcpy(first_write + n, head.data, head.len);
    send_all(vm, first_write, n + head.len);
    free(first_write);

    for (int i = 0; i < 200 && first.held == NULL; i++)
        loop_a_while();
    CU_ASSERT_FATAL(first.held == s);
    CU_ASSERT_STRING_EQUAL(seen, "ab");
    CU_ASSERT_EQUAL(s->phase, SESSION_STREAM);
    CU_ASSERT_STRING_EQUAL(s->vm_version, "test VM");
    loop_a_while();
    CU_ASSERT_EQUAL(decoded(s), 0);
    CU_ASSERT_EQUAL(first.fed_bytes, 0);
    CU_ASSERT_EQUAL(recv(vm, &ack, 1, MSG_DONTWAIT), -1);

    session_release(s);
    CU_ASSERT_EQUAL(recv(vm, &ack, 1, MSG_DONTWAIT), 1);
    CU_ASSERT_EQUAL(ack, LJMP_HELLO_ACK);
    CU_ASSERT_EQUAL(decoded(s), 20);
    CU_ASSERT_EQUAL(first.fed_bytes, head.len);
    CU_ASSERT_EQUAL(second.fed_bytes, head.len);

    send_all(vm, rest.data, rest.len);
    ljmp_trailer_encode(trailer, 50, head.len + rest.len);
    send_all(vm, trailer, sizeof(trailer));
    close(vm);
    loop_until_ended(s);
    CU_ASSERT_EQUAL(s->state, LJMP__SESSION_STATE__COMPLETE);
    CU_ASSERT_EQUAL(decoded(s), 50);
    CU_ASSERT_EQUAL(first.fed_bytes, head.len + rest.len);
    CU_ASSERT_EQUAL(second.fed_bytes, head.len + rest.len);
    CU_ASSERT_EQUAL(first.out_of_order + second.out_of_order, 0);
    CU_ASSERT_STRING_EQUAL(seen, "abAB");
    CU_ASSERT_EQUAL(srv.counters.sessions_complete, 1);
    CU_ASSERT_EQUAL(srv.nlive, 0);
    teardown();
    CU_ASSERT_STRING_EQUAL(seen, "abABxy");
    lm_buf_free(&head);
    lm_buf_free(&rest);
}

/* A held session is not read: a VM that hangs up meanwhile is seen to
 * once the hold is released, and the session is truncated. */
static void test_hangup_while_held(void)
{
    int vm;

    setup();
    struct session *s = held_session(&vm);
    close(vm);
    loop_a_while();
    CU_ASSERT_EQUAL(s->phase, SESSION_STREAM);
    session_release(s);
    loop_until_ended(s);
    CU_ASSERT_EQUAL(s->state, LJMP__SESSION_STATE__TRUNCATED);
    CU_ASSERT_STRING_EQUAL(seen, "abAB");
    CU_ASSERT_EQUAL(first.fed_bytes, 0);
    teardown();
}

/* A session that ends while held (its stream failed, ljmpd stops) stays
 * ended when the hold is released: the VM is not told to stream. */
static void test_released_after_the_end(void)
{
    uint8_t byte;
    int vm;

    setup();
    struct session *s = held_session(&vm);
    session_end(s, LJMP__SESSION_STATE__FAILED, "%s", "ended by the test");
    session_release(s);
    loop_a_while();
    CU_ASSERT_EQUAL(s->phase, SESSION_ENDED);
    CU_ASSERT_EQUAL(s->state, LJMP__SESSION_STATE__FAILED);
    CU_ASSERT_EQUAL(recv(vm, &byte, 1, 0), 0); /* closed, never acked */
    CU_ASSERT_STRING_EQUAL(seen, "abAB");
    close(vm);
    teardown();
}

/* A peer that sends no valid hello is no session: it is told to no
 * observer but as freed. */
static void test_bad_hello(void)
{
    int vm;

    setup();
    connect_vm(&vm);
    send_all(vm, "HTTP/1.1", 8);
    loop_a_while();
    CU_ASSERT(TAILQ_EMPTY(&srv.sessions));
    CU_ASSERT_EQUAL(srv.counters.sessions_rejected, 1);
    CU_ASSERT_STRING_EQUAL(seen, "xy");
    close(vm);
    teardown();
}

/* The closing service is the process's, started once; ljmpd's log is
 * quiet but for errors. */
static int suite_init(void)
{
    log_init(LOG_ERROR);
    return peerfd_start();
}

static int suite_clean(void)
{
    peerfd_stop();
    return 0;
}

void register_session_tests(void)
{
    CU_pSuite s = CU_add_suite("sessions", suite_init, suite_clean);

    CU_add_test(s, "a hold, then the stream, the trailer and the end",
                test_hold_then_stream);
    CU_add_test(s, "a hang-up while held", test_hangup_while_held);
    CU_add_test(s, "a hold released after the end",
                test_released_after_the_end);
    CU_add_test(s, "a peer without a hello", test_bad_hello);
}
