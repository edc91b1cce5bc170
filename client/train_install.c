/* train_install: `wattprof train --install-if-better DIR` — the retraining
 * timer's decision.  The new model and the one in use are scored on the
 * same held-out recent seconds; the new one replaces DIR/current.json only
 * when its MAPE is lower, and the daemon is then asked to load it. */
#include "model/model.h"
#include "rpc/rpc.h"
#include "train.h"
#include "util/util.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAIN_DEFAULT_SOCKET "/run/wattprof/io.wattprof.sock"
#define TRAIN_RELOAD_TIMEOUT_MS 10000
#define TRAIN_MSG_LEN (2 * PATH_MAX + 2 * UTIL_ERRLEN)

/* The model in use, as far as the trainer can tell. */
struct current {
    model *m;    /* NULL when there is none that loads */
    char *bytes; /* its file, kept as previous.json on replacement */
    size_t len;
    char source[PATH_MAX + 64];
    char why_none[UTIL_ERRLEN]; /* set when DIR/current.json does not load */
    bool from_file;
};

static json_object *jnum(double v)
{
    return isfinite(v) ? json_object_new_double(v) : NULL;
}

static int find_current(struct current *cur, const char *dir, const struct train_calib *cal,
                        char *err, size_t errlen)
{
    char path[PATH_MAX];
    int r;

    snprintf(path, sizeof(path), "%s/current.json", dir);
    if (access(path, F_OK) == 0) {
        cur->from_file = true;
        snprintf(cur->source, sizeof(cur->source), "%s", path);
        r = util_read_file(path, &cur->bytes, &cur->len);
        if (r < 0)
            snprintf(cur->why_none, sizeof(cur->why_none), "cannot read: %s", strerror(-r));
        else if (model_parse(cur->bytes, cur->len, path, &cur->m, cur->why_none,
                             sizeof(cur->why_none)) < 0)
            cur->m = NULL;
        return 0;
    }
    /* No installed model yet: the daemon runs the one the rows were taken with. */
    snprintf(cur->source, sizeof(cur->source),
             "the database (model id %d, in use for the newest calibration row)", cal->ref_id);
    cur->len = strlen(cal->ref_json);
    if (!(cur->bytes = strdup(cal->ref_json)))
        return -ENOMEM;
    r = model_parse(cur->bytes, cur->len, "database model", &cur->m, err, errlen);
    return r;
}

static int score(const model *m, const struct train_data *d, const struct train_calib *cal,
                 const size_t *test, size_t n, learn_metrics *out, char *err, size_t errlen)
{
    double *pred = malloc((n ? n : 1) * sizeof(double)), *y = malloc((n ? n : 1) * sizeof(double));
    int r = pred && y ? train_calib_predict(m, cal, test, n, pred, err, errlen) : -ENOMEM;

    for (size_t i = 0; r == 0 && i < n; i++)
        y[i] = d->y[test[i]];
    if (r == 0)
        learn_metrics_compute(y, pred, n, out);
    free(pred);
    free(y);
    return r;
}

static int write_file(const char *path, const char *bytes, size_t len, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 16];
    FILE *f;
    int r = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    if (!(f = fopen(tmp, "w")))
        return util_err(err, errlen, -errno, "%s: cannot write: %s", tmp, strerror(errno));
    if (fwrite(bytes, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0)
        r = -errno;
    if (fclose(f) != 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) != 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return util_err(err, errlen, r, "%s: cannot write: %s", path, strerror(-r));
    }
    return 0;
}

/* previous.json first, then current.json by rename: current.json is
 * always a whole model, the old one or the new one. */
static int install(const char *dir, model *fresh, const struct current *cur, char *err,
                   size_t errlen)
{
    char path[PATH_MAX];
    int r;

    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return util_err(err, errlen, -errno, "%s: cannot create: %s", dir, strerror(errno));
    if (cur->bytes) {
        snprintf(path, sizeof(path), "%s/previous.json", dir);
        r = write_file(path, cur->bytes, cur->len, err, errlen);
        if (r < 0)
            return r;
    }
    snprintf(path, sizeof(path), "%s/current.json", dir);
    return model_save(fresh, path, err, errlen);
}

/* Puts the replaced model back after the daemon refused the new one, so
 * that its next start does not fail on it. */
static void roll_back(const char *dir, const struct current *cur)
{
    char path[PATH_MAX], prev[PATH_MAX];

    snprintf(path, sizeof(path), "%s/current.json", dir);
    snprintf(prev, sizeof(prev), "%s/previous.json", dir);
    if (cur->from_file)
        rename(prev, path);
    else
        unlink(path);
}

/* 0: loaded; 1: the daemon was not reached or would not do it (reported,
 * not fatal: it loads current.json when it starts); -EINVAL: it refused
 * the model. *msg says what happened. */
static int reload(const char *sock, const char *path, const model *fresh, char *msg, size_t len)
{
    rpc_client *c = NULL;
    rpc_reply_msg rep = {0};
    json_object *params = json_object_new_object(), *m, *v;
    char why[UTIL_ERRLEN];
    int r;

    json_object_object_add(params, "path", json_object_new_string(path));
    r = rpc_client_connect(sock, &c, why, sizeof(why));
    if (r == 0)
        r = rpc_client_call(c, "io.wattprof.Monitor.ReloadModels", params, 0,
                            TRAIN_RELOAD_TIMEOUT_MS, why, sizeof(why));
    if (r == 0)
        r = rpc_client_read(c, TRAIN_RELOAD_TIMEOUT_MS, &rep, why, sizeof(why));
    json_object_put(params);
    rpc_client_free(c);
    if (r < 0) {
        snprintf(msg, len, "daemon not reached (%s); it loads %s when it starts", why, path);
        r = 1;
    } else if (rep.error && strcmp(rep.error, "io.wattprof.Monitor.ModelLoadFailed") == 0) {
        v = json_object_object_get(rep.params, "reason");
        snprintf(msg, len, "the daemon refused the model: %s",
                 v ? json_object_get_string(v) : rep.error);
        r = -EINVAL;
    } else if (rep.error) {
        snprintf(msg, len, "the daemon did not reload (%s); it loads %s when it starts", rep.error,
                 path);
        r = 1;
    } else {
        m = json_object_object_get(rep.params, "model");
        v = m ? json_object_object_get(m, "sha256") : NULL;
        snprintf(msg, len, "the daemon at %s now uses '%s'%s", sock, fresh->name,
                 v && strcmp(json_object_get_string(v), fresh->sha256) == 0
                     ? ""
                     : " (but it reports another sha256)");
        r = 0;
    }
    rpc_reply_msg_clear(&rep);
    return r;
}

static json_object *metrics_json(const learn_metrics *m)
{
    json_object *o = json_object_new_object();

    json_object_object_add(o, "mape", jnum(m->mape));
    json_object_object_add(o, "mae", jnum(m->mae));
    json_object_object_add(o, "rmse", jnum(m->rmse));
    json_object_object_add(o, "r2", jnum(m->r2));
    return o;
}

struct decision {
    bool install;
    char reason[TRAIN_MSG_LEN];
    learn_metrics fresh, cur;
    bool cur_scored;
};

static int decide(struct decision *dc, const struct current *cur, const model *fresh,
                  const struct train_data *d, const struct train_calib *cal, const size_t *test,
                  size_t n_test, char *err, size_t errlen)
{
    char why[UTIL_ERRLEN];
    int r = score(fresh, d, cal, test, n_test, &dc->fresh, err, errlen);

    if (r < 0)
        return r;
    if (!cur->m) {
        dc->install = true;
        snprintf(dc->reason, sizeof(dc->reason), "%s does not load (%s); the new model replaces it",
                 cur->source, cur->why_none);
        return 0;
    }
    if (score(cur->m, d, cal, test, n_test, &dc->cur, why, sizeof(why)) < 0) {
        dc->install = true;
        snprintf(dc->reason, sizeof(dc->reason),
                 "the current model cannot be scored on this node's data (%s); the new one can",
                 why);
        return 0;
    }
    dc->cur_scored = true;
    dc->install = dc->fresh.mape < dc->cur.mape;
    snprintf(dc->reason, sizeof(dc->reason),
             "on the last %zu seconds (held out), MAPE %.3f %% for the new model against "
             "%.3f %% for the current '%s'%s",
             n_test, dc->fresh.mape * 100, dc->cur.mape * 100, cur->m->name,
             dc->install ? ": the new one is better"
                         : ": the new one is not better, kept the current one");
    return 0;
}

static json_object *report_json(const struct train_install *in, const struct decision *dc,
                                const struct current *cur, const model *fresh, size_t n_test)
{
    json_object *o = json_object_new_object(), *c = json_object_new_object();
    json_object *nw = metrics_json(&dc->fresh);

    json_object_object_add(o, "dir", json_object_new_string(in->dir));
    json_object_object_add(o, "decision",
                           json_object_new_string(dc->install ? "installed" : "kept"));
    json_object_object_add(o, "reason", json_object_new_string(dc->reason));
    json_object_object_add(o, "test_rows", json_object_new_int64((int64_t)n_test));
    json_object_object_add(nw, "name", json_object_new_string(fresh->name));
    json_object_object_add(nw, "sha256", json_object_new_string(fresh->sha256));
    json_object_object_add(o, "new", nw);
    json_object_object_add(c, "source", json_object_new_string(cur->source));
    json_object_object_add(c, "name", cur->m ? json_object_new_string(cur->m->name) : NULL);
    if (dc->cur_scored)
        json_object_object_add(c, "metrics", metrics_json(&dc->cur));
    json_object_object_add(o, "current", c);
    return o;
}

static void add_reload(json_object *o, const char *sock, int r, const char *msg)
{
    json_object *rl = json_object_new_object();

    json_object_object_add(rl, "socket", json_object_new_string(sock));
    json_object_object_add(rl, "loaded", json_object_new_boolean(r == 0));
    json_object_object_add(rl, "message", json_object_new_string(msg));
    json_object_object_add(o, "reload", rl);
}

static const char *socket_path(const struct train_install *in)
{
    const char *env = getenv("WATTPROF_SOCKET");

    return in->socket ? in->socket : env && *env ? env : TRAIN_DEFAULT_SOCKET;
}

static int activate(const struct train_install *in, model *fresh, const struct current *cur,
                    bool quiet, json_object *o, char *err, size_t errlen)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], msg[TRAIN_MSG_LEN];
    const char *sock = socket_path(in);
    int r = install(in->dir, fresh, cur, err, errlen);

    if (r < 0)
        return r;
    /* The daemon resolves the path itself, from its own working directory. */
    snprintf(path, sizeof(path), "%s/current.json", realpath(in->dir, dir) ? dir : in->dir);
    if (!quiet)
        printf("installed %s%s\n", path, cur->bytes ? " (the one it replaces: previous.json)" : "");
    r = reload(sock, path, fresh, msg, sizeof(msg));
    add_reload(o, sock, r, msg);
    if (!quiet)
        printf("reload: %s\n", msg);
    if (r < 0) {
        roll_back(in->dir, cur);
        return util_err(err, errlen, r, "%s; %s put back as it was", msg, path);
    }
    return 0;
}

int train_install_if_better(const struct train_install *in, model *fresh,
                            const struct train_data *d, const struct train_calib *cal,
                            const size_t *test, size_t n_test, bool quiet, void **report, char *err,
                            size_t errlen)
{
    struct current cur = {0};
    struct decision dc = {0};
    json_object *o = NULL;
    int r = find_current(&cur, in->dir, cal, err, errlen);

    if (r == 0)
        r = decide(&dc, &cur, fresh, d, cal, test, n_test, err, errlen);
    if (r == 0) {
        o = report_json(in, &dc, &cur, fresh, n_test);
        if (!quiet)
            printf("install: %s\n", dc.reason);
        if (dc.install)
            r = activate(in, fresh, &cur, quiet, o, err, errlen);
    }
    if (r < 0) {
        json_object_put(o);
        o = NULL;
    }
    *report = o;
    model_free(cur.m);
    free(cur.bytes);
    return r;
}
