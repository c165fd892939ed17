/* How a helper thread wakes the event loop: an eventfd the loop watches. */
#ifndef LJMPD_BELL_H
#define LJMPD_BELL_H

#include <event2/event.h>

/* The loop runs cb(arg) when the bell rings; cb answers it with
 * bell_answer() and takes the work done. */
struct bell {
    int efd;
    struct event *ev;
};

/* An unused bell, safe to free. */
#define BELL_NONE ((struct bell){.efd = -1, .ev = NULL})

/* 0, or -1 with the reason logged, for `who`; the bell's event runs at
 * priority prio of base. */
int bell_init(struct bell *b, struct event_base *base, int prio,
              event_callback_fn cb, void *arg, const char *who);
/* From any thread. */
void bell_ring(struct bell *b);
void bell_answer(struct bell *b);
void bell_free(struct bell *b);

#endif
