/* ljmpd's clocks: monotonic milliseconds for durations, wall time for people.
 */
#ifndef LJMPD_CLOCK_H
#define LJMPD_CLOCK_H

#include <stdint.h>

/* Milliseconds on the monotonic clock: durations, deadlines, retention. */
uint64_t clock_now_ms(void);

/* Unix time in milliseconds of a monotonic instant (0 stays 0); the
 * offset between the two clocks is fixed by the first call. */
uint64_t clock_wall_ms(uint64_t mono);

/* Milliseconds from then to now, 0 if then is later: a loop's turn takes
 * `now` once, and what it ends or touches meanwhile is stamped later. */
static inline uint64_t clock_elapsed_ms(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

#endif
