/* calib_ring: the window of per-second rows that the calibration fits
 * (calib.c, calib_events.c) share: time, measured power, the weight and
 * outlier mark of the fit under way, and scratch for medians. The oldest
 * row goes when the window is full. Private to lib/model. */
#ifndef WATTPROF_CALIB_RING_H
#define WATTPROF_CALIB_RING_H

#include <stdbool.h>
#include <stddef.h>

typedef struct calib_ring {
    size_t window, n, next; /* capacity, rows held, slot of the next row */
    double newest_t;
    double *t, *y;   /* time, measured power */
    double *w;       /* each row's weight for the fit under way */
    double *scratch; /* window doubles for the fits' own use */
    bool *keep;      /* kept by the latest outlier test */
} calib_ring;

/* -ENOMEM, with nothing left allocated, when out of memory. */
int calib_ring_init(calib_ring *r, size_t window);
void calib_ring_free(calib_ring *r);
/* Stores a row's time and power and returns its slot (for the caller's
 * own columns). */
size_t calib_ring_push(calib_ring *r, double t_s, double y);
/* Sets every row kept and weighted by age: halves every half_life_s. */
void calib_ring_weigh(calib_ring *r, double half_life_s);

#endif
