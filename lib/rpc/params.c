/* rpc params: checks a call's parameters against what a method declares, so
 * each handler rejects wrong types and unknown fields the same way. */
#include "rpc/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static bool type_matches(json_object *v, enum rpc_type t)
{
    switch (t) {
    case RPC_T_INT:
        return json_object_is_type(v, json_type_int);
    case RPC_T_FLOAT:
        return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
    case RPC_T_STRING:
        return json_object_is_type(v, json_type_string);
    case RPC_T_BOOL:
        return json_object_is_type(v, json_type_boolean);
    case RPC_T_OBJECT:
        return json_object_is_type(v, json_type_object);
    case RPC_T_ARRAY:
        return json_object_is_type(v, json_type_array);
    }
    return false;
}

static const rpc_param_spec *find_spec(const char *name, const rpc_param_spec *spec, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(spec[i].name, name) == 0)
            return &spec[i];
    return NULL;
}

/* A ranged number outside its range: InvalidParameter saying so.  An
 * integer is compared as an integer (one past 2^53 is not rounded into
 * range) and shown as written. */
static int check_range(rpc_call *call, const char *key, json_object *v, const rpc_param_spec *s)
{
    if (json_object_is_type(v, json_type_int)) {
        int64_t i = json_object_get_int64(v);
        if ((double)i >= s->min && (double)i <= s->max && (s->max >= 9e18 || i <= (int64_t)s->max))
            return 0;
        rpc_error_invalid_parameter_why(call, key, "%s is %" PRId64 ", not from %.15g to %.15g",
                                        key, i, s->min, s->max);
        return -EINVAL;
    }
    double d = json_object_get_double(v);
    if (d >= s->min && d <= s->max)
        return 0;
    rpc_error_invalid_parameter_why(call, key, "%s is %.6g, not from %.15g to %.15g", key, d,
                                    s->min, s->max);
    return -EINVAL;
}

int rpc_params_check(rpc_call *call, json_object *params, const rpc_param_spec *spec, size_t n)
{
    json_object *v;

    json_object_object_foreach(params, key, val)
    {
        const rpc_param_spec *s = find_spec(key, spec, n);
        if (!s || (val ? !type_matches(val, s->type) : !s->optional)) {
            rpc_error_invalid_parameter(call, key);
            return -EINVAL;
        }
        if (val && s->ranged && check_range(call, key, val, s) != 0)
            return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (spec[i].optional)
            continue;
        if (!json_object_object_get_ex(params, spec[i].name, &v) || !v) {
            rpc_error_invalid_parameter(call, spec[i].name);
            return -EINVAL;
        }
    }
    return 0;
}
