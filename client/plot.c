/* plot: sparklines, terminal charts and cairo pictures of power over time
 * (plot.h has the contract). */
#include "plot.h"
#include "format.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <langinfo.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const blocks_utf8[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
static const char blocks_ascii[] = " .:-=+*#%";

bool plot_utf8(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && strcmp(cs, "UTF-8") == 0;
}

static double max_of(const double *y, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(y[i]) && y[i] > m)
            m = y[i];
    return m;
}

void plot_sparkline(FILE *out, const double *y, size_t n, bool utf8)
{
    double m = max_of(y, n);

    for (size_t i = 0; i < n; i++) {
        int k = isfinite(y[i]) && m > 0 ? (int)lround(y[i] / m * 8) : 0;
        k = k < 0 ? 0 : k > 8 ? 8 : k;
        if (isfinite(y[i]) && y[i] > 0 && k == 0)
            k = 1; /* anything at all shows */
        if (utf8)
            fputs(blocks_utf8[k], out);
        else
            fputc(blocks_ascii[k], out);
    }
}

/* The columns to draw, *w of them at most: with fewer points than columns
 * each point gets an equal run of columns (and *w shrinks to fit them);
 * otherwise each column is the mean of the points in its time slice (NAN
 * where none). */
static double *bucket(const plot_series *s, int *w)
{
    double *sum, *cnt, t0 = s->t[0], span = s->t[s->n - 1] - t0;

    if (s->n <= (size_t)*w) {
        int k = *w / (int)s->n;
        *w = k * (int)s->n;
        if (!(sum = calloc((size_t)*w, sizeof(double))))
            return NULL;
        for (int i = 0; i < *w; i++)
            sum[i] = s->y[i / k];
        return sum;
    }
    sum = calloc((size_t)*w, sizeof(double));
    cnt = calloc((size_t)*w, sizeof(double));
    if (!sum || !cnt) {
        free(sum);
        free(cnt);
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        int k = span > 0 ? (int)((s->t[i] - t0) / span * (*w - 1) + 0.5) : 0;
        if (!isfinite(s->y[i]))
            continue;
        sum[k] += s->y[i];
        cnt[k]++;
    }
    for (int k = 0; k < *w; k++)
        sum[k] = cnt[k] > 0 ? sum[k] / cnt[k] : NAN;
    free(cnt);
    return sum;
}

#define AXIS_W 10 /* columns for the y labels */

int plot_terminal(FILE *out, const plot_series *s, int width, int height, bool utf8)
{
    char lab[FMT_LEN], t0[FMT_LEN], t1[FMT_LEN];
    double *col, top;

    if (s->n == 0 || width < 10 || height < 2)
        return -EINVAL;
    if (!(col = bucket(s, &width)))
        return -ENOMEM;
    top = max_of(col, (size_t)width);
    if (top <= 0)
        top = 1;
    fprintf(out, "%*s%s\n", AXIS_W + 1, "", s->label);
    for (int row = height - 1; row >= 0; row--) {
        if (row == height - 1 || row == 0 || row == height / 2)
            fprintf(out, "%*s ", AXIS_W - 1, fmt_power(lab, top * (row + 1) / height));
        else
            fprintf(out, "%*s ", AXIS_W - 1, "");
        fputs(utf8 ? "│" : "|", out);
        for (int k = 0; k < width; k++) {
            int eighths = isfinite(col[k]) ? (int)lround(col[k] / top * height * 8) : 0;
            int fill = eighths - row * 8;
            fill = fill < 0 ? 0 : fill > 8 ? 8 : fill;
            if (row == 0 && fill == 0 && isfinite(col[k]) && col[k] > 0)
                fill = 1;
            if (utf8)
                fputs(blocks_utf8[fill], out);
            else
                fputc(fill == 0 ? ' ' : fill >= 8 ? '#' : blocks_ascii[fill], out);
        }
        fputc('\n', out);
    }
    fprintf(out, "%*s %s", AXIS_W - 1, "0", utf8 ? "└" : "+");
    for (int k = 0; k < width; k++)
        fputs(utf8 ? "─" : "-", out);
    fputc('\n', out);
    fmt_iso8601(t0, s->t[0]);
    fmt_iso8601(t1, s->t[s->n - 1]);
    fprintf(out, "%*s%s%*s\n", AXIS_W + 1, "", t0,
            width - (int)strlen(t0) > 0 ? width - (int)strlen(t0) : 1, t1);
    free(col);
    return 0;
}

int plot_image_kind(const char *path)
{
    size_t n = strlen(path);

    if (n > 4 && strcasecmp(path + n - 4, ".png") == 0)
        return 1;
    if (n > 4 && strcasecmp(path + n - 4, ".svg") == 0)
        return 2;
    return 0;
}

int plot_check_name(const char *opt, const char *path, char *err, size_t errlen)
{
    const char *dot = strrchr(path, '.');

    if (plot_image_kind(path))
        return 0;
    snprintf(err, errlen, "%s '%s': %s%s%s; the formats known are PNG (.png) and SVG (.svg)", opt,
             path, dot && !strchr(dot, '/') ? "unknown picture format '" : "no picture format",
             dot && !strchr(dot, '/') ? dot : "", dot && !strchr(dot, '/') ? "'" : "");
    return -EINVAL;
}

/* ---- cairo ---------------------------------------------------------------- */

struct frame {
    double x0, y0, x1, y1; /* plot area in device units, y0 at the top */
    double t0, t1, vmax;   /* data ranges */
    double unit;           /* watts per axis unit */
    const char *unit_name;
};

static cairo_status_t write_file(void *closure, const unsigned char *data, unsigned int len)
{
    return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* 1, 2 or 5 times a power of ten, at least x. */
static double nice_step(double x)
{
    double p = pow(10, floor(log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static double px(const struct frame *f, double t)
{
    return f->x0 + (t - f->t0) / (f->t1 - f->t0) * (f->x1 - f->x0);
}

static double py(const struct frame *f, double v)
{
    return f->y1 - v / f->vmax * (f->y1 - f->y0);
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.width * ax - e.x_bearing, y + e.height * ay - (e.height + e.y_bearing));
    cairo_show_text(cr, s);
}

static void draw_axes(cairo_t *cr, const struct frame *f)
{
    static const double tsteps[] = {1,     2,     5,     10,    15,     30,    60,
                                    120,   300,   600,   900,   1800,   3600,  7200,
                                    10800, 21600, 43200, 86400, 172800, 604800};
    double vstep = nice_step(f->vmax / f->unit / 5) * f->unit, tstep = tsteps[19];
    char buf[64];

    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_set_line_width(cr, 1);
    for (double v = vstep; v <= f->vmax * 1.0001; v += vstep) {
        cairo_move_to(cr, f->x0, py(f, v));
        cairo_line_to(cr, f->x1, py(f, v));
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, f->x0, f->y0, f->x1 - f->x0, f->y1 - f->y0);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 12);
    for (double v = 0; v <= f->vmax * 1.0001; v += vstep) {
        snprintf(buf, sizeof(buf), "%g", v / f->unit);
        text_at(cr, f->x0 - 6, py(f, v), buf, 1, 0.5);
    }
    for (size_t i = 0; i < sizeof(tsteps) / sizeof(tsteps[0]); i++)
        if ((f->t1 - f->t0) / tsteps[i] <= 7) {
            tstep = tsteps[i];
            break;
        }
    for (double t = ceil(f->t0 / tstep) * tstep; t <= f->t1; t += tstep) {
        time_t s = (time_t)t;
        struct tm tm;
        gmtime_r(&s, &tm);
        strftime(buf, sizeof(buf), tstep >= 86400 ? "%m-%d" : "%H:%M:%S", &tm);
        cairo_move_to(cr, px(f, t), f->y1);
        cairo_line_to(cr, px(f, t), f->y1 + 5);
        cairo_stroke(cr);
        text_at(cr, px(f, t), f->y1 + 8, buf, 0.5, 1);
    }
    snprintf(buf, sizeof(buf), "power (%s)", f->unit_name);
    cairo_save(cr);
    cairo_translate(cr, 18, (f->y0 + f->y1) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, buf, 0.5, 0.5);
    cairo_restore(cr);
}

static const double palette[][3] = {
    {0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17}, {1.0, 0.5, 0.05}};

static void draw_series(cairo_t *cr, const struct frame *f, const plot_series *s, size_t k)
{
    bool pen = false;

    cairo_set_source_rgb(cr, palette[k % 4][0], palette[k % 4][1], palette[k % 4][2]);
    cairo_set_line_width(cr, 1.5);
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->y[i])) {
            pen = false;
            continue;
        }
        if (pen)
            cairo_line_to(cr, px(f, s->t[i]), py(f, s->y[i]));
        else
            cairo_move_to(cr, px(f, s->t[i]), py(f, s->y[i]));
        pen = true;
    }
    cairo_stroke(cr);
}

static void draw_legend(cairo_t *cr, const struct frame *f, const plot_series *s, size_t n)
{
    double x = f->x1 - 180, y = f->y0 + 10;

    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, x, y, 170, 8 + 18 * (double)n);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    for (size_t k = 0; k < n; k++) {
        double ly = y + 13 + 18 * (double)k;
        cairo_set_source_rgb(cr, palette[k % 4][0], palette[k % 4][1], palette[k % 4][2]);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, x + 8, ly);
        cairo_line_to(cr, x + 32, ly);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, x + 38, ly, s[k].label, 0, 0.5);
    }
}

static void draw(cairo_t *cr, const plot_series *s, size_t n, const char *title, int w, int h)
{
    struct frame f = {
        .x0 = 70, .y0 = 40, .x1 = w - 20, .y1 = h - 50, .t0 = INFINITY, .t1 = -INFINITY};
    char range[2 * FMT_LEN + 32], a[FMT_LEN], b[FMT_LEN];

    for (size_t k = 0; k < n; k++) {
        if (s[k].n == 0)
            continue;
        f.t0 = fmin(f.t0, s[k].t[0]);
        f.t1 = fmax(f.t1, s[k].t[s[k].n - 1]);
        f.vmax = fmax(f.vmax, max_of(s[k].y, s[k].n));
    }
    if (!(f.t1 > f.t0))
        f.t1 = f.t0 + 1;
    f.vmax = f.vmax > 0 ? f.vmax * 1.1 : 1;
    f.unit = f.vmax < 1 ? 1e-3 : f.vmax < 1000 ? 1 : 1e3;
    f.unit_name = f.vmax < 1 ? "mW" : f.vmax < 1000 ? "W" : "kW";
    f.vmax = ceil(f.vmax / f.unit / nice_step(f.vmax / f.unit / 5)) *
             nice_step(f.vmax / f.unit / 5) * f.unit;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw_axes(cr, &f);
    for (size_t k = 0; k < n; k++)
        draw_series(cr, &f, &s[k], k);
    draw_legend(cr, &f, s, n);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 15);
    text_at(cr, w / 2.0, 12, title, 0.5, 1);
    cairo_set_font_size(cr, 12);
    snprintf(range, sizeof(range), "time (UTC), %s to %s", fmt_iso8601(a, f.t0),
             fmt_iso8601(b, f.t1));
    text_at(cr, (f.x0 + f.x1) / 2, h - 8, range, 0.5, 0);
}

int plot_image(const char *path, const plot_series *s, size_t n_series, const char *title,
               int width, int height, char *err, size_t errlen)
{
    int kind = plot_image_kind(path);
    cairo_surface_t *surf;
    cairo_status_t st;
    FILE *f;

    if (kind == 0)
        return plot_check_name("picture", path, err, errlen);
    if (!(f = fopen(path, "wb"))) {
        int r = -errno;
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return r;
    }
    surf = kind == 1 ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height)
                     : cairo_svg_surface_create_for_stream(write_file, f, width, height);
    cairo_t *cr = cairo_create(surf);
    draw(cr, s, n_series, title, width, height);
    cairo_destroy(cr);
    if (kind == 1)
        st = cairo_surface_write_to_png_stream(surf, write_file, f);
    else {
        cairo_surface_finish(surf);
        st = cairo_surface_status(surf);
    }
    cairo_surface_destroy(surf);
    if (fclose(f) != 0 && st == CAIRO_STATUS_SUCCESS)
        st = CAIRO_STATUS_WRITE_ERROR;
    if (st != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "cannot write %s: %s", path, cairo_status_to_string(st));
        return -EIO;
    }
    return 0;
}

void plot_release(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}
