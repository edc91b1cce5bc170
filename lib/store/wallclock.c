/* wallclock: the writer's view of the clock that stamps live rows, for
 * retention.
 *
 * Live rows are stamped CLOCK_MONOTONIC plus the largest wall-minus-
 * monotonic offset seen (daemon/sampler.c): NTP slews both clocks alike,
 * so the offset moves only when CLOCK_REALTIME is stepped; a step forward
 * is followed, a step back is not. Retention counts the same way, so a step
 * back neither holds rows nor loses them. A step forward, though, makes the
 * seconds stored before it look that much older than they are: a step of a
 * day would roll every recent second into minutes at the next run. So the
 * forward steps are remembered with the monotonic time they were seen, and
 * the per-second cut is held back by those seen within the last
 * second_retention_s: every second keeps its per-second rows for
 * second_retention_s of elapsed time, whatever the steps. */
#include "store/store-internal.h"
#include "util/util.h"

#include <string.h>

#define NS_PER_S 1000000000LL

void wallclock_init(store_wallclock *w)
{
    *w = (store_wallclock){.offset_ns = INT64_MIN};
}

/* Forgets the steps seen at or before `since` (monotonic ns). */
static void forget_before(store_wallclock *w, int64_t since)
{
    size_t keep = 0;

    for (size_t i = 0; i < w->n_steps; i++)
        if (w->steps[i].mono_ns > since)
            w->steps[keep++] = w->steps[i];
    w->n_steps = keep;
}

/* Remembers a step; when the list is full the two oldest become one, seen
 * at the later time: the cut is then held back longer, never shorter. */
static void remember(store_wallclock *w, int64_t mono, int64_t step)
{
    if (w->n_steps == WALLCLOCK_STEPS) {
        w->steps[1].step_ns += w->steps[0].step_ns;
        memmove(&w->steps[0], &w->steps[1], (WALLCLOCK_STEPS - 1) * sizeof(w->steps[0]));
        w->n_steps--;
    }
    w->steps[w->n_steps++] = (store_wallclock_step){.mono_ns = mono, .step_ns = step};
}

int64_t wallclock_read(store_wallclock *w, int64_t mono_ns, int64_t wall_ns, int64_t window_s,
                       int64_t *held_s)
{
    int64_t off = wall_ns - mono_ns, held = 0;

    if (w->offset_ns == INT64_MIN) {
        w->offset_ns = off;
    } else if (off > w->offset_ns) {
        /* a second or more at once is a step; less is drift or slew */
        if (off - w->offset_ns >= NS_PER_S) {
            log_info("CLOCK_REALTIME stepped forward %.1f s: second_retention (%llds) counts"
                     " the time elapsed across the step",
                     (double)(off - w->offset_ns) / 1e9, (long long)window_s);
            remember(w, mono_ns, off - w->offset_ns);
        }
        w->offset_ns = off;
    }
    forget_before(w, mono_ns - window_s * NS_PER_S);
    for (size_t i = 0; i < w->n_steps; i++)
        held += w->steps[i].step_ns;
    *held_s = (held + NS_PER_S - 1) / NS_PER_S;
    return (mono_ns + w->offset_ns) / NS_PER_S;
}
