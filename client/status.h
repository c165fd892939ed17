/* ljmpctl's exit statuses, documented in `ljmpctl --help`. */
#ifndef LJMPCTL_STATUS_H
#define LJMPCTL_STATUS_H

enum {
    EXIT_OK = 0,
    EXIT_USAGE = 1,     /* bad arguments, unreadable input, I/O error */
    EXIT_TRUNCATED = 2, /* the stream ended early: report of what was read */
    EXIT_MALFORMED = 3, /* the stream is malformed: nothing reported */
    EXIT_NO_DAEMON = 4, /* ljmpd is not running, or went away */
    EXIT_REFUSED = 5,   /* ljmpd refused: no such session, permission */
};

#endif
