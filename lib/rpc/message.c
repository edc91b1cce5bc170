/* rpc message: Varlink framing (JSON objects ended by NUL) and the
 * calls, replies and errors that travel in it. */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rpc_frame_next(const rpc_buf *b, size_t max, const char **msg, size_t *len)
{
    const char *nul = b->len ? memchr(b->data, '\0', b->len) : NULL;

    if (!nul)
        return b->len > max ? -E2BIG : 0;
    if ((size_t)(nul - b->data) > max)
        return -E2BIG;
    *msg = b->data;
    *len = (size_t)(nul - b->data);
    return 1;
}

/* Parses exactly len bytes as one JSON value, or explains why not.  text[len]
 * must be the NUL terminator: it tells the tokenizer the input has ended. */
json_object *rpc_json_parse(const char *text, size_t len, char *why, size_t whylen)
{
    json_tokener *tok;
    json_object *obj;
    enum json_tokener_error e;

    size_t bad = util_utf8_check(text, len); /* json-c checks only the shape */

    if (bad < len) {
        util_err(why, whylen, EBADMSG, "not UTF-8 at byte %zu", bad);
        return NULL;
    }
    tok = json_tokener_new();
    if (!tok) {
        util_err(why, whylen, ENOMEM, "out of memory");
        return NULL;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    obj = json_tokener_parse_ex(tok, text, (int)len + 1);
    e = json_tokener_get_error(tok);
    if (e == json_tokener_continue) {
        util_err(why, whylen, EBADMSG, "malformed JSON: message ends inside a value");
    } else if (e != json_tokener_success) {
        util_err(why, whylen, EBADMSG, "malformed JSON at byte %zu: %s",
                 json_tokener_get_parse_end(tok), json_tokener_error_desc(e));
    } else if (json_tokener_get_parse_end(tok) != len) {
        util_err(why, whylen, EBADMSG, "malformed JSON: trailing data at byte %zu",
                 json_tokener_get_parse_end(tok));
        json_object_put(obj);
        obj = NULL;
    }
    json_tokener_free(tok);
    return e == json_tokener_success ? obj : NULL;
}

/* Reads an optional boolean member; -EBADMSG when present with another type. */
static int get_flag(json_object *obj, const char *key, bool *out)
{
    json_object *v;

    *out = false;
    if (!json_object_object_get_ex(obj, key, &v) || !v)
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return -EBADMSG;
    *out = json_object_get_boolean(v);
    return 0;
}

int rpc_msg_parse_call(const char *text, size_t len, rpc_call_hdr *h, const char **field, char *why,
                       size_t whylen)
{
    json_object *m, *p;

    memset(h, 0, sizeof(*h));
    *field = "";
    h->obj = rpc_json_parse(text, len, why, whylen);
    if (!h->obj)
        return -EBADMSG;
    if (!json_object_is_type(h->obj, json_type_object)) {
        util_err(why, whylen, EBADMSG, "a message must be a JSON object");
        goto bad;
    }
    if (!json_object_object_get_ex(h->obj, "method", &m) ||
        !json_object_is_type(m, json_type_string)) {
        *field = "method";
        util_err(why, whylen, EBADMSG, "a call needs \"method\" as a string");
        goto bad;
    }
    h->method = json_object_get_string(m);
    if (json_object_object_get_ex(h->obj, "parameters", &p) && p) {
        if (!json_object_is_type(p, json_type_object)) {
            *field = "parameters";
            util_err(why, whylen, EBADMSG, "\"parameters\" must be an object");
            goto bad;
        }
        h->params = json_object_get(p);
    } else {
        h->params = json_object_new_object();
        if (!h->params)
            goto bad;
    }
    if (get_flag(h->obj, "more", &h->more) < 0) {
        *field = "more";
        util_err(why, whylen, EBADMSG, "\"more\" must be a boolean");
        goto bad;
    }
    if (get_flag(h->obj, "oneway", &h->oneway) < 0) {
        *field = "oneway";
        util_err(why, whylen, EBADMSG, "\"oneway\" must be a boolean");
        goto bad;
    }
    return 0;
bad:
    rpc_call_hdr_free(h);
    return -EBADMSG;
}

void rpc_call_hdr_free(rpc_call_hdr *h)
{
    json_object_put(h->params);
    json_object_put(h->obj);
    memset(h, 0, sizeof(*h));
}

/* Serialises obj (consumed) with its NUL terminator counted in *len.  A
 * string that is not UTF-8 (a process's name is any bytes it chose) has each
 * bad byte sent as U+FFFD: JSON's own syntax is ASCII, so repairing the text
 * repairs exactly the strings, and the peer gets a message it can read. */
static int finish(json_object *obj, char **text, size_t *len)
{
    size_t n;
    const char *s;

    if (!obj)
        return -ENOMEM;
    s = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN, &n);
    if (s && util_utf8_check(s, n) < n)
        *text = util_utf8_repair(s, n, &n);
    else
        *text = s ? strndup(s, n) : NULL;
    json_object_put(obj);
    if (!*text)
        return -ENOMEM;
    *len = n + 1;
    return 0;
}

/* Adds params (consumed; NULL = {}) under "parameters". */
static int add_params(json_object *obj, json_object *params)
{
    if (!params)
        params = json_object_new_object();
    if (!params || json_object_object_add(obj, "parameters", params) < 0) {
        json_object_put(params);
        return -ENOMEM;
    }
    return 0;
}

int rpc_msg_reply(json_object *params, bool continues, char **text, size_t *len)
{
    json_object *obj = json_object_new_object();

    if (!obj || add_params(obj, params) < 0 ||
        (continues && json_object_object_add(obj, "continues", json_object_new_boolean(1)) < 0)) {
        json_object_put(obj);
        return -ENOMEM;
    }
    return finish(obj, text, len);
}

int rpc_msg_error(const char *name, json_object *params, char **text, size_t *len)
{
    json_object *obj = json_object_new_object();

    if (!obj || json_object_object_add(obj, "error", json_object_new_string(name)) < 0 ||
        add_params(obj, params) < 0) {
        json_object_put(obj);
        return -ENOMEM;
    }
    return finish(obj, text, len);
}

int rpc_msg_call(const char *method, json_object *params, bool more, bool oneway, char **text,
                 size_t *len)
{
    json_object *obj = json_object_new_object();

    if (!obj || json_object_object_add(obj, "method", json_object_new_string(method)) < 0 ||
        add_params(obj, params) < 0 ||
        (more && json_object_object_add(obj, "more", json_object_new_boolean(1)) < 0) ||
        (oneway && json_object_object_add(obj, "oneway", json_object_new_boolean(1)) < 0)) {
        json_object_put(obj);
        return -ENOMEM;
    }
    return finish(obj, text, len);
}
