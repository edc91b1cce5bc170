/* util: the few helpers every part of wattprof shares.
 *
 * Logging follows sd-daemon conventions: each line starts with a priority
 * prefix ("<3>") when stderr goes to the journal (JOURNAL_STREAM is set),
 * otherwise with the program name, so the same binary reads well in a
 * terminal and in journald.  Functions that can fail return a negative errno
 * and, where a person needs to know more, fill an error buffer with one line
 * that names the input at fault. */
#ifndef WATTPROF_UTIL_H
#define WATTPROF_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTIL_ERRLEN 512 /* size of every error-message buffer in wattprof */

enum util_log_level {
    UTIL_LOG_ERR = 3,
    UTIL_LOG_WARNING = 4,
    UTIL_LOG_NOTICE = 5,
    UTIL_LOG_INFO = 6,
    UTIL_LOG_DEBUG = 7
};

/* Writes one line to stderr at the given syslog level. */
void util_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_error(...) util_log(UTIL_LOG_ERR, __VA_ARGS__)
#define log_warning(...) util_log(UTIL_LOG_WARNING, __VA_ARGS__)
#define log_info(...) util_log(UTIL_LOG_INFO, __VA_ARGS__)
#define log_debug(...) util_log(UTIL_LOG_DEBUG, __VA_ARGS__)

/* printf into an error buffer of errlen bytes (no-op when err is NULL);
 * returns -error so callers can write `return util_err(err, n, -EINVAL, ...)`. */
int util_err(char *err, size_t errlen, int error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads a whole file into a NUL-terminated malloc'd buffer. Returns 0 or
 * -errno; *len excludes the terminator. */
int util_read_file(const char *path, char **buf, size_t *len);

/* Files that hold other users' command lines (the database, a recording)
 * are created with this mode whatever the umask; group: the daemon's group. */
#define UTIL_PRIVATE_FILE_MODE 0640

/* open(path, flags | O_CREAT | O_CLOEXEC) for such a file: a regular file it
 * creates gets exactly UTIL_PRIVATE_FILE_MODE, one that exists loses the
 * permissions of others; anything else (a device, a FIFO) is left as it
 * is.  Returns the descriptor or -errno. */
int util_open_private(const char *path, int flags);

/* SHA-256 of a buffer as 64 lowercase hex digits plus NUL (hex must hold 65). */
void util_sha256_hex(const void *data, size_t len, char hex[65]);

/* Nanoseconds on the given clock (CLOCK_MONOTONIC, CLOCK_REALTIME, ...). */
uint64_t util_now_ns(int clock_id);

/* Line and column (both 1-based) of byte offset `off` in `text`. */
void util_line_col(const char *text, size_t off, int *line, int *col);

/* The shortest %g form of v, with at most max_digits (1..17) significant
 * digits, that reads back as v; failing that, the max_digits form. A
 * magnitude from 1 to 1e12 keeps its integer digits: "80", not "8e+01".
 * 17 digits always read back. Returns buf. */
#define UTIL_NUMLEN 32 /* enough for any %.17g */
char *util_format_double(char buf[UTIL_NUMLEN], double v, int max_digits);

/* Strict number parsing: the whole string must be a finite number. */
int util_parse_double(const char *s, double *out);
int util_parse_long(const char *s, long *out);

/* Splits "a,b,c" into a malloc'd array of malloc'd strings (empty items are
 * an error). Free with util_strv_free. */
int util_split_list(const char *s, char sep, char ***out, size_t *n);
void util_strv_free(char **v, size_t n);

/* UTF-8 (utf8.c), strict as RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF.  Process names and command lines are bytes; what
 * wattprof sends as JSON or Prometheus text is repaired with these. */

/* Length (1-4) of the valid sequence at s, of at most `left` bytes; 0 when
 * s[0] does not start one. */
size_t util_utf8_seq(const unsigned char *s, size_t left);

/* Offset of the first byte that is not valid UTF-8, or len when all are. */
size_t util_utf8_check(const char *s, size_t len);

/* A malloc'd, NUL-terminated copy of len bytes of s in which each byte that
 * does not start a valid sequence is U+FFFD; *out_len (may be NULL) gets its
 * length.  NULL when out of memory. */
char *util_utf8_repair(const char *s, size_t len, size_t *out_len);

/* Regexes (regex.c): the patterns users give wattprof, compiled and
 * matched by PCRE2 (Perl-compatible syntax) with bounded cost, since they
 * come from clients of a long-running daemon.  A util_regex holds its own
 * match buffer, so one thread matches with it at a time. */
#define UTIL_REGEX_MAX_LEN 1024     /* bytes of pattern */
#define UTIL_REGEX_MAX_STEPS 100000 /* backtracking steps (and depth) of one match */

typedef struct util_regex util_regex;

/* Compiles `pattern`.  Returns 0 with *out set, or -EINVAL with `err` saying
 * what is wrong and at which byte offset ("missing closing parenthesis at
 * offset 1"; callers name the pattern), or -ENOMEM.  A pattern over
 * UTIL_REGEX_MAX_LEN, or one whose compiled form would be too large, is
 * wrong too. */
int util_regex_new(const char *pattern, util_regex **out, char *err, size_t errlen);

/* 1 when `text` matches anywhere, 0 when not, -E2BIG when the match gave up
 * after UTIL_REGEX_MAX_STEPS steps (callers take that as no match). */
int util_regex_match(util_regex *re, const char *text);

/* util_regex_new and free: 0 when `pattern` compiles, else as util_regex_new. */
int util_regex_check(const char *pattern, char *err, size_t errlen);

void util_regex_free(util_regex *re);

#endif
