/* cgroupids: the unified-hierarchy path of a cgroup known only by its id
 * (the kernfs id the bpf backend records); see cgroupids.c. */
#ifndef WATTPROFD_CGROUPIDS_H
#define WATTPROFD_CGROUPIDS_H

#include <stdint.h>

typedef struct cgroupids cgroupids;

/* A cache over the first cgroup2 mount that `mountinfo` (normally
 * /proc/self/mountinfo) lists; -ENOENT when it lists none. Nothing is
 * walked until the first lookup. */
int cgroupids_new(const char *mountinfo, cgroupids **out);
void cgroupids_free(cgroupids *c);
/* The path of cgroup `id` as /proc/PID/cgroup shows it ("/a/b"), or NULL
 * when it is not (or no longer) there. A miss walks the hierarchy again
 * unless it was walked less than a second before now_ns (CLOCK_MONOTONIC).
 * The string lives until the next call. */
const char *cgroupids_path(cgroupids *c, uint64_t id, uint64_t now_ns);
/* The first cgroup2 mount in `mountinfo`: mount point and root ("" for
 * "/"), malloc'd; -ENOENT when there is none. */
int cgroupids_find_mount(const char *mountinfo, char **mount, char **root);

#endif
