/* utf8: strict UTF-8 (RFC 3629), checked and repaired.
 *
 * A process may name itself with any bytes (prctl(PR_SET_NAME) takes 15 of
 * them), and command lines and cgroup paths are bytes too.  What leaves
 * wattprof as Varlink JSON or as a Prometheus page must be UTF-8, or a
 * strict reader rejects the whole message: one process that renames itself
 * "\xff" would otherwise break every listing for every user.  So text is
 * repaired at those exits: each byte that does not start a valid sequence
 * becomes U+FFFD, as Python's errors="replace" does. */
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

size_t util_utf8_seq(const unsigned char *s, size_t left)
{
    unsigned c = s[0], n, cp, min;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 1, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 2, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 3, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (left <= n)
        return 0;
    for (unsigned k = 1; k <= n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    /* No overlong forms, no surrogates, nothing past U+10FFFF. */
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n + 1;
}

size_t util_utf8_check(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, n;

    while (i < len && (n = util_utf8_seq(u + i, len - i)) > 0)
        i += n;
    return i;
}

char *util_utf8_repair(const char *s, size_t len, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *out = malloc(len * 3 + 1), *o = out; /* each bad byte grows to 3 */

    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        size_t n = util_utf8_seq(u + i, len - i);
        if (n == 0) {
            memcpy(o, replacement, 3);
            o += 3;
            i++;
        } else {
            memcpy(o, s + i, n);
            o += n;
            i += n;
        }
    }
    *o = '\0';
    if (out_len)
        *out_len = (size_t)(o - out);
    return out;
}
