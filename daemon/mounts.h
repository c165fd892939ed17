/* Mounts as /proc/PID/mountinfo lists them: asked of /proc, never of the
 * file system itself, which may be a FUSE daemon that never answers. */
#ifndef LJMPD_MOUNTS_H
#define LJMPD_MOUNTS_H

struct mount_desc {
    int fuse;   /* a FUSE mount: its daemon answers requests, or not */
    long owner; /* a FUSE mount's user_id= (who runs its daemon), or -1 */
};

/* The mount whose id is mnt in the mountinfo file at path: 1 and *m, or
 * 0 when it is not listed (or the file cannot be read). */
int mounts_by_id(const char *path, int mnt, struct mount_desc *m);

/* The mount of device major:minor (the first listed: bind mounts share
 * their file system's): the same. */
int mounts_by_dev(const char *path, unsigned major, unsigned minor,
                  struct mount_desc *m);

#endif
