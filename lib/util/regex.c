/* regex: the patterns users give wattprof (`[track] comm`, a client's
 * `comm` filter, the top view's filter), compiled and matched with bounded
 * cost.
 *
 * These patterns come from the config file, from any client of the socket
 * and from the keyboard, and each is compiled inside a long-running process.
 * glibc's regcomp copies a repeated atom once per repeat and computes epsilon
 * closures that grow faster than that: `b+++…+` (a few hundred bytes) took
 * over 2 GiB in the config fuzzer, and `b*{0,50}{3,}` ran past 20 s of CPU.
 * PCRE2 bounds both ends with its own limits, as journalctl --grep relies
 * on: compiling is linear in the pattern, and refuses one whose compiled form
 * would be too large; matching stops after a set number of steps.  So the
 * dialect is Perl-compatible (PCRE2), which for the patterns a comm filter
 * needs (anchors, alternation, classes, repeats) reads as POSIX ERE does. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "util/util.h"

#include <errno.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

struct util_regex {
    pcre2_code *code;
    pcre2_match_data *data;       /* one match at a time, so one block */
    pcre2_match_context *context; /* carries the step limits */
};

void util_regex_free(util_regex *re)
{
    if (!re)
        return;
    pcre2_match_context_free(re->context);
    pcre2_match_data_free(re->data);
    pcre2_code_free(re->code);
    free(re);
}

/* Compiles under the length limit, or says where the pattern is wrong. */
static int compile(const char *pattern, pcre2_code **out, char *err, size_t errlen)
{
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    PCRE2_UCHAR why[128];
    PCRE2_SIZE at = 0;
    int code = 0;

    if (!cc)
        return -ENOMEM;
    pcre2_set_max_pattern_length(cc, UTIL_REGEX_MAX_LEN);
    *out = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &code, &at, cc);
    pcre2_compile_context_free(cc);
    if (*out)
        return 0;
    if (code == PCRE2_ERROR_NOMEMORY)
        return -ENOMEM;
    pcre2_get_error_message(code, why, sizeof(why));
    return util_err(err, errlen, -EINVAL, "%s at offset %zu", (const char *)why, (size_t)at);
}

int util_regex_new(const char *pattern, util_regex **out, char *err, size_t errlen)
{
    util_regex *re = calloc(1, sizeof(*re));
    int r;

    *out = NULL;
    if (!re)
        return -ENOMEM;
    r = compile(pattern, &re->code, err, errlen);
    if (r == 0) {
        re->data = pcre2_match_data_create_from_pattern(re->code, NULL);
        re->context = pcre2_match_context_create(NULL);
        if (!re->data || !re->context)
            r = -ENOMEM;
    }
    if (r < 0) {
        util_regex_free(re);
        return r == -ENOMEM ? util_err(err, errlen, r, "regex: out of memory") : r;
    }
    pcre2_set_match_limit(re->context, UTIL_REGEX_MAX_STEPS);
    pcre2_set_depth_limit(re->context, UTIL_REGEX_MAX_STEPS);
    *out = re;
    return 0;
}

int util_regex_match(util_regex *re, const char *text)
{
    int r = pcre2_match(re->code, (PCRE2_SPTR)text, strlen(text), 0, 0, re->data, re->context);

    if (r >= 0)
        return 1;
    if (r == PCRE2_ERROR_NOMATCH)
        return 0;
    if (r == PCRE2_ERROR_MATCHLIMIT || r == PCRE2_ERROR_DEPTHLIMIT || r == PCRE2_ERROR_HEAPLIMIT)
        return -E2BIG;
    return r == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EINVAL;
}

int util_regex_check(const char *pattern, char *err, size_t errlen)
{
    util_regex *re;
    int r = util_regex_new(pattern, &re, err, errlen);

    util_regex_free(re);
    return r;
}
