/* methods_subscribe: Subscribe, the live stream of the sampler's
 * once-a-second snapshot, and its publication from the main thread. */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int m_subscribe(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    double interval = methods_param_double(params, "interval_s", 1);
    subscriber *sub;

    CHECK_PARAMS(call, params, OPT_IN("interval_s", FLOAT, 0, 86400),
                 OPT_IN("limit", INT, 0, P_LIMIT_MAX), OPT_IN("uid", INT, 0, P_UID_MAX));
    if (!rpc_call_more(call))
        return rpc_error(call, RPC_ERR_EXPECTED_MORE, NULL);
    if (methods_other_uid(params, peer))
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (!(interval > 0) || (!peer->privileged && interval < 1))
        return rpc_error_invalid_parameter_why(call, "interval_s", "interval_s is %g, not %s",
                                               interval,
                                               peer->privileged ? "above 0" : "1 or more");
    if (!(sub = calloc(1, sizeof(*sub))))
        return -ENOMEM;
    sub->call = rpc_call_ref(call);
    sub->peer = *peer;
    sub->interval_s = interval;
    sub->limit = (size_t)fmax(0, methods_param_double(params, "limit", 10));
    sub->uid = methods_param_present(params, "uid")
                   ? (int64_t)methods_param_double(params, "uid", -1)
                   : -1;
    if (!peer->privileged)
        sub->uid = peer->uid;
    pthread_mutex_lock(&ctx->lock);
    sub->next = ctx->subs;
    ctx->subs = sub;
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

static int cmp_power(const void *a, const void *b)
{
    double x = ((const live_proc *)a)->power_w, y = ((const live_proc *)b)->power_w;
    return (x < y) - (x > y);
}

/* One reply of a subscription; NULL when it would pass REPLY_MAX_BYTES. */
static json_object *subscription_reply(const subscriber *sub, const snapshot *snap, const model *m)
{
    json_object *o = json_object_new_object(), *a = json_object_new_array();
    user_cache users = {0};
    size_t shown = 0;
    reply_budget budget;

    methods_reply_budget_init(&budget);
    json_object_object_add(o, "t", json_object_new_double((double)snap->t_ns / 1e9));
    json_object_object_add(o, "host", methods_host_json(&snap->st));
    for (size_t i = 0; i < snap->n_procs && (sub->limit == 0 || shown < sub->limit); i++) {
        if (sub->uid >= 0 && snap->procs[i].uid != (uid_t)sub->uid)
            continue;
        json_object *p = methods_live_json(&snap->procs[i], m, &users);
        json_object_array_add(a, p);
        if (!methods_reply_budget_take(&budget, p)) {
            json_object_put(a);
            json_object_put(o);
            return NULL;
        }
        shown++;
    }
    json_object_object_add(o, "processes", a);
    return o;
}

void methods_publish(daemon_ctx *ctx)
{
    snapshot *snap = sampler_snapshot(ctx->smp);
    int64_t now = (int64_t)util_now_ns(CLOCK_MONOTONIC);

    if (!snap)
        return;
    qsort(snap->procs, snap->n_procs, sizeof(live_proc), cmp_power);
    pthread_mutex_lock(&ctx->lock);
    for (subscriber **pp = &ctx->subs; *pp;) {
        subscriber *sub = *pp;
        if (rpc_call_closed(sub->call)) {
            *pp = sub->next;
            rpc_call_unref(sub->call);
            free(sub);
            continue;
        }
        if (now >= sub->next_ns) {
            json_object *reply = subscription_reply(sub, snap, ctx->model);
            sub->next_ns = now + (int64_t)(sub->interval_s * 1e9);
            if (!reply) { /* the subscription ends: the caller asks for fewer */
                methods_reply_too_large(
                    sub->call, "limit",
                    "the top processes (limit %zu, 0: all) take more than %d bytes", sub->limit,
                    REPLY_MAX_BYTES);
                *pp = sub->next;
                rpc_call_unref(sub->call);
                free(sub);
                continue;
            }
            rpc_reply_more(sub->call, reply);
        }
        pp = &sub->next;
    }
    pthread_mutex_unlock(&ctx->lock);
    sampler_snapshot_unref(snap);
}
