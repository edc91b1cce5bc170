/* backend-perf: the sampler's counter backend on perf_event groups
 * (lib/sample/counters.c): one set of groups per thread of a process, with
 * inherit for the threads it starts, and a context-switch buffer per thread
 * whose quiet word lets a tick skip the processes that slept
 * (COUNTERS_SKIP_IDLE). Processes only: the contract is in backend.h. */
#include "backend.h"
#include "util/util.h"

#include <errno.h>

static int perf_open(const sample_eventset *es, pid_t pid, uint64_t start, int cpu,
                     backend_handle **out, char *err, size_t errlen)
{
    counters_proc *cp;
    int r;

    if (pid <= 0 || cpu >= 0)
        return util_err(err, errlen, -EOPNOTSUPP,
                        "perf counter backend: pid %d, CPU %d: only a process can be counted",
                        (int)pid, cpu);
    if ((r = counters_open(es, pid, COUNTERS_SKIP_IDLE, &cp, err, errlen)) < 0)
        return r;
    *out = (backend_handle *)cp;
    return 0;
}

static int perf_read(backend_handle *h, counters_delta *d)
{
    return counters_read((counters_proc *)h, d);
}

static const __u64 *perf_quiet_word(const backend_handle *h, __u64 *value)
{
    return counters_quiet_word((const counters_proc *)h, value);
}

static bool perf_alive(const backend_handle *h)
{
    return counters_alive((const counters_proc *)h);
}

static int perf_skip_error(const backend_handle *h)
{
    return counters_skip_error((const counters_proc *)h);
}

static void perf_close(backend_handle *h)
{
    counters_close((counters_proc *)h);
}

const backend backend_perf = {
    .name = "perf",
    .open = perf_open,
    .read = perf_read,
    .quiet_word = perf_quiet_word,
    .alive = perf_alive,
    .skip_error = perf_skip_error,
    .close = perf_close,
};
