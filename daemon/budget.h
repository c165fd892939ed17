/* Memory budgets: what ljmpd holds for each session, each user and in all. */
#ifndef LJMPD_BUDGET_H
#define LJMPD_BUDGET_H

#include <stdint.h>
#include <sys/types.h>

struct server;
struct session;

/* Which budget a session went over. */
enum budget_kind {
    BUDGET_SESSION,
    BUDGET_USER,
    BUDGET_TOTAL,
};

/* Forgets what the budgets counted (after the sessions are freed). */
void budget_free(struct server *srv);

/* The most one session of uid may hold: --session-memory, and no more
 * than its user's (--user-memory, for users with a quota) or the total
 * (--memory). */
uint64_t budget_of_session(const struct server *srv, uid_t uid);

/* What uid's sessions hold, streaming and kept. */
uint64_t budget_user_bytes(const struct server *srv, uid_t uid);

/* What s may still take on the loop's word before a budget of its own,
 * its user's or the total would be passed (0 when one is already). */
uint64_t budget_room(const struct session *s);

/* Charges s's user with what s holds now (after its views changed); does
 * not end it, nor forget other sessions (the caller may be walking the
 * session list). */
void budget_charge(struct session *s);

/* Charges, ends and makes room for sessions as they grow (session.h). */
extern const struct session_observer budget_observer;

#endif
