/* A one-file FUSE file system served by the test's own thread, speaking
 * the kernel's protocol (linux/fuse.h) directly, which can stall. */
#define _GNU_SOURCE
#include "fake_fuse.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    ROOT_INODE = 1,
    FILE_INODE = 2,
    MAX_WRITE = 128 * 1024,
    /* Room for the largest request: a write of MAX_WRITE and headers. */
    REQUEST_ROOM = MAX_WRITE + 4096,
    FOREVER = 86400, /* seconds the kernel may cache names and attributes */
};

struct fake_fuse {
    char dir[256], name[64];
    unsigned char *data;
    size_t len;
    int dev;     /* /dev/fuse, this connection */
    int stop[2]; /* a pipe: the thread ends when it is readable */
    pthread_t thread;
    _Atomic pid_t stall_pid;
    _Atomic unsigned held;
    _Atomic size_t written; /* bytes writes brought (not kept) */
    _Atomic pid_t slow_pid;
    _Atomic unsigned slow_us; /* how long its writes take */
    _Atomic size_t full_at;   /* writes past it fail (ENOSPC); 0: none */
    unsigned char *req;
};

static void reply(struct fake_fuse *f, uint64_t unique, int error,
                  const void *out, size_t out_len)
{
    struct fuse_out_header h = {
        .len = (uint32_t)(sizeof(h) + (error ? 0 : out_len)),
        .error = -error,
        .unique = unique,
    };
    struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)out, out_len}};

    /* An interrupted request's reply fails with ENOENT: nothing to do. */
    (void)!writev(f->dev, iov, error || out_len == 0 ? 1 : 2);
}

static void attr_of(const struct fake_fuse *f, uint64_t inode,
                    struct fuse_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->ino = inode;
    a->blksize = 4096;
    if (inode == ROOT_INODE) {
        a->mode = S_IFDIR | 0755;
        a->nlink = 2;
    } else {
        a->mode = S_IFREG | 0755;
        a->nlink = 1;
        a->size = f->len;
        a->blocks = (f->len + 511) / 512;
    }
}

static void on_init(struct fake_fuse *f, const struct fuse_in_header *h,
                    const struct fuse_init_in *in)
{
    struct fuse_init_out out = {
        .major = FUSE_KERNEL_VERSION,
        .minor = in->minor < FUSE_KERNEL_MINOR_VERSION
                     ? in->minor
                     : FUSE_KERNEL_MINOR_VERSION,
        .max_readahead = in->max_readahead,
        .max_write = MAX_WRITE,
        .time_gran = 1,
        /* Writes of more than a page each, up to MAX_WRITE. */
        .flags = in->flags & (FUSE_BIG_WRITES | FUSE_MAX_PAGES),
        .max_pages = MAX_WRITE / 4096,
    };

    reply(f, h->unique, 0, &out, sizeof(out));
}

static void on_lookup(struct fake_fuse *f, const struct fuse_in_header *h,
                      const char *name)
{
    struct fuse_entry_out out = {
        .nodeid = FILE_INODE, .entry_valid = FOREVER, .attr_valid = FOREVER};

    if (h->nodeid != ROOT_INODE || strcmp(name, f->name) != 0) {
        reply(f, h->unique, ENOENT, NULL, 0);
        return;
    }
    attr_of(f, FILE_INODE, &out.attr);
    reply(f, h->unique, 0, &out, sizeof(out));
}

static void on_getattr(struct fake_fuse *f, const struct fuse_in_header *h)
{
    struct fuse_attr_out out = {.attr_valid = FOREVER};

    attr_of(f, h->nodeid, &out.attr);
    reply(f, h->unique, 0, &out, sizeof(out));
}

static void on_read(struct fake_fuse *f, const struct fuse_in_header *h,
                    const struct fuse_read_in *in)
{
    size_t off = in->offset < f->len ? (size_t)in->offset : f->len;
    size_t n = f->len - off < in->size ? f->len - off : in->size;

    reply(f, h->unique, 0, f->data + off, n);
}

/* Whether thread tid is one of process pid's (FUSE names the thread). */
static int thread_of(pid_t tid, pid_t pid)
{
    char path[64];
    struct stat st;

    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
    return stat(path, &st) == 0;
}

/* Whether a request is one the stalled process waits for forever. */
static int held(struct fake_fuse *f, const struct fuse_in_header *h)
{
    pid_t pid = atomic_load(&f->stall_pid);

    if (pid == 0 || !thread_of((pid_t)h->pid, pid))
        return 0;
    atomic_fetch_add(&f->held, 1);
    return 1;
}

/* Takes a write's bytes without keeping them: only their count. */
static void on_write(struct fake_fuse *f, const struct fuse_in_header *h,
                     const struct fuse_write_in *in)
{
    struct fuse_write_out out = {.size = in->size};
    pid_t slow = atomic_load(&f->slow_pid);

    size_t full_at = atomic_load(&f->full_at);

    if (slow != 0 && thread_of((pid_t)h->pid, slow))
        usleep(atomic_load(&f->slow_us));
    if (full_at != 0 && atomic_load(&f->written) + in->size > full_at) {
        reply(f, h->unique, ENOSPC, NULL, 0);
        return;
    }
    atomic_fetch_add(&f->written, in->size);
    reply(f, h->unique, 0, &out, sizeof(out));
}

static void serve(struct fake_fuse *f, const struct fuse_in_header *h)
{
    const void *in = h + 1;
    struct fuse_open_out open_out = {.fh = 1};

    switch (h->opcode) {
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT:
        return; /* no reply */
    case FUSE_INIT:
        on_init(f, h, in);
        return;
    case FUSE_DESTROY:
        reply(f, h->unique, 0, NULL, 0);
        return;
    }
    if (held(f, h))
        return;
    switch (h->opcode) {
    case FUSE_LOOKUP:
        on_lookup(f, h, in);
        break;
    case FUSE_GETATTR:
        on_getattr(f, h);
        break;
    case FUSE_OPEN:
    case FUSE_OPENDIR:
        reply(f, h->unique, 0, &open_out, sizeof(open_out));
        break;
    case FUSE_READ:
        on_read(f, h, in);
        break;
    case FUSE_WRITE:
        on_write(f, h, in);
        break;
    case FUSE_FLUSH:
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FSYNC:
        reply(f, h->unique, 0, NULL, 0);
        break;
    default:
        reply(f, h->unique, ENOSYS, NULL, 0);
        break;
    }
}

static void *serve_requests(void *arg)
{
    struct fake_fuse *f = arg;
    struct pollfd pfd[2] = {{.fd = f->dev, .events = POLLIN},
                            {.fd = f->stop[0], .events = POLLIN}};

    for (;;) {
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfd[1].revents != 0)
            break;
        if ((pfd[0].revents & POLLIN) == 0)
            continue;
        ssize_t n = read(f->dev, f->req, REQUEST_ROOM);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
            continue;
        if (n < (ssize_t)sizeof(struct fuse_in_header))
            break; /* unmounted */
        serve(f, (const struct fuse_in_header *)(void *)f->req);
    }
    return NULL;
}

/* The user's group (a mount open to its owner alone admits the processes
 * of that user and group). */
static gid_t group_of(uid_t uid)
{
    struct passwd *pw = getpwuid(uid);

    return pw != NULL ? pw->pw_gid : (gid_t)uid;
}

struct fake_fuse *fake_fuse_start(const char *dir, const char *name,
                                  const void *data, size_t len, uid_t owner,
                                  int to_all, char *why, size_t why_len)
{
    struct fake_fuse *f = calloc(1, sizeof(*f));
    char opts[128];

    if (f == NULL || (f->data = malloc(len ? len : 1)) == NULL ||
        (f->req = malloc(REQUEST_ROOM)) == NULL) {
        snprintf(why, why_len, "out of memory");
        goto fail;
    }
    memcpy(f->data, data, len);
    f->len = len;
    snprintf(f->dir, sizeof(f->dir), "%s", dir);
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->stop[0] = f->stop[1] = -1;
    if ((f->dev = open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0) {
        snprintf(why, why_len, "/dev/fuse: %s", strerror(errno));
        goto fail;
    }
    snprintf(opts, sizeof(opts),
             "fd=%d,rootmode=40000,user_id=%u,group_id=%u,max_read=%u%s",
             f->dev, (unsigned)owner, (unsigned)group_of(owner), MAX_WRITE,
             to_all ? ",allow_other" : "");
    if (mount("ljmp-test", dir, "fuse.ljmp-test", MS_NOSUID | MS_NODEV, opts) !=
        0) {
        snprintf(why, why_len, "mounting FUSE at %s: %s", dir, strerror(errno));
        goto fail_dev;
    }
    if (pipe2(f->stop, O_CLOEXEC) != 0 ||
        pthread_create(&f->thread, NULL, serve_requests, f) != 0) {
        snprintf(why, why_len, "no thread to serve FUSE");
        umount2(dir, MNT_DETACH);
        goto fail_dev;
    }
    return f;
fail_dev:
    close(f->dev);
fail:
    if (f != NULL) {
        if (f->stop[0] >= 0) {
            close(f->stop[0]);
            close(f->stop[1]);
        }
        free(f->data);
        free(f->req);
        free(f);
    }
    return NULL;
}

void fake_fuse_stall(struct fake_fuse *f, pid_t pid)
{
    atomic_store(&f->stall_pid, pid);
}

void fake_fuse_slow(struct fake_fuse *f, pid_t pid, unsigned us)
{
    atomic_store(&f->slow_us, us);
    atomic_store(&f->slow_pid, pid);
}

void fake_fuse_full(struct fake_fuse *f, size_t bytes)
{
    atomic_store(&f->full_at, bytes ? bytes : 1);
}

unsigned fake_fuse_held(struct fake_fuse *f)
{
    return atomic_load(&f->held);
}

size_t fake_fuse_written(struct fake_fuse *f)
{
    return atomic_load(&f->written);
}

void fake_fuse_stop(struct fake_fuse *f)
{
    if (f == NULL)
        return;
    (void)!write(f->stop[1], "", 1);
    pthread_join(f->thread, NULL);
    /* A forced unmount aborts the connection (children may share its
     * descriptor, so its close might not): what waits on it fails. */
    if (umount2(f->dir, MNT_FORCE) != 0)
        umount2(f->dir, MNT_DETACH);
    close(f->dev);
    close(f->stop[0]);
    close(f->stop[1]);
    free(f->data);
    free(f->req);
    free(f);
}
