/* How a helper thread wakes the event loop: an eventfd the loop watches. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "bell.h"
#include "log.h"

int bell_init(struct bell *b, struct event_base *base, int prio,
              event_callback_fn cb, void *arg, const char *who)
{
    b->ev = NULL;
    b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->efd < 0 ||
        (b->ev = event_new(base, b->efd, EV_READ | EV_PERSIST, cb, arg)) ==
            NULL ||
        event_priority_set(b->ev, prio) != 0 || event_add(b->ev, NULL) != 0) {
        log_error("%s: %s", who, strerror(errno ? errno : ENOMEM));
        return -1;
    }
    return 0;
}

void bell_ring(struct bell *b)
{
    uint64_t one = 1;

    /* Fails only when the counter is full: then it is readable. */
    (void)!write(b->efd, &one, sizeof(one));
}

void bell_answer(struct bell *b)
{
    uint64_t n;

    (void)!read(b->efd, &n, sizeof(n));
}

void bell_free(struct bell *b)
{
    if (b->ev != NULL)
        event_free(b->ev);
    if (b->efd >= 0)
        close(b->efd);
    b->ev = NULL;
    b->efd = -1;
}
