/* C symbols read on threads of their own, users in turn, one process of
 * a user at a time: the event loop never waits for a file. */
#ifndef LJMPD_SYMLOAD_H
#define LJMPD_SYMLOAD_H

struct server;
struct session_observer;

/* Starts the first reader: 0, or -1 with the reason logged. */
int symload_start(struct server *srv);
/* Once a session's hello is taken, its C symbols are read before its
 * stream is decoded (a location's name is fixed at birth), for
 * --symbols-wait at most. */
extern const struct session_observer symload_observer;
/* Drops the reads under way, waiting a little for the readers. */
void symload_stop(struct server *srv);

#endif
