/* labels: the systemd unit and the batch job of a process, the labels a
 * cluster sums energy by (the Prometheus exporter's series).
 *
 * Both come from what the kernel says about the process: its cgroup path
 * (systemd puts every service and scope in a cgroup named after it, Slurm's
 * cgroup plugin puts every job in ".../job_<id>/...") or, for batch systems
 * that only set the environment (PBS), an environment variable. */
#include "sample.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unit types systemd places processes in (slices hold no processes). */
static bool labels_is_unit(const char *name, size_t len)
{
    static const char *const suffixes[] = {".service", ".scope", ".socket", ".mount", ".swap"};

    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t n = strlen(suffixes[i]);
        if (len > n && memcmp(name + len - n, suffixes[i], n) == 0)
            return true;
    }
    return false;
}

static void labels_copy(char *out, size_t cap, const char *s, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

void labels_unit(const char *cgroup, char out[LABELS_UNIT_MAX])
{
    const char *p = cgroup ? cgroup : "";

    out[0] = '\0';
    while (*p) {
        p += strspn(p, "/");
        size_t len = strcspn(p, "/");
        /* The first unit is the one systemd manages: below it, a service
         * may make cgroups of its own that are not units at all. */
        if (labels_is_unit(p, len)) {
            labels_copy(out, LABELS_UNIT_MAX, p, len);
            return;
        }
        p += len;
    }
}

void labels_job_cgroup(const char *cgroup, char out[LABELS_JOB_MAX])
{
    const char *p = cgroup ? cgroup : "";

    out[0] = '\0';
    while (*p) {
        p += strspn(p, "/");
        size_t len = strcspn(p, "/");
        if (len > 4 && strncmp(p, "job_", 4) == 0 && strspn(p + 4, "0123456789") == len - 4) {
            labels_copy(out, LABELS_JOB_MAX, p + 4, len - 4);
            return;
        }
        p += len;
    }
}

void labels_job_env_block(const char *env, size_t len, char *const *names, size_t n_names,
                          char out[LABELS_JOB_MAX])
{
    out[0] = '\0';
    /* The configured order decides, not the order in the block. */
    for (size_t k = 0; k < n_names; k++) {
        size_t nl = strlen(names[k]);
        for (size_t off = 0; off < len;) {
            const char *var = env + off;
            size_t vl = strnlen(var, len - off);
            if (vl > nl && var[nl] == '=' && memcmp(var, names[k], nl) == 0 && vl > nl + 1) {
                labels_copy(out, LABELS_JOB_MAX, var + nl + 1, vl - nl - 1);
                return;
            }
            off += vl + 1;
        }
    }
}

int labels_job_environ(pid_t pid, char *const *names, size_t n_names, char out[LABELS_JOB_MAX])
{
    char path[64], *env;
    size_t len;
    int r;

    out[0] = '\0';
    if (n_names == 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if ((r = util_read_file(path, &env, &len)) < 0)
        return r == -ENOENT ? -ESRCH : r;
    labels_job_env_block(env, len, names, n_names, out);
    free(env);
    return 0;
}
