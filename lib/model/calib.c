/* calib: online self-calibration of idle power and model scale
 * (docs/calibration.md).
 *
 * Each second the daemon hands in the measured host power and the model's
 * dynamic prediction for the same second. A line through them,
 * P_measured = idle + s * P_dynamic, has the node's idle power as its
 * intercept: unlike a low percentile of measured power, that holds on a
 * node that never idles, as long as the load has varied enough to pin the
 * line down. The fit is weighted least squares over a window of rows,
 * older rows weighing less (exponential forgetting, so a drifting idle is
 * followed), with residuals beyond k robust standard deviations (from
 * their median absolute deviation) left out and refitted until the rows
 * kept stop changing. A fit is called identifiable only when it has enough
 * rows, a load spread worth extrapolating from, a positive scale and a
 * small standard error of the intercept; otherwise it says why. */
#include "model/model.h"
#include "model/calib_ring.h"

#include <errno.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CALIB_MAX_PASSES 6 /* refits while the rows kept change */

struct calib {
    calib_config cfg;
    calib_ring r; /* rows: time, measured power */
    double *x;    /* each row's dynamic model power */
};

void calib_config_default(calib_config *c)
{
    *c = (calib_config){
        .window = 900,
        .half_life_s = 300,
        .min_rows = 30,
        .min_spread_w = 1.0,
        .max_idle_se_w = 0.5,
        .max_idle_se_rel = 0.02,
        .reject_k = 4.0,
    };
}

int calib_new(const calib_config *cfg, calib **out)
{
    calib_config def;
    calib *c;

    if (!cfg) {
        calib_config_default(&def);
        cfg = &def;
    }
    if (cfg->window < 3 || !(cfg->half_life_s > 0) || !(cfg->reject_k > 0) || cfg->min_rows < 3 ||
        !(cfg->min_spread_w >= 0) || !(cfg->max_idle_se_w >= 0) || !(cfg->max_idle_se_rel >= 0))
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    c->x = calloc(cfg->window, sizeof(double));
    if (!c->x || calib_ring_init(&c->r, cfg->window) < 0) {
        calib_free(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void calib_free(calib *c)
{
    if (!c)
        return;
    calib_ring_free(&c->r);
    free(c->x);
    free(c);
}

void calib_reset(calib *c)
{
    c->r.n = c->r.next = 0;
}

size_t calib_rows(const calib *c)
{
    return c->r.n;
}

int calib_add(calib *c, double t_s, double dyn_w, double host_w)
{
    /* A host drawing no power is a stalled meter, not a measurement. */
    if (!isfinite(t_s) || !isfinite(dyn_w) || dyn_w < 0 || !isfinite(host_w) || !(host_w > 0))
        return -EINVAL;
    c->x[calib_ring_push(&c->r, t_s, host_w)] = dyn_w;
    return 0;
}

/* Weighted sums over the kept rows, centred for accuracy. */
typedef struct sums {
    double w, w2, mx, my, sxx, sxy, syy;
    size_t n;
} sums;

static sums sum_kept(const calib *c)
{
    sums s = {0};

    for (size_t i = 0; i < c->r.n; i++) {
        if (!c->r.keep[i])
            continue;
        double w = c->r.w[i];
        s.w += w;
        s.w2 += w * w;
        s.mx += w * c->x[i];
        s.my += w * c->r.y[i];
        s.n++;
    }
    if (!(s.w > 0))
        return s;
    s.mx /= s.w;
    s.my /= s.w;
    for (size_t i = 0; i < c->r.n; i++) {
        if (!c->r.keep[i])
            continue;
        double w = c->r.w[i], dx = c->x[i] - s.mx, dy = c->r.y[i] - s.my;
        s.sxx += w * dx * dx;
        s.sxy += w * dx * dy;
        s.syy += w * dy * dy;
    }
    return s;
}

/* Fits the kept rows; then marks as kept exactly the rows whose residual is
 * within reject_k robust sigmas. Returns whether the kept set changed. */
static bool fit_pass(calib *c, sums *s, double *idle, double *scale)
{
    bool changed = false;

    *s = sum_kept(c);
    *scale = s->sxx > 0 ? s->sxy / s->sxx : 0;
    *idle = s->my - *scale * s->mx;
    for (size_t i = 0; i < c->r.n; i++)
        c->r.scratch[i] = fabs(c->r.y[i] - *idle - *scale * c->x[i]);
    double mad = gsl_stats_select(c->r.scratch, 1, c->r.n, c->r.n / 2);
    double sigma = fmax(1.4826 * mad, 1e-6 * (fabs(s->my) + 1));
    for (size_t i = 0; i < c->r.n; i++) {
        bool keep = fabs(c->r.y[i] - *idle - *scale * c->x[i]) <= c->cfg.reject_k * sigma;
        changed |= keep != c->r.keep[i];
        c->r.keep[i] = keep;
    }
    return changed;
}

/* Why the fit cannot name idle, or NULL when it can. */
static const char *unidentifiable(const calib *c, const calib_fit *f)
{
    if (f->rows < c->cfg.min_rows)
        return "too few measured seconds";
    if (!(f->scale > 0))
        return "measured power does not rise with the model's";
    if (f->spread_w < c->cfg.min_spread_w)
        return "the load has not varied enough";
    if (!(f->idle_w >= 0))
        return "the fitted idle is negative";
    if (f->idle_se_w > fmax(c->cfg.max_idle_se_w, c->cfg.max_idle_se_rel * f->idle_w))
        return "the fitted idle is too uncertain";
    return NULL;
}

int calib_fit_now(calib *c, calib_fit *f)
{
    double idle = NAN, scale = NAN;
    sums s = {0};

    memset(f, 0, sizeof(*f));
    f->idle_w = f->idle_se_w = f->scale = f->scale_se = f->r2 = f->spread_w = NAN;
    f->dyn_mean_w = NAN;
    f->why = "too few measured seconds";
    if (c->r.n < 3)
        return 0;
    calib_ring_weigh(&c->r, c->cfg.half_life_s);
    for (int pass = 0; pass < CALIB_MAX_PASSES && fit_pass(c, &s, &idle, &scale); pass++)
        ;
    s = sum_kept(c);
    if (s.n < 3 || !(s.sxx > 0))
        return 0;
    scale = s.sxy / s.sxx;
    idle = s.my - scale * s.mx;
    /* Rows that weigh less count less: Kish's effective number of rows. */
    double n_eff = s.w * s.w / s.w2, rss = fmax(0, s.syy - scale * s.sxy);
    double sigma2 = n_eff > 2 ? rss / s.w * n_eff / (n_eff - 2) : NAN;
    double sxx_eff = s.sxx / s.w * n_eff;
    f->rows = s.n;
    f->rejected = c->r.n - s.n;
    f->idle_w = idle;
    f->scale = scale;
    f->idle_se_w = sqrt(sigma2 * (1 / n_eff + s.mx * s.mx / sxx_eff));
    f->scale_se = sqrt(sigma2 / sxx_eff);
    f->r2 = s.syy > 0 ? 1 - rss / s.syy : NAN;
    f->dyn_mean_w = s.mx;
    f->spread_w = fabs(scale) * sqrt(s.sxx / s.w);
    f->why = unidentifiable(c, f);
    f->identifiable = f->why == NULL;
    return 0;
}
