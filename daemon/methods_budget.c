/* methods_budget: what one reply may cost in bytes (REPLY_MAX_BYTES).
 *
 * A reply's list is charged member by member as it is built, at a bound of
 * the bytes json-c will write for the member (JSON_C_TO_STRING_PLAIN, as
 * lib/rpc sends replies), computed without writing it: serialising every
 * member twice doubled the time and the memory of a large reply.  The bound
 * is exact but for numbers, which get their longest form: a page ends a
 * few rows early at worst, never past the budget. */
#include "methods-internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A JSON string of len bytes: its quotes and escapes (json-c writes \" \\
 * \/ and \b \f \n \r \t as two bytes, other bytes below 0x20 as \u00XX,
 * the rest as they are). */
static size_t string_bytes(const char *s, size_t len)
{
    size_t n = 2;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c == '/' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
            c == '\t')
            n += 2;
        else if (c < 0x20)
            n += 6;
        else
            n++;
    }
    return n;
}

static size_t json_bytes(json_object *o)
{
    char num[64];
    size_t n;

    switch (json_object_get_type(o)) {
    case json_type_null:
        return 4;
    case json_type_boolean:
        return 5;
    case json_type_int:
        return (size_t)snprintf(num, sizeof(num), "%lld", (long long)json_object_get_int64(o));
    case json_type_double:
        /* %.17g and a ".0" where that looks like an integer; NaN, -Infinity */
        if (!isfinite(json_object_get_double(o)))
            return 9;
        return (size_t)snprintf(num, sizeof(num), "%.17g", json_object_get_double(o)) + 2;
    case json_type_string:
        return string_bytes(json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case json_type_array:
        n = json_object_array_length(o);
        n = 2 + (n ? n - 1 : 0);
        for (size_t i = 0; i < json_object_array_length(o); i++)
            n += json_bytes(json_object_array_get_idx(o, i));
        return n;
    case json_type_object:
        n = 2;
        json_object_object_foreach(o, key, val)
        {
            n += string_bytes(key, strlen(key)) + 2 + json_bytes(val); /* ':' and ',' */
        }
        return n;
    }
    return 0;
}

void methods_reply_budget_init(reply_budget *b)
{
    b->left = REPLY_MAX_BYTES - REPLY_RESERVE_BYTES;
}

bool methods_reply_budget_take(reply_budget *b, json_object *o)
{
    size_t n = json_bytes(o) + 1; /* and the comma before it */

    if (n > b->left)
        return false;
    b->left -= n;
    return true;
}

int methods_reply_too_large(rpc_call *call, const char *parameter, const char *fmt, ...)
{
    json_object *e = json_object_new_object();
    char why[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    json_object_object_add(e, "parameter", parameter ? json_object_new_string(parameter) : NULL);
    json_object_object_add(e, "limit_bytes", json_object_new_int64(REPLY_MAX_BYTES));
    json_object_object_add(e, "reason", json_object_new_string(why));
    return rpc_error(call, "io.wattprof.Monitor.ReplyTooLarge", e);
}
