/* trace_fields: the --replay reader's checks of a line's values (types,
 * ranges, known fields), and where a value found wrong is in the line's
 * text: json-c does not keep that, so the value's path is walked again
 * over the text (trace_locate) to name FILE:LINE:COLUMN. */
#include "sample/trace_read-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Locating a value in the line's text: a minimal walk over JSON that json-c
 * has already accepted, so it only needs to skip strings and nesting. */
const char *trace_skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

static const char *trace_skip_string(const char *p)
{
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\' && p[1])
            p++;
    return *p ? p + 1 : p;
}

static const char *trace_skip_value(const char *p)
{
    int depth = 0;

    for (; *p; p++) {
        if (*p == '"') {
            p = trace_skip_string(p) - 1;
            if (depth == 0)
                return p + 1;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (depth == 0)
                return p;
            if (--depth == 0)
                return p + 1;
        } else if (depth == 0 && strchr(",: \t\r\n", *p)) {
            return p;
        }
    }
    return p;
}

/* The value of member `key` of the object at p (the last one when a key
 * repeats, as json-c keeps), or element `idx` of the array at p; NULL if absent. */
static const char *trace_child(const char *p, const char *key, size_t idx)
{
    const char *found = NULL;
    size_t i = 0;

    if (*p != (key ? '{' : '['))
        return NULL;
    p = trace_skip_ws(p + 1);
    while (*p && *p != '}' && *p != ']') {
        bool match = !key && i == idx;
        if (key) {
            const char *end = trace_skip_string(p);
            size_t klen = strlen(key);
            match = (size_t)(end - p) == klen + 2 && strncmp(p + 1, key, klen) == 0;
            p = trace_skip_ws(end);
            if (*p == ':')
                p = trace_skip_ws(p + 1);
        }
        if (match)
            found = p;
        p = trace_skip_ws(trace_skip_value(p));
        if (*p == ',')
            p = trace_skip_ws(p + 1);
        i++;
    }
    return found;
}

static int trace_locate(const char *line, const trace_path *path)
{
    const char *p = trace_skip_ws(line);

    for (int d = 0; d < path->depth; d++) {
        const char *c = trace_child(p, path->key[d], path->idx[d]);
        if (!c)
            break; /* a missing member: point at its parent */
        p = c;
    }
    return (int)(p - line) + 1;
}

static void trace_path_str(const trace_path *path, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int d = 0; d < path->depth && used < len; d++) {
        int n = path->key[d] ? snprintf(buf + used, len - used, "%s%s", d ? "." : "", path->key[d])
                             : snprintf(buf + used, len - used, "[%zu]", path->idx[d]);
        used += n > 0 ? (size_t)n : 0;
    }
}

int trace_bad(trace_reader *r, const trace_path *path, char *err, size_t errlen, const char *fmt,
              ...)
{
    char what[256], where[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    trace_path_str(path, where, sizeof(where));
    if (!*where && r->lineno == 1)
        snprintf(where, sizeof(where), "header");
    return util_err(err, errlen, -EBADMSG, "%s:%lu:%d: %s%s%s", r->path, r->lineno,
                    trace_locate(r->line, path), where, *where ? ": " : "", what);
}

void trace_push_key(trace_path *p, const char *key)
{
    p->key[p->depth] = key;
    p->idx[p->depth++] = 0;
}

void trace_push_idx(trace_path *p, size_t idx)
{
    p->key[p->depth] = NULL;
    p->idx[p->depth++] = idx;
}

/* Field `key` of object `o`, which must have type `type` (json_type_double
 * also accepts integers: 2 and 2.0 are the same number). */
int trace_field(trace_reader *r, json_object *o, trace_path *path, const char *key, json_type type,
                json_object **out, char *err, size_t errlen)
{
    static const char *const type_name[] = {
        [json_type_null] = "null",        [json_type_boolean] = "a boolean",
        [json_type_double] = "a number",  [json_type_int] = "an integer",
        [json_type_object] = "an object", [json_type_array] = "an array",
        [json_type_string] = "a string",
    };

    if (!json_object_object_get_ex(o, key, out))
        return trace_bad(r, path, err, errlen, "has no \"%s\"", key);
    trace_push_key(path, key);
    json_type t = json_object_get_type(*out);
    if (t != type && !(type == json_type_double && t == json_type_int))
        return trace_bad(r, path, err, errlen, "is %s, expected %s", type_name[t], type_name[type]);
    path->depth--;
    return 0;
}

/* Only the fields a record kind defines: a misspelt one is an error, not a
 * silently missing value. */
int trace_known_fields(trace_reader *r, json_object *o, trace_path *path, const char *const *keys,
                       size_t n, char *err, size_t errlen)
{
    json_object_object_foreach(o, key, val)
    {
        bool known = false;
        (void)val;
        for (size_t i = 0; i < n && !known; i++)
            known = strcmp(key, keys[i]) == 0;
        if (!known) {
            trace_push_key(path, key);
            return trace_bad(r, path, err, errlen, "is not a field of this record");
        }
    }
    return 0;
}

/* An unsigned integer field no larger than `max`. json-c saturates numbers
 * that overflow 64 bits to UINT64_MAX, so that value means "too large". */
int trace_u64(trace_reader *r, json_object *o, trace_path *path, const char *key, uint64_t max,
              uint64_t *out, char *err, size_t errlen)
{
    json_object *v;
    int e = trace_field(r, o, path, key, json_type_int, &v, err, errlen);

    if (e < 0)
        return e;
    trace_push_key(path, key);
    if (json_object_get_int64(v) < 0)
        return trace_bad(r, path, err, errlen, "is negative");
    *out = json_object_get_uint64(v);
    if (*out > max || *out == UINT64_MAX)
        return trace_bad(r, path, err, errlen, "is out of range (at most %llu)",
                         (unsigned long long)(max == UINT64_MAX ? max - 1 : max));
    path->depth--;
    return 0;
}

int trace_string(trace_reader *r, json_object *o, trace_path *path, const char *key,
                 const char **out, char *err, size_t errlen)
{
    json_object *v;
    int e = trace_field(r, o, path, key, json_type_string, &v, err, errlen);

    if (e < 0)
        return e;
    *out = json_object_get_string(v);
    if (strlen(*out) != (size_t)json_object_get_string_len(v)) {
        trace_push_key(path, key);
        return trace_bad(r, path, err, errlen, "contains a NUL character");
    }
    return 0;
}

/* Array field `key` of exactly `n` numbers, each allowed as `kind`. */
int trace_numbers(trace_reader *r, json_object *o, trace_path *path, const char *key, size_t n,
                  const char *per, enum trace_value kind, double *out, char *err, size_t errlen)
{
    json_object *a;
    int e = trace_field(r, o, path, key, json_type_array, &a, err, errlen);

    if (e < 0)
        return e;
    trace_push_key(path, key);
    if (json_object_array_length(a) != n)
        return trace_bad(r, path, err, errlen, "has %zu values, expected %zu (one per %s)",
                         json_object_array_length(a), n, per);
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        json_type t = json_object_get_type(v);
        const char *bad;
        trace_push_idx(path, i);
        if (t != json_type_double && t != json_type_int)
            return trace_bad(r, path, err, errlen, "is not a number");
        if (t == json_type_int && json_object_get_int64(v) >= 0)
            out[i] = (double)json_object_get_uint64(v);
        else
            out[i] = json_object_get_double(v);
        if ((bad = trace_value_bad(kind, out[i])))
            return trace_bad(r, path, err, errlen, "%s", bad);
        path->depth--;
    }
    path->depth--;
    return 0;
}
