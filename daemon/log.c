/* ljmpd's log: one line per message on stderr, with a time and a level. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
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

/* The limits whose windows hold lines back, for log_limits_flush. */
static struct log_limit *holding;

/* Ends l's window: its count, if any, is logged, and l is unlisted. */
static void limit_window_over(struct log_limit *l, uint64_t now)
{
    if (l->held_back > 0)
        log_msg(LOG_WARN, "%u more %s in %llu s were not logged", l->held_back,
                l->cause,
                (unsigned long long)(clock_elapsed_ms(now, l->since_ms) + 999) /
                    1000);
    l->lines = l->held_back = 0;
    l->since_ms = now;
}

void log_limited(struct log_limit *l, enum log_level level, const char *fmt,
                 ...)
{
    uint64_t now = clock_now_ms();
    va_list ap;

    if (level > max_level)
        return;
    if (now - l->since_ms >= LOG_WINDOW_MS && l->held_back == 0) {
        l->lines = 0;
        l->since_ms = now;
    }
    if (l->lines >= LOG_BURST) {
        if (l->held_back++ == 0) {
            l->next = holding;
            holding = l;
        }
        return;
    }
    l->lines++;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

void log_limits_flush(uint64_t now)
{
    struct log_limit **at = &holding;

    while (*at != NULL) {
        struct log_limit *l = *at;
        if (clock_elapsed_ms(now, l->since_ms) < LOG_WINDOW_MS) {
            at = &l->next;
            continue;
        }
        *at = l->next;
        limit_window_over(l, now);
    }
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
