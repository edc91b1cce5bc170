/* rpc params: checks a call's parameters against what a method declares, so
 * each handler rejects wrong types and unknown fields the same way. */
#include "rpc/internal.h"

#include <errno.h>
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
