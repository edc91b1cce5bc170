/* trace_read: the --replay reader (format in docs/records.md; the writer
 * is trace_write.c).
 *
 * The reader checks every field, because a replay drives the whole daemon:
 * lengths against the header, types, ranges, ticks in time order. json-c
 * says where a syntax error is; it does not remember where values are, so a
 * value found wrong is located afterwards by walking its path through the
 * line's text, to name FILE:LINE:COLUMN either way: that walk and the
 * typed checks of fields are in trace_fields.c. */
#include "sample/sample.h"
#include "sample/trace-internal.h"
#include "sample/trace_read-internal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Reader ----------------------------------------------------------------- */

/* One declared process, by identity (pid and start: pids are reused). */
struct trace_ident {
    uint64_t start;
    pid_t pid;
    enum { TRACE_ID_FREE, TRACE_ID_LIVE, TRACE_ID_GONE } state;
    char comm[17];
    unsigned long line, tick_line; /* of its proc record, of the last tick naming it */
};

static int trace_parse_zones(trace_reader *r, json_object *o, trace_path *path, char *err,
                             size_t errlen)
{
    static const char *const keys[] = {"id", "name"};
    json_object *a;
    int e;

    if ((e = trace_field(r, o, path, "zones", json_type_array, &a, err, errlen)) < 0)
        return e;
    size_t n = json_object_array_length(a);
    r->h.zone_id = calloc(n + 1, sizeof(char *));
    r->h.zone_name = calloc(n + 1, sizeof(char *));
    if (!r->h.zone_id || !r->h.zone_name)
        return -ENOMEM;
    trace_push_key(path, "zones");
    for (size_t i = 0; i < n; i++) {
        json_object *z = json_object_array_get_idx(a, i);
        const char *id, *name;
        trace_push_idx(path, i);
        if (!json_object_is_type(z, json_type_object))
            return trace_bad(r, path, err, errlen, "is not an object {\"id\", \"name\"}");
        if ((e = trace_known_fields(r, z, path, keys, 2, err, errlen)) < 0 ||
            (e = trace_string(r, z, path, "id", &id, err, errlen)) < 0 ||
            (e = trace_string(r, z, path, "name", &name, err, errlen)) < 0)
            return e;
        r->h.zone_id[i] = strdup(id);
        r->h.zone_name[i] = strdup(name);
        r->h.n_zones = i + 1;
        if (!r->h.zone_id[i] || !r->h.zone_name[i])
            return -ENOMEM;
        path->depth--;
    }
    path->depth--;
    return 0;
}

static int trace_parse_events(trace_reader *r, json_object *o, trace_path *path, char *err,
                              size_t errlen)
{
    json_object *a;
    int e;

    if ((e = trace_field(r, o, path, "events", json_type_array, &a, err, errlen)) < 0)
        return e;
    size_t n = json_object_array_length(a);
    r->h.events = calloc(n + 1, sizeof(char *));
    if (!r->h.events)
        return -ENOMEM;
    trace_push_key(path, "events");
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        trace_push_idx(path, i);
        if (!json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
            strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
            return trace_bad(r, path, err, errlen, "is not an event name");
        if (!(r->h.events[i] = strdup(json_object_get_string(v))))
            return -ENOMEM;
        r->h.n_events = i + 1;
        path->depth--;
    }
    path->depth--;
    return 0;
}

static int trace_parse_header(trace_reader *r, json_object *o, char *err, size_t errlen)
{
    static const char *const keys[] = {"format",  "events",  "zones",
                                       "rate_hz", "boot_id", "realtime_offset_ns"};
    trace_path path = {.depth = 0};
    json_object *v;
    const char *s;
    int e;

    if (!json_object_is_type(o, json_type_object))
        return trace_bad(r, &path, err, errlen, "is not a JSON object");
    if ((e = trace_string(r, o, &path, "format", &s, err, errlen)) < 0)
        return e;
    if (strcmp(s, TRACE_FORMAT) != 0) {
        trace_push_key(&path, "format");
        return trace_bad(r, &path, err, errlen, "is \"%.64s\", expected \"" TRACE_FORMAT "\"", s);
    }
    if ((e = trace_known_fields(r, o, &path, keys, 6, err, errlen)) < 0 ||
        (e = trace_parse_events(r, o, &path, err, errlen)) < 0 ||
        (e = trace_parse_zones(r, o, &path, err, errlen)) < 0 ||
        (e = trace_field(r, o, &path, "rate_hz", json_type_double, &v, err, errlen)) < 0)
        return e;
    r->h.rate_hz = json_object_get_double(v);
    if (!(r->h.rate_hz > 0) || !isfinite(r->h.rate_hz)) {
        trace_push_key(&path, "rate_hz");
        return trace_bad(r, &path, err, errlen, "is not a positive rate in Hz");
    }
    if ((e = trace_string(r, o, &path, "boot_id", &s, err, errlen)) < 0)
        return e;
    if (strlen(s) != 36) {
        trace_push_key(&path, "boot_id");
        return trace_bad(r, &path, err, errlen, "is not a 36-character boot id");
    }
    memcpy(r->h.boot_id, s, 37);
    if (json_object_object_get_ex(o, "realtime_offset_ns", &v)) { /* optional */
        if ((e = trace_field(r, o, &path, "realtime_offset_ns", json_type_int, &v, err, errlen)) <
            0)
            return e;
        r->h.realtime_offset_ns = json_object_get_int64(v);
    }
    return 0;
}

/* Room for n processes of n_events values each in the tick storage. */
static int trace_grow_procs(trace_reader *r, size_t n)
{
    size_t ne = r->h.n_events;

    if (n <= r->procs_cap)
        return 0;
    size_t cap = r->procs_cap ? r->procs_cap : 64;
    while (cap < n)
        cap *= 2;
    trace_proc_delta *p = realloc(r->procs, cap * sizeof(*p));
    if (!p)
        return -ENOMEM;
    r->procs = p;
    double *v = realloc(r->values, (cap * 2 * ne + 1) * sizeof(double));
    if (!v)
        return -ENOMEM;
    r->values = v;
    r->procs_cap = cap;
    for (size_t i = 0; i < cap; i++) {
        r->procs[i].scaled = r->values + 2 * ne * i;
        r->procs[i].ratio = r->values + 2 * ne * i + ne;
    }
    return 0;
}

/* ---- the declared processes: open addressing, deleted slots marked ---- */

static size_t trace_id_slot(const trace_reader *r, pid_t pid, uint64_t start)
{
    uint64_t h = (uint64_t)(uint32_t)pid * 0x9E3779B97F4A7C15ull ^ start * 0xC2B2AE3D27D4EB4Full;
    size_t i = (size_t)(h ^ (h >> 29)) & (r->ids_cap - 1);

    while (r->ids[i].state != TRACE_ID_FREE && !(r->ids[i].pid == pid && r->ids[i].start == start))
        i = (i + 1) & (r->ids_cap - 1);
    return i;
}

/* The live entry of (pid, start), or NULL. */
static struct trace_ident *trace_id_find(trace_reader *r, pid_t pid, uint64_t start)
{
    struct trace_ident *id;

    if (!r->ids_cap)
        return NULL;
    id = &r->ids[trace_id_slot(r, pid, start)];
    return id->state == TRACE_ID_LIVE ? id : NULL;
}

/* Keeps at most half the slots used, dropping deleted ones on the way. */
static int trace_id_reserve(trace_reader *r)
{
    struct trace_ident *old = r->ids;
    size_t old_cap = r->ids_cap, cap = old_cap ? old_cap : 64;

    if ((r->ids_used + 1) * 2 <= old_cap)
        return 0;
    while ((r->ids_used + 1) * 2 > cap)
        cap *= 2;
    if (!(r->ids = calloc(cap, sizeof(*r->ids)))) {
        r->ids = old;
        return -ENOMEM;
    }
    r->ids_cap = cap;
    r->ids_used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].state == TRACE_ID_LIVE) {
            r->ids[trace_id_slot(r, old[i].pid, old[i].start)] = old[i];
            r->ids_used++;
        }
    free(old);
    return 0;
}

/* A proc record: a new process, or a new name (exec) for a declared one;
 * the same record twice is a fault of the file. */
static int trace_id_declare(trace_reader *r, const procs_info *p, trace_path *path, char *err,
                            size_t errlen)
{
    struct trace_ident *id = trace_id_find(r, p->pid, p->start_ticks);
    int e;

    if (id && strcmp(id->comm, p->comm) == 0)
        return trace_bad(r, path, err, errlen,
                         "pid %d (start %llu) is already declared as '%s' on line %lu", (int)p->pid,
                         (unsigned long long)p->start_ticks, id->comm, id->line);
    if (!id) {
        if ((e = trace_id_reserve(r)) < 0)
            return e;
        id = &r->ids[trace_id_slot(r, p->pid, p->start_ticks)];
        if (id->state == TRACE_ID_FREE)
            r->ids_used++;
        *id = (struct trace_ident){.start = p->start_ticks, .pid = p->pid, .state = TRACE_ID_LIVE};
    }
    snprintf(id->comm, sizeof(id->comm), "%s", p->comm);
    id->line = r->lineno;
    return 0;
}

/* A tick's process must be declared, live, and named once in the tick. */
static int trace_id_check_delta(trace_reader *r, const trace_proc_delta *d, trace_path *path,
                                char *err, size_t errlen)
{
    struct trace_ident *id = trace_id_find(r, d->pid, d->start_ticks);

    if (!id)
        return trace_bad(r, path, err, errlen,
                         "pid %d (start %llu) has no proc record before it (or has exited)",
                         (int)d->pid, (unsigned long long)d->start_ticks);
    if (id->tick_line == r->lineno)
        return trace_bad(r, path, err, errlen, "pid %d (start %llu) is listed twice in the tick",
                         (int)d->pid, (unsigned long long)d->start_ticks);
    id->tick_line = r->lineno;
    return 0;
}

static int trace_parse_delta(trace_reader *r, json_object *o, trace_path *path, trace_proc_delta *d,
                             char *err, size_t errlen)
{
    static const char *const keys[] = {"pid", "start", "d", "r"};
    uint64_t pid;
    int e;

    if (!json_object_is_type(o, json_type_object))
        return trace_bad(r, path, err, errlen,
                         "is not an object {\"pid\", \"start\", \"d\", \"r\"}");
    if ((e = trace_known_fields(r, o, path, keys, 4, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "pid", INT32_MAX, &pid, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "start", UINT64_MAX, &d->start_ticks, err, errlen)) < 0 ||
        (e = trace_numbers(r, o, path, "d", r->h.n_events, "event in the header", TRACE_V_SCALED,
                           d->scaled, err, errlen)) < 0 ||
        (e = trace_numbers(r, o, path, "r", r->h.n_events, "event in the header", TRACE_V_RATIO,
                           d->ratio, err, errlen)) < 0)
        return e;
    if (pid == 0) {
        trace_push_key(path, "pid");
        return trace_bad(r, path, err, errlen, "is not a process id");
    }
    d->pid = (pid_t)pid;
    return trace_id_check_delta(r, d, path, err, errlen);
}

static int trace_parse_tick(trace_reader *r, json_object *o, trace_path *path, trace_tick *t,
                            char *err, size_t errlen)
{
    static const char *const keys[] = {"t", "dt", "energy_j", "procs"};
    json_object *procs;
    int e;

    if (!json_object_is_type(o, json_type_object))
        return trace_bad(r, path, err, errlen, "is not an object");
    if ((e = trace_known_fields(r, o, path, keys, 4, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "t", UINT64_MAX, &t->mono_ns, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "dt", UINT64_MAX, &t->dt_ns, err, errlen)) < 0)
        return e;
    if (r->any_tick && t->mono_ns <= r->last_t) {
        trace_push_key(path, "t");
        return trace_bad(r, path, err, errlen, "%llu is not after the previous tick's %llu",
                         (unsigned long long)t->mono_ns, (unsigned long long)r->last_t);
    }
    if (t->dt_ns == 0) {
        trace_push_key(path, "dt");
        return trace_bad(r, path, err, errlen, "is zero");
    }
    if ((e = trace_numbers(r, o, path, "energy_j", r->h.n_zones, "zone in the header",
                           TRACE_V_ENERGY, r->energy, err, errlen)) < 0 ||
        (e = trace_field(r, o, path, "procs", json_type_array, &procs, err, errlen)) < 0)
        return e;
    size_t n = json_object_array_length(procs);
    if ((e = trace_grow_procs(r, n)) < 0)
        return e;
    trace_push_key(path, "procs");
    for (size_t i = 0; i < n; i++) {
        trace_push_idx(path, i);
        e = trace_parse_delta(r, json_object_array_get_idx(procs, i), path, &r->procs[i], err,
                              errlen);
        if (e < 0)
            return e;
        path->depth--;
    }
    t->energy_j = r->energy;
    t->procs = r->procs;
    t->n_procs = n;
    r->last_t = t->mono_ns;
    r->any_tick = true;
    return 0;
}

static int trace_parse_proc(trace_reader *r, json_object *o, trace_path *path, procs_info *p,
                            char *err, size_t errlen)
{
    static const char *const keys[] = {"pid",  "ppid",    "start",  "uid",
                                       "comm", "cmdline", "cgroup", "job"};
    uint64_t pid, ppid, uid;
    const char *comm, *cmdline, *cgroup, *job = "";
    int e;

    if (!json_object_is_type(o, json_type_object))
        return trace_bad(r, path, err, errlen, "is not an object");
    memset(p, 0, sizeof(*p));
    if ((e = trace_known_fields(r, o, path, keys, 8, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "pid", INT32_MAX, &pid, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "ppid", INT32_MAX, &ppid, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "start", UINT64_MAX, &p->start_ticks, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "uid", UINT32_MAX - 1, &uid, err, errlen)) < 0 ||
        (e = trace_string(r, o, path, "comm", &comm, err, errlen)) < 0 ||
        (e = trace_string(r, o, path, "cmdline", &cmdline, err, errlen)) < 0 ||
        (e = trace_string(r, o, path, "cgroup", &cgroup, err, errlen)) < 0 ||
        (json_object_object_get_ex(o, "job", NULL) &&
         (e = trace_string(r, o, path, "job", &job, err, errlen)) < 0))
        return e;
    if (pid == 0) {
        trace_push_key(path, "pid");
        return trace_bad(r, path, err, errlen, "is not a process id");
    }
    if (strlen(comm) >= sizeof(p->comm)) {
        trace_push_key(path, "comm");
        return trace_bad(r, path, err, errlen, "is longer than %zu bytes", sizeof(p->comm) - 1);
    }
    if (strlen(job) >= sizeof(p->job)) {
        trace_push_key(path, "job");
        return trace_bad(r, path, err, errlen, "is longer than %zu bytes", sizeof(p->job) - 1);
    }
    free(r->cmdline);
    free(r->cgroup);
    r->cmdline = strdup(cmdline);
    r->cgroup = strdup(cgroup);
    if (!r->cmdline || !r->cgroup)
        return -ENOMEM;
    p->pid = (pid_t)pid;
    p->ppid = (pid_t)ppid;
    p->uid = (uid_t)uid;
    strcpy(p->comm, comm);
    strcpy(p->job, job);
    p->cmdline = r->cmdline;
    p->cgroup = r->cgroup;
    return trace_id_declare(r, p, path, err, errlen);
}

static int trace_parse_exit(trace_reader *r, json_object *o, trace_path *path, procs_info *p,
                            char *err, size_t errlen)
{
    static const char *const keys[] = {"pid", "start"};
    uint64_t pid;
    int e;

    if (!json_object_is_type(o, json_type_object))
        return trace_bad(r, path, err, errlen, "is not an object");
    memset(p, 0, sizeof(*p));
    if ((e = trace_known_fields(r, o, path, keys, 2, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "pid", INT32_MAX, &pid, err, errlen)) < 0 ||
        (e = trace_u64(r, o, path, "start", UINT64_MAX, &p->start_ticks, err, errlen)) < 0)
        return e;
    if (pid == 0) {
        trace_push_key(path, "pid");
        return trace_bad(r, path, err, errlen, "is not a process id");
    }
    p->pid = (pid_t)pid;
    struct trace_ident *id = trace_id_find(r, p->pid, p->start_ticks);
    if (id)
        id->state = TRACE_ID_GONE; /* its slot stays used until the next growth */
    return 0;
}

static int trace_parse_record(trace_reader *r, json_object *o, trace_record_kind *kind,
                              trace_tick *tick, procs_info *proc, char *err, size_t errlen)
{
    trace_path path = {.depth = 0};

    if (!json_object_is_type(o, json_type_object) || json_object_object_length(o) != 1)
        return trace_bad(r, &path, err, errlen,
                         "a record is an object with one member: \"tick\", \"proc\" or \"exit\"");
    json_object_object_foreach(o, key, val)
    {
        trace_push_key(&path, key);
        if (strcmp(key, "tick") == 0) {
            *kind = TRACE_TICK;
            return trace_parse_tick(r, val, &path, tick, err, errlen);
        }
        if (strcmp(key, "proc") == 0) {
            *kind = TRACE_PROC;
            return trace_parse_proc(r, val, &path, proc, err, errlen);
        }
        if (strcmp(key, "exit") == 0) {
            *kind = TRACE_EXIT;
            return trace_parse_exit(r, val, &path, proc, err, errlen);
        }
    }
    return trace_bad(r, &path, err, errlen,
                     "unknown record kind (expected \"tick\", \"proc\" or \"exit\")");
}

/* Reads and parses the next line into r->obj: 1 when there is one, 0 at the
 * end. A last line without its newline that does not parse is what a crash
 * while recording leaves: -ENODATA, distinct from a malformed line. */
static int trace_next_line(trace_reader *r, char *err, size_t errlen)
{
    json_object_put(r->obj);
    r->obj = NULL;
    if (r->ended)
        return 0;
    errno = 0;
    ssize_t n = getline(&r->line, &r->line_cap, r->f);
    if (n < 0) {
        r->ended = true;
        if (ferror(r->f))
            return util_err(err, errlen, errno ? -errno : -EIO, "%s: %s", r->path,
                            strerror(errno ? errno : EIO));
        return 0;
    }
    r->lineno++;
    bool complete = r->line[n - 1] == '\n';
    if (complete)
        r->line[--n] = '\0';
    r->line_len = (size_t)n;
    const char *nul = memchr(r->line, '\0', (size_t)n);
    if (nul)
        return util_err(err, errlen, -EBADMSG, "%s:%lu:%zu: NUL byte in a JSON line", r->path,
                        r->lineno, (size_t)(nul - r->line) + 1);

    json_tokener_reset(r->tok);
    r->obj = json_tokener_parse_ex(r->tok, r->line, (int)n);
    enum json_tokener_error je = json_tokener_get_error(r->tok);
    size_t end = json_tokener_get_parse_end(r->tok);
    if (je == json_tokener_continue && !complete) {
        r->ended = true;
        return util_err(err, errlen, -ENODATA,
                        "%s:%lu:%zu: the last line is cut short: the recording ended in the "
                        "middle of a record (a crash?); the %lu lines before it are complete",
                        r->path, r->lineno, (size_t)n + 1, r->lineno - 1);
    }
    if (je == json_tokener_continue)
        return util_err(err, errlen, -EBADMSG, "%s:%lu:%zu: %s", r->path, r->lineno, (size_t)n + 1,
                        n == 0 ? "empty line, expected a record" : "the line ends inside a record");
    if (je != json_tokener_success)
        return util_err(err, errlen, -EBADMSG, "%s:%lu:%zu: invalid JSON: %s", r->path, r->lineno,
                        end + 1, json_tokener_error_desc(je));
    const char *rest = trace_skip_ws(r->line + end);
    if (*rest)
        return util_err(err, errlen, -EBADMSG, "%s:%lu:%zu: text after the end of the record",
                        r->path, r->lineno, (size_t)(rest - r->line) + 1);
    return 1;
}

int trace_reader_open(const char *path, trace_reader **out, char *err, size_t errlen)
{
    trace_reader *r = calloc(1, sizeof(*r));
    int e;

    if (!r)
        return -ENOMEM;
    r->path = strdup(path);
    r->tok = json_tokener_new();
    if (!r->path || !r->tok) {
        trace_reader_close(r);
        return -ENOMEM;
    }
    json_tokener_set_flags(r->tok, JSON_TOKENER_STRICT);
    r->f = fopen(path, "re");
    if (!r->f) {
        e = util_err(err, errlen, -errno, "%s: %s", path, strerror(errno));
        trace_reader_close(r);
        return e;
    }
    e = trace_next_line(r, err, errlen);
    if (e == 0)
        e = util_err(err, errlen, -EBADMSG, "%s:1:1: empty file, expected a trace header", path);
    if (e > 0)
        e = trace_parse_header(r, r->obj, err, errlen);
    if (e >= 0) {
        r->energy = calloc(r->h.n_zones + 1, sizeof(double));
        e = r->energy ? trace_grow_procs(r, 1) : -ENOMEM;
    }
    if (e < 0) {
        trace_reader_close(r);
        return e;
    }
    *out = r;
    return 0;
}

const trace_header *trace_reader_header(const trace_reader *r)
{
    return &r->h;
}

int trace_read(trace_reader *r, trace_record_kind *kind, trace_tick *tick, procs_info *proc,
               char *err, size_t errlen)
{
    int e = trace_next_line(r, err, errlen);

    if (e <= 0)
        return e;
    e = trace_parse_record(r, r->obj, kind, tick, proc, err, errlen);
    return e < 0 ? e : 1;
}

void trace_reader_close(trace_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    json_object_put(r->obj);
    if (r->tok)
        json_tokener_free(r->tok);
    util_strv_free(r->h.events, r->h.n_events);
    util_strv_free(r->h.zone_id, r->h.n_zones);
    util_strv_free(r->h.zone_name, r->h.n_zones);
    free(r->energy);
    free(r->procs);
    free(r->values);
    free(r->cmdline);
    free(r->cgroup);
    free(r->ids);
    free(r->line);
    free(r->path);
    free(r);
}
