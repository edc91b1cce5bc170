/* cgroupids: the unified-hierarchy path of a cgroup known only by its id.
 *
 * The bpf counter backend records each process's cgroup id (the kernfs id
 * of its cgroup v2 directory, which on a 64-bit kernel is the directory's
 * inode number). A process that exited before the daemon read its
 * /proc/PID/cgroup has only that id; this cache turns it back into the path
 * /proc would have shown ("/system.slice/x.service"), so that [track]
 * cgroup and the unit and job labels work for it too. The cache is filled
 * by walking the cgroup2 mount (found in /proc/self/mountinfo) and walked
 * again when an id is not in it, at most once per CGROUPIDS_RESCAN_NS: the
 * processes of one cgroup share one entry, so a walk is the cost of a new
 * cgroup, not of a process start. Used by the sampling thread only. */
#include "cgroupids.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUPIDS_RESCAN_NS 1000000000ull /* between walks on a miss */
#define CGROUPIDS_MAX_DEPTH 32            /* directories below the mount walked */

struct entry {
    uint64_t id;
    char *path;
};

struct cgroupids {
    char *mount; /* the cgroup2 mount point */
    char *root;  /* its root in the hierarchy ("" for "/") */
    struct entry *v;
    size_t n, cap;
    uint64_t walked_ns; /* CLOCK_MONOTONIC of the latest walk; 0: none yet */
};

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *out = s;

    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* The first cgroup2 mount in `mountinfo` (a file in its format): its mount
 * point and root, malloc'd. -ENOENT when there is none. */
int cgroupids_find_mount(const char *mountinfo, char **mount, char **root)
{
    FILE *f = fopen(mountinfo, "re");
    char *line = NULL;
    size_t len = 0;
    int r = -ENOENT;

    if (!f)
        return -errno;
    while (r == -ENOENT && getline(&line, &len, f) > 0) {
        char rt[4096], mp[4096], fstype[64];
        /* id parent major:minor root mount-point options [optional...] - type ... */
        const char *sep = strstr(line, " - ");
        if (!sep || sscanf(sep, " - %63s", fstype) != 1 || strcmp(fstype, "cgroup2") != 0)
            continue;
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", rt, mp) != 2)
            continue;
        unescape(rt);
        unescape(mp);
        *mount = strdup(mp);
        *root = strdup(strcmp(rt, "/") == 0 ? "" : rt);
        r = *mount && *root ? 0 : -ENOMEM;
        if (r < 0) {
            free(*mount);
            free(*root);
            *mount = *root = NULL;
        }
    }
    free(line);
    fclose(f);
    return r;
}

static int add(cgroupids *c, uint64_t id, const char *path)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 64;
        struct entry *v = realloc(c->v, ncap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        c->v = v;
        c->cap = ncap;
    }
    if (!(c->v[c->n].path = strdup(path)))
        return -ENOMEM;
    c->v[c->n++].id = id;
    return 0;
}

/* The directories below `fd` (the cgroup at `path`, "" for the root),
 * each by the inode readdir gives, which kernfs makes the cgroup id. */
static int walk(cgroupids *c, int fd, char *path, size_t len, size_t cap, int depth)
{
    DIR *d = fdopendir(fd);
    struct dirent *e;
    int r = 0;

    if (!d) {
        close(fd);
        return -errno;
    }
    while (r >= 0 && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (len + 1 + n >= cap)
            continue; /* deeper than any real path: left out */
        path[len] = '/';
        memcpy(path + len + 1, e->d_name, n + 1);
        r = add(c, (uint64_t)e->d_ino, path);
        if (r >= 0 && depth < CGROUPIDS_MAX_DEPTH) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            /* A cgroup removed meanwhile is simply not there. */
            if (sub >= 0)
                r = walk(c, sub, path, len + 1 + n, cap, depth + 1);
        }
        path[len] = '\0';
    }
    closedir(d);
    return r == -ENOENT ? 0 : r;
}

static int cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const struct entry *)a)->id, y = ((const struct entry *)b)->id;
    return (x > y) - (x < y);
}

static void clear(cgroupids *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].path);
    c->n = 0;
}

/* Every cgroup of the hierarchy, afresh. */
static int rewalk(cgroupids *c)
{
    char path[4096];
    struct stat st;
    int fd, r;

    clear(c);
    if ((fd = open(c->mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    snprintf(path, sizeof(path), "%s", c->root);
    if ((r = add(c, (uint64_t)st.st_ino, c->root[0] ? c->root : "/")) < 0) {
        close(fd);
        return r;
    }
    r = walk(c, fd, path, strlen(path), sizeof(path), 0);
    qsort(c->v, c->n, sizeof(*c->v), cmp_entry);
    return r;
}

int cgroupids_new(const char *mountinfo, cgroupids **out)
{
    cgroupids *c = calloc(1, sizeof(*c));
    int r;

    if (!c)
        return -ENOMEM;
    if ((r = cgroupids_find_mount(mountinfo, &c->mount, &c->root)) < 0) {
        free(c);
        return r;
    }
    *out = c;
    return 0;
}

void cgroupids_free(cgroupids *c)
{
    if (!c)
        return;
    clear(c);
    free(c->v);
    free(c->mount);
    free(c->root);
    free(c);
}

static const char *lookup(const cgroupids *c, uint64_t id)
{
    struct entry key = {.id = id};
    const struct entry *e = c->n ? bsearch(&key, c->v, c->n, sizeof(*c->v), cmp_entry) : NULL;

    return e ? e->path : NULL;
}

const char *cgroupids_path(cgroupids *c, uint64_t id, uint64_t now_ns)
{
    const char *p;

    if (!c || id == 0)
        return NULL;
    if ((p = lookup(c, id)))
        return p;
    if (c->walked_ns && now_ns - c->walked_ns < CGROUPIDS_RESCAN_NS)
        return NULL;
    c->walked_ns = now_ns ? now_ns : 1;
    rewalk(c); /* a partial walk still answers for what it found */
    return lookup(c, id);
}
