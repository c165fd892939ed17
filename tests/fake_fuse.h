/* A FUSE mount with one file, served by a thread of the test, that can
 * stop answering one process: a file system that never answers. */
#ifndef FAKE_FUSE_H
#define FAKE_FUSE_H

#include <stddef.h>
#include <sys/types.h>

struct fake_fuse;

/*
 * Mounts at dir (an empty directory) a file system holding one regular
 * file, name, with the len bytes at data (copied), as user owner's mount
 * (user_id=, group_id= its group), open to all users (allow_other) or
 * to its owner alone.
 * NULL when this process cannot mount FUSE (not root, no /dev/fuse, no
 * FUSE in the kernel), with the reason in why.
 */
struct fake_fuse *fake_fuse_start(const char *dir, const char *name,
                                  const void *data, size_t len, uid_t owner,
                                  int to_all, char *why, size_t why_len);

/* From now on, requests from process pid are held, never answered
 * (those of others still are). */
void fake_fuse_stall(struct fake_fuse *f, pid_t pid);

/* From now on, each write of process pid is answered after us
 * microseconds: a slow disk. */
void fake_fuse_slow(struct fake_fuse *f, pid_t pid, unsigned us);

/* From now on, a write that would bring the bytes written past bytes
 * fails with ENOSPC: a full disk. */
void fake_fuse_full(struct fake_fuse *f, size_t bytes);

/* Requests held so far. */
unsigned fake_fuse_held(struct fake_fuse *f);

/* Bytes written to the file so far (taken, and not kept: reads still
 * see the data it started with). */
size_t fake_fuse_written(struct fake_fuse *f);

/* Ends the connection, so that held requests fail (ENOTCONN), unmounts
 * and frees. */
void fake_fuse_stop(struct fake_fuse *f);

#endif
