/* ljmpd's log: one line per message on stderr, with a time and a level. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include <event2/event.h>

#include "log.h"

static enum log_level max_level = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/*
 * Copies in to out (4 times its size) with control characters escaped
 * (\n, \t, \xHH): messages quote what peers chose, a process's command
 * line or a VM's version, and a newline there must not forge a line of
 * the log, nor an escape sequence drive the terminal that shows it.
 */
static void escape_controls(char *out, const char *in)
{
    static const char hex[] = "0123456789abcdef";

    for (; *in != '\0'; in++) {
        unsigned char c = (unsigned char)*in;
        if (c >= 0x20 && c != 0x7f) {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        if (c == '\n' || c == '\t') {
            *out++ = c == '\n' ? 'n' : 't';
        } else {
            *out++ = 'x';
            *out++ = hex[c >> 4];
            *out++ = hex[c & 15];
        }
    }
    *out = '\0';
}

__attribute__((format(printf, 2, 0))) static void
log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
    struct timespec ts;
    struct tm tm;
    char when[32];

    if (level > max_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line: lines of one process never interleave. */
    char line[1024], shown[4 * sizeof(line)];
    vsnprintf(line, sizeof(line), fmt, ap);
    escape_controls(shown, line);
    fprintf(stderr, "%s.%03ldZ ljmpd %s: %s\n", when, ts.tv_nsec / 1000000,
            level_names[level], shown);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

static void libevent_log(int severity, const char *msg)
{
    enum log_level level = severity >= EVENT_LOG_ERR    ? LOG_ERROR
                           : severity >= EVENT_LOG_WARN ? LOG_WARN
                           : severity >= EVENT_LOG_MSG  ? LOG_INFO
                                                        : LOG_DEBUG;

    log_msg(level, "libevent: %s", msg);
}

void log_init(enum log_level level)
{
    max_level = level;
    setvbuf(stderr, NULL, _IOLBF, 0);
    event_set_log_callback(libevent_log);
}
