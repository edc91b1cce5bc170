/* Unit tests for util/regex.c: the comm patterns wattprof takes from its
 * config, its clients and the top view.  Ordinary patterns match as a user
 * expects; bad ones are refused with one line saying what is wrong and
 * where; patterns that cost glibc's regcomp gigabytes or minutes
 * are refused or compiled small, and a match that would backtrack for ever
 * gives up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int match(const char *pattern, const char *text)
{
    char err[UTIL_ERRLEN] = "";
    util_regex *re;
    int r;

    if (util_regex_new(pattern, &re, err, sizeof(err)) < 0)
        fail_msg("'%s' did not compile: %s", pattern, err);
    r = util_regex_match(re, text);
    util_regex_free(re);
    return r;
}

static void refused(const char *pattern, const char *want)
{
    char err[UTIL_ERRLEN] = "";
    util_regex *re = NULL;

    assert_int_equal(util_regex_new(pattern, &re, err, sizeof(err)), -EINVAL);
    assert_null(re);
    if (!strstr(err, want))
        fail_msg("'%s': error '%s' does not say '%s'", pattern, err, want);
    assert_int_equal(util_regex_check(pattern, err, sizeof(err)), -EINVAL);
}

static void test_comm_patterns(void **state)
{
    assert_int_equal(match("^burn$", "burn"), 1);
    assert_int_equal(match("^burn$", "burner"), 0);
    assert_int_equal(match("urn", "burner"), 1);
    assert_int_equal(match("^(bu|id)", "idle"), 1);
    assert_int_equal(match("^(bu|id)", "xbu"), 0);
    assert_int_equal(match("^(python3?|mpirun|lmp_[a-z]+)$", "lmp_mpi"), 1);
    assert_int_equal(match("^(python3?|mpirun|lmp_[a-z]+)$", "python2"), 0);
    assert_int_equal(match("^[[:alpha:]]+$", "kworker"), 1);
    assert_int_equal(match("^[[:alpha:]]+$", "kworker/0:1"), 0);
    assert_int_equal(match("^wpx.{2,4}$", "wpxshort"), 0);
    assert_int_equal(match("^wpx.{2,5}$", "wpxshort"), 1);
    assert_int_equal(match("", "anything"), 1);
}

static void test_bad_patterns(void **state)
{
    refused("(", "missing closing parenthesis at offset 1");
    refused("([", "missing terminating ] for character class at offset 2");
    refused("a{2,1}", "numbers out of order in {} quantifier at offset 5");
}

/* The first two took glibc's regcomp past 2 GiB (the config fuzzer) and
 * past 20 s of CPU on this machine; the others are nested repeats of the
 * same kind.  PCRE2 refuses the first three at once and compiles the others
 * small. */
static void test_costly_patterns(void **state)
{
    char err[UTIL_ERRLEN];
    char *plus = malloc(302);

    assert_non_null(plus);
    strcpy(plus, "^(b");
    memset(plus + 3, '+', 297);
    strcpy(plus + 300, ")");
    refused(plus, "quantifier does not follow a repeatable item at offset 5");
    free(plus);
    refused("b*{0,50}{3,}", "quantifier does not follow a repeatable item");
    refused("(((a{1000}){1000}){1000})", "regular expression is too large");
    assert_int_equal(match("((b*){0,50}){3,}", "aabbaababbaabab"), 1);
    assert_int_equal(match("((a?){20}){3,}c", "aabbaababbaabab"), 0);
    assert_int_equal(util_regex_check("(a|b?){4000}", err, sizeof(err)), 0);
}

static void test_length_limit(void **state)
{
    char *p = malloc(UTIL_REGEX_MAX_LEN + 2), err[UTIL_ERRLEN];

    assert_non_null(p);
    memset(p, 'a', UTIL_REGEX_MAX_LEN);
    p[UTIL_REGEX_MAX_LEN] = '\0';
    assert_int_equal(util_regex_check(p, err, sizeof(err)), 0);
    strcat(p, "a");
    assert_int_equal(util_regex_check(p, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "pattern string is longer than the limit set by the application "
                             "at offset 0");
    free(p);
}

/* (a+)+$ on a long run of a's that ends wrong backtracks 2^n ways; the match
 * gives up after UTIL_REGEX_MAX_STEPS and says so, which callers take as
 * "no match". */
static void test_match_gives_up(void **state)
{
    char text[64];

    memset(text, 'a', 40);
    strcpy(text + 40, "!");
    assert_int_equal(match("^(a+)+$", text), -E2BIG);
    assert_int_equal(match("^(a+)+!$", text), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_patterns),   cmocka_unit_test(test_bad_patterns),
        cmocka_unit_test(test_costly_patterns), cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_match_gives_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
