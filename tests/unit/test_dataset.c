/* Unit tests for learn/dataset.c: CSV into numeric tables, and the errors
 * that name file, line and column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "learn/learn.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/wattprof-test-XXXXXX.csv");
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_reads_columns(void **state)
{
    char *path = write_tmp("a,b,\"c,d\"\n1,2,3\n4,5e3,6\n");
    const char *cols[] = {"c,d", "a", "b"};
    learn_table *t;
    char err[UTIL_ERRLEN];

    assert_int_equal(learn_table_read(path, cols, 3, 0, &t, NULL, err, sizeof(err)), 0);
    assert_int_equal(t->n_rows, 2);
    assert_float_equal(learn_table_col(t, 0)[1], 6, 0);
    assert_float_equal(learn_table_col(t, 1)[0], 1, 0);
    assert_float_equal(learn_table_col(t, 2)[1], 5000, 0);
    assert_int_equal(t->line[1], 3);
    learn_table_free(t);
    unlink(path);
    free(path);
}

static void test_bad_cell_names_line_and_column(void **state)
{
    char *path = write_tmp("x,y\n1,2\n3,abc\n");
    const char *cols[] = {"x", "y"};
    learn_table *t;
    char err[UTIL_ERRLEN], want[600];

    assert_int_equal(learn_table_read(path, cols, 2, 0, &t, NULL, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s:3:2: non-numeric value 'abc' in column 'y'", path);
    assert_string_equal(err, want);
    unlink(path);
    free(path);
}

static void test_drop_invalid(void **state)
{
    char *path = write_tmp("x,y\n1,2\n3,\n5,6\n");
    const char *cols[] = {"x", "y"};
    learn_table *t;
    size_t dropped;
    char err[UTIL_ERRLEN];

    assert_int_equal(
        learn_table_read(path, cols, 2, LEARN_DROP_INVALID, &t, &dropped, err, sizeof(err)), 0);
    assert_int_equal(dropped, 1);
    assert_int_equal(t->n_rows, 2);
    assert_float_equal(learn_table_col(t, 1)[1], 6, 0);
    assert_int_equal(t->line[1], 4);
    learn_table_free(t);
    unlink(path);
    free(path);
}

static void test_unknown_column_and_ragged_row(void **state)
{
    char *path = write_tmp("x,y\n1,2,3\n");
    const char *cols[] = {"z"};
    learn_table *t;
    learn_csv *c;
    char err[UTIL_ERRLEN];

    assert_int_equal(learn_csv_read(path, &c, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, ":2: 3 cells, but the header has 2"));
    unlink(path);
    free(path);

    path = write_tmp("x,y\n1,2\n");
    assert_int_equal(learn_table_read(path, cols, 1, 0, &t, NULL, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "no column named 'z'"));
    unlink(path);
    free(path);
}

static void test_missing_file(void **state)
{
    learn_csv *c;
    char err[UTIL_ERRLEN];

    assert_int_equal(learn_csv_read("/nonexistent/x.csv", &c, err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "/nonexistent/x.csv: cannot read: No such file or directory");
}

static void test_metrics(void **state)
{
    double y[] = {1, 2, 4}, p[] = {1.1, 1.8, 4};
    learn_metrics m;

    learn_metrics_compute(y, p, 3, &m);
    assert_float_equal(m.mape, (0.1 + 0.1 + 0) / 3, 1e-12);
    assert_float_equal(m.mae, 0.1, 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_columns), cmocka_unit_test(test_bad_cell_names_line_and_column),
        cmocka_unit_test(test_drop_invalid),  cmocka_unit_test(test_unknown_column_and_ragged_row),
        cmocka_unit_test(test_missing_file),  cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
