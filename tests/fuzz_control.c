/* libFuzzer target: bytes from a control client, as ljmpd reads them, on a
 * daemon with every module and no socket of its own. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "modules.h"
#include "options.h"
#include "peer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The caller is a uid no process runs as: attach and detach requests go
 * through their checks to the refusal, and never signal a process of the
 * machine the fuzzer runs on.
 */
#define FUZZ_UID ((uid_t)0x7ffffff3)

static struct server srv;

static void start_daemon(void)
{
    char *argv[] = {"ljmpd", "-q", NULL};

    options_parse(&srv.cfg, 2, argv);
    srv.cfg.feed_threads = 0;
    log_init(LOG_ERROR);
    if (modules_start(&srv) != 0)
        abort();
}

/* Reads and drops what the daemon answered. */
static void drain(int fd)
{
    char buf[65536];

    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

/* Turns of the loop, the client's answers read between them, until the
 * peer is gone or `turns` have run. */
static void run(int client, int turns)
{
    while (turns-- > 0 && srv.npeers > 0) {
        event_base_loop(srv.base, EVLOOP_NONBLOCK);
        drain(client);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    size_t at = 0;

    if (srv.base == NULL)
        start_daemon();
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   sv) != 0)
        abort();
    peer_accept(&srv, sv[0]);
    struct peer *p = TAILQ_LAST(&srv.peers, peer_list);
    if (p == NULL)
        abort();
    p->uid = FUZZ_UID;
    while (at < size) {
        ssize_t n = write(sv[1], data + at, size - at);
        if (n > 0)
            at += (size_t)n;
        run(sv[1], 1);
        if (srv.npeers == 0)
            break;
    }
    shutdown(sv[1], SHUT_WR);
    run(sv[1], 64);
    close(sv[1]);
    for (int i = 0; i < 8 && srv.npeers > 0; i++)
        event_base_loop(srv.base, EVLOOP_NONBLOCK);
    while ((p = TAILQ_FIRST(&srv.peers)) != NULL)
        peer_free(p);
    return 0;
}
