/* ljmpd's modules started and freed in order, without sockets: what the
 * daemon runs on, and what a test or a fuzzer can drive by hand. */
#ifndef LJMPD_MODULES_H
#define LJMPD_MODULES_H

#include "server.h"

/*
 * srv's event loop, its lists and every module's state, from srv->cfg:
 * 0, or -1 (srv half made: modules_free frees what there is).  No
 * listener, timer or signal: the caller adds those to srv->base.
 */
int modules_start(struct server *srv);

/* Frees what modules_start made, peers and sessions first, but not
 * srv->base (the caller's events go before it). */
void modules_free(struct server *srv);

#endif
