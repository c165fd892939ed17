/* ljmpd's log: leveled lines on stderr, libevent's own messages included. */
#ifndef LJMPD_LOG_H
#define LJMPD_LOG_H

#include <stdint.h>

enum log_level {
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
};

/* Lines above level are dropped; routes libevent's log here. */
void log_init(enum log_level level);

__attribute__((format(printf, 2, 3))) void log_msg(enum log_level level,
                                                   const char *fmt, ...);

/*
 * A cause of log lines that any peer can repeat at will (a refused
 * connection, a rejected hello): at most LOG_BURST of its lines in a
 * window of LOG_WINDOW_MS, and the lines past them counted, the count
 * logged once the window is over.  The loop's only.
 */
#define LOG_BURST     20
#define LOG_WINDOW_MS 5000
struct log_limit {
    const char *cause; /* what the count's line calls the lines */
    uint64_t since_ms; /* when its window began */
    unsigned lines, held_back;
    struct log_limit *next; /* in the list of limits holding lines back */
};
#define LOG_LIMIT(cause)                                                       \
    {                                                                          \
        cause, 0, 0, 0, NULL                                                   \
    }

__attribute__((format(printf, 3, 4))) void
log_limited(struct log_limit *l, enum log_level level, const char *fmt, ...);
/* Logs the counts of the windows over at now (ljmpd's tick). */
void log_limits_flush(uint64_t now);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
