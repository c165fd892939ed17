/* ljmpd's log: leveled lines on stderr, libevent's own messages included. */
#ifndef LJMPD_LOG_H
#define LJMPD_LOG_H

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

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
