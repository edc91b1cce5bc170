/* The exporter's group totals of daemon/groups.c: each set of labels
 * (uid, command, unit, job) has one group, found again at the same index
 * however many groups there are, in the table and in a copy of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "daemon.h"

#include <stdio.h>
#include <string.h>

#define N_GROUPS 5000

static void labels_of(size_t i, uid_t *uid, char comm[17], char unit[LABELS_UNIT_MAX],
                      char job[LABELS_JOB_MAX])
{
    *uid = (uid_t)(i % 7);
    snprintf(comm, 17, "cmd%u", (unsigned)(i / 3 % 100000));
    snprintf(unit, LABELS_UNIT_MAX, "%s", i % 3 == 0 ? "" : i % 3 == 1 ? "a.service" : "b.scope");
    snprintf(job, LABELS_JOB_MAX, "%s", i % 5 == 0 ? "" : "42");
}

/* Every index i names distinct labels: the command (i / 3) and the unit
 * (i % 3) give i back. */
static void test_many(void **state)
{
    groups g = {0};
    uid_t uid;
    char comm[17], unit[LABELS_UNIT_MAX], job[LABELS_JOB_MAX];
    size_t idx;

    (void)state;
    for (size_t i = 0; i < N_GROUPS; i++) {
        labels_of(i, &uid, comm, unit, job);
        assert_int_equal(groups_find(&g, uid, comm, unit, job, &idx), 0);
        assert_int_equal(idx, i); /* new: appended, zeroed */
        assert_true(g.v[idx].energy_j == 0);
        g.v[idx].energy_j = (double)i;
    }
    assert_int_equal(g.n, N_GROUPS);
    for (size_t i = N_GROUPS; i-- > 0;) {
        labels_of(i, &uid, comm, unit, job);
        assert_int_equal(groups_find(&g, uid, comm, unit, job, &idx), 0);
        assert_int_equal(idx, i);
        assert_int_equal(g.v[idx].uid, uid);
        assert_string_equal(g.v[idx].comm, comm);
        assert_string_equal(g.v[idx].unit, unit);
        assert_string_equal(g.v[idx].job, job);
        assert_true(g.v[idx].energy_j == (double)i);
    }
    assert_int_equal(g.n, N_GROUPS);

    /* A copy has the groups but not the table: its first find builds it. */
    groups c = {0};
    assert_int_equal(groups_copy(&c, &g), 0);
    assert_null(c.slot);
    for (size_t i = 0; i < N_GROUPS; i += 7) {
        labels_of(i, &uid, comm, unit, job);
        assert_int_equal(groups_find(&c, uid, comm, unit, job, &idx), 0);
        assert_int_equal(idx, i);
    }
    assert_int_equal(c.n, N_GROUPS);
    groups_free(&c);
    groups_free(&g);
    assert_null(g.v);
    assert_null(g.slot);
}

/* Labels that differ in one field only are different groups. */
static void test_each_field(void **state)
{
    groups g = {0};
    size_t a, b, c, d, e, again;

    (void)state;
    assert_int_equal(groups_find(&g, 1000, "make", "x.service", "7", &a), 0);
    assert_int_equal(groups_find(&g, 1001, "make", "x.service", "7", &b), 0);
    assert_int_equal(groups_find(&g, 1000, "cc1", "x.service", "7", &c), 0);
    assert_int_equal(groups_find(&g, 1000, "make", "y.service", "7", &d), 0);
    assert_int_equal(groups_find(&g, 1000, "make", "x.service", "", &e), 0);
    assert_int_equal(g.n, 5);
    assert_true(a != b && a != c && a != d && a != e);
    assert_int_equal(groups_find(&g, 1000, "make", "x.service", "7", &again), 0);
    assert_int_equal(again, a);
    /* A comm is 16 bytes: the group keeps it cut, as the kernel does. */
    assert_int_equal(groups_find(&g, 0, "0123456789abcdef", "", "", &again), 0);
    assert_string_equal(g.v[again].comm, "0123456789abcdef");
    assert_int_equal(g.n, 6);
    groups_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_each_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
