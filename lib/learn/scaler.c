/* scaler: min-max scaling of features to [0, 1], fitted on training rows
 * only so that validation never sees the test rows' range. */
#include "learn/learn.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int scaler_fit(scaler *s, const double *const *x, size_t p, const size_t *rows, size_t n_rows)
{
    s->p = p;
    s->min = malloc((p ? p : 1) * sizeof(double));
    s->max = malloc((p ? p : 1) * sizeof(double));
    if (!s->min || !s->max) {
        scaler_done(s);
        return -ENOMEM;
    }
    for (size_t j = 0; j < p; j++) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n_rows; i++) {
            double v = x[j][rows ? rows[i] : i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        s->min[j] = n_rows ? lo : 0;
        s->max[j] = n_rows ? hi : 0;
    }
    return 0;
}

void scaler_done(scaler *s)
{
    free(s->min);
    free(s->max);
    s->min = s->max = NULL;
    s->p = 0;
}
