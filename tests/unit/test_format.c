/* Unit tests of the query commands' pure parts: units, durations, times,
 * CSV quoting, table layout, terminal charts and cairo pictures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "format.h"
#include "plot.h"
#include "query.h"

#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void test_energy_units(void **state)
{
    char b[FMT_LEN];

    assert_string_equal(fmt_energy(b, 0), "0 J");
    assert_string_equal(fmt_energy(b, 0.0123), "12.3 mJ");
    assert_string_equal(fmt_energy(b, 0.9996), "1.00 J");
    assert_string_equal(fmt_energy(b, 5), "5.00 J");
    assert_string_equal(fmt_energy(b, 123.4), "123 J");
    assert_string_equal(fmt_energy(b, 12345), "12.3 kJ");
    assert_string_equal(fmt_energy(b, 3.6e6), "1.00 kWh");
    assert_string_equal(fmt_energy(b, 7.2e7), "20.0 kWh");
    assert_string_equal(fmt_energy(b, NAN), "-");
    assert_string_equal(fmt_energy(b, -2.5), "-2.50 J");
}

static void test_power_bytes_units(void **state)
{
    char b[FMT_LEN];

    assert_string_equal(fmt_power(b, 0.85), "850 mW");
    assert_string_equal(fmt_power(b, 41.5), "41.5 W");
    assert_string_equal(fmt_power(b, 1500), "1.50 kW");
    assert_string_equal(fmt_power(b, 2.5e6), "2.50 MW");
    assert_string_equal(fmt_power(b, 0), "0 W");
    assert_string_equal(fmt_bytes(b, 512), "512 B");
    assert_string_equal(fmt_bytes(b, 1536), "1.50 KiB");
    assert_string_equal(fmt_bytes(b, 5 * 1048576.0), "5.00 MiB");
    assert_string_equal(fmt_bytes(b, -1), "-");
}

static void test_durations(void **state)
{
    char b[FMT_LEN];

    assert_string_equal(fmt_duration(b, 45), "45s");
    assert_string_equal(fmt_duration(b, 2.5), "2.5s");
    assert_string_equal(fmt_duration(b, 200), "3m 20s");
    assert_string_equal(fmt_duration(b, 3600), "1h");
    assert_string_equal(fmt_duration(b, 7500), "2h 5m");
    assert_string_equal(fmt_duration(b, 90000), "1d 1h");
    assert_string_equal(fmt_iso8601(b, 1796011200), "2026-11-30T04:00:00Z");
}

static void test_parse_duration(void **state)
{
    char err[256];
    double v;

    assert_int_equal(fmt_parse_duration("90", "--step", &v, err, sizeof(err)), 0);
    assert_true(v == 90);
    assert_int_equal(fmt_parse_duration("30m", "--step", &v, err, sizeof(err)), 0);
    assert_true(v == 1800);
    assert_int_equal(fmt_parse_duration("1h30m", "--step", &v, err, sizeof(err)), 0);
    assert_true(v == 5400);
    assert_int_equal(fmt_parse_duration("1.5h", "--step", &v, err, sizeof(err)), 0);
    assert_true(v == 5400);
    assert_int_equal(fmt_parse_duration("2d", "--step", &v, err, sizeof(err)), 0);
    assert_true(v == 172800);
    const char *bad[] = {"", "0", "-5", "10x", "m", "1h30", "abc", "1e400s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(fmt_parse_duration(bad[i], "--window", &v, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "--window"));
    }
}

static void test_parse_time(void **state)
{
    const double now = 1796011200; /* 2026-11-30T04:00:00Z */
    char err[256];
    double v;

    assert_int_equal(fmt_parse_time("now", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now);
    assert_int_equal(fmt_parse_time("1h", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now - 3600);
    assert_int_equal(fmt_parse_time("-30m", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now - 1800);
    assert_int_equal(fmt_parse_time("2d ago", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now - 172800);
    assert_int_equal(fmt_parse_time("@1700000000.5", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == 1700000000.5);
    assert_int_equal(fmt_parse_time("2026-11-30T04:00:00Z", "--since", now, &v, err, sizeof(err)),
                     0);
    assert_true(v == now);
    assert_int_equal(
        fmt_parse_time("2026-11-30T05:00:00+01:00", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now);
    assert_int_equal(
        fmt_parse_time("2026-11-30 03:30:00.25-0030", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == now + 0.25);
    /* Without a zone: local time, as ISO 8601 says. */
    struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 30, .tm_hour = 4, .tm_isdst = -1};
    double local = (double)mktime(&tm);
    assert_int_equal(fmt_parse_time("2026-11-30T04:00", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == local);
    tm = (struct tm){.tm_year = 126, .tm_mon = 10, .tm_mday = 30, .tm_isdst = -1};
    assert_int_equal(fmt_parse_time("2026-11-30", "--since", now, &v, err, sizeof(err)), 0);
    assert_true(v == (double)mktime(&tm));
    const char *bad[] = {"yesterday",
                         "1x",
                         "2026-13-01",
                         "2026-11-30T25:00",
                         "@",
                         "@-5",
                         "2026-11-30T04:00:00+1",
                         "26-11-30",
                         "",
                         "now!",
                         "2026-11-30T04:00:00Zjunk"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(fmt_parse_time(bad[i], "--until", now, &v, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "--until"));
    }
}

/* Text written to a memory stream by fn. */
static char *capture(void (*fn)(FILE *, void *), void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    fn(f, arg);
    fclose(f);
    return buf;
}

static void csv_fields(FILE *f, void *arg)
{
    fmt_csv_field(f, "plain");
    fputc('|', f);
    fmt_csv_field(f, "a,b");
    fputc('|', f);
    fmt_csv_field(f, "say \"hi\"");
    fputc('|', f);
    fmt_csv_field(f, "two\nlines");
}

static void test_csv_quoting(void **state)
{
    char *s = capture(csv_fields, NULL);
    assert_string_equal(s, "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"");
    free(s);
}

/* CSV numbers keep what the data can tell: a bucket split over a minute
 * boundary (16/15 J and 1184/15 J) still sums to 80 J once printed and
 * parsed, and the last-bit noise of a sum is not printed. */
static void test_number_digits(void **state)
{
    char a[FMT_LEN], b[FMT_LEN];

    assert_string_equal(fmt_number(a, 80), "80");
    assert_string_equal(fmt_number(a, 80.00000000000006), "80");
    assert_string_equal(fmt_number(a, 0.012500000000000006), "0.0125");
    assert_string_equal(fmt_number(a, 0.04), "0.04");
    assert_string_equal(fmt_number(a, 123456789), "123456789");
    assert_string_equal(fmt_number(a, -2.5e-7), "-2.5e-07");
    assert_string_equal(fmt_number(a, 3.6e15), "3.6e+15");
    assert_string_equal(fmt_number(a, NAN), "nan");
    assert_string_equal(fmt_number(a, 16.0 / 15), "1.06666666667");
    assert_string_equal(fmt_number(b, 1184.0 / 15), "78.9333333333");
    assert_true(fabs(strtod(a, NULL) + strtod(b, NULL) - 80) < 1e-9);
    (void)state;
}

static fmt_table *sample_table(void)
{
    static const char *head[] = {"PID", "COMMAND", "POWER"};
    static const char *csv[] = {"pid", "comm", "power_w"};
    static const fmt_align al[] = {FMT_RIGHT, FMT_LEFT, FMT_RIGHT};
    fmt_table *t = fmt_table_new(3, head, csv, al);

    assert_non_null(t);
    assert_int_equal(fmt_table_add(t, "7", NULL), 0);
    assert_int_equal(fmt_table_add(t, "burn", NULL), 0);
    assert_int_equal(fmt_table_add(t, "12.3 W", "12.3456"), 0);
    assert_int_equal(fmt_table_add(t, "12345", NULL), 0);
    assert_int_equal(fmt_table_add(t, "données,x", NULL), 0);
    assert_int_equal(fmt_table_add(t, "850 mW", "0.85"), 0);
    assert_int_equal(fmt_table_rows(t), 2);
    return t;
}

static void print_plain(FILE *f, void *t)
{
    fmt_table_print(t, f, false);
}

static void print_bold(FILE *f, void *t)
{
    fmt_table_print(t, f, true);
}

static void print_csv(FILE *f, void *t)
{
    fmt_table_print_csv(t, f);
}

static void test_table_layout(void **state)
{
    fmt_table *t = sample_table();
    char *s = capture(print_plain, t);

    /* Right-aligned numbers, left-aligned text counted in characters (é is
     * two bytes, one column), two spaces between columns. */
    assert_string_equal(s, "  PID  COMMAND     POWER\n"
                           "    7  burn       12.3 W\n"
                           "12345  données,x  850 mW\n");
    free(s);
    s = capture(print_bold, t);
    assert_memory_equal(s, "\033[1m", 4);
    assert_non_null(strstr(s, "\033[0m\n"));
    free(s);
    s = capture(print_csv, t);
    assert_string_equal(s, "pid,comm,power_w\n7,burn,12.3456\n12345,\"données,x\",0.85\n");
    free(s);
    fmt_table_free(t);
}

static void test_color_not_on_pipes(void **state)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    FILE *f = fdopen(fd[1], "w");
    unsetenv("NO_COLOR");
    assert_false(fmt_color_wanted(f)); /* not a terminal */
    fclose(f);
    close(fd[0]);
}

struct chart {
    plot_series s;
};

static void draw_chart(FILE *f, void *arg)
{
    assert_int_equal(plot_terminal(f, arg, 20, 4, false), 0);
}

static void test_terminal_chart(void **state)
{
    double t[] = {0, 1, 2, 3}, y[] = {0, 10, 20, 40};
    plot_series s = {"host", t, y, 4};
    char *out = capture(draw_chart, &s), *line[16];
    size_t n = 0;

    for (char *p = strtok(out, "\n"); p && n < 16; p = strtok(NULL, "\n"))
        line[n++] = p;
    /* Label, 4 plot rows, the x axis, the time range. */
    assert_int_equal(n, 7);
    assert_non_null(strstr(line[0], "host"));
    assert_non_null(strstr(line[1], "40.0 W")); /* the top row is the peak */
    /* The last column is full in every row; the first (0 W) is empty. */
    for (int r = 1; r <= 4; r++) {
        char *bar = strchr(line[r], '|');
        assert_non_null(bar);
        assert_int_equal(strlen(bar + 1), 20);
        assert_int_equal(bar[20], '#');
        assert_int_equal(bar[1], ' ');
    }
    assert_non_null(strstr(line[6], "1970-01-01T00:00:00Z"));
    assert_non_null(strstr(line[6], "1970-01-01T00:00:03Z"));
    free(out);
    assert_int_equal(plot_terminal(stdout, &(plot_series){"x", t, y, 0}, 20, 4, false), -EINVAL);
}

static void test_png(void **state)
{
    char path[] = "/tmp/wattprof-plot-XXXXXX.png", err[256];
    double t[60], y[60];
    int fd = mkstemps(path, 4);

    assert_true(fd >= 0);
    close(fd);
    for (int i = 0; i < 60; i++) {
        t[i] = 1796011200 + i;
        y[i] = 40 + 20 * sin(i / 6.0);
    }
    plot_series s = {"host", t, y, 60};
    assert_int_equal(plot_image(path, &s, 1, "power of host", 640, 360, err, sizeof(err)), 0);
    cairo_surface_t *img = cairo_image_surface_create_from_png(path);
    assert_int_equal(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_width(img), 640);
    assert_int_equal(cairo_image_surface_get_height(img), 360);
    /* The series' colour appears inside the plot area. */
    unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img), blue = 0;
    for (int yy = 40; yy < 310; yy++)
        for (int x = 70; x < 620; x++) {
            uint32_t p = *(uint32_t *)(px + yy * stride + x * 4);
            int r = (p >> 16) & 0xff, g = (p >> 8) & 0xff, b = p & 0xff;
            blue += b > 150 && r < 100 && g < 160;
        }
    assert_true(blue > 200);
    cairo_surface_destroy(img);
    unlink(path);
    assert_int_equal(plot_image("/nonexistent-dir/x.png", &s, 1, "t", 640, 360, err, sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "/nonexistent-dir/x.png"));
    assert_int_equal(plot_image("/tmp/x.jpg", &s, 1, "t", 640, 360, err, sizeof(err)), -EINVAL);
    assert_int_equal(plot_image_kind("A.SVG"), 2);
    plot_release();
}

/* --socket, then $WATTPROF_SOCKET, then the daemon's own default. */
static void test_socket_path(void **state)
{
    char buf[256], dir[] = "/tmp/wattprof-xdg-XXXXXX", sock[300];

    setenv("WATTPROF_SOCKET", "/env/sock", 1);
    query_socket_path("/opt/sock", buf, sizeof(buf));
    assert_string_equal(buf, "/opt/sock");
    query_socket_path(NULL, buf, sizeof(buf));
    assert_string_equal(buf, "/env/sock");
    unsetenv("WATTPROF_SOCKET");
    assert_non_null(mkdtemp(dir));
    setenv("XDG_RUNTIME_DIR", dir, 1);
    query_socket_path(NULL, buf, sizeof(buf));
    assert_string_equal(buf, QUERY_SYSTEM_SOCKET); /* no personal daemon there */
    /* A personal daemon's socket, where an unprivileged wattprofd puts it. */
    snprintf(sock, sizeof(sock), "%s/wattprof", dir);
    assert_int_equal(mkdir(sock, 0700), 0);
    snprintf(sock, sizeof(sock), "%s/wattprof/io.wattprof.sock", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    query_socket_path(NULL, buf, sizeof(buf));
    /* Root always means the system daemon. */
    assert_string_equal(buf, geteuid() == 0 ? QUERY_SYSTEM_SOCKET : sock);
    close(fd);
    unlink(sock);
    snprintf(sock, sizeof(sock), "%s/wattprof", dir);
    rmdir(sock);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energy_units),
        cmocka_unit_test(test_power_bytes_units),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_csv_quoting),
        cmocka_unit_test(test_number_digits),
        cmocka_unit_test(test_table_layout),
        cmocka_unit_test(test_color_not_on_pipes),
        cmocka_unit_test(test_terminal_chart),
        cmocka_unit_test(test_png),
        cmocka_unit_test(test_socket_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
