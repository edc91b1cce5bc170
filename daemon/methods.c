/* methods: io.wattprof.Monitor, the daemon's Varlink interface
 * (lib/rpc/io.wattprof.Monitor.varlink has the types and their meaning).
 *
 * Live values come from the sampler's once-a-second snapshot; history from
 * the store through a read-only connection owned by the server thread.
 * Access: root and members of the configured group see everything; anyone
 * else sees only their own processes, at one-second resolution or coarser
 * (the kernel made energy_uj root-only because fine-grained power leaks
 * information).
 *
 * This file has what the methods share and their registration; each
 * concern has its file: methods_status.c, methods_process.c,
 * methods_subscribe.c, methods_models.c, methods_jobs.c. */
#include "methods-internal.h"
#include "util/util.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t methods_now_s(void)
{
    return (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000000ull);
}

/* Now for the windows of queries: the clock stored rows are stamped with. */
int64_t methods_data_now_s(daemon_ctx *ctx)
{
    return sampler_now_ns(ctx->smp) / 1000000000;
}

json_object *methods_num_or_null(double v)
{
    return isfinite(v) ? json_object_new_double(v) : NULL;
}

const char *methods_class_name(const model *m, int k)
{
    if (k < 0 || (size_t)k >= m->n_classes)
        return "unknown";
    return m->classes[k].name ? m->classes[k].name : "all";
}

static json_object *strings_json(char *const *v, size_t n)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

/* The Model type; `loaded` is when it was last loaded (NAN: only on record). */
json_object *methods_model_json(const model *m, bool in_use, double loaded)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "name", json_object_new_string(m->name));
    json_object_object_add(o, "sha256", json_object_new_string(m->sha256));
    json_object_object_add(o, "engine", json_object_new_string(m->engine));
    json_object_object_add(o, "target", strings_json(m->target, m->n_target));
    json_object_object_add(o, "events", strings_json(m->events, m->n_events));
    json_object_object_add(o, "calibrated", json_object_new_boolean(m->training.present));
    json_object_object_add(
        o, "created", m->training.created ? json_object_new_string(m->training.created) : NULL);
    json_object_object_add(o, "cv_mape",
                           m->training.present ? methods_num_or_null(m->training.cv_mape) : NULL);
    json_object_object_add(o, "in_use", json_object_new_boolean(in_use));
    json_object_object_add(o, "loaded", methods_num_or_null(loaded));
    return o;
}

static void user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char tmp[1024];

    if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
}

/* The names of the uids one reply shows: getpwuid_r reads /etc/passwd on
 * every call (a quarter of ListProcesses' time in the query-load profile),
 * and hundreds of processes have only a few owners. */
const char *methods_cached_user(user_cache *c, uid_t uid)
{
    size_t i;

    for (i = 0; i < c->n; i++)
        if (c->uid[i] == uid)
            return c->name[i];
    i = c->n < USER_CACHE_SLOTS ? c->n++ : USER_CACHE_SLOTS - 1; /* full: reuse the last */
    c->uid[i] = uid;
    user_name(uid, c->name[i], sizeof(c->name[i]));
    return c->name[i];
}

json_object *methods_host_json(const daemon_status *st)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "measured_w", methods_num_or_null(st->host_measured_w));
    json_object_object_add(o, "modeled_w", json_object_new_double(st->host_modeled_w));
    json_object_object_add(o, "idle_w", json_object_new_double(st->idle_w));
    double total = isfinite(st->host_measured_w) ? st->host_measured_w : st->host_modeled_w;
    json_object_object_add(
        o, "attributed_w",
        json_object_new_double(fmax(0, total - st->idle_w - st->unattributed_w)));
    json_object_object_add(o, "unattributed_w", json_object_new_double(st->unattributed_w));
    json_object_object_add(o, "untracked_cpu", methods_num_or_null(st->untracked_cpu));
    json_object_object_add(o, "untracked_dynamic_w", methods_num_or_null(st->untracked_w));
    return o;
}

/* A live process as the Process type, from the snapshot. */
json_object *methods_live_json(const live_proc *p, const model *m, user_cache *users)
{
    json_object *o = json_object_new_object();
    const char *user = methods_cached_user(users, p->uid);

    json_object_object_add(o, "pid", json_object_new_int(p->pid));
    json_object_object_add(o, "start_time", json_object_new_double((double)p->start_time));
    json_object_object_add(o, "comm", json_object_new_string(p->comm));
    json_object_object_add(o, "cmdline", json_object_new_string(""));
    json_object_object_add(o, "uid", json_object_new_int((int)p->uid));
    json_object_object_add(o, "user", json_object_new_string(user));
    json_object_object_add(o, "cgroup", json_object_new_string(""));
    json_object_object_add(o, "class", json_object_new_string(methods_class_name(m, p->klass)));
    json_object_object_add(o, "power_w", json_object_new_double(p->power_w));
    json_object_object_add(o, "energy_j", json_object_new_double(p->power_w));
    json_object_object_add(o, "cpu", json_object_new_double(p->cpu));
    json_object_object_add(o, "total_j", json_object_new_double(p->total_j));
    json_object_object_add(o, "standalone_j", json_object_new_double(p->total_standalone_j));
    json_object_object_add(o, "first_seen", json_object_new_double(0));
    json_object_object_add(o, "exited", NULL);
    json_object_object_add(o, "job", p->job[0] ? json_object_new_string(p->job) : NULL);
    return o;
}

/* A stored process as the Process type. */
json_object *methods_stored_json(const store_process *p, const model *m, double window_s,
                                 bool windowed, user_cache *users)
{
    json_object *o = json_object_new_object();
    const char *user = methods_cached_user(users, (uid_t)p->uid);

    json_object_object_add(o, "pid", json_object_new_int(p->pid));
    json_object_object_add(o, "start_time", json_object_new_double((double)p->start_time));
    json_object_object_add(o, "comm", json_object_new_string(p->comm ? p->comm : ""));
    json_object_object_add(o, "cmdline", json_object_new_string(p->cmdline ? p->cmdline : ""));
    json_object_object_add(o, "uid", json_object_new_int((int)p->uid));
    json_object_object_add(o, "user", json_object_new_string(user));
    json_object_object_add(o, "cgroup", json_object_new_string(p->cgroup ? p->cgroup : ""));
    json_object_object_add(o, "class", json_object_new_string(methods_class_name(m, p->klass)));
    json_object_object_add(o, "power_w", json_object_new_double(windowed ? p->power_w : 0));
    json_object_object_add(
        o, "energy_j", json_object_new_double(windowed ? p->attributed_j : p->total_attributed_j));
    json_object_object_add(
        o, "cpu", json_object_new_double(windowed && window_s > 0 ? p->cpu_s / window_s : 0));
    json_object_object_add(o, "total_j", json_object_new_double(p->total_attributed_j));
    json_object_object_add(o, "standalone_j", json_object_new_double(p->total_standalone_j));
    json_object_object_add(o, "first_seen", json_object_new_double((double)p->first_seen));
    json_object_object_add(o, "exited",
                           p->exit_time ? json_object_new_double((double)p->exit_time) : NULL);
    json_object_object_add(o, "job", p->job && p->job[0] ? json_object_new_string(p->job) : NULL);
    return o;
}

/* How stale a query's view of the store may be.  The store already makes
 * every complete second visible once the next has begun (store.h); a query
 * also sees the second in progress up to this long ago.  Sharing one flush
 * per interval among all queries keeps the writer at about one extra commit a
 * second however many clients ask, instead of one per call
 * (tests/bench/query-load). */
#define QUERY_FRESHNESS_MS 1000

/* Commits what the sampler pushed, unless a flush under a second old did. */
void methods_sync_store(daemon_ctx *ctx)
{
    store_flush_within(ctx->st, QUERY_FRESHNESS_MS);
}

/* InvalidRegex for a comm pattern the store refused (-EINVAL).  The store
 * names the pattern in its message; the reason is asked again here, since
 * the client has the pattern and wants the regex library's words alone. */
int methods_invalid_regex(rpc_call *call, const char *pattern)
{
    char why[UTIL_ERRLEN] = "";
    json_object *e = json_object_new_object();

    util_regex_check(pattern, why, sizeof(why));
    json_object_object_add(e, "pattern", json_object_new_string(pattern));
    json_object_object_add(e, "reason", json_object_new_string(why));
    return rpc_error(call, "io.wattprof.Monitor.InvalidRegex", e);
}

int methods_storage_unavailable(rpc_call *call, const char *why)
{
    json_object *p = json_object_new_object();
    json_object_object_add(p, "reason", json_object_new_string(why));
    rpc_error(call, "io.wattprof.Monitor.StorageUnavailable", p);
    return -EIO;
}

/* The read-only connection of the queries.  While the writer cannot commit
 * (a full disk, a corrupt page) the database lags behind what was measured:
 * a query would look empty or stale, so it is StorageUnavailable instead. */
int methods_reader(daemon_ctx *ctx, rpc_call *call)
{
    char err[UTIL_ERRLEN];
    store_stats ss;

    store_get_stats(ctx->st, &ss);
    if (ss.error) {
        snprintf(err, sizeof(err), "%.400s (%llu rows wait in memory, %llu lost)", ss.error_text,
                 (unsigned long long)ss.pending_rows, (unsigned long long)ss.rows_lost);
        return methods_storage_unavailable(call, err);
    }
    if (!ctx->reader) {
        store_flush(ctx->st);
        if (store_reader_open(ctx->cfg->db_path, &ctx->reader, err, sizeof(err)) < 0)
            return methods_storage_unavailable(call, err);
    }
    if (!ctx->queried) /* the call's budget starts at its first query */
        store_reader_budget(ctx->reader, ctx->cfg->query_time_limit_s);
    ctx->queried = true;
    return 0;
}

int methods_store_failed(daemon_ctx *ctx, rpc_call *call, int r, const char *err)
{
    json_object *p;

    if (r != -ETIME)
        return methods_storage_unavailable(call, err);
    p = json_object_new_object();
    json_object_object_add(p, "limit_s", json_object_new_double(ctx->cfg->query_time_limit_s));
    json_object_object_add(p, "reason", json_object_new_string(err));
    rpc_error(call, "io.wattprof.Monitor.QueryTimeLimit", p);
    return -ETIME;
}

/* A call that ran this long, or longer, gave back what its queries took:
 * SQLite's page cache and the heap's free pages (a page of a listing of
 * 100,000 processes left the daemon 7 MiB bigger). Quicker calls, `top`'s
 * every second, keep the cache. */
#define RELEASE_AFTER_NS (100 * 1000000LL)

static int method_call(rpc_call *call, json_object *params, const rpc_peer *peer, void *userdata)
{
    struct daemon_method *m = userdata;
    daemon_ctx *ctx = m->ctx;
    int64_t t0 = (int64_t)util_now_ns(CLOCK_MONOTONIC);
    int r;

    ctx->queried = false;
    r = m->fn(call, params, peer, ctx);
    if (ctx->queried) {
        store_reader_budget(ctx->reader, 0);
        if ((int64_t)util_now_ns(CLOCK_MONOTONIC) - t0 >= RELEASE_AFTER_NS) {
            store_reader_release_memory(ctx->reader);
            malloc_trim(0);
        }
    }
    ctx->queried = false;
    return r;
}

double methods_param_double(json_object *params, const char *key, double dflt)
{
    json_object *v;
    if (json_object_object_get_ex(params, key, &v) && v)
        return json_object_get_double(v);
    return dflt;
}

const char *methods_param_string(json_object *params, const char *key)
{
    json_object *v;
    if (json_object_object_get_ex(params, key, &v) && v)
        return json_object_get_string(v);
    return NULL;
}

/* An unprivileged caller asking about another uid: PermissionDenied, the
 * same answer from every method. */
bool methods_other_uid(json_object *params, const rpc_peer *peer)
{
    json_object *v;
    return !peer->privileged && json_object_object_get_ex(params, "uid", &v) && v &&
           json_object_get_int64(v) != (int64_t)peer->uid;
}

bool methods_param_present(json_object *params, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(params, key, &v) && v;
}

int methods_register(daemon_ctx *ctx, rpc_server *srv, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        rpc_method_fn fn;
    } methods[] = {
        {"io.wattprof.Monitor.GetStatus", m_get_status},
        {"io.wattprof.Monitor.ListProcesses", m_list_processes},
        {"io.wattprof.Monitor.GetProcess", m_get_process},
        {"io.wattprof.Monitor.GetHistory", m_get_history},
        {"io.wattprof.Monitor.Subscribe", m_subscribe},
        {"io.wattprof.Monitor.ListModels", m_list_models},
        {"io.wattprof.Monitor.ReloadModels", m_reload_models},
        {"io.wattprof.Monitor.ListJobs", m_list_jobs},
    };
    int r = rpc_server_add_interface(srv, rpc_monitor_interface, err, errlen);

    _Static_assert(sizeof(methods) / sizeof(methods[0]) == DAEMON_METHODS, "DAEMON_METHODS");
    for (size_t i = 0; r == 0 && i < DAEMON_METHODS; i++) {
        ctx->methods[i] = (struct daemon_method){.ctx = ctx, .fn = methods[i].fn};
        r = rpc_server_add_method(srv, methods[i].name, method_call, &ctx->methods[i]);
    }
    return r;
}

void methods_free(daemon_ctx *ctx)
{
    while (ctx->subs) {
        subscriber *s = ctx->subs;
        ctx->subs = s->next;
        rpc_call_unref(s->call);
        free(s);
    }
    store_reader_close(ctx->reader);
    model_free(ctx->model);
    free(ctx->model_json);
}
