/* Unit tests for sample/rapl.c's pure parts: the wrap of the energy counter
 * and the sum over domains that must not count core/uncore twice.  Reading
 * real trees through libpowercap is tests/integration/rapl_fake.sh. */
/* cmocka.h needs these first */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "sample/sample.h"

#include <stdint.h>
#include <string.h>

/* The value a Skylake server reports (32-bit counter, 61 uJ units). */
#define REAL_RANGE UINT64_C(262143328850)

static void test_wrap_delta_no_wrap(void **state)
{
    assert_int_equal(rapl_wrap_delta(100, 250, 1000), 150);
    assert_int_equal(rapl_wrap_delta(7, 7, 1000), 0);
    assert_int_equal(rapl_wrap_delta(0, REAL_RANGE - 1, REAL_RANGE), REAL_RANGE - 1);
}

static void test_wrap_delta_wraps(void **state)
{
    /* 900 -> 1000 (= 0) -> 50 */
    assert_int_equal(rapl_wrap_delta(900, 50, 1000), 150);
    assert_int_equal(rapl_wrap_delta(999, 0, 1000), 1);
    assert_int_equal(rapl_wrap_delta(REAL_RANGE - 10, 5, REAL_RANGE), 15);
    assert_int_equal(rapl_wrap_delta(REAL_RANGE, 0, REAL_RANGE), 0);
}

static void test_wrap_delta_reset(void **state)
{
    /* a reading above the range, or no range at all: the counter was
     * reset, and only what it counted since is known */
    assert_int_equal(rapl_wrap_delta(5000, 20, 1000), 20);
    assert_int_equal(rapl_wrap_delta(5000, 20, 0), 20);
}

/* A two-socket server with psys: what the kernel shows on such machines. */
static const struct {
    const char *name, *domain;
    unsigned package;
} server[] = {
    {"package-0", "package", 0}, {"core", "core", 0}, {"uncore", "uncore", 0}, {"dram", "dram", 0},
    {"package-1", "package", 1}, {"core", "core", 1}, {"dram", "dram", 1},     {"psys", "psys", 2},
};
#define N_SERVER (sizeof(server) / sizeof(server[0]))

static void make_server(rapl *r, rapl_zone *zones, double *delta)
{
    memset(zones, 0, N_SERVER * sizeof(*zones));
    for (size_t i = 0; i < N_SERVER; i++) {
        strcpy(zones[i].name, server[i].name);
        strcpy(zones[i].domain, server[i].domain);
        zones[i].package = server[i].package;
        /* distinct powers of two: every sum says exactly which zones it took */
        delta[i] = (double)(1u << i);
    }
    memset(r, 0, sizeof(*r));
    r->zone = zones;
    r->n = N_SERVER;
}

static double sum(const rapl *r, const double *delta, const char *const *domains, size_t n)
{
    return rapl_sum_domains(r, delta, domains, n);
}

static void test_sum_package_skips_core_uncore(void **state)
{
    rapl_zone zones[N_SERVER];
    double d[N_SERVER];
    rapl r;
    const char *pkg[] = {"package"};
    const char *pkg_core[] = {"package", "core", "uncore"};

    make_server(&r, zones, d);
    assert_float_equal(sum(&r, d, pkg, 1), 1 + 16, 0);
    /* listing the parts of package as well changes nothing */
    assert_float_equal(sum(&r, d, pkg_core, 3), 1 + 16, 0);
}

static void test_sum_dram_is_outside_package(void **state)
{
    rapl_zone zones[N_SERVER];
    double d[N_SERVER];
    rapl r;
    const char *pkg_dram[] = {"package", "dram"};
    const char *dram[] = {"dram"};

    make_server(&r, zones, d);
    assert_float_equal(sum(&r, d, pkg_dram, 2), 1 + 8 + 16 + 64, 0);
    assert_float_equal(sum(&r, d, dram, 1), 8 + 64, 0);
}

static void test_sum_parts_without_package(void **state)
{
    rapl_zone zones[N_SERVER];
    double d[N_SERVER];
    rapl r;
    const char *core[] = {"core"};
    const char *core_uncore[] = {"uncore", "core"};
    const char *psys[] = {"psys"};

    make_server(&r, zones, d);
    assert_float_equal(sum(&r, d, core, 1), 2 + 32, 0);
    assert_float_equal(sum(&r, d, core_uncore, 2), 2 + 4 + 32, 0);
    assert_float_equal(sum(&r, d, psys, 1), 128, 0);
}

static void test_sum_nothing(void **state)
{
    rapl_zone zones[N_SERVER];
    double d[N_SERVER];
    rapl r;
    const char *unknown[] = {"gpu"};
    rapl none = {0};

    make_server(&r, zones, d);
    assert_float_equal(sum(&r, d, unknown, 1), 0, 0);
    assert_float_equal(sum(&r, d, NULL, 0), 0, 0);
    /* a machine without RAPL sums to zero whatever is asked */
    assert_float_equal(sum(&none, d, unknown, 1), 0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_delta_no_wrap),
        cmocka_unit_test(test_wrap_delta_wraps),
        cmocka_unit_test(test_wrap_delta_reset),
        cmocka_unit_test(test_sum_package_skips_core_uncore),
        cmocka_unit_test(test_sum_dram_is_outside_package),
        cmocka_unit_test(test_sum_parts_without_package),
        cmocka_unit_test(test_sum_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
