/* util: logging, file reading, hashing and parsing shared by all of wattprof. */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char *program_invocation_short_name;

void util_log(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* journald reads the priority from the prefix; a terminal wants a name. */
    if (getenv("JOURNAL_STREAM"))
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, line);
}

int util_err(char *err, size_t errlen, int error, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return error < 0 ? error : -error;
}

int util_open_private(const char *path, int flags)
{
    int fd = open(path, flags | O_CREAT | O_EXCL | O_CLOEXEC, UTIL_PRIVATE_FILE_MODE);
    bool created = fd >= 0;
    struct stat st;
    mode_t want;

    if (fd < 0 && errno == EEXIST && !(flags & O_EXCL))
        fd = open(path, (flags & ~O_CREAT) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return fd;
    want = created ? UTIL_PRIVATE_FILE_MODE : st.st_mode & 07770;
    if ((st.st_mode & 07777) != want && fchmod(fd, want) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int util_read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    size_t used = 0, cap = 0;
    int r = 0;

    if (!f)
        return -errno;
    for (;;) {
        if (used + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *n = realloc(data, ncap);
            if (!n) {
                r = -ENOMEM;
                goto out;
            }
            data = n;
            cap = ncap;
        }
        errno = 0;
        size_t got = fread(data + used, 1, cap - used - 1, f);
        used += got;
        if (got == 0) {
            if (ferror(f))
                r = errno ? -errno : -EIO; /* EISDIR for a directory */
            break;
        }
    }
out:
    fclose(f);
    if (r < 0) {
        free(data);
        return r;
    }
    data[used] = '\0';
    *buf = data;
    if (len)
        *len = used;
    return 0;
}

void util_sha256_hex(const void *data, size_t len, char hex[65])
{
    SHA2_CTX ctx;
    uint8_t digest[SHA256_DIGEST_LENGTH];

    SHA256Init(&ctx);
    SHA256Update(&ctx, data, len);
    SHA256Final(digest, &ctx);
    for (size_t i = 0; i < sizeof(digest); i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

uint64_t util_now_ns(int clock_id)
{
    struct timespec ts;

    clock_gettime(clock_id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void util_line_col(const char *text, size_t off, int *line, int *col)
{
    int l = 1, c = 1;

    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

char *util_format_double(char buf[UTIL_NUMLEN], double v, int max_digits)
{
    double a = fabs(v);
    int prec = a >= 1 && a < 1e12 ? (int)log10(a) + 1 : 1;

    if (max_digits > 17)
        max_digits = 17;
    if (max_digits < 1)
        max_digits = 1;
    if (prec > max_digits)
        prec = max_digits;
    for (; prec <= max_digits; prec++) {
        snprintf(buf, UTIL_NUMLEN, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

int util_parse_double(const char *s, double *out)
{
    char *end;
    double v;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    if (*end != '\0' || errno == ERANGE || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

int util_parse_long(const char *s, long *out)
{
    char *end;
    long v;

    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return -EINVAL;
    *out = v;
    return 0;
}

int util_split_list(const char *s, char sep, char ***out, size_t *n)
{
    size_t count = 1, k = 0;
    char **v;

    for (const char *p = s; *p; p++)
        count += *p == sep;
    v = calloc(count, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (const char *p = s;; p++) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) {
            util_strv_free(v, k);
            return -EINVAL;
        }
        v[k] = strndup(p, len);
        if (!v[k]) {
            util_strv_free(v, k);
            return -ENOMEM;
        }
        k++;
        if (!end)
            break;
        p = end;
    }
    *out = v;
    *n = k;
    return 0;
}

void util_strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
