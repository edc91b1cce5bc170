/* trace-internal: what the --record writer (trace_write.c) and the
 * --replay reader (trace_read.c) share: the format's name and the values a
 * trace may hold. */
#ifndef WATTPROF_TRACE_INTERNAL_H
#define WATTPROF_TRACE_INTERNAL_H

#define TRACE_FORMAT "wattprof-trace/1"

enum trace_value { TRACE_V_ENERGY, TRACE_V_SCALED, TRACE_V_RATIO };

/* Why a value of this kind may not be in a trace, or NULL when it may: what
 * the sampler can produce (finite, not negative, a ratio at most 1). */
const char *trace_value_bad(enum trace_value kind, double v);

#endif
