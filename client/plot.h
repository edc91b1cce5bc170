/* plot: charts of a power series — a one-line sparkline, a terminal chart
 * made of block characters, and a PNG or SVG picture drawn with cairo (axes,
 * units, legend).
 *
 * A series is n points (t[i] Unix seconds, y[i] watts) in time order; NAN
 * values are gaps. */
#ifndef WATTPROF_CLIENT_PLOT_H
#define WATTPROF_CLIENT_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct plot_series {
    const char *label; /* for the legend */
    const double *t, *y;
    size_t n;
} plot_series;

/* True when the terminal's character set is UTF-8 (after setlocale). */
bool plot_utf8(void);

/* Writes one line of n characters from ▁ to █ (or " .:-=+*#%@" without UTF-8),
 * scaled from 0 to the largest value. */
void plot_sparkline(FILE *out, const double *y, size_t n, bool utf8);

/* Draws s as a column chart at most `width` columns by `height` rows (plus
 * axes and labels) on out, from zero to the largest value: each column is
 * the mean of the points that fall in its time slice, or with fewer points
 * than columns, each point an equal run of columns. Returns 0, or -EINVAL when
 * there is nothing to draw or the size is too small. */
int plot_terminal(FILE *out, const plot_series *s, int width, int height, bool utf8);

/* Draws the series as lines into `path`, a PNG (width x height pixels) or an
 * SVG (points), by its extension, with a title, axes with ticks in time and
 * watts (scaled to mW/W/kW), and a legend. Fills err with one line naming
 * path when it cannot be written. */
int plot_image(const char *path, const plot_series *s, size_t n_series, const char *title,
               int width, int height, char *err, size_t errlen);

/* Frees the caches cairo and fontconfig keep for the life of the process,
 * so leak checkers see none. Once, before exit, after the last plot_image. */
void plot_release(void);

/* 1 when path ends in .png, 2 in .svg (case ignored), else 0. */
int plot_image_kind(const char *path);
/* 0 when `path` names a picture plot_image can write; else -EINVAL with err
 * naming the option, the name and the formats known (PNG, SVG). */
int plot_check_name(const char *opt, const char *path, char *err, size_t errlen);

#endif
