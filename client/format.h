/* format: how wattprof's query commands show numbers, times and tables to
 * people, and how they read the times people type.
 *
 * Everything here is pure (no daemon, no terminal state but what is passed
 * in), so it is unit-tested on its own (tests/unit/test_format.c). Numbers
 * scale to a unit that keeps three significant digits; NAN prints as "-". */
#ifndef WATTPROF_CLIENT_FORMAT_H
#define WATTPROF_CLIENT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define FMT_LEN 64 /* enough for every fmt_* result */

/* Energy in joules as mJ, J, kJ or kWh ("12.3 kJ"). Returns buf. */
char *fmt_energy(char buf[FMT_LEN], double joules);
/* Power in watts as mW, W, kW or MW ("850 mW"). Returns buf. */
char *fmt_power(char buf[FMT_LEN], double watts);
/* A duration in seconds, two units at most ("45s", "3m 20s", "2h 5m", "4d 1h"). */
char *fmt_duration(char buf[FMT_LEN], double seconds);
/* Bytes as B, KiB, MiB, GiB ("1.5 MiB"). */
char *fmt_bytes(char buf[FMT_LEN], double bytes);
/* Unix seconds as ISO 8601 in UTC, to the second ("2026-11-30T04:00:00Z"). */
char *fmt_iso8601(char buf[FMT_LEN], double t);
/* A number for scripts (CSV): the shortest %g form that reads back as the
 * same double, with FMT_NUMBER_DIGITS significant digits at most ("80",
 * "0.04", "1.06666666667"). Twelve digits are finer than any meter or model
 * here, keep sums of printed values within a relative 1e-11 of the stored
 * sums, and drop the last-bit noise of summed doubles (80.00000000000006
 * prints as "80"). Returns buf. */
#define FMT_NUMBER_DIGITS 12
char *fmt_number(char buf[FMT_LEN], double v);

#define FMT_SPAN_MAX 1e9  /* seconds (31 years): longer durations are typos */
#define FMT_TIME_MAX 1e10 /* seconds since the epoch (the year 2286) */

/* What the two energies of a process mean, in one line for the reports of
 * run, show and ps (docs/design.md, "Sampling and energy"). */
#define FMT_ENERGY_LEGEND                                                                          \
    "attributed: its share of the measured energy, which adds up to the node's (to account); "    \
    "standalone: the model's estimate of it alone (to compare variants)"

/* Reads a duration: a number of seconds, or numbers with units s, m (min),
 * h, d, w in any sequence ("90", "30m", "1h30m", "1.5h"). Positive only.
 * On error fills err with one line naming `what` (the option) and the text. */
int fmt_parse_duration(const char *s, const char *what, double *out, char *err, size_t errlen);

/* Reads a point in time relative to `now` (Unix seconds): "now", a duration
 * meaning that long ago ("1h", "30m", "-1h", "2d ago"), "@SECONDS" since the
 * epoch, or ISO 8601 date and time ("2026-11-30", "2026-11-30T04:00",
 * "2026-11-30 04:00:05.5+01:00", "...Z"; local time when no zone is given),
 * from the epoch to FMT_TIME_MAX. */
int fmt_parse_time(const char *s, const char *what, double now, double *out, char *err,
                   size_t errlen);

/* Whether to colour output written to `f`: only a terminal, and not when
 * NO_COLOR is set to anything non-empty (https://no-color.org) or TERM=dumb. */
bool fmt_color_wanted(FILE *f);

/* Writes `s` as one CSV field (RFC 4180: quoted when it holds a comma, a
 * quote, CR or LF; quotes doubled). */
void fmt_csv_field(FILE *out, const char *s);

/* ---- Tables ---------------------------------------------------------------
 * A table is built once and printed either as aligned text for people
 * (each cell's human text: "12.3 kJ") or as CSV for scripts (each cell's raw
 * value: "12345.6", with the column's CSV name as the header). */

typedef enum fmt_align { FMT_LEFT, FMT_RIGHT } fmt_align;

typedef struct fmt_table fmt_table;

/* Creates a table with n columns: headers[i] is the text header, csv[i]
 * the CSV header, align[i] the alignment of column i. NULL on ENOMEM. */
fmt_table *fmt_table_new(size_t n, const char *const *headers, const char *const *csv,
                         const fmt_align *align);
void fmt_table_free(fmt_table *t);
/* Appends the next cell, row by row: `text` for people, `raw` for CSV (NULL:
 * same as text). Both are copied. Returns 0 or -ENOMEM. */
int fmt_table_add(fmt_table *t, const char *text, const char *raw);
/* Leaves column `col` out of fmt_table_print (CSV keeps every column). */
void fmt_table_hide(fmt_table *t, size_t col);
/* Rows completed so far. */
size_t fmt_table_rows(const fmt_table *t);
/* Prints aligned columns separated by two spaces; the header is bold when
 * `color`. The last column is not padded. */
void fmt_table_print(const fmt_table *t, FILE *out, bool color);
/* Prints the CSV header then one line per row. */
void fmt_table_print_csv(const fmt_table *t, FILE *out);

#endif
