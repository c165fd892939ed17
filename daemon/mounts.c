/* Reads mountinfo lines: a mount's id, device, type and FUSE owner. */
#include "mounts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A FUSE mount's owner, from its super options ("rw,user_id=1000,..."). */
static long fuse_owner(const char *opts)
{
    const char *u = strstr(opts, "user_id=");

    if (u == NULL || (u != opts && u[-1] != ','))
        return -1;
    return strtol(u + 8, NULL, 10);
}

/*
 * One line: "ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] -
 * TYPE SOURCE SUPER-OPTIONS".  1 with its id, device and *m, or 0.
 */
static int parse_line(const char *line, int *id, unsigned *major,
                      unsigned *minor, struct mount_desc *m)
{
    const char *dash = strstr(line, " - ");
    char type[64], source[4096], opts[4096];

    if (dash == NULL || sscanf(line, "%d %*d %u:%u", id, major, minor) != 3 ||
        sscanf(dash + 3, "%63s %4095s %4095s", type, source, opts) != 3)
        return 0;
    m->fuse = strcmp(type, "fuse") == 0 || strcmp(type, "fuseblk") == 0 ||
              strncmp(type, "fuse.", 5) == 0;
    m->owner = m->fuse ? fuse_owner(opts) : -1;
    return 1;
}

/* The first mount in the file at path whose id is want_id, or (by_dev)
 * whose device is want_major:want_minor. */
static int find_mount(const char *path, int want_id, int by_dev,
                      unsigned want_major, unsigned want_minor,
                      struct mount_desc *m)
{
    static __thread char line[8192];
    int found = 0;
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        int id;
        unsigned major, minor;
        if (!parse_line(line, &id, &major, &minor, m))
            continue;
        found =
            by_dev ? major == want_major && minor == want_minor : id == want_id;
    }
    fclose(f);
    return found;
}

int mounts_by_id(const char *path, int mnt, struct mount_desc *m)
{
    return find_mount(path, mnt, 0, 0, 0, m);
}

int mounts_by_dev(const char *path, unsigned major, unsigned minor,
                  struct mount_desc *m)
{
    return find_mount(path, 0, 1, major, minor, m);
}
