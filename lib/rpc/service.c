/* rpc service: org.varlink.service, the interface every Varlink service
 * answers, so generic tools (varlinkctl, python varlink) can ask what this
 * server is and what it offers. */
#include "rpc/internal.h"

#include <errno.h>
#include <string.h>

static int get_info(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    rpc_server *srv = userdata;
    json_object *out, *list;
    int r = rpc_params_check(call, params, NULL, 0);

    if (r < 0)
        return r;
    out = json_object_new_object();
    list = json_object_new_array();
    if (!out || !list) {
        json_object_put(out);
        json_object_put(list);
        return -ENOMEM;
    }
    json_object_object_add(out, "vendor", json_object_new_string(srv->vendor));
    json_object_object_add(out, "product", json_object_new_string(srv->product));
    json_object_object_add(out, "version", json_object_new_string(srv->version));
    json_object_object_add(out, "url", json_object_new_string(srv->url));
    for (size_t i = 0; i < srv->n_ifaces; i++)
        json_object_array_add(list, json_object_new_string(srv->ifaces[i].name));
    json_object_object_add(out, "interfaces", list);
    return rpc_reply(call, out);
}

static int get_description(rpc_call *call, json_object *params, const rpc_peer *peer,
                           void *userdata)
{
    static const rpc_param_spec spec[] = {{.name = "interface", .type = RPC_T_STRING}};
    rpc_server *srv = userdata;
    json_object *v, *out;
    const char *name;
    int r = rpc_params_check(call, params, spec, 1);

    if (r < 0)
        return r;
    json_object_object_get_ex(params, "interface", &v);
    name = json_object_get_string(v);
    for (size_t i = 0; i < srv->n_ifaces; i++) {
        if (strcmp(srv->ifaces[i].name, name) != 0)
            continue;
        out = json_object_new_object();
        if (!out)
            return -ENOMEM;
        json_object_object_add(out, "description", json_object_new_string(srv->ifaces[i].text));
        return rpc_reply(call, out);
    }
    out = json_object_new_object();
    if (!out)
        return -ENOMEM;
    json_object_object_add(out, "interface", json_object_new_string(name));
    return rpc_error(call, RPC_ERR_INTERFACE_NOT_FOUND, out);
}

int rpc_service_register(rpc_server *srv)
{
    int r = rpc_server_add_interface(srv, rpc_service_interface, NULL, 0);

    if (r >= 0)
        r = rpc_server_add_method(srv, "org.varlink.service.GetInfo", get_info, srv);
    if (r >= 0)
        r = rpc_server_add_method(srv, "org.varlink.service.GetInterfaceDescription",
                                  get_description, srv);
    return r;
}
