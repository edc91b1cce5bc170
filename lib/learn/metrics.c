/* metrics: the regression errors every engine reports. */
#include "learn/learn.h"

#include <math.h>

void learn_metrics_compute(const double *y, const double *p, size_t n, learn_metrics *out)
{
    double sum_ape = 0, sum_ae = 0, sum_se = 0, mean = 0, ss_tot = 0;
    bool mape_ok = true;

    for (size_t i = 0; i < n; i++)
        mean += y[i];
    mean = n ? mean / (double)n : 0;
    for (size_t i = 0; i < n; i++) {
        double e = y[i] - p[i];
        if (y[i] == 0)
            mape_ok = false;
        else
            sum_ape += fabs(e / y[i]);
        sum_ae += fabs(e);
        sum_se += e * e;
        ss_tot += (y[i] - mean) * (y[i] - mean);
    }
    out->mape = (mape_ok && n) ? sum_ape / (double)n : NAN;
    out->mae = n ? sum_ae / (double)n : NAN;
    out->rmse = n ? sqrt(sum_se / (double)n) : NAN;
    out->r2 = ss_tot > 0 ? 1.0 - sum_se / ss_tot : NAN;
}
