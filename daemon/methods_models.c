/* methods_models: ListModels, ReloadModels and the model loading they and
 * the daemon's start share. */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int m_list_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    store_model_row *rows;
    size_t n;
    char err[UTIL_ERRLEN];
    int r;

    if (rpc_params_check(call, params, NULL, 0) < 0)
        return 0;
    if (methods_reader(ctx, call) < 0)
        return 0;
    methods_sync_store(ctx);
    if ((r = store_list_models(ctx->reader, &rows, &n, err, sizeof(err))) < 0)
        return methods_store_failed(ctx, call, r, err);
    json_object *a = json_object_new_array(), *reply = json_object_new_object();
    double in_use_loaded = NAN; /* when the store last saw the model in use loaded */
    reply_budget budget;
    bool fits = true;
    methods_reply_budget_init(&budget);
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].sha256, ctx->model->sha256) == 0)
            in_use_loaded = (double)rows[i].last_loaded;
    json_object *o = methods_model_json(ctx->model, true, in_use_loaded);
    json_object_array_add(a, o);
    fits = methods_reply_budget_take(&budget, o);
    for (size_t i = 0; fits && i < n; i++) {
        model *m;
        if (strcmp(rows[i].sha256, ctx->model->sha256) == 0 ||
            model_parse(rows[i].json, strlen(rows[i].json), rows[i].name, &m, err, sizeof(err)) < 0)
            continue;
        o = methods_model_json(m, false, (double)rows[i].last_loaded);
        json_object_array_add(a, o);
        fits = methods_reply_budget_take(&budget, o);
        model_free(m);
    }
    pthread_mutex_unlock(&ctx->lock);
    store_models_free(rows, n);
    json_object_object_add(reply, "models", a);
    if (!fits) { /* no parameters to page by; never seen short of a flood of reloads */
        json_object_put(reply);
        return methods_reply_too_large(
            call, NULL, "the %zu models on record take more than %d bytes", n + 1, REPLY_MAX_BYTES);
    }
    return rpc_reply(call, reply);
}

int methods_stored_evcal(daemon_ctx *ctx, store_reader *r, const model *m, store_node_evcal *out)
{
    char err[UTIL_ERRLEN], target[sizeof(out->target)];
    store_reader *own = NULL;
    const char *why;
    int ret = 0;

    model_target_key(m, target, sizeof(target));
    if (!r && (ret = store_reader_open(ctx->cfg->db_path, &own, err, sizeof(err))) == 0)
        r = own;
    if (ret == 0)
        ret = store_node_evcal_get(r, target, out, err, sizeof(err));
    store_reader_close(own);
    if (ret == -ENOENT)
        return ret;
    if (ret < 0) {
        log_warning("cannot read the stored per-event calibration: %s", err);
        return ret;
    }
    if ((why = sampler_stored_evcal_why(ctx->smp, m, out))) {
        log_info("stored per-event calibration for %s (model %.12s) not used: %s", target,
                 out->model_sha256, why);
        return -ESTALE;
    }
    /* A reload of the model in use keeps this run's fit when it is as new
     * (the sampler decides; the snapshot only words the log). */
    snapshot *snap = sampler_snapshot(ctx->smp);
    const store_node_evcal *kept = snap ? &snap->st.calib.ev_best : NULL;
    if (kept && kept->t >= out->t && !strcmp(kept->model_sha256, out->model_sha256))
        log_info("stored per-event calibration for %s (model %.12s) not taken: this run keeps"
                 " one as new",
                 target, out->model_sha256);
    else
        log_info("stored per-event calibration for %s: idle %.2f W, penalty %g, from %lld s of"
                 " this node",
                 target, out->idle_w, out->alpha, (long long)out->rows);
    sampler_snapshot_unref(snap);
    return 0;
}

int methods_load_model(daemon_ctx *ctx, const char *path, model **for_sampler, int32_t *model_id,
                       char *err, size_t errlen)
{
    store_node_evcal stored;
    const char *origin = path ? path : "built-in cputime.json";
    model *m = NULL, *desc = NULL;
    char *json;
    size_t len;
    int r;

    /* Parse from the bytes we keep, so the hash names exactly what the store
     * records. */
    if (path && (r = util_read_file(path, &json, &len)) < 0)
        return util_err(err, errlen, r, "%s: cannot read model: %s", path, strerror(-r));
    if (!path && !(json = strdup(model_default_text())))
        return -ENOMEM;
    r = model_parse(json, strlen(json), origin, &m, err, errlen);
    if (r == 0)
        r = model_parse(json, strlen(json), origin, &desc, err, errlen);
    if (r == 0)
        r = store_model_add(ctx->st, m->sha256, m->name, m->engine, json, model_id, err, errlen);
    if (r == 0 && ctx->smp)
        r = sampler_set_model(ctx->smp, m, *model_id,
                              methods_stored_evcal(ctx, NULL, m, &stored) == 0 ? &stored : NULL,
                              err, errlen);
    if (r < 0) {
        free(json);
        model_free(m);
        model_free(desc);
        return r;
    }
    /* The server keeps its own description; the sampler owns `m`. */
    pthread_mutex_lock(&ctx->lock);
    model_free(ctx->model);
    ctx->model = desc;
    free(ctx->model_json);
    ctx->model_json = json;
    pthread_mutex_unlock(&ctx->lock);
    if (for_sampler)
        *for_sampler = m;
    return 0;
}

int m_reload_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u)
{
    daemon_ctx *ctx = u;
    const char *path = methods_param_string(params, "path");
    char err[UTIL_ERRLEN];
    int32_t id;

    CHECK_PARAMS(call, params, OPT("path", STRING));
    /* An unprivileged wattprofd serves its owner's processes only; its owner
     * may choose its model. */
    if (!peer->privileged && peer->uid != geteuid())
        return rpc_error(call, RPC_ERR_PERMISSION_DENIED, NULL);
    if (!path)
        path = ctx->cfg->model_path;
    if (methods_load_model(ctx, path, NULL, &id, err, sizeof(err)) < 0) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "path", json_object_new_string(path ? path : "built-in"));
        json_object_object_add(e, "reason", json_object_new_string(err));
        log_warning("ReloadModels refused: %s", err);
        return rpc_error(call, "io.wattprof.Monitor.ModelLoadFailed", e);
    }
    json_object *reply = json_object_new_object();
    pthread_mutex_lock(&ctx->lock);
    log_info("model %s (sha256 %.12s) loaded", ctx->model->name, ctx->model->sha256);
    json_object_object_add(reply, "model",
                           methods_model_json(ctx->model, true, (double)methods_now_s()));
    pthread_mutex_unlock(&ctx->lock);
    return rpc_reply(call, reply);
}
