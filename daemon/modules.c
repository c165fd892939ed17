/* ljmpd's modules started and freed in order, without sockets. */
#include "attach.h"
#include "budget.h"
#include "clock.h"
#include "control.h"
#include "feed.h"
#include "follow.h"
#include "history.h"
#include "marks.h"
#include "modules.h"
#include "peer.h"
#include "peerfd.h"
#include "recorder.h"
#include "report.h"
#include "session.h"
#include "snapshot.h"
#include "symload.h"

/*
 * The loop: ingest callbacks run at the lowest priority, and after every
 * few of them (or 10 ms) the loop looks for control work, so a snapshot
 * is not held up by 32 busy VMs' reads in one turn.
 */
static struct event_base *new_event_base(void)
{
    struct event_config *cfg = event_config_new();
    struct timeval slice = {0, 10000};
    struct event_base *base = NULL;

    if (cfg != NULL && event_config_set_max_dispatch_interval(
                           cfg, &slice, 4, PRIO_DEFAULT) == 0)
        base = event_base_new_with_config(cfg);
    if (cfg != NULL)
        event_config_free(cfg);
    if (base != NULL && event_base_priority_init(base, PRIO_LEVELS) != 0) {
        event_base_free(base);
        base = NULL;
    }
    return base;
}

/*
 * Who watches sessions, in this order: a record request waiting for the
 * process begins before anything is read (a recording from the start), an
 * attach is answered when its stream starts, then the C symbols are read;
 * a session's recording is finished before a detach is answered.
 */
static int watch_sessions(struct server *srv)
{
    static const struct session_observer *const order[] = {
        &control_observer, &recorder_observer, &attach_observer,
        &symload_observer, &snapshot_observer, &budget_observer,
        &history_observer, &marks_observer,    &report_observer,
    };

    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
        if (session_observe(srv, order[i]) != 0)
            return -1;
    return 0;
}

int modules_start(struct server *srv)
{
    TAILQ_INIT(&srv->sessions);
    TAILQ_INIT(&srv->peers);
    srv->peer_handler = &control_handler;
    srv->start_ms = clock_now_ms();
    clock_wall_ms(srv->start_ms);
    if ((srv->base = new_event_base()) == NULL || recorder_start(srv) != 0 ||
        (srv->feed = feed_new(srv->base, PRIO_DEFAULT, srv->cfg.feed_threads,
                              srv->cfg.inline_bytes)) == NULL ||
        symload_start(srv) != 0 || peerfd_start() != 0 ||
        control_start(srv) != 0 || attach_start(srv) != 0 ||
        follow_start(srv) != 0 || snapshot_start(srv) != 0 ||
        report_start(srv) != 0 || watch_sessions(srv) != 0)
        return -1;
    return 0;
}

void modules_free(struct server *srv)
{
    struct session *s;
    struct peer *p;

    feed_free(srv->feed); /* before the sessions its threads may feed */
    srv->feed = NULL;
    report_stop(srv); /* before the sessions its thread may read */
    symload_stop(srv);
    while ((p = TAILQ_FIRST(&srv->peers)) != NULL)
        peer_free(p);
    control_free(srv); /* after the peers that hold subscriptions */
    follow_free(srv);
    attach_free(srv);
    while ((s = TAILQ_FIRST(&srv->sessions)) != NULL) {
        TAILQ_REMOVE(&srv->sessions, s, link);
        session_free(s);
    }
    snapshot_free(srv); /* after the sessions, whose views go first */
    budget_free(srv);   /* after the sessions, uncharged as they go */
    recorder_free(srv); /* after the sessions that finish theirs */
    peerfd_stop();      /* after the peers and sessions that close theirs */
}
