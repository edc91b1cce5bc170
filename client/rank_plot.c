/* rank_plot: box plots of the ranked variants, drawn with cairo into PNG or
 * SVG, coloured by rank like the figures of the ranking paper: a box from
 * Q1 to Q3 with the median, whiskers to the furthest values inside the
 * 1.5 IQR fences, and the outliers beyond them as dots. */
#include "rank_cli.h"

#include "learn/learn.h"
#include "util/util.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <gsl/gsl_sort.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PLOT_H 480.0
#define PLOT_LEFT 80.0
#define PLOT_RIGHT 130.0 /* room for the legend */
#define PLOT_TOP 40.0
#define PLOT_BOTTOM 110.0 /* room for slanted names */
#define PLOT_SLOT 44.0    /* horizontal space per variant, at least */
#define PLOT_MIN_W 360.0  /* plotting area width, at least */

struct frame {
    double ymin, ymax;   /* data range on the axis */
    double x0, y0, w, h; /* plotting area in device units */
    double slot;         /* width per variant */
};

/* Colours for ranks 1, 2, ...; the cycle repeats beyond eight classes. */
static const double palette[8][3] = {
    {0.17, 0.63, 0.17}, {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.58, 0.40, 0.74},
    {0.84, 0.15, 0.16}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.74, 0.74, 0.13},
};

static void set_rank_colour(cairo_t *cr, int rank, double alpha)
{
    if (rank <= 0)
        cairo_set_source_rgba(cr, 0.6, 0.6, 0.6, alpha);
    else
        cairo_set_source_rgba(cr, palette[(rank - 1) % 8][0], palette[(rank - 1) % 8][1],
                              palette[(rank - 1) % 8][2], alpha);
}

static double to_y(const struct frame *f, double v)
{
    return f->y0 + f->h - (v - f->ymin) / (f->ymax - f->ymin) * f->h;
}

/* A tick step of 1, 2 or 5 times a power of ten giving about six ticks. */
static double tick_step(double span)
{
    double raw = span / 6, mag = pow(10, floor(log10(raw))), n = raw / mag;

    return mag * (n < 1.5 ? 1 : n < 3.5 ? 2 : n < 7.5 ? 5 : 10);
}

static void draw_axes(cairo_t *cr, const struct frame *f, const char *ylabel)
{
    double step = tick_step(f->ymax - f->ymin);
    char label[64];

    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, f->x0, f->y0, f->w, f->h);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 11);
    for (double t = ceil(f->ymin / step) * step; t <= f->ymax; t += step) {
        double y = to_y(f, t);
        cairo_set_source_rgba(cr, 0, 0, 0, 0.12);
        cairo_move_to(cr, f->x0, y);
        cairo_line_to(cr, f->x0 + f->w, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        snprintf(label, sizeof(label), "%.4g", fabs(t) < step * 1e-6 ? 0 : t);
        cairo_move_to(cr, f->x0 - 6 - 6.5 * (double)strlen(label), y + 4);
        cairo_show_text(cr, label);
    }
    cairo_save(cr);
    cairo_move_to(cr, 18, f->y0 + f->h / 2 + 3.0 * (double)strlen(ylabel));
    cairo_rotate(cr, -M_PI / 2);
    cairo_show_text(cr, ylabel);
    cairo_restore(cr);
}

static void draw_box(cairo_t *cr, const struct frame *f, const rank_sample *s, const double *all,
                     double cx, int rank)
{
    /* The median of every measurement, as the table reports it. */
    double half = fmin(f->slot * 0.3, 40), med = rank_quantile(all, s->n_all, 0.5);

    set_rank_colour(cr, rank, 0.35);
    cairo_rectangle(cr, cx - half, to_y(f, s->q3), 2 * half, to_y(f, s->q1) - to_y(f, s->q3));
    cairo_fill_preserve(cr);
    set_rank_colour(cr, rank, 1);
    cairo_set_line_width(cr, 1.5);
    cairo_stroke(cr);
    cairo_move_to(cr, cx - half, to_y(f, med));
    cairo_line_to(cr, cx + half, to_y(f, med));
    cairo_set_line_width(cr, 2.5);
    cairo_stroke(cr);
    cairo_set_line_width(cr, 1.2);
    cairo_move_to(cr, cx, to_y(f, s->q3));
    cairo_line_to(cr, cx, to_y(f, s->v[s->n - 1]));
    cairo_move_to(cr, cx - half / 2, to_y(f, s->v[s->n - 1]));
    cairo_line_to(cr, cx + half / 2, to_y(f, s->v[s->n - 1]));
    cairo_move_to(cr, cx, to_y(f, s->q1));
    cairo_line_to(cr, cx, to_y(f, s->v[0]));
    cairo_move_to(cr, cx - half / 2, to_y(f, s->v[0]));
    cairo_line_to(cr, cx + half / 2, to_y(f, s->v[0]));
    cairo_stroke(cr);
    for (size_t i = 0; i < s->n_all; i++) {
        if (all[i] >= s->lo && all[i] <= s->hi)
            continue;
        cairo_new_sub_path(cr);
        cairo_arc(cr, cx, to_y(f, all[i]), 2.5, 0, 2 * M_PI);
    }
    cairo_fill(cr);
}

static void draw_name(cairo_t *cr, const struct frame *f, double cx, const char *name)
{
    char shown[41];

    snprintf(shown, sizeof(shown), "%s", name);
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 11);
    cairo_move_to(cr, cx - 4, f->y0 + f->h + 14);
    cairo_rotate(cr, M_PI / 4);
    cairo_show_text(cr, shown);
    cairo_restore(cr);
}

static void draw_legend(cairo_t *cr, const struct frame *f, int max_rank, bool unranked)
{
    char label[32];
    double x = f->x0 + f->w + 16, y = f->y0 + 8;
    int shown = max_rank < 20 ? max_rank : 20;

    cairo_set_font_size(cr, 11);
    for (int r = 1; r <= shown + (unranked ? 1 : 0); r++, y += 18) {
        int rank = r <= shown ? r : 0;
        set_rank_colour(cr, rank, 1);
        cairo_rectangle(cr, x, y, 12, 12);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        if (rank)
            snprintf(label, sizeof(label), "rank %d", rank);
        else
            snprintf(label, sizeof(label), "not ranked");
        cairo_move_to(cr, x + 18, y + 10);
        cairo_show_text(cr, label);
    }
}

/* The data range over every measurement shown, padded by 5 %. */
static void data_range(const rank_variants *rv, const size_t *order, size_t n, struct frame *f)
{
    double lo = INFINITY, hi = -INFINITY, pad;

    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < rv->n[order[k]]; i++) {
            lo = fmin(lo, rv->x[order[k]][i]);
            hi = fmax(hi, rv->x[order[k]][i]);
        }
    }
    pad = hi > lo ? (hi - lo) * 0.05 : fabs(hi) * 0.05 + 1e-9;
    f->ymin = lo - pad;
    f->ymax = hi + pad;
}

/* One variant's box at horizontal centre cx. */
static int draw_variant(cairo_t *cr, const struct frame *f, const double *x, size_t n, double cx,
                        int rank)
{
    double *all = malloc(n * sizeof(*all));
    rank_sample s;
    int r;

    if (!all)
        return -ENOMEM;
    memcpy(all, x, n * sizeof(*all));
    gsl_sort(all, 1, n);
    r = rank_sample_init(&s, all, n);
    if (r == 0)
        draw_box(cr, f, &s, all, cx, rank);
    rank_sample_clear(&s);
    free(all);
    return r;
}

static int draw(cairo_t *cr, const struct frame *f, const rank_variants *rv, const size_t *order,
                size_t n, const int *rank, const char *ylabel)
{
    int max_rank = 0, r = 0;
    bool unranked = false;

    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw_axes(cr, f, ylabel);
    cairo_set_font_size(cr, 12);
    cairo_move_to(cr, f->x0, f->y0 - 14);
    cairo_show_text(cr, "box Q1-Q3, whiskers at 1.5 IQR, dots: outliers; colour: rank at (75,25)");
    for (size_t k = 0; r == 0 && k < n; k++) {
        size_t v = order[k];
        double cx = f->x0 + f->slot * ((double)k + 0.5);
        r = draw_variant(cr, f, rv->x[v], rv->n[v], cx, rank[v]);
        draw_name(cr, f, cx, rv->names[v]);
        max_rank = rank[v] > max_rank ? rank[v] : max_rank;
        unranked |= rank[v] <= 0;
    }
    draw_legend(cr, f, max_rank, unranked);
    return r;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);

    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

int rank_plot_write(const char *path, const rank_variants *rv, const size_t *order, size_t n_order,
                    const int *rank, const char *ylabel, char *err, size_t errlen)
{
    bool png = ends_with(path, ".png");
    struct frame f = {.x0 = PLOT_LEFT, .y0 = PLOT_TOP, .h = PLOT_H - PLOT_TOP - PLOT_BOTTOM};
    cairo_surface_t *surface;
    cairo_status_t st;
    cairo_t *cr;
    int r;

    if (!png && !ends_with(path, ".svg"))
        return util_err(err, errlen, -EINVAL, "--plot %s: the file name must end in .png or .svg",
                        path);
    f.slot = fmax(PLOT_SLOT, PLOT_MIN_W / (double)(n_order ? n_order : 1));
    f.w = f.slot * (double)n_order;
    data_range(rv, order, n_order, &f);
    if (png)
        surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24,
                                             (int)(PLOT_LEFT + f.w + PLOT_RIGHT), (int)PLOT_H);
    else
        surface = cairo_svg_surface_create(path, PLOT_LEFT + f.w + PLOT_RIGHT, PLOT_H);
    cr = cairo_create(surface);
    r = draw(cr, &f, rv, order, n_order, rank, ylabel);
    cairo_destroy(cr);
    st = cairo_surface_status(surface);
    if (r == 0 && st == CAIRO_STATUS_SUCCESS && png)
        st = cairo_surface_write_to_png(surface, path);
    cairo_surface_finish(surface);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    /* cairo and fontconfig keep font caches for the life of the process;
     * wattprof draws once, so hand them back and keep leak checkers
     * meaningful. */
    cairo_debug_reset_static_data();
    FcFini();
    if (r == 0 && st != CAIRO_STATUS_SUCCESS)
        r = util_err(err, errlen, -EIO, "--plot %s: %s", path, cairo_status_to_string(st));
    return r;
}
