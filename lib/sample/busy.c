/* busy: the CPU time a power meter sees, for the daemon's untracked load and
 * for `wattprof calibrate`.
 *
 * RAPL measures the whole package, so the meter's CPU is the host's busy
 * time from /proc/stat (jiffies: 1/USER_HZ resolution). A meter that sees
 * only one cgroup (the fake RAPL rig of the tests) is matched by that
 * cgroup's CPU time: cgroup v2 cpu.stat usage_usec, or v1 cpuacct.usage. */
#include "sample/sample.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Busy seconds of the whole host: user nice system [idle iowait] irq
 * softirq steal. */
static int proc_stat_busy(double *busy_s)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");

    if (!f)
        return -errno;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8)
        return -EBADMSG;
    *busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

static int cgroup_busy(const char *dir, double *busy_s)
{
    char path[4096], key[64];
    unsigned long long v;
    FILE *f;

    snprintf(path, sizeof(path), "%s/cpu.stat", dir);
    if ((f = fopen(path, "r"))) {
        int found = 0;
        while (!found && fscanf(f, "%63s %llu", key, &v) == 2)
            found = strcmp(key, "usage_usec") == 0;
        fclose(f);
        if (found) {
            *busy_s = (double)v / 1e6;
            return 0;
        }
    }
    snprintf(path, sizeof(path), "%s/cpuacct.usage", dir);
    if (!(f = fopen(path, "r")))
        return -errno;
    int n = fscanf(f, "%llu", &v);
    fclose(f);
    if (n != 1)
        return -EBADMSG;
    *busy_s = (double)v / 1e9;
    return 0;
}

int sample_busy_cpu_s(const char *cgroup, double *busy_s)
{
    return cgroup ? cgroup_busy(cgroup, busy_s) : proc_stat_busy(busy_s);
}
