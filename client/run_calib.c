/* run_calib: where `wattprof run` takes idle power from, and the part of the
 * host's work its command did not do (docs/calibration.md, "wattprof run").
 *
 * Everything above idle is what the command shares with the rest of the
 * host, so run uses the node's calibration, in this order, and says which:
 * the running daemon's idle (GetStatus over its socket, when its model
 * measures the same RAPL domains); else the node's fit stored in the
 * daemon's database; else a trained model's idle; else the host's power
 * measured for a moment before the command starts (idle only if the node
 * is idle then). The host's busy CPU that the command did not use goes
 * through the model's task-clock coefficient as untracked dynamic power:
 * its share of the energy above idle is unattributed, as in the daemon. */
#include "query.h"
#include "rpc/rpc.h"
#include "run.h"
#include "store/store.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define RUN_DAEMON_TIMEOUT_MS 2000

/* The daemon's calibration, when it has one for the same domains.
 * 1: taken; 0: none (c->idle_note says why); <0 never (a missing daemon
 * is the common case, not a failure). */
static int run_calib_daemon(struct run_ctx *c, const char *target)
{
    char path[4096], err[UTIL_ERRLEN], key[64] = "";
    rpc_client *cl = NULL;
    json_object *reply = NULL, *st, *cal, *mj, *tg;
    int r, taken = 0;

    query_socket_path(c->opt.socket, path, sizeof(path));
    if (rpc_client_connect(path, &cl, err, sizeof(err)) < 0) {
        snprintf(c->idle_note, sizeof(c->idle_note), "no daemon at %.300s", path);
        return 0;
    }
    r = rpc_client_call(cl, "io.wattprof.Monitor.GetStatus", NULL, 0, RUN_DAEMON_TIMEOUT_MS, err,
                        sizeof(err));
    if (r == 0) {
        rpc_reply_msg m = {0};
        r = rpc_client_read(cl, RUN_DAEMON_TIMEOUT_MS, &m, err, sizeof(err));
        if (r == 0 && m.error) {
            snprintf(err, sizeof(err), "%s", m.error);
            r = -EPROTO;
        }
        if (r == 0)
            reply = m.params ? json_object_get(m.params) : NULL;
        rpc_reply_msg_clear(&m);
    }
    rpc_client_free(cl);
    if (r < 0 || !reply) {
        snprintf(c->idle_note, sizeof(c->idle_note), "the daemon at %.300s did not answer: %s",
                 path, r < 0 ? err : "no reply");
        json_object_put(reply);
        return 0;
    }
    st = query_obj(reply, "status");
    cal = query_obj(st, "calibration");
    mj = query_obj(st, "model");
    if (json_object_object_get_ex(mj, "target", &tg) && json_object_is_type(tg, json_type_array))
        for (size_t i = 0, used = 0; i < json_object_array_length(tg) && used < sizeof(key); i++)
            used += (size_t)snprintf(key + used, sizeof(key) - used, "%s%s", i ? "+" : "",
                                     json_object_get_string(json_object_array_get_idx(tg, i)));
    double idle = query_num(cal, "idle_w");
    const char *src = query_str(cal, "source");
    if (!cal || !src || !isfinite(idle) || idle < 0)
        snprintf(c->idle_note, sizeof(c->idle_note), "the daemon at %.300s has no calibration yet",
                 path);
    else if (strcmp(key, target) != 0)
        snprintf(c->idle_note, sizeof(c->idle_note),
                 "the daemon at %.300s measures %s, this model %s", path, key, target);
    else {
        double se = query_num(cal, "idle_se_w");
        const char *sha = query_str(mj, "sha256");
        c->idle_w = idle;
        /* The scale belongs to the model it was fitted with. */
        if (sha && strcmp(sha, c->m->sha256) == 0 && isfinite(query_num(cal, "scale")))
            c->scale = query_num(cal, "scale");
        if (isfinite(se))
            snprintf(c->idle_buf, sizeof(c->idle_buf), "the daemon's, %s +- %.2f W", src, se);
        else
            snprintf(c->idle_buf, sizeof(c->idle_buf), "the daemon's, %s", src);
        c->idle_source = c->idle_buf;
        taken = 1;
    }
    json_object_put(reply);
    return taken;
}

/* The node's fit stored in the daemon's database. 1: taken; 0: none. */
static int run_calib_stored(struct run_ctx *c, const char *target)
{
    char err[UTIL_ERRLEN];
    store_node_calib s;
    store_reader *rd;
    int r;

    if (access(c->opt.db, R_OK) < 0) {
        snprintf(c->idle_note + strlen(c->idle_note), sizeof(c->idle_note) - strlen(c->idle_note),
                 "; no database at %.300s", c->opt.db);
        return 0;
    }
    if ((r = store_reader_open(c->opt.db, &rd, err, sizeof(err))) == 0) {
        r = store_node_calib_get(rd, target, &s, err, sizeof(err));
        store_reader_close(rd);
    }
    if (r == -ENOENT)
        snprintf(err, sizeof(err), "no calibration for %s", target);
    if (r < 0) {
        snprintf(c->idle_note + strlen(c->idle_note), sizeof(c->idle_note) - strlen(c->idle_note),
                 "; %.300s: %.300s", c->opt.db, err);
        return 0;
    }
    c->idle_w = s.idle_w;
    if (strcmp(s.model_sha256, c->m->sha256) == 0 && isfinite(s.scale))
        c->scale = s.scale;
    snprintf(c->idle_buf, sizeof(c->idle_buf), "stored in %.300s +- %.2f W", c->opt.db,
             s.idle_se_w);
    c->idle_source = c->idle_buf;
    return 1;
}

int run_calib_choose(struct run_ctx *c)
{
    char target[64];

    c->idle_w = c->m->idle_power_w;
    c->idle_source = c->m->training.present ? "the model's" : "the model's (uncalibrated)";
    c->idle_note[0] = '\0';
    if (c->power->n == 0)
        return 0; /* nothing measured: the model's idle is all there is */
    model_target_key(c->m, target, sizeof(target));
    if (run_calib_daemon(c, target) || run_calib_stored(c, target))
        return 0;
    if (c->m->training.present)
        return 0;
    return 1; /* measure before the command */
}

int run_host_open(struct run_ctx *c)
{
    double busy;
    int r;

    c->task_clock = events_find(c->es, "perf::TASK-CLOCK");
    if (c->task_clock < 0)
        return 0; /* no CPU time of the command to subtract: untracked stays 0 */
    if ((r = sample_busy_cpu_s(c->opt.meter_cgroup, &busy)) < 0) {
        if (c->opt.meter_cgroup) {
            log_error("--meter-cgroup %s: cannot read its CPU time (cpu.stat or "
                      "cpuacct.usage): %s",
                      c->opt.meter_cgroup, strerror(-r));
            return r;
        }
        c->task_clock = -1; /* no /proc/stat: the whole active energy is the command's */
        return 0;
    }
    c->urates = calloc(c->m->n_events, sizeof(double));
    return c->urates ? 0 : -ENOMEM;
}

void run_host_start(struct run_ctx *c)
{
    if (c->task_clock >= 0 && sample_busy_cpu_s(c->opt.meter_cgroup, &c->busy_last) < 0)
        c->busy_last = NAN;
    c->busy_carry = 0;
}

double run_host_untracked_w(struct run_ctx *c, double dt)
{
    double busy, u;

    if (c->task_clock < 0 || sample_busy_cpu_s(c->opt.meter_cgroup, &busy) < 0)
        return 0;
    if (!isfinite(c->busy_last)) {
        c->busy_last = busy;
        return 0;
    }
    /* /proc/stat counts in jiffies: a tick may see less host CPU than the
     * command's own task-clock, and the next one more. The difference is
     * carried (a short one, at most 0.1 CPU s) instead of being clipped to
     * zero, which would book the jitter as untracked work. */
    u = busy - c->busy_last - c->d.scaled[c->task_clock] / 1e9 + c->busy_carry;
    c->busy_last = busy;
    c->busy_carry = 0;
    if (u < 0) {
        c->busy_carry = u < -0.1 ? -0.1 : u;
        return 0;
    }
    c->t.untracked_cpu_s += u;
    memset(c->urates, 0, c->m->n_events * sizeof(double));
    c->urates[c->task_clock] = u / dt * 1e9; /* task-clock counts nanoseconds */
    return model_dynamic_power(c->m, model_classify(c->m, 0), c->urates);
}
