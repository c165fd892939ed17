/* The loop's helper threads: started without signals, run below the
 * loop's priority, joined within a bound. */
#ifndef LJMPD_HELPER_H
#define LJMPD_HELPER_H

#include <pthread.h>

/* How long ljmpd's stop waits for its helpers' reads and writes under
 * way (C symbols, recordings). */
#define HELPER_STOP_WAIT_S 2

/* Lowers the calling thread's priority below the loop's (nice is per
 * thread on Linux), for the threads that work for it. */
void helper_lower_priority(void);

/* Starts fn(arg) on a thread that takes no signals (they are the
 * loop's): 0, or an errno value. */
int helper_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* Joins the n threads at t within `seconds` in all, and detaches those
 * still running then (a close or read that never returns): how many. */
unsigned helper_join(pthread_t *t, unsigned n, int seconds);

#endif
