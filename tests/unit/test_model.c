/* lib/model: model files (load, validate, save round trip, errors that name
 * the field or line:column), classification at the threshold, power. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "model/model.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char two_class[] =
    "{\"format\": \"wattprof-model/1\", \"name\": \"t\", \"engine\": \"ridge\",\n"
    " \"target\": [\"package\", \"dram\"],\n"
    " \"events\": [\"cycles\", \"instructions\", \"cache-misses\", \"perf::TASK-CLOCK\"],\n"
    " \"scaler\": {\"min\": [0, 0, 0, 0], \"max\": [3.1e9, 5.2e9, 8.0e7, 1.0e9]},\n"
    " \"classes\": {\"event\": \"cache-misses\", \"threshold\": 2e7, \"mode\": \"cumulative\",\n"
    "  \"models\": [{\"name\": \"high-miss\", \"intercept\": 109.7, \"coef\": [0.1, 0.2, 0.3, "
    "0.4]},\n"
    "             {\"name\": \"low-miss\", \"intercept\": 63.2, \"coef\": [1, 2, 3, 4]}]},\n"
    " \"idle_power_w\": 41.5,\n"
    " \"training\": {\"rows\": 86400, \"cv_mape\": 0.043, \"created\": "
    "\"2026-11-30T04:00:00Z\"}}\n";

static model *parse_ok(const char *text)
{
    model *m = NULL;
    char err[UTIL_ERRLEN] = "";
    int r = model_parse(text, strlen(text), "t.json", &m, err, sizeof(err));
    if (r < 0)
        fail_msg("parse failed: %s", err);
    return m;
}

static void expect_error(const char *text, const char *want)
{
    model *m = NULL;
    char err[UTIL_ERRLEN] = "";

    assert_true(model_parse(text, strlen(text), "t.json", &m, err, sizeof(err)) < 0);
    assert_null(m);
    if (!strstr(err, want))
        fail_msg("error '%s' does not contain '%s'", err, want);
    assert_null(strchr(err, '\n'));
}

static void test_default_model_loads(void **state)
{
    model *m;
    char err[UTIL_ERRLEN];

    assert_int_equal(model_load_default(&m, err, sizeof(err)), 0);
    assert_string_equal(m->events[0], "perf::TASK-CLOCK");
    assert_int_equal(m->n_classes, 1);
    assert_int_equal(m->class_event, -1);
    assert_false(m->training.present);
    assert_int_equal(strlen(m->sha256), 64);
    model_free(m);
}

static void test_round_trip(void **state)
{
    model *m = parse_ok(two_class), *back;
    char path[] = "/tmp/wattprof-model-XXXXXX", err[UTIL_ERRLEN];
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    close(fd);
    /* Values that do not print exactly in short decimal form. */
    m->classes[1].coef[2] = 1.0 / 3.0;
    m->scale_max[0] = 3.1e9 + 0.1;
    assert_int_equal(model_save(m, path, err, sizeof(err)), 0);
    assert_int_equal(model_load(path, &back, err, sizeof(err)), 0);
    assert_string_equal(back->sha256, m->sha256); /* save hashes what it wrote */
    assert_int_equal(back->n_events, 4);
    assert_int_equal(back->class_event, 2);
    assert_float_equal(back->class_threshold, 2e7, 0);
    assert_true(back->classes[1].coef[2] == 1.0 / 3.0);
    assert_true(back->scale_max[0] == 3.1e9 + 0.1);
    assert_string_equal(back->classes[0].name, "high-miss");
    assert_true(back->training.present);
    assert_int_equal(back->training.rows, 86400);
    assert_float_equal(back->training.cv_mape, 0.043, 0);
    assert_string_equal(back->target[1], "dram");
    unlink(path);
    model_free(back);
    model_free(m);
}

static void test_classify_at_threshold(void **state)
{
    model *m = parse_ok(two_class);

    assert_int_equal(model_classify(m, 2e7), 0); /* >= threshold: high-miss */
    assert_int_equal(model_classify(m, nextafter(2e7, 0)), 1);
    assert_int_equal(model_classify(m, 0), 1);
    model_free(m);
}

static void test_power(void **state)
{
    model *m = parse_ok(two_class);
    double x[] = {3.1e9, 0, 4.0e7, 0.5e9};

    /* low-miss: 63.2 + 1*1 + 3*0.5 + 4*0.5 */
    assert_float_equal(model_power(m, 1, x), 63.2 + 1 + 1.5 + 2, 1e-9);
    assert_float_equal(model_dynamic_power(m, 1, x), 1 + 1.5 + 2, 1e-9);
    model_free(m);
}

static char *replace(const char *from, const char *to);

/* A feature constant in training (scaler max == min, as `wattprof train`
 * writes it) loads and contributes nothing, whatever its coefficient. */
static void test_constant_feature(void **state)
{
    model *m = parse_ok(replace("\"min\": [0, 0, 0, 0]", "\"min\": [0, 5.2e9, 0, 0]"));
    double x[] = {3.1e9, 1e12, 4.0e7, 0.5e9};

    /* low-miss: 63.2 + 1*1 + (instructions: no term) + 3*0.5 + 4*0.5 */
    assert_float_equal(model_power(m, 1, x), 63.2 + 1 + 1.5 + 2, 1e-9);
    assert_float_equal(model_dynamic_power(m, 1, x), 1 + 1.5 + 2, 1e-9);
    model_free(m);
}

static void test_syntax_error_names_line_col(void **state)
{
    expect_error("{\"format\": \"wattprof-model/1\",\n \"name\": }", "t.json:2:10:");
    expect_error("{\"format\": \"wattprof-model/1\"", "t.json:1:");
    expect_error("", "t.json:1:1:");
}

static char *replace(const char *from, const char *to)
{
    static char buf[4096];
    const char *at = strstr(two_class, from);
    assert_non_null(at);
    snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - two_class), two_class, to, at + strlen(from));
    return buf;
}

static void test_validation_names_field(void **state)
{
    expect_error(replace("wattprof-model/1", "wattprof-model/9"), "format 'wattprof-model/9'");
    expect_error(replace("\"max\": [3.1e9, 5.2e9, 8.0e7, 1.0e9]", "\"max\": [1, 2]"),
                 "'scaler.max' has 2 numbers, expected 4");
    expect_error(replace("[1, 2, 3, 4]", "[1, 2, \"x\", 4]"),
                 "'classes.models[1].coef[2]' must be a number");
    expect_error(replace("\"event\": \"cache-misses\"", "\"event\": \"LLC-misses\""),
                 "classes.event 'LLC-misses' is not one of the model's events");
    expect_error(replace("\"idle_power_w\": 41.5", "\"idle_power_w\": -1"),
                 "idle_power_w (-1) is not from 0 to 1e+06 W");
    /* Coefficients that pass one by one but overflow together, or out of
     * scale; a scaler whose max is below its min. */
    expect_error(replace("[1, 2, 3, 4]", "[1e308, 1e308, 0, 0]"),
                 "class 'low-miss' gives up to inf W over the scaler's range, more than 1e+06 W");
    expect_error(replace("\"intercept\": 109.7", "\"intercept\": 2e6"),
                 "class 'high-miss' gives up to 2e+06 W");
    expect_error(replace("\"min\": [0, 0, 0, 0]", "\"min\": [0, 6e9, 0, 0]"),
                 "scaler.max[1] (5.2e+09) is below scaler.min[1] (6e+09) for 'instructions'");
    expect_error(replace("\"idle_power_w\": 41.5,", ""), "missing field 'idle_power_w'");
    expect_error(replace("\"instructions\"", "\"cycles\""), "lists 'cycles' twice");
    expect_error(replace("\"max\": [3.1e9", "\"max\": [-3.1e9"), "scaler.max[0]");
    expect_error(replace("\"mode\": \"cumulative\"", "\"mode\": \"sometimes\""),
                 "classes.mode 'sometimes'");
    expect_error("[1, 2]", "a model file is a JSON object");
    /* A misspelt or unknown field was dropped silently, any engine taken. */
    expect_error(replace("\"ridge\"", "\"bogus\""),
                 "engine 'bogus' is not one of ols, ridge, lasso");
    expect_error(replace("\"idle_power_w\": 41.5", "\"idle_power_w\": 41.5, \"idle_w\": 3"),
                 "t.json: unknown field 'idle_w'");
    expect_error(replace("\"intercept\": 63.2", "\"intercept\": 63.2, \"coeff\": [1]"),
                 "unknown field 'classes.models[1].coeff'");
    expect_error(replace("\"mode\": \"cumulative\"", "\"mode\": \"cumulative\", \"thresh\": 1"),
                 "unknown field 'classes.thresh'");
    expect_error(replace("\"min\": [0, 0, 0, 0]", "\"min\": [0, 0, 0, 0], \"mean\": 1"),
                 "unknown field 'scaler.mean'");
    expect_error(replace("\"rows\": 86400", "\"rows\": 86400, \"cv\": 1"),
                 "unknown field 'training.cv'");
}

static void test_unreadable_file(void **state)
{
    model *m;
    char err[UTIL_ERRLEN];

    assert_int_equal(model_load("/nonexistent/m.json", &m, err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "/nonexistent/m.json: cannot read model: No such file or directory");
    assert_int_equal(model_load("/tmp", &m, err, sizeof(err)), -EISDIR);
}

static void test_expr_model(void **state)
{
    char path[] = "/tmp/wattprof-expr-XXXXXX";
    const char *text = "{\"format\": \"wattprof-model/1\", \"name\": \"memory\", "
                       "\"engine\": \"expr\", \"expression\": \"3 * cube(n) + 2 * n * m + 5\", "
                       "\"features\": [\"n\", \"m\"], \"target\": \"mem\"}";
    double n[] = {2, 1}, m[] = {3, 0}, out[2];
    const double *cols[] = {n, m};
    model_expr *e;
    model *pm;
    size_t nf;
    char err[UTIL_ERRLEN];
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(model_expr_load(path, &e, err, sizeof(err)), 0);
    assert_string_equal(model_expr_features(e, &nf)[1], "m");
    assert_int_equal(model_expr_predict(e, cols, 2, out), 0);
    assert_float_equal(out[0], 41, 1e-12);
    assert_float_equal(out[1], 8, 1e-12);
    model_expr_free(e);
    /* A power-model loader refuses it, saying what it is. */
    assert_true(model_load(path, &pm, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "engine 'expr' is an equation over program parameters"));
    unlink(path);
}

static void test_expr_model_unknown_feature(void **state)
{
    char path[] = "/tmp/wattprof-expr-XXXXXX";
    const char *text = "{\"engine\": \"expr\", \"expression\": \"n + k\", "
                       "\"features\": [\"n\"]}";
    model_expr *e;
    char err[UTIL_ERRLEN];
    int fd = mkstemp(path);

    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(model_expr_load(path, &e, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "'k'"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_model_loads),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_classify_at_threshold),
        cmocka_unit_test(test_power),
        cmocka_unit_test(test_constant_feature),
        cmocka_unit_test(test_syntax_error_names_line_col),
        cmocka_unit_test(test_validation_names_field),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_expr_model),
        cmocka_unit_test(test_expr_model_unknown_feature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
