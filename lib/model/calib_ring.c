/* calib_ring: the window of rows the calibration fits share (calib_ring.h). */
#include "model/calib_ring.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int calib_ring_init(calib_ring *r, size_t window)
{
    *r = (calib_ring){.window = window};
    r->t = calloc(window, sizeof(double));
    r->y = calloc(window, sizeof(double));
    r->w = calloc(window, sizeof(double));
    r->scratch = calloc(window, sizeof(double));
    r->keep = calloc(window, sizeof(bool));
    if (!r->t || !r->y || !r->w || !r->scratch || !r->keep) {
        calib_ring_free(r);
        return -ENOMEM;
    }
    return 0;
}

void calib_ring_free(calib_ring *r)
{
    free(r->t);
    free(r->y);
    free(r->w);
    free(r->scratch);
    free(r->keep);
    *r = (calib_ring){0};
}

size_t calib_ring_push(calib_ring *r, double t_s, double y)
{
    size_t i = r->next;

    r->t[i] = t_s;
    r->y[i] = y;
    r->keep[i] = true;
    r->next = (i + 1) % r->window;
    if (r->n < r->window)
        r->n++;
    if (r->n == 1 || t_s > r->newest_t)
        r->newest_t = t_s;
    return i;
}

void calib_ring_weigh(calib_ring *r, double half_life_s)
{
    for (size_t i = 0; i < r->n; i++) {
        r->keep[i] = true;
        r->w[i] = exp2(-(r->newest_t - r->t[i]) / half_life_s);
    }
}
