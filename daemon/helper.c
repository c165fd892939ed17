/* The loop's helper threads: started without signals, run below the
 * loop's priority, joined within a bound. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "helper.h"

/*
 * Helpers (feed, symbol and recording threads) run HELPER_NICE below the
 * loop: the loop serves snapshots and requests, and must not queue for
 * the CPU behind the work it hands out (bench/daemon.sh's latency shows
 * it).  A thread that cannot lower itself runs at the loop's priority.
 */
#define HELPER_NICE 5

void helper_lower_priority(void)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno == 0)
        setpriority(PRIO_PROCESS, 0, nice + HELPER_NICE);
}

int helper_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

unsigned helper_join(pthread_t *t, unsigned n, int seconds)
{
    struct timespec until;
    unsigned left = 0;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    for (unsigned i = 0; i < n; i++)
        if (pthread_timedjoin_np(t[i], NULL, &until) != 0) {
            pthread_detach(t[i]);
            left++;
        }
    return left;
}
