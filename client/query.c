/* query: socket, calls and Varlink errors for the query commands (query.h
 * has the contract). */
#include "query.h"
#include "format.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void query_opts_init(query_opts *q)
{
    q->socket = NULL;
    q->out = QUERY_TEXT;
    q->color = fmt_color_wanted(stdout);
}

int query_common_opt(query_opts *q, int opt, const char *arg)
{
    switch (opt) {
    case 'S':
        q->socket = arg;
        return 1;
    case 'J':
    case 'C':
        if (q->out != QUERY_TEXT && q->out != (opt == 'J' ? QUERY_JSON : QUERY_CSV)) {
            log_error("--json and --csv contradict each other: pick one output format");
            return -1;
        }
        q->out = opt == 'J' ? QUERY_JSON : QUERY_CSV;
        return 1;
    default:
        return 0;
    }
}

int query_bad_option(const char *cmd, const char *arg)
{
    log_error("unknown option or missing value '%s' (see wattprof %s --help)", arg, cmd);
    return 2;
}

int query_parse(const query_cmd *cmd, query_opts *q, void *ctx, int argc, char **argv)
{
    int o, r;

    optind = 1;
    opterr = 0; /* our own one-line messages */
    while ((o = getopt_long(argc, argv, cmd->shortopts, cmd->longopts, NULL)) != -1) {
        if ((r = query_common_opt(q, o, optarg)) != 0) {
            if (r < 0)
                return -EINVAL;
            continue;
        }
        if (o == 'h') {
            cmd->usage(stdout);
            return 1;
        }
        r = cmd->opt && o != '?' ? cmd->opt(ctx, o, optarg) : QUERY_OPT_UNKNOWN;
        if (r == QUERY_OPT_UNKNOWN) {
            query_bad_option(cmd->name, argv[optind - 1]);
            return -EINVAL;
        }
        if (r < 0)
            return r;
    }
    if (!cmd->operands && optind < argc) {
        log_error("unexpected argument '%s' (see wattprof %s --help)", argv[optind], cmd->name);
        return -EINVAL;
    }
    return 0;
}

void query_socket_path(const char *opt, char *buf, size_t len)
{
    const char *env = getenv("WATTPROF_SOCKET"), *runtime = getenv("XDG_RUNTIME_DIR");
    const char *home = getenv("HOME");
    struct stat st;

    if (opt && *opt) {
        snprintf(buf, len, "%s", opt);
        return;
    }
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    if (geteuid() != 0) {
        /* The same place an unprivileged wattprofd puts its socket. */
        if (runtime && *runtime)
            snprintf(buf, len, "%s/wattprof/io.wattprof.sock", runtime);
        else
            snprintf(buf, len, "%s/.local/state/wattprof/io.wattprof.sock", home ? home : "/tmp");
        if (stat(buf, &st) == 0 && S_ISSOCK(st.st_mode))
            return;
    }
    snprintf(buf, len, "%s", QUERY_SYSTEM_SOCKET);
}

int query_connect(const query_opts *q, rpc_client **out)
{
    char path[4096], err[UTIL_ERRLEN];
    int r;

    if (q->socket && !*q->socket) {
        log_error("--socket '': expected the path of the daemon's socket");
        return -EINVAL;
    }
    query_socket_path(q->socket, path, sizeof(path));
    r = rpc_client_connect(path, out, err, sizeof(err));
    if (r == -ENOENT || r == -ECONNREFUSED)
        log_error("the daemon is not running: nothing listens on %s (start it with "
                  "'systemctl start wattprofd', or run wattprofd and pass its --socket)",
                  path);
    else if (r == -EACCES || r == -EPERM)
        log_error("permission denied on %s: this user may not open the daemon's socket "
                  "(ask for the wattprof group, or use sudo)",
                  path);
    else if (r < 0)
        log_error("cannot reach the daemon: %s", err);
    return r;
}

/* One line for each error the daemon can answer, into msg. */
static void describe_error(const char *method, const char *name, json_object *p, char *msg,
                           size_t len)
{
    if (strcmp(name, QUERY_IFACE "NoSuchProcess") == 0)
        snprintf(msg, len,
                 "no process with pid %lld: the daemon has no record of it (or it belongs "
                 "to another user)",
                 (long long)query_int(p, "pid", -1));
    else if (strcmp(name, RPC_ERR_PERMISSION_DENIED) == 0)
        snprintf(msg, len,
                 "permission denied: as uid %u you may see only your own processes, and "
                 "change nothing; root and members of the daemon's group (wattprof) may do "
                 "the rest",
                 (unsigned)getuid());
    else if (strcmp(name, QUERY_IFACE "InvalidTimeRange") == 0)
        snprintf(msg, len, "bad time range: %s", query_str(p, "reason"));
    else if (strcmp(name, QUERY_IFACE "InvalidRegex") == 0)
        snprintf(msg, len, "bad --comm regex '%s': %s", query_str(p, "pattern"),
                 query_str(p, "reason"));
    else if (strcmp(name, QUERY_IFACE "ModelLoadFailed") == 0)
        snprintf(msg, len, "the daemon could not load %s and keeps its current model: %s",
                 query_str(p, "path"), query_str(p, "reason"));
    else if (strcmp(name, QUERY_IFACE "TooManyClients") == 0)
        snprintf(msg, len, "the daemon refused the connection: %s", query_str(p, "reason"));
    else if (strcmp(name, QUERY_IFACE "StorageUnavailable") == 0)
        snprintf(msg, len, "the daemon's database is unavailable: %s", query_str(p, "reason"));
    else if (strcmp(name, QUERY_IFACE "ReplyTooLarge") == 0)
        snprintf(msg, len, "the daemon's answer to %s would pass its %lld bytes per reply: %s%s%s",
                 method, (long long)query_int(p, "limit_bytes", 0), query_str(p, "reason"),
                 *query_str(p, "parameter") ? "; ask for less through " : "",
                 query_str(p, "parameter"));
    else if (strcmp(name, QUERY_IFACE "QueryTimeLimit") == 0)
        snprintf(msg, len,
                 "the daemon stopped %s at its time limit of %g s per query ([daemon] "
                 "query_time_limit): ask for less (a shorter window, a coarser step)",
                 method, query_num(p, "limit_s"));
    else if (strcmp(name, RPC_ERR_INVALID_PARAMETER) == 0)
        snprintf(msg, len, "the daemon refused parameter '%s' of %s%s%s", query_str(p, "parameter"),
                 method, *query_str(p, "reason") ? ": " : "", query_str(p, "reason"));
    else if (strcmp(name, RPC_ERR_METHOD_NOT_FOUND) == 0 ||
             strcmp(name, RPC_ERR_METHOD_NOT_IMPLEMENTED) == 0)
        snprintf(msg, len, "the daemon does not offer %s (is it an older version?)", method);
    else
        snprintf(msg, len, "the daemon answered %s with %s", method, name);
}

/* Reads one reply; on failure fills msg with the line to show. */
static int read_reply(rpc_client *c, const char *method, int timeout_ms, json_object **reply,
                      char *msg, size_t len)
{
    rpc_reply_msg m = {0};
    char err[UTIL_ERRLEN];
    int r = rpc_client_read(c, timeout_ms, &m, err, sizeof(err));

    if (r == -ETIMEDOUT)
        snprintf(msg, len, "the daemon did not answer %s within %.0f s", method,
                 timeout_ms / 1000.0);
    else if (r == -ECONNRESET)
        snprintf(msg, len, "the daemon closed the connection during %s (did it stop?)", method);
    else if (r < 0)
        snprintf(msg, len, "reading the daemon's answer to %s: %.400s", method, err);
    if (r < 0)
        return r;
    if (m.error) {
        describe_error(method, m.error, m.params, msg, len);
        r = strcmp(m.error, RPC_ERR_PERMISSION_DENIED) == 0 ? -EACCES
            : strstr(m.error, "NoSuchProcess")              ? -ESRCH
                                                            : -EINVAL;
        rpc_reply_msg_clear(&m);
        return r;
    }
    *reply = m.params;
    m.params = NULL;
    rpc_reply_msg_clear(&m);
    return 0;
}

/* Sends a call.  A daemon that refuses a connection says why and closes it
 * at once, possibly before the call is sent: that answer is read and shown
 * rather than "the server closed the connection". */
static int send_call(rpc_client *c, const char *method, json_object *params, unsigned flags)
{
    char full[256], err[UTIL_ERRLEN], why[UTIL_ERRLEN];
    json_object *none = NULL;
    int r, e;

    snprintf(full, sizeof(full), "%s%s", QUERY_IFACE, method);
    r = rpc_client_call(c, full, params, flags, QUERY_TIMEOUT_MS, err, sizeof(err));
    if (r == -ECONNRESET) {
        e = read_reply(c, method, 0, &none, why, sizeof(why));
        json_object_put(none);
        if (e < 0 && e != -ECONNRESET && e != -ETIMEDOUT) {
            log_error("%s", why);
            return e;
        }
    }
    if (r < 0)
        log_error("sending %s to the daemon: %s", method, err);
    return r;
}

int query_call(rpc_client *c, const char *method, json_object *params, json_object **reply)
{
    char err[UTIL_ERRLEN];
    int r = send_call(c, method, params, 0);

    if (r < 0)
        return r;
    if ((r = read_reply(c, method, QUERY_TIMEOUT_MS, reply, err, sizeof(err))) < 0)
        log_error("%s", err);
    return r;
}

int query_once(const query_opts *q, const char *method, json_object *params, json_object **reply)
{
    rpc_client *c;
    int r = query_connect(q, &c);

    if (r < 0)
        return r;
    r = query_call(c, method, params, reply);
    rpc_client_free(c);
    return r;
}

static int by_identity(const void *a, const void *b)
{
    json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b;
    int64_t px = query_int(x, "pid", 0), py = query_int(y, "pid", 0);
    double sx = query_num(x, "start_time"), sy = query_num(y, "start_time");
    return px != py ? (px > py) - (px < py) : (sx > sy) - (sx < sy);
}

static int by_key_desc(const void *a, const void *b, void *key)
{
    double x = query_num(*(json_object *const *)a, key);
    double y = query_num(*(json_object *const *)b, key);
    return (x < y) - (x > y);
}

/* Pages asked a moment apart see windows a moment apart, so a process can
 * move between them: one entry per process, in the order asked for. */
static json_object *merge_pages(json_object *all, const char *sort)
{
    const char *key = !*sort || strcmp(sort, "energy") == 0 ? "energy_j"
                      : strcmp(sort, "power") == 0          ? "power_w"
                                                            : "cpu";
    size_t n = json_object_array_length(all), k = 0;
    json_object **v = malloc((n + 1) * sizeof(*v)), *out = json_object_new_array();

    if (!v || !out) {
        free(v);
        json_object_put(out);
        return json_object_get(all);
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_object_array_get_idx(all, i);
    qsort(v, n, sizeof(*v), by_identity);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || by_identity(&v[k - 1], &v[i]) != 0)
            v[k++] = v[i];
    qsort_r(v, k, sizeof(*v), by_key_desc, (void *)key);
    for (size_t i = 0; i < k; i++)
        json_object_array_add(out, json_object_get(v[i]));
    free(v);
    return out;
}

int query_list_processes(rpc_client *c, json_object *params, json_object **reply)
{
    json_object *page = NULL, *all;
    int64_t next = 0;
    int pages = 0, r;

    if (query_obj(params, "limit"))
        return query_call(c, "ListProcesses", params, reply);
    *reply = NULL;
    do {
        json_object_object_add(params, "offset", json_object_new_int64(next));
        if ((r = query_call(c, "ListProcesses", params, &page)) < 0) {
            json_object_put(*reply);
            *reply = NULL;
            return r;
        }
        next = query_int(page, "next_offset", -1);
        pages++;
        if (!*reply) {
            *reply = page;
            continue;
        }
        all = query_obj(*reply, "processes");
        json_object *more = query_obj(page, "processes");
        for (size_t i = 0; i < json_object_array_length(more); i++)
            json_object_array_add(all, json_object_get(json_object_array_get_idx(more, i)));
        json_object_put(page);
    } while (next > 0);
    if (pages > 1)
        json_object_object_add(
            *reply, "processes",
            merge_pages(query_obj(*reply, "processes"), query_str(params, "sort")));
    json_object_object_add(*reply, "next_offset", NULL);
    return 0;
}

/* Where the page after `reply` starts, as the parameters of the next call
 * (next_offset: offset; next_before: before, the key of the last item so
 * far; next_since: since, with the step_s of the buckets so far); false
 * after the last page. */
static bool next_page(json_object *reply, json_object *params)
{
    json_object *off = query_obj(reply, "next_offset"), *since = query_obj(reply, "next_since");
    json_object *before = query_obj(reply, "next_before");

    if (before) {
        json_object_object_add(params, "before", json_object_get(before));
        return true;
    }
    if (off) {
        json_object_object_add(params, "offset", json_object_get(off));
        return true;
    }
    if (since) {
        json_object_object_add(params, "since", json_object_get(since));
        json_object_object_add(params, "step_s", json_object_get(query_obj(reply, "step_s")));
        return true;
    }
    return false;
}

int query_pages(rpc_client *c, const char *method, json_object *params, const char *list,
                json_object **reply)
{
    json_object *page = NULL;
    int r;

    if ((r = query_call(c, method, params, reply)) < 0)
        return r;
    while (next_page(page ? page : *reply, params)) {
        json_object_put(page);
        page = NULL;
        if ((r = query_call(c, method, params, &page)) < 0)
            break;
        json_object *all = query_obj(*reply, list), *more = query_obj(page, list);
        size_t n = json_object_array_length(more);
        if (n == 0 && (query_obj(page, "next_offset") || query_obj(page, "next_since") ||
                       query_obj(page, "next_before"))) {
            log_error("the daemon answered %s with an empty page that is not the last", method);
            r = -EPROTO;
            break;
        }
        for (size_t i = 0; i < n; i++)
            json_object_array_add(all, json_object_get(json_object_array_get_idx(more, i)));
        /* what the reply says it is as fresh as: the newest page's */
        json_object *as_of = query_obj(page, "as_of");
        if (as_of)
            json_object_object_add(*reply, "as_of", json_object_get(as_of));
    }
    json_object_put(page);
    if (r < 0) {
        json_object_put(*reply);
        *reply = NULL;
        return r;
    }
    /* One reply with every page: none after it. */
    if (json_object_object_get_ex(*reply, "next_offset", NULL))
        json_object_object_add(*reply, "next_offset", NULL);
    if (json_object_object_get_ex(*reply, "next_since", NULL))
        json_object_object_add(*reply, "next_since", NULL);
    if (json_object_object_get_ex(*reply, "next_before", NULL))
        json_object_object_add(*reply, "next_before", NULL);
    return 0;
}

int query_once_pages(const query_opts *q, const char *method, json_object *params, const char *list,
                     json_object **reply)
{
    rpc_client *c;
    int r = query_connect(q, &c);

    if (r < 0)
        return r;
    r = query_pages(c, method, params, list, reply);
    rpc_client_free(c);
    return r;
}

int query_call_more(rpc_client *c, const char *method, json_object *params)
{
    return send_call(c, method, params, RPC_CALL_MORE);
}

int query_next(rpc_client *c, int timeout_ms, json_object **reply, char *err, size_t errlen)
{
    return read_reply(c, "Subscribe", timeout_ms, reply, err, errlen);
}

void query_print_json(json_object *o)
{
    puts(json_object_to_json_string_ext(o,
                                        JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}

json_object *query_obj(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

double query_num(json_object *o, const char *key)
{
    json_object *v = query_obj(o, key);
    if (!v || (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)))
        return NAN;
    return json_object_get_double(v);
}

const char *query_str(json_object *o, const char *key)
{
    json_object *v = query_obj(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

int64_t query_int(json_object *o, const char *key, int64_t dflt)
{
    json_object *v = query_obj(o, key);
    if (!v || (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)))
        return dflt;
    return json_object_get_int64(v);
}

int query_parse_user(const char *s, int64_t *uid)
{
    struct passwd *pw = getpwnam(s);
    long n;

    if (pw) {
        *uid = pw->pw_uid;
        return 0;
    }
    if (util_parse_long(s, &n) == 0 && n >= 0 && n <= QUERY_UID_MAX) {
        *uid = n;
        return 0;
    }
    log_error("--user '%s': no such user (give a name or a numeric uid up to %lld)", s,
              (long long)QUERY_UID_MAX);
    return -EINVAL;
}

int query_user_opt(const char *arg, json_object *params)
{
    int64_t uid;

    if (query_parse_user(arg, &uid) < 0)
        return -EINVAL;
    json_object_object_add(params, "uid", json_object_new_int64(uid));
    return 0;
}

int query_time_opt(int opt, const char *arg, double now, json_object *params)
{
    const char *what = opt == 's' ? "--since" : "--until";
    char err[UTIL_ERRLEN];
    double v;

    if (fmt_parse_time(arg, what, now, &v, err, sizeof(err)) < 0) {
        log_error("%s", err);
        return -EINVAL;
    }
    json_object_object_add(params, what + 2, json_object_new_double(v));
    return 0;
}

void query_print_table(const query_opts *q, const struct fmt_table *t)
{
    if (q->out == QUERY_CSV)
        fmt_table_print_csv(t, stdout);
    else
        fmt_table_print(t, stdout, q->color);
}

int query_open_out(const char *path, FILE **out)
{
    if (strcmp(path, "-") == 0) {
        *out = stdout;
        return 0;
    }
    *out = fopen(path, "w");
    if (!*out) {
        int r = -errno;
        log_error("cannot write %s: %s", path, strerror(errno));
        return r;
    }
    return 0;
}

int query_close_out(const char *path, FILE *f)
{
    bool bad = ferror(f) != 0;
    int e = 0;

    if (f == stdout)
        bad = fflush(f) != 0 || bad;
    else if (fclose(f) != 0)
        bad = true;
    e = errno;
    if (bad) {
        log_error("cannot write %s: %s", path, strerror(e ? e : EIO));
        return -(e ? e : EIO);
    }
    return 0;
}

int query_table_num(fmt_table *t, const char *text, double raw)
{
    char buf[FMT_LEN];

    if (isnan(raw))
        return fmt_table_add(t, text, "");
    return fmt_table_add(t, text, fmt_number(buf, raw));
}

struct fmt_table *query_process_table(json_object *processes)
{
    static const char *head[] = {"PID",   "USER",   "COMMAND", "CLASS",
                                 "POWER", "ENERGY", "TOTAL",   "CPU%"};
    static const char *csv[] = {"pid",     "user",     "comm",    "class",
                                "power_w", "energy_j", "total_j", "cpu"};
    static const fmt_align al[] = {FMT_RIGHT, FMT_LEFT,  FMT_LEFT,  FMT_LEFT,
                                   FMT_RIGHT, FMT_RIGHT, FMT_RIGHT, FMT_RIGHT};
    fmt_table *t = fmt_table_new(8, head, csv, al);
    bool one_class = true;
    int r = 0;

    for (size_t i = 0; t && r == 0 && i < json_object_array_length(processes); i++) {
        json_object *p = json_object_array_get_idx(processes, i);
        char a[FMT_LEN], pid[32];
        double cpu = query_num(p, "cpu");

        snprintf(pid, sizeof(pid), "%lld", (long long)query_int(p, "pid", 0));
        r = fmt_table_add(t, pid, NULL);
        r = r ? r : fmt_table_add(t, query_str(p, "user"), NULL);
        r = r ? r : fmt_table_add(t, query_str(p, "comm"), NULL);
        r = r ? r : fmt_table_add(t, query_str(p, "class"), NULL);
        r = r ? r
              : query_table_num(t, fmt_power(a, query_num(p, "power_w")), query_num(p, "power_w"));
        r = r ? r
              : query_table_num(t, fmt_energy(a, query_num(p, "energy_j")),
                                query_num(p, "energy_j"));
        r = r ? r
              : query_table_num(t, fmt_energy(a, query_num(p, "total_j")), query_num(p, "total_j"));
        snprintf(a, sizeof(a), "%.1f", cpu * 100);
        r = r ? r : query_table_num(t, a, cpu);
        one_class = one_class && strcmp(query_str(p, "class"), "all") == 0;
    }
    if (r < 0) {
        fmt_table_free(t);
        return NULL;
    }
    /* A one-class model's processes are all in class "all": the column says
     * nothing then (CSV keeps it, for scripts). */
    if (t && one_class)
        fmt_table_hide(t, 3);
    return t;
}
