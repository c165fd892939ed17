/* ljmpd's clocks: monotonic milliseconds for durations, wall time for people.
 */
#include <time.h>

#include "clock.h"

static uint64_t read_ms(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Durations (retention, rates, deadlines) run on the monotonic clock: a
 * wall clock stepped back must not evict every session at once. */
uint64_t clock_now_ms(void)
{
    return read_ms(CLOCK_MONOTONIC);
}

uint64_t clock_wall_ms(uint64_t mono)
{
    static int64_t offset;
    static int known;

    if (!known) {
        offset = (int64_t)read_ms(CLOCK_REALTIME) -
                 (int64_t)read_ms(CLOCK_MONOTONIC);
        known = 1;
    }
    return mono != 0 ? (uint64_t)((int64_t)mono + offset) : 0;
}
