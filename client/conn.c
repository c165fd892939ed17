/* ljmpctl's side of the control wire: connect, send frames (with a
 * descriptor for record), read frames. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "status.h"

static char socket_path[108];

void conn_set_socket_path(const char *path)
{
    snprintf(socket_path, sizeof(socket_path), "%s", path);
}

const char *conn_socket_path(void)
{
    const char *env = getenv("LJMP_CONTROL");

    if (socket_path[0] != '\0')
        return socket_path;
    if (env != NULL && *env != '\0')
        return env;
    if (ljmp_wire_default_path(socket_path, sizeof(socket_path),
                               LJMP_CONTROL_SOCKET) != 0)
        return "";
    return socket_path;
}

int conn_open(struct conn *c)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *path = conn_socket_path();

    memset(c, 0, sizeof(*c));
    c->fd = -1;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "ljmpctl: control socket path too long: %s\n", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    snprintf(c->path, sizeof(c->path), "%s", path);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int err = errno;
        if (err == ENOENT || err == ECONNREFUSED)
            fprintf(stderr,
                    "ljmpctl: ljmpd is not running at %s (%s); start it, or "
                    "name its control socket with -s PATH or LJMP_CONTROL\n",
                    path, strerror(err));
        else
            fprintf(stderr, "ljmpctl: cannot connect to ljmpd at %s: %s%s\n",
                    path, strerror(err),
                    err == EACCES ? " (are you in its group?)" : "");
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return -1;
    }
    c->next_id = 1;
    return 0;
}

void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

static int send_all(struct conn *c, const uint8_t *p, size_t n, int pass_fd)
{
    while (n > 0) {
        struct iovec iov = {(void *)p, n};
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (pass_fd >= 0) {
            msg.msg_control = ctl.buf;
            msg.msg_controllen = sizeof(ctl.buf);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
        }
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        pass_fd = -1; /* sent with the first byte */
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

uint64_t conn_send(struct conn *c, Ljmp__Request *req, int fd)
{
    size_t len;
    uint8_t *frame;

    req->has_version = req->has_id = 1;
    req->version = LJMP_WIRE_VERSION;
    req->id = c->next_id++;
    if ((frame = ljmp_wire_pack(&req->base, &len)) == NULL) {
        fprintf(stderr, "ljmpctl: the request is over the frame limit, or "
                        "out of memory\n");
        return 0;
    }
    int rc = send_all(c, frame, len, fd);
    free(frame);
    if (rc != 0) {
        fprintf(stderr, "ljmpctl: sending to ljmpd at %s: %s\n", c->path,
                strerror(errno));
        return 0;
    }
    return req->id;
}

__attribute__((format(printf, 2, 3))) static void
conn_fail(struct conn *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    if (!c->quiet)
        fprintf(stderr, "ljmpctl: %s\n", c->err);
}

int conn_has_frame(const struct conn *c)
{
    return c->len >= LJMP_WIRE_HEADER &&
           c->len - LJMP_WIRE_HEADER >= ljmp_wire_get_len(c->buf);
}

/* Reads until the buffer holds want bytes; -1 on EOF, error or timeout. */
static int fill(struct conn *c, size_t want, int timeout_ms)
{
    if (c->cap < want) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < want)
            cap *= 2;
        uint8_t *b = realloc(c->buf, cap);
        if (b == NULL) {
            conn_fail(c, "out of memory");
            return -1;
        }
        c->buf = b;
        c->cap = cap;
    }
    while (c->len < want) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            conn_fail(c, "no answer from ljmpd within %d ms", timeout_ms);
            return -1;
        }
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            conn_fail(c, "ljmpd at %s closed the connection%s%s", c->path,
                      n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
            return -1;
        }
        c->len += (size_t)n;
    }
    return 0;
}

Ljmp__Response *conn_recv(struct conn *c, int timeout_ms)
{
    if (fill(c, LJMP_WIRE_HEADER, timeout_ms) != 0)
        return NULL;
    uint32_t len = ljmp_wire_get_len(c->buf);
    if (len > LJMP_WIRE_MAX_FRAME) {
        conn_fail(c, "ljmpd sent a %u-byte frame (limit %u)", len,
                  LJMP_WIRE_MAX_FRAME);
        return NULL;
    }
    if (fill(c, LJMP_WIRE_HEADER + (size_t)len, timeout_ms) != 0)
        return NULL;
    Ljmp__Response *resp =
        ljmp__response__unpack(NULL, len, c->buf + LJMP_WIRE_HEADER);
    c->len -= LJMP_WIRE_HEADER + (size_t)len;
    memmove(c->buf, c->buf + LJMP_WIRE_HEADER + len, c->len);
    if (resp == NULL)
        conn_fail(c, "ljmpd sent a malformed response");
    return resp;
}

static Ljmp__Response *call_within(struct conn *c, Ljmp__Request *req, int fd,
                                   int timeout_ms)
{
    uint64_t id = conn_send(c, req, fd);

    while (id != 0) {
        Ljmp__Response *resp = conn_recv(c, timeout_ms);
        if (resp == NULL || resp->id == id || resp->id == 0 || resp->goodbye)
            return resp;
        ljmp__response__free_unpacked(resp, NULL);
    }
    return NULL;
}

Ljmp__Response *conn_call(struct conn *c, Ljmp__Request *req, int fd)
{
    return call_within(c, req, fd, 30000);
}

Ljmp__Response *conn_ask(struct conn *c, const char *cmd, Ljmp__Request *req,
                         int fd, int timeout_ms, uint32_t expect, int *rc)
{
    Ljmp__Response *resp;

    if (conn_open(c) != 0 ||
        (resp = call_within(c, req, fd, timeout_ms)) == NULL) {
        *rc = EXIT_NO_DAEMON;
        return NULL;
    }
    if ((*rc = conn_error(cmd, resp)) == 0 && expect != 0 &&
        (uint32_t)resp->body_case != expect) {
        fprintf(stderr, "ljmpctl %s: unexpected answer from ljmpd\n", cmd);
        *rc = EXIT_NO_DAEMON;
    }
    if (*rc != 0) {
        ljmp__response__free_unpacked(resp, NULL);
        return NULL;
    }
    return resp;
}

int conn_error(const char *cmd, const Ljmp__Response *resp)
{
    if (resp->goodbye) {
        fprintf(stderr, "ljmpctl %s: ljmpd is shutting down\n", cmd);
        return EXIT_NO_DAEMON;
    }
    if (resp->error == NULL || resp->error->code == LJMP__ERROR_CODE__ERR_NONE)
        return 0;
    fprintf(stderr, "ljmpctl %s: %s\n", cmd,
            resp->error->message ? resp->error->message
                                 : ljmp_wire_error_name(resp->error->code));
    return EXIT_REFUSED;
}
