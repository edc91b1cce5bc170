/* config: wattprofd.conf (INI, read by libinih) and its defaults.
 *
 * Every key is documented in the shipped wattprofd.conf. Unknown sections or
 * keys, and values that do not parse, are errors naming FILE:LINE: a typo in
 * a config file should stop the daemon, not silently change what it does. */
#include "daemon.h"
#include "util/util.h"

#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int set_str(char **dst, const char *v)
{
    char *n = strdup(v);
    if (!n)
        return -ENOMEM;
    free(*dst);
    *dst = n;
    return 0;
}

int config_init(config *c, bool as_root)
{
    const char *runtime = getenv("XDG_RUNTIME_DIR"), *home = getenv("HOME");
    char buf[4096];

    memset(c, 0, sizeof(*c));
    c->rate_hz = 50;
    c->max_clients = 64;
    c->max_clients_per_user = 16;
    c->client_timeout_s = 60;
    c->query_time_limit_s = 10;
    c->drift_threshold = 0.10;
    c->rescan_s = 5;
    c->second_retention_s = 24 * 3600;
    c->minute_retention_s = 90 * 24 * 3600;
    c->replay_speed = 1;
    c->exporter_grace_s = 60;
    if (as_root)
        snprintf(buf, sizeof(buf), "/var/lib/wattprof");
    else if (runtime)
        snprintf(buf, sizeof(buf), "%s/wattprof", runtime);
    else
        snprintf(buf, sizeof(buf), "%s/.local/state/wattprof", home ? home : "/tmp");
    if (set_str(&c->state_dir, buf) < 0 || set_str(&c->group, "wattprof") < 0)
        return -ENOMEM;
    c->system_paths = as_root;
    return 0;
}

void config_free(config *c)
{
    free(c->state_dir);
    free(c->db_path);
    free(c->socket_path);
    free(c->model_path);
    free(c->group);
    free(c->track_comm);
    free(c->track_cgroup);
    free(c->meter_cgroup);
    free(c->record_path);
    free(c->pid_file);
    free(c->replay_path);
    free(c->exporter_listen);
    util_strv_free(c->job_env, c->n_job_env);
    memset(c, 0, sizeof(*c));
}

#define CONFIG_MAX_KEYS 64 /* distinct keys one file may set */

struct load_ctx {
    config *c;
    char *err;
    size_t errlen;
    const char *path;
    FILE *f;
    int line;     /* of the line being parsed, counted by read_line */
    bool failed;  /* err holds the first error */
    int too_long; /* 0, or the size of the libinih buffer a line did not fit */
    struct {
        char name[96]; /* "section.key" */
        int line;
    } seen[CONFIG_MAX_KEYS];
    size_t n_seen;
};

int config_parse_backend(const char *v, config_backend *out)
{
    static const char *const names[] = {"auto", "bpf", "perf"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(v, names[i]) == 0) {
            *out = (config_backend)i;
            return 0;
        }
    return -EINVAL;
}

int config_parse_rate(const char *v, double *out)
{
    double d;
    /* Below one tick a second nothing rounds to a whole tick per second
     * (the status rings and the once-a-second publication count ticks). */
    if (util_parse_double(v, &d) < 0 || !(d >= CONFIG_MIN_RATE_HZ && d <= CONFIG_MAX_RATE_HZ))
        return -EINVAL;
    *out = d;
    return 0;
}

/* A count of connections: 1 to 100000. */
static int parse_count(const char *v, unsigned *out)
{
    long n;
    if (util_parse_long(v, &n) < 0 || n < 1 || n > 100000)
        return -EINVAL;
    *out = (unsigned)n;
    return 0;
}

static int parse_positive(const char *v, double *out)
{
    double d;
    if (util_parse_double(v, &d) < 0 || d <= 0)
        return -EINVAL;
    *out = d;
    return 0;
}

static int parse_uids(config *c, const char *v)
{
    char **items;
    size_t n;
    int r = util_split_list(v, ',', &items, &n);

    if (r < 0)
        return r;
    c->n_track_uids = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        long uid;
        struct passwd *pw;
        if (c->n_track_uids == CONFIG_MAX_UIDS)
            r = -E2BIG;
        else if (util_parse_long(items[i], &uid) == 0 && uid >= 0)
            c->track_uids[c->n_track_uids++] = (uid_t)uid;
        else if ((pw = getpwnam(items[i])))
            c->track_uids[c->n_track_uids++] = pw->pw_uid;
        else
            r = -EINVAL;
    }
    util_strv_free(items, n);
    return r;
}

/* Longer retentions than this are typos; the bound also keeps "now minus
 * the retention" in the store far from int64 overflow. */
#define CONFIG_MAX_DURATION_S (100 * 366 * 86400.0)

static int parse_duration(const char *v, int64_t *out)
{
    char *end;
    double n = strtod(v, &end);
    double unit = 1;

    if (end == v || n < 0)
        return -EINVAL;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        unit = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        unit = 60;
    else if (strcmp(end, "h") == 0)
        unit = 3600;
    else if (strcmp(end, "d") == 0)
        unit = 86400;
    else
        return -EINVAL;
    if (!(n * unit <= CONFIG_MAX_DURATION_S)) /* also NaN and inf, which strtod accepts */
        return -EINVAL;
    *out = (int64_t)(n * unit);
    return 0;
}

/* A time limit with a fraction: "250ms", "2.5s", "1m" (bare: seconds). */
static int parse_time_limit(const char *v, double *out)
{
    char *end;
    double n = strtod(v, &end), unit;

    if (end == v)
        return -EINVAL;
    if (strcmp(end, "ms") == 0)
        unit = 1e-3;
    else if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        unit = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        unit = 60;
    else
        return -EINVAL;
    if (!(n * unit >= 1e-3 && n * unit <= 3600)) /* also NaN */
        return -EINVAL;
    *out = n * unit;
    return 0;
}

/* "HOST:PORT", "[V6ADDR]:PORT" or a bare "PORT" (loopback: the endpoint
 * shows every process's command and user, so it is private unless an
 * address is asked for). Numeric addresses only, in their strict forms
 * (inet_pton: "1.2.3" is not 1.2.0.3), and no name lookups at start. */
static int parse_listen(config *c, const char *v)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)&c->exporter_addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&c->exporter_addr;
    char host[INET6_ADDRSTRLEN + 1] = "127.0.0.1";
    const char *port = strrchr(v, ':');
    size_t hl;

    if (port) {
        bool v6 = v[0] == '[' && port > v && port[-1] == ']';
        hl = (size_t)(port - v) - (v6 ? 2 : 0);
        if (hl == 0 || hl >= sizeof(host))
            return -EINVAL;
        memcpy(host, v + (v6 ? 1 : 0), hl);
        host[hl] = '\0';
        port++;
    } else
        port = v;
    if (!port[0] || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
        atol(port) > 65535)
        return -EINVAL;
    memset(&c->exporter_addr, 0, sizeof(c->exporter_addr));
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)atol(port));
        c->exporter_addrlen = sizeof(*in4);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)atol(port));
        c->exporter_addrlen = sizeof(*in6);
    } else
        return -EINVAL;
    return set_str(&c->exporter_listen, v);
}

#define ENV_NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"

static int parse_exporter(config *c, const char *key, const char *v)
{
    long n;

    if (strcmp(key, "listen") == 0)
        return parse_listen(c, v);
    if (strcmp(key, "top_pids") == 0) {
        if (util_parse_long(v, &n) < 0 || n < 0 || n > 100000)
            return -EINVAL;
        c->exporter_top_pids = (unsigned)n;
        return 0;
    }
    if (strcmp(key, "grace") == 0) {
        int64_t s;
        if (parse_duration(v, &s) < 0)
            return -EINVAL;
        c->exporter_grace_s = (double)s;
        return 0;
    }
    if (strcmp(key, "job_env") == 0) {
        char **names;
        size_t k;
        if (util_split_list(v, ',', &names, &k) < 0)
            return -EINVAL;
        for (size_t i = 0; i < k; i++) {
            char *name = names[i] + strspn(names[i], " \t");
            size_t len = strspn(name, ENV_NAME_CHARS);
            if (len == 0 || name[len + strspn(name + len, " \t")] != '\0') {
                util_strv_free(names, k);
                return -EINVAL;
            }
            memmove(names[i], name, len);
            names[i][len] = '\0';
        }
        util_strv_free(c->job_env, c->n_job_env);
        c->job_env = names;
        c->n_job_env = k;
        return 0;
    }
    return -ENOENT;
}

/* Returns 0 when the key is known and the value good, -ENOENT for an
 * unknown key, -EINVAL for a bad value (with `why` filled where there is
 * more to say than that). */
static int config_set(config *c, const char *section, const char *key, const char *v, char *why,
                      size_t whylen)
{
    if (strcmp(section, "daemon") == 0) {
        if (strcmp(key, "rate_hz") == 0)
            return config_parse_rate(v, &c->rate_hz) < 0
                       ? util_err(why, whylen, -EINVAL, "'%s': ticks per second from %g to %g", v,
                                  CONFIG_MIN_RATE_HZ, CONFIG_MAX_RATE_HZ)
                       : 0;
        if (strcmp(key, "state_dir") == 0) {
            c->state_dir_set = true;
            return set_str(&c->state_dir, v);
        }
        if (strcmp(key, "db") == 0)
            return set_str(&c->db_path, v);
        if (strcmp(key, "socket") == 0)
            return set_str(&c->socket_path, v);
        if (strcmp(key, "model") == 0)
            return set_str(&c->model_path, v);
        if (strcmp(key, "group") == 0) {
            if (!getgrnam(v))
                return util_err(why, whylen, -EINVAL, "no group '%s' on this system", v);
            return set_str(&c->group, v);
        }
        if (strcmp(key, "max_clients") == 0)
            return parse_count(v, &c->max_clients);
        if (strcmp(key, "max_clients_per_user") == 0)
            return parse_count(v, &c->max_clients_per_user);
        if (strcmp(key, "client_timeout") == 0) {
            int64_t t;
            /* in whole seconds; a day at most: the timeout is kept in ms */
            if (parse_duration(v, &t) < 0 || t < 1 || t > 86400)
                return util_err(why, whylen, -EINVAL, "'%s': from 1s to 1d", v);
            c->client_timeout_s = (double)t;
            return 0;
        }
        if (strcmp(key, "query_time_limit") == 0)
            return parse_time_limit(v, &c->query_time_limit_s) < 0
                       ? util_err(why, whylen, -EINVAL, "'%s': from 1ms to 1h (ms, s or m)", v)
                       : 0;
        if (strcmp(key, "drift_threshold") == 0)
            return parse_positive(v, &c->drift_threshold);
        if (strcmp(key, "rescan_s") == 0)
            return parse_positive(v, &c->rescan_s);
        return -ENOENT;
    }
    if (strcmp(section, "track") == 0) {
        if (strcmp(key, "uid") == 0 || strcmp(key, "user") == 0)
            return parse_uids(c, v);
        if (strcmp(key, "comm") == 0) {
            char what[UTIL_ERRLEN];
            int r = util_regex_check(v, what, sizeof(what));
            if (r < 0)
                return util_err(why, whylen, r, "regex '%s': %s", v, what);
            return set_str(&c->track_comm, v);
        }
        if (strcmp(key, "cgroup") == 0)
            return set_str(&c->track_cgroup, v);
        return -ENOENT;
    }
    if (strcmp(section, "sampler") == 0) {
        long n;
        if (strcmp(key, "meter_cgroup") == 0)
            return set_str(&c->meter_cgroup, v);
        if (strcmp(key, "backend") == 0)
            return config_parse_backend(v, &c->backend) < 0
                       ? util_err(why, whylen, -EINVAL, "'%s': expected auto, bpf or perf", v)
                       : 0;
        if (strcmp(key, "priority") != 0)
            return -ENOENT;
        if (util_parse_long(v, &n) < 0 || n < 0 || n > 99)
            return -EINVAL;
        c->sampler_priority = (int)n;
        return 0;
    }
    if (strcmp(section, "storage") == 0) {
        if (strcmp(key, "second_retention") == 0)
            return parse_duration(v, &c->second_retention_s);
        if (strcmp(key, "minute_retention") == 0)
            return parse_duration(v, &c->minute_retention_s);
        return -ENOENT;
    }
    if (strcmp(section, "exporter") == 0)
        return parse_exporter(c, key, v);
    return -ENOENT;
}

/* The line a key was set on, 0 when it was not. */
static int seen_line(const struct load_ctx *ctx, const char *section, const char *key)
{
    char name[96];

    snprintf(name, sizeof(name), "%s.%s", section, key);
    for (size_t i = 0; i < ctx->n_seen; i++)
        if (strcmp(ctx->seen[i].name, name) == 0)
            return ctx->seen[i].line;
    return 0;
}

/* A key set twice would have the last one win silently (a continuation
 * line, indented, counts as setting it again). */
static int note_key(struct load_ctx *ctx, const char *section, const char *key)
{
    int first = seen_line(ctx, section, key);

    if (first)
        return util_err(ctx->err, ctx->errlen, -EINVAL,
                        "'%s' in [%s] is set again (first on line %d)", key, section, first);
    if (ctx->n_seen == CONFIG_MAX_KEYS)
        return util_err(ctx->err, ctx->errlen, -EINVAL, "more than %d keys", CONFIG_MAX_KEYS);
    snprintf(ctx->seen[ctx->n_seen].name, sizeof(ctx->seen[0].name), "%s.%s", section, key);
    ctx->seen[ctx->n_seen++].line = ctx->line;
    return 0;
}

static int on_value(void *user, const char *section, const char *key, const char *value)
{
    struct load_ctx *ctx = user;
    char why[UTIL_ERRLEN] = "";
    int r;

    if (!ctx->failed && note_key(ctx, section, key) < 0) {
        ctx->failed = true;
        return 0;
    }
    r = config_set(ctx->c, section, key, value, why, sizeof(why));
    if (r == 0)
        return 1;
    if (!ctx->failed) {
        /* libinih reports the line of the first handler failure. */
        if (r == -ENOENT)
            util_err(ctx->err, ctx->errlen, -EINVAL, "unknown key '%s' in section [%s]", key,
                     section);
        else if (why[0])
            util_err(ctx->err, ctx->errlen, -EINVAL, "bad value for '%s' in [%s]: %s", key, section,
                     why);
        else
            util_err(ctx->err, ctx->errlen, -EINVAL, "bad value '%s' for '%s' in [%s]", value, key,
                     section);
        ctx->failed = true;
    }
    return 0;
}

/* libinih's reader: fgets that counts lines, and stops at one longer than
 * libinih's buffer (it would read the rest as more lines, and count them). */
static char *read_line(char *str, int num, void *stream)
{
    struct load_ctx *ctx = stream;
    size_t len;

    if (!fgets(str, num, ctx->f))
        return NULL;
    ctx->line++;
    len = strlen(str);
    if (len + 1 == (size_t)num && str[len - 1] != '\n' && !feof(ctx->f)) {
        ctx->too_long = num;
        return NULL;
    }
    return str;
}

/* What depends on two keys, checked once both are read; errors name the
 * line of the second. */
static int check_retention(const struct load_ctx *ctx, char *err, size_t errlen)
{
    const config *c = ctx->c;
    int second = seen_line(ctx, "storage", "second_retention");
    int minute = seen_line(ctx, "storage", "minute_retention");

    if (c->second_retention_s < 60)
        return util_err(err, errlen, -EINVAL, "%s:%d: second_retention (%llds) is under 60s",
                        ctx->path, second, (long long)c->second_retention_s);
    if (c->minute_retention_s < c->second_retention_s)
        return util_err(err, errlen, -EINVAL,
                        "%s:%d: minute_retention (%llds) is shorter than second_retention (%llds)",
                        ctx->path, minute > second ? minute : second,
                        (long long)c->minute_retention_s, (long long)c->second_retention_s);
    return 0;
}

int config_load(config *c, const char *path, char *err, size_t errlen)
{
    char reason[UTIL_ERRLEN] = "syntax error";
    struct load_ctx ctx = {.c = c, .err = reason, .errlen = sizeof(reason), .path = path};
    struct stat st;
    int line;

    if (!(ctx.f = fopen(path, "re")))
        return util_err(err, errlen, -errno, "%s: cannot read config: %s", path, strerror(errno));
    if (fstat(fileno(ctx.f), &st) == 0 && !S_ISREG(st.st_mode)) {
        fclose(ctx.f);
        return util_err(err, errlen, -EINVAL, "%s: cannot read config: not a regular file", path);
    }
    line = ini_parse_stream(read_line, &ctx, on_value, &ctx);
    fclose(ctx.f);
    if (ctx.too_long)
        return util_err(err, errlen, -EINVAL, "%s:%d: line longer than %d characters", path,
                        ctx.line, ctx.too_long - 2);
    if (line != 0)
        return util_err(err, errlen, -EINVAL, "%s:%d: %s", path, line, reason);
    return check_retention(&ctx, err, errlen);
}

int config_finish(config *c, char *err, size_t errlen)
{
    char buf[4096];

    if (!c->db_path) {
        snprintf(buf, sizeof(buf), "%s/wattprof.db", c->state_dir);
        if (set_str(&c->db_path, buf) < 0)
            return -ENOMEM;
    }
    if (!c->socket_path) {
        /* The system daemon's socket is in /run, unless it was given a state
         * directory of its own: then everything lives there. */
        if (c->system_paths && !c->state_dir_set)
            snprintf(buf, sizeof(buf), "/run/wattprof/io.wattprof.sock");
        else
            snprintf(buf, sizeof(buf), "%s/io.wattprof.sock", c->state_dir);
        if (set_str(&c->socket_path, buf) < 0)
            return -ENOMEM;
    }
    /* `wattprof train --install-if-better STATE_DIR/models` installs the
     * node's calibrated model as models/current.json; without this it would
     * be dropped at the next restart in favour of the generic one. */
    if (!c->model_path) {
        snprintf(buf, sizeof(buf), "%s/models/current.json", c->state_dir);
        if (access(buf, F_OK) == 0 && set_str(&c->model_path, buf) < 0)
            return -ENOMEM;
    }
    if (c->record_path && c->replay_path)
        return util_err(err, errlen, -EINVAL, "--record and --replay cannot be combined");
    return 0;
}
