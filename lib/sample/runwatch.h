/* runwatch: has any thread of a process been on a CPU since the last look?
 * Private to lib/sample (counters.c uses it to skip reads that would return
 * nothing new); runwatch.c explains the kernel interface. */
#ifndef WATTPROF_SAMPLE_RUNWATCH_H
#define WATTPROF_SAMPLE_RUNWATCH_H

#include <linux/types.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct runwatch runwatch;

/* Opens a context-switch ring buffer on every thread of `pid`. Fails with
 * the kernel's -errno: -EPERM when the locked-memory budget is spent
 * (perf_event_mlock_kb per user, then RLIMIT_MEMLOCK without CAP_IPC_LOCK). */
int runwatch_open(pid_t pid, runwatch **out);
void runwatch_close(runwatch *w);

/* Takes in what the kernel wrote since the previous look (opening buffers on
 * new threads). Returns 1 when no thread of the process can have run since
 * the previous look and none is running now, so its counts are what the
 * last read returned; 0 when it must be read; a negative errno when the
 * watch broke (the caller then reads every time). Call it before the read
 * it decides on, never after. */
int runwatch_look(runwatch *w);

/* Tells the watch the outcome of the read that followed the latest look:
 * `time_passed` when the counters' enabled time advanced. A read across
 * which no time passed and no record arrived proves every thread we knew
 * nothing about is off the CPU. */
void runwatch_settle(runwatch *w, bool time_passed);

/* The one word a caller may watch instead of looking: when the process has a
 * single thread and the latest look found it off the CPU, returns its ring's
 * data_head and sets *value to what it held then; for as long as an atomic
 * load of it still gives *value, a look would return 1 and change nothing.
 * NULL otherwise (several threads, one on the CPU or not yet known). */
const __u64 *runwatch_quiet_word(const runwatch *w, __u64 *value);

#endif
