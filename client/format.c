/* format: units, durations, times and tables for the query commands
 * (format.h has the contract). */
#include "format.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Three significant digits, trailing unit. */
static char *scaled(char buf[FMT_LEN], double v, const char *unit)
{
    double a = fabs(v);
    int prec = a < 9.995 ? 2 : a < 99.95 ? 1 : 0;

    snprintf(buf, FMT_LEN, "%.*f %s", prec, v, unit);
    return buf;
}

struct unit_step {
    double factor; /* value in base units of 1 of this unit */
    const char *name;
};

/* Picks the largest unit the magnitude reaches (the first one for tiny
 * values); `steps` ascend. */
static char *pick_unit(char buf[FMT_LEN], double v, const struct unit_step *steps, size_t n)
{
    size_t k = 0;

    if (isnan(v))
        return strcpy(buf, "-");
    if (v == 0) {
        snprintf(buf, FMT_LEN, "0 %s", steps[1].name);
        return buf;
    }
    for (size_t i = 0; i < n; i++)
        if (fabs(v) >= steps[i].factor * 0.9995)
            k = i;
    return scaled(buf, v / steps[k].factor, steps[k].name);
}

char *fmt_energy(char buf[FMT_LEN], double joules)
{
    static const struct unit_step steps[] = {
        {1e-3, "mJ"}, {1, "J"}, {1e3, "kJ"}, {3.6e6, "kWh"}, {3.6e9, "MWh"}};
    return pick_unit(buf, joules, steps, sizeof(steps) / sizeof(steps[0]));
}

char *fmt_power(char buf[FMT_LEN], double watts)
{
    static const struct unit_step steps[] = {{1e-3, "mW"}, {1, "W"}, {1e3, "kW"}, {1e6, "MW"}};
    return pick_unit(buf, watts, steps, sizeof(steps) / sizeof(steps[0]));
}

char *fmt_number(char buf[FMT_LEN], double v)
{
    return util_format_double(buf, v, FMT_NUMBER_DIGITS);
}

char *fmt_bytes(char buf[FMT_LEN], double bytes)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = bytes;
    size_t k = 0;

    if (isnan(bytes) || bytes < 0)
        return strcpy(buf, "-");
    if (bytes < 1024) {
        snprintf(buf, FMT_LEN, "%.0f B", bytes);
        return buf;
    }
    for (v = bytes / 1024; v >= 1023.95 && k + 1 < sizeof(units) / sizeof(units[0]); k++)
        v /= 1024;
    return scaled(buf, v, units[k]);
}

char *fmt_duration(char buf[FMT_LEN], double seconds)
{
    static const struct {
        double s;
        const char *name;
    } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    double left;
    size_t i;

    if (isnan(seconds) || seconds < 0)
        return strcpy(buf, "-");
    if (seconds < 10 && seconds != floor(seconds)) {
        snprintf(buf, FMT_LEN, "%.1fs", seconds);
        return buf;
    }
    left = floor(seconds + 0.5);
    for (i = 0; i + 1 < 4 && left < units[i].s; i++)
        ;
    long big = (long)(left / units[i].s);
    if (i + 1 < 4) {
        long small = (long)((left - (double)big * units[i].s) / units[i + 1].s);
        if (small)
            snprintf(buf, FMT_LEN, "%ld%s %ld%s", big, units[i].name, small, units[i + 1].name);
        else
            snprintf(buf, FMT_LEN, "%ld%s", big, units[i].name);
    } else {
        snprintf(buf, FMT_LEN, "%lds", big);
    }
    return buf;
}

char *fmt_iso8601(char buf[FMT_LEN], double t)
{
    time_t s = (time_t)floor(t);
    struct tm tm;

    if (!isfinite(t) || !gmtime_r(&s, &tm))
        return strcpy(buf, "-");
    strftime(buf, FMT_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* ---- Reading durations and times ------------------------------------------ */

static double unit_seconds(const char *u, size_t len)
{
    static const struct {
        const char *name;
        double s;
    } units[] = {{"s", 1},    {"sec", 1},   {"m", 60},    {"min", 60},
                 {"h", 3600}, {"hr", 3600}, {"d", 86400}, {"w", 604800}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strlen(units[i].name) == len && strncmp(u, units[i].name, len) == 0)
            return units[i].s;
    return 0;
}

/* Sum of <number><unit> pairs; a lone number is seconds. */
static int parse_span(const char *s, double *out)
{
    double total = 0;
    const char *p = s;
    bool any = false;

    while (*p) {
        char *end;
        double n;
        if (!isdigit((unsigned char)*p) && *p != '.')
            return -EINVAL;
        n = strtod(p, &end);
        if (end == p || !isfinite(n))
            return -EINVAL;
        p = end;
        const char *u = p;
        while (isalpha((unsigned char)*p))
            p++;
        if (p == u) {
            if (*p || any) /* a bare number only on its own */
                return -EINVAL;
            total += n;
        } else {
            double f = unit_seconds(u, (size_t)(p - u));
            if (f == 0)
                return -EINVAL;
            total += n * f;
        }
        any = true;
    }
    if (!any)
        return -EINVAL;
    *out = total;
    return 0;
}

int fmt_parse_duration(const char *s, const char *what, double *out, char *err, size_t errlen)
{
    double v;

    if (parse_span(s, &v) < 0 || !(v > 0)) {
        snprintf(err, errlen, "%s '%s': expected a positive duration like 10s, 30m, 1h30m or 2d",
                 what, s);
        return -EINVAL;
    }
    if (v > FMT_SPAN_MAX) {
        snprintf(err, errlen, "%s '%s': longer than %.0f days", what, s, FMT_SPAN_MAX / 86400);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* A time the daemon takes: from the epoch to FMT_TIME_MAX. */
static int time_in_range(const char *s, const char *what, double v, double *out, char *err,
                         size_t errlen)
{
    if (!(v >= 0 && v <= FMT_TIME_MAX)) {
        snprintf(err, errlen, "%s '%s': before 1970 or after the year 2286", what, s);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* "Z", "+HH", "+HH:MM", "+HHMM" (or '-'): seconds east of UTC. */
static int parse_zone(const char *z, long *east)
{
    int hh = 0, mm = 0, n = 0;
    int sign;

    if (strcmp(z, "Z") == 0 || strcmp(z, "z") == 0) {
        *east = 0;
        return 0;
    }
    if (*z != '+' && *z != '-')
        return -EINVAL;
    sign = *z == '-' ? -1 : 1;
    z++;
    if (sscanf(z, "%2d:%2d%n", &hh, &mm, &n) == 2 && z[n] == '\0' && n == 5)
        ;
    else if (sscanf(z, "%2d%2d%n", &hh, &mm, &n) == 2 && z[n] == '\0' && n == 4)
        ;
    else if (sscanf(z, "%2d%n", &hh, &n) == 1 && z[n] == '\0' && n == 2)
        mm = 0;
    else
        return -EINVAL;
    if (hh > 23 || mm > 59)
        return -EINVAL;
    *east = sign * (hh * 3600L + mm * 60L);
    return 0;
}

/* ISO 8601 through strptime, then optional fraction and zone. */
static int parse_iso(const char *s, double *out)
{
    static const char *formats[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
                                    "%Y-%m-%d %H:%M", "%Y-%m-%d"};

    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        struct tm tm = {0};
        const char *rest = strptime(s, formats[i], &tm);
        double frac = 0;
        long east = 0;
        bool zoned = false;
        time_t t;

        if (!rest)
            continue;
        if (*rest == '.' && i < 2) {
            char *end;
            frac = strtod(rest, &end);
            if (end == rest + 1)
                continue;
            rest = end;
        }
        if (*rest) {
            if (i == 4 || parse_zone(rest, &east) < 0)
                continue;
            zoned = true;
        }
        /* strptime accepts one-digit fields; ISO 8601 wants the full date. */
        if (strlen(s) < 10 || s[4] != '-' || s[7] != '-')
            continue;
        if (zoned) {
            t = timegm(&tm);
            t -= east;
        } else {
            tm.tm_isdst = -1;
            t = mktime(&tm);
        }
        if (t == (time_t)-1)
            continue;
        *out = (double)t + frac;
        return 0;
    }
    return -EINVAL;
}

int fmt_parse_time(const char *s, const char *what, double now, double *out, char *err,
                   size_t errlen)
{
    char span[64];
    size_t len = strlen(s);
    double v;

    if (strcmp(s, "now") == 0) {
        *out = now;
        return 0;
    }
    if (s[0] == '@') {
        char *end;
        v = strtod(s + 1, &end);
        if (end != s + 1 && *end == '\0' && isfinite(v))
            return time_in_range(s, what, v, out, err, errlen);
    } else if (parse_iso(s, &v) == 0) {
        return time_in_range(s, what, v, out, err, errlen);
    } else if (len < sizeof(span)) {
        /* "1h", "-1h", "1h ago" all mean an hour before now. */
        const char *p = s[0] == '-' ? s + 1 : s;
        snprintf(span, sizeof(span), "%s", p);
        size_t n = strlen(span);
        if (n > 4 && strcmp(span + n - 4, " ago") == 0)
            span[n - 4] = '\0';
        if (parse_span(span, &v) == 0)
            return time_in_range(s, what, now - v, out, err, errlen);
    }
    snprintf(err, errlen,
             "%s '%s': not a time; use a relative time like 30m, 1h or 2d (that long ago), "
             "'now', @EPOCH or ISO 8601 like 2026-11-30T04:00:00Z",
             what, s);
    return -EINVAL;
}

bool fmt_color_wanted(FILE *f)
{
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

    if (no && *no)
        return false;
    if (term && strcmp(term, "dumb") == 0)
        return false;
    return isatty(fileno(f)) == 1;
}

void fmt_csv_field(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* ---- Tables ------------------------------------------------------------- */

struct fmt_table {
    size_t ncols;
    char **headers, **csv;
    fmt_align *align;
    bool *hidden;       /* left out of the text table (kept in CSV) */
    char **text, **raw; /* cells, row-major */
    size_t ncells, cap;
};

fmt_table *fmt_table_new(size_t n, const char *const *headers, const char *const *csv,
                         const fmt_align *align)
{
    fmt_table *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->ncols = n;
    t->headers = calloc(n, sizeof(char *));
    t->csv = calloc(n, sizeof(char *));
    t->align = calloc(n, sizeof(fmt_align));
    t->hidden = calloc(n, sizeof(bool));
    if (!t->headers || !t->csv || !t->align || !t->hidden) {
        fmt_table_free(t);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        t->headers[i] = strdup(headers[i]);
        t->csv[i] = strdup(csv[i]);
        t->align[i] = align[i];
        if (!t->headers[i] || !t->csv[i]) {
            fmt_table_free(t);
            return NULL;
        }
    }
    return t;
}

void fmt_table_free(fmt_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncols; i++) {
        if (t->headers)
            free(t->headers[i]);
        if (t->csv)
            free(t->csv[i]);
    }
    for (size_t i = 0; i < t->ncells; i++) {
        free(t->text[i]);
        free(t->raw[i]);
    }
    free(t->headers);
    free(t->csv);
    free(t->align);
    free(t->hidden);
    free(t->text);
    free(t->raw);
    free(t);
}

int fmt_table_add(fmt_table *t, const char *text, const char *raw)
{
    if (t->ncells == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **nt = realloc(t->text, cap * sizeof(char *));
        if (!nt)
            return -ENOMEM;
        t->text = nt;
        char **nr = realloc(t->raw, cap * sizeof(char *));
        if (!nr)
            return -ENOMEM;
        t->raw = nr;
        t->cap = cap;
    }
    char *a = strdup(text), *b = strdup(raw ? raw : text);
    if (!a || !b) {
        free(a);
        free(b);
        return -ENOMEM;
    }
    t->text[t->ncells] = a;
    t->raw[t->ncells] = b;
    t->ncells++;
    return 0;
}

void fmt_table_hide(fmt_table *t, size_t col)
{
    if (col < t->ncols)
        t->hidden[col] = true;
}

size_t fmt_table_rows(const fmt_table *t)
{
    return t->ncols ? t->ncells / t->ncols : 0;
}

/* Columns a string takes on a terminal: UTF-8 continuation bytes take none. */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

static void print_cell(FILE *out, const char *s, size_t width, fmt_align a, bool last)
{
    size_t w = text_width(s), pad = width > w ? width - w : 0;

    if (a == FMT_RIGHT)
        fprintf(out, "%*s", (int)pad, "");
    fputs(s, out);
    if (a == FMT_LEFT && !last)
        fprintf(out, "%*s", (int)pad, "");
}

void fmt_table_print(const fmt_table *t, FILE *out, bool color)
{
    size_t rows = fmt_table_rows(t), *width = calloc(t->ncols, sizeof(size_t)), last = 0;

    if (!width)
        return;
    for (size_t c = 0; c < t->ncols; c++)
        if (!t->hidden[c])
            last = c;
    for (size_t c = 0; c < t->ncols; c++) {
        width[c] = text_width(t->headers[c]);
        for (size_t r = 0; r < rows; r++) {
            size_t w = text_width(t->text[r * t->ncols + c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    if (color)
        fputs("\033[1m", out);
    for (size_t c = 0; c <= last; c++) {
        if (t->hidden[c])
            continue;
        print_cell(out, t->headers[c], width[c], t->align[c], c == last);
        if (c < last)
            fputs("  ", out);
    }
    if (color)
        fputs("\033[0m", out);
    fputc('\n', out);
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c <= last; c++) {
            if (t->hidden[c])
                continue;
            print_cell(out, t->text[r * t->ncols + c], width[c], t->align[c], c == last);
            if (c < last)
                fputs("  ", out);
        }
        fputc('\n', out);
    }
    free(width);
}

void fmt_table_print_csv(const fmt_table *t, FILE *out)
{
    size_t rows = fmt_table_rows(t);

    for (size_t c = 0; c < t->ncols; c++) {
        fmt_csv_field(out, t->csv[c]);
        fputc(c + 1 < t->ncols ? ',' : '\n', out);
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            fmt_csv_field(out, t->raw[r * t->ncols + c]);
            fputc(c + 1 < t->ncols ? ',' : '\n', out);
        }
}
