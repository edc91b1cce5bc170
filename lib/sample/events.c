/* events: perf event names into perf_event_attr, grouped for the PMU.
 *
 * libpfm4 understands generic names ("cycles", "cache-misses"), perf
 * software events ("perf::TASK-CLOCK", "cs") and the CPU's native names. We
 * ask for user and kernel privilege levels so kernel-mode work stays in the
 * features.  Hardware events are packed into groups no larger than the core
 * PMU's generic counters, so the kernel can schedule each group whole and
 * multiplexing happens between groups, where it is measured and scaled. */
#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <perfmon/pfmlib_perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Used when libpfm4 knows no core PMU (e.g. an unknown CPU): small enough
 * for every x86 and ARM core PMU. */
#define EVENTS_DEFAULT_COUNTERS 4
#define EVENTS_MAX_SOFTWARE_GROUP 16

static int events_pfm_init(void)
{
    /* pfm_initialize is idempotent and cheap after the first call. */
    int r = pfm_initialize();
    return r == PFM_SUCCESS ? 0 : -EIO;
}

static unsigned events_core_counters(void)
{
    for (int p = 0; p < PFM_PMU_MAX; p++) {
        pfm_pmu_info_t info;
        memset(&info, 0, sizeof(info));
        info.size = sizeof(info);
        if (pfm_get_pmu_info(p, &info) != PFM_SUCCESS || !info.is_present)
            continue;
        if (info.type == PFM_PMU_TYPE_CORE && info.num_cntrs > 0)
            return (unsigned)info.num_cntrs;
    }
    return EVENTS_DEFAULT_COUNTERS;
}

static int events_encode_one(sample_event *ev, const char *name, char *err, size_t errlen)
{
    pfm_perf_encode_arg_t arg;
    char *fstr = NULL;
    int r;

    memset(&arg, 0, sizeof(arg));
    arg.size = sizeof(arg);
    arg.attr = &ev->attr;
    arg.fstr = &fstr;
    r = pfm_get_os_event_encoding(name, PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
    if (r != PFM_SUCCESS) {
        free(fstr);
        return util_err(err, errlen, r == PFM_ERR_NOTFOUND ? -ENOENT : -EINVAL, "event '%s': %s",
                        name, pfm_strerror(r));
    }
    ev->attr.size = sizeof(ev->attr);
    ev->name = strdup(name);
    ev->canonical = fstr;
    ev->software = ev->attr.type == PERF_TYPE_SOFTWARE;
    return ev->name ? 0 : -ENOMEM;
}

/* Hardware groups first, filled in order; software events after them. */
static void events_assign_groups(sample_eventset *es)
{
    unsigned group = 0, in_group = 0, n_hw = 0;

    for (size_t i = 0; i < es->n; i++) {
        if (es->ev[i].software)
            continue;
        if (in_group == es->hw_counters) {
            group++;
            in_group = 0;
        }
        es->ev[i].group = group;
        in_group++;
        n_hw++;
    }
    if (n_hw > 0) {
        group++;
        in_group = 0;
    }
    for (size_t i = 0; i < es->n; i++) {
        if (!es->ev[i].software)
            continue;
        if (in_group == EVENTS_MAX_SOFTWARE_GROUP) {
            group++;
            in_group = 0;
        }
        es->ev[i].group = group;
        in_group++;
    }
    es->n_groups = in_group > 0 ? group + 1 : group;
}

int events_encode(const char *const *names, size_t n, sample_eventset **out, char *err,
                  size_t errlen)
{
    sample_eventset *es;
    int r;

    if (n == 0)
        return util_err(err, errlen, -EINVAL, "no events given");
    r = events_pfm_init();
    if (r < 0)
        return util_err(err, errlen, r, "libpfm4 failed to initialise");
    es = calloc(1, sizeof(*es));
    if (!es || !(es->ev = calloc(n, sizeof(*es->ev)))) {
        free(es);
        return -ENOMEM;
    }
    es->n = n;
    es->hw_counters = events_core_counters();
    for (size_t i = 0; i < n; i++) {
        r = events_encode_one(&es->ev[i], names[i], err, errlen);
        if (r < 0) {
            events_free(es);
            return r;
        }
    }
    events_assign_groups(es);
    *out = es;
    return 0;
}

void events_free(sample_eventset *es)
{
    if (!es)
        return;
    for (size_t i = 0; i < es->n; i++) {
        free(es->ev[i].name);
        free(es->ev[i].canonical);
    }
    free(es->ev);
    free(es);
}

int events_find(const sample_eventset *es, const char *name)
{
    for (size_t i = 0; i < es->n; i++)
        if (strcmp(es->ev[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int events_try_open(const sample_event *ev)
{
    struct perf_event_attr attr = ev->attr;
    attr.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

/* Unprivileged callers under perf_event_paranoid >= 2 may count only user
 * mode: better a user-mode count that says so than no count at all. */
static void events_user_only(sample_eventset *es)
{
    for (size_t i = 0; i < es->n; i++) {
        es->ev[i].attr.exclude_kernel = 1;
        es->ev[i].attr.exclude_hv = 1;
    }
    es->user_only = true;
}

int events_probe(sample_eventset *es, char *err, size_t errlen)
{
    size_t used = 0;
    int first = 0;

    if (err && errlen)
        err[0] = '\0';
    if (es->n > 0 && events_try_open(&es->ev[0]) == -EACCES && !es->ev[0].attr.exclude_kernel)
        events_user_only(es);
    for (size_t i = 0; i < es->n; i++) {
        int r = events_try_open(&es->ev[i]);
        if (r == 0)
            continue;
        if (!first)
            first = r;
        if (err && used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%sevent '%s': %s",
                                     used ? "; " : "", es->ev[i].name, strerror(-r));
    }
    return first;
}
