/* hostcpu: the CPU time the power meter sees, and the power the model gives
 * the part of it no tracked process used (DESIGN, "Sampling and energy",
 * step 5: what no tracked process did is unattributed, not spread over the
 * tracked ones).
 *
 * RAPL measures the whole package, so the meter's CPU is the host's busy
 * time; a meter that sees only one cgroup ([sampler] meter_cgroup; the fake
 * RAPL rig of the tests) is matched by that cgroup's (sample_busy_cpu_s). */
#include "daemon.h"

#include <string.h>

int hostcpu_busy_s(const char *cgroup, double *busy_s)
{
    return sample_busy_cpu_s(cgroup, busy_s);
}

double hostcpu_untracked_power(const model *m, int cpu_event, int klass, double cpu, double *rates)
{
    if (cpu_event < 0 || !(cpu > 0))
        return 0;
    memset(rates, 0, m->n_events * sizeof(double));
    rates[cpu_event] = cpu * 1e9; /* task-clock counts nanoseconds */
    return model_dynamic_power(m, klass, rates);
}
