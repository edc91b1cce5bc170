/* store: opening and closing the store, its configuration, the requests
 * other threads make of the writer (flush, maintenance, models) and its
 * health for GetStatus. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void store_config_default(store_config *c)
{
    memset(c, 0, sizeof(*c));
    c->queue_capacity = 16384;
    c->drain_interval_ms = 100;
    c->min_commit_gap_ms = 500;
    c->maintain_interval_s = 60;
    c->second_retention_s = 24 * 3600;
    c->minute_retention_s = 90 * 24 * 3600;
    c->calibration_retention_s = 7 * 24 * 3600;
    c->rollup_chunk_s = 600;
    /* a held row costs about 64 bytes (tests/bench/store_writer.c pending):
     * 8 MiB, 60 % of the daemon's RSS at 200 processes, and 10 minutes of
     * rows at 200 processes, 2 at 1,000 */
    c->max_pending_rows = 131072;
    c->clock = STORE_CLOCK_WALL;
}

static int check_config(const store_config *c, char *err, size_t errlen)
{
    if (c->queue_capacity < 16 || c->queue_capacity > (1u << 26))
        return util_err(err, errlen, -EINVAL, "store: queue_capacity %zu is outside 16..%u",
                        c->queue_capacity, 1u << 26);
    if (c->drain_interval_ms == 0 || c->maintain_interval_s == 0)
        return util_err(err, errlen, -EINVAL,
                        "store: drain and maintain intervals must be positive");
    if (c->second_retention_s < 60 || c->minute_retention_s < c->second_retention_s ||
        c->calibration_retention_s < 0)
        return util_err(err, errlen, -EINVAL,
                        "store: retention must be at least 60 s per second, and the per-minute"
                        " retention (%lld s) at least the per-second one (%lld s)",
                        (long long)c->minute_retention_s, (long long)c->second_retention_s);
    if (c->rollup_chunk_s < 60 || c->rollup_chunk_s % 60 != 0)
        return util_err(err, errlen, -EINVAL,
                        "store: rollup_chunk_s (%lld) must be a positive number of minutes",
                        (long long)c->rollup_chunk_s);
    if (c->clock != STORE_CLOCK_WALL && c->clock != STORE_CLOCK_DATA)
        return util_err(err, errlen, -EINVAL, "store: unknown clock %d", (int)c->clock);
    return 0;
}

static int read_boot_id(char *out, size_t len, char *err, size_t errlen)
{
    const char *path = "/proc/sys/kernel/random/boot_id";
    char *text;
    int r = util_read_file(path, &text, NULL);

    if (r < 0)
        return util_err(err, errlen, r, "%s: %s", path, strerror(-r));
    text[strcspn(text, "\n")] = '\0';
    snprintf(out, len, "%s", text);
    free(text);
    return 0;
}

static void free_models(store *s)
{
    for (size_t i = 0; i < s->n_model; i++) {
        free(s->model[i].name);
        free(s->model[i].engine);
        free(s->model[i].json);
    }
    free(s->model);
}

/* Two writers on one file would interleave model ids and double-count
 * totals, so the second is refused with a lock beside the database. */
static int take_lock(store *s, char *err, size_t errlen)
{
    char name[4096];

    snprintf(name, sizeof(name), "%s-lock", s->path);
    s->lock_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0)
        return util_err(err, errlen, -errno, "%s: %s", name, strerror(errno));
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        return util_err(err, errlen, r, "%s: %s", s->path,
                        r == -EBUSY ? "in use by another writer" : strerror(-r));
    }
    return 0;
}

/* Frees a store whose thread is not running. */
static void destroy(store *s)
{
    size_t first, n = s->queue.slot ? ring_readable(&s->queue, &first) : 0;

    for (size_t i = 0; i < n; i++) {
        store_item *it = ring_slot(&s->queue, first + i);
        if (it->kind == ITEM_INFO)
            store_proc_info_blob_free(it->u.proc_id.info);
    }
    conn_close(s);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    agg_free(&s->acc);
    free(s->order);
    free(s->pack);
    free(s->merged);
    free(s->old);
    free(s->pack_blob);
    ring_free(&s->queue);
    free_models(s);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s);
}

static int init_sync(store *s)
{
    pthread_condattr_t attr;
    int r;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    r = -pthread_cond_init(&s->wake, &attr);
    if (r == 0)
        r = -pthread_cond_init(&s->done, NULL);
    if (r == 0)
        r = -pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_destroy(&attr);
    saved_row_init(&s->node_row, &s->lock, &s->node, sizeof(s->node));
    saved_row_init(&s->evcal_row, &s->lock, &s->evcal, sizeof(s->evcal));
    return r;
}

int store_open(const char *path, const store_config *c, store **out, char *err, size_t errlen)
{
    store *s = calloc(1, sizeof(*s));
    int r;

    if (!s)
        return -ENOMEM;
    s->lock_fd = -1;
    if (c)
        s->cfg = *c;
    else
        store_config_default(&s->cfg);
    agg_init(&s->acc);
    s->partial_from = INT64_MAX;
    r = init_sync(s);
    if (r < 0) {
        free(s);
        return util_err(err, errlen, r, "store: %s", strerror(-r));
    }
    s->path = strdup(path);
    r = s->path ? check_config(&s->cfg, err, errlen) : -ENOMEM;
    if (r == 0 && s->cfg.boot_id[0] == '\0')
        r = read_boot_id(s->cfg.boot_id, sizeof(s->cfg.boot_id), err, errlen);
    if (r == 0)
        r = ring_init(&s->queue, s->cfg.queue_capacity);
    if (r == 0)
        r = take_lock(s, err, errlen);
    if (r == 0)
        r = conn_open(s, err, errlen);
    if (r == 0)
        r = conn_load_models(s, err, errlen);
    if (r == 0)
        r = -pthread_create(&s->thread, NULL, writer_main, s);
    if (r < 0) {
        if (r == -ENOMEM)
            util_err(err, errlen, r, "%s: out of memory", path);
        destroy(s);
        return r;
    }
    *out = s;
    return 0;
}

int store_close(store *s)
{
    int r;

    if (!s)
        return 0;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    r = s->req_result;
    /* What a full disk or a broken database cost, said once at the end. */
    if (s->stats.rows_lost || s->acc.rows)
        log_warning("%s: %llu rows could not be stored%s%s", s->path,
                    (unsigned long long)(s->stats.rows_lost + s->acc.rows),
                    s->stats.error ? ": " : "", s->stats.error ? s->stats.error_text : "");
    destroy(s);
    return r;
}

/* Asks the writer for a commit (and maintenance at now_s > 0) and waits. */
static int request(store *s, int64_t now_s)
{
    uint64_t seq;
    int r;

    pthread_mutex_lock(&s->lock);
    if (now_s > 0)
        s->maintain_now = now_s;
    seq = ++s->req_seq;
    pthread_cond_signal(&s->wake);
    while (s->done_seq < seq)
        pthread_cond_wait(&s->done, &s->lock);
    r = s->req_result;
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* True when a successful flush began within max_age_ns of now: its commit
 * covers all but the last max_age_ns of pushes, so a reader can share it. */
static bool recently_flushed(store *s, int64_t max_age_ns)
{
    int64_t now = (int64_t)util_now_ns(CLOCK_MONOTONIC);
    bool recent;

    pthread_mutex_lock(&s->lock);
    recent = max_age_ns > 0 && s->flushed_ns > 0 && now - s->flushed_ns <= max_age_ns;
    s->stats.flushes++;
    if (recent)
        s->stats.flushes_shared++;
    pthread_mutex_unlock(&s->lock);
    return recent;
}

int store_flush_within(store *s, unsigned max_age_ms)
{
    if (recently_flushed(s, (int64_t)max_age_ms * 1000000))
        return 0;
    return request(s, 0);
}

int64_t store_flushed_at(store *s)
{
    int64_t t;

    pthread_mutex_lock(&s->lock);
    t = s->flushed_real_ns;
    pthread_mutex_unlock(&s->lock);
    return t;
}

int store_flush(store *s)
{
    return store_flush_within(s, 0);
}

int store_maintain(store *s, int64_t now_s)
{
    if (now_s <= 0)
        return -EINVAL;
    return request(s, now_s);
}

static int64_t file_size(const char *path, const char *suffix)
{
    char name[4096];
    struct stat st;

    snprintf(name, sizeof(name), "%s%s", path, suffix);
    return stat(name, &st) == 0 ? (int64_t)st.st_size : 0;
}

void store_get_stats(store *s, store_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
    out->pushed = atomic_load(&s->pushed);
    out->dropped = atomic_load(&s->dropped);
    out->queue_capacity = s->queue.mask + 1;
    out->queue_high_water = atomic_load(&s->high_water);
    out->max_pending_rows = s->cfg.max_pending_rows;
    out->db_bytes =
        file_size(s->path, "") + file_size(s->path, "-wal") + file_size(s->path, SETTLED_SUFFIX);
}

static bool is_sha256(const char *h)
{
    size_t n = 0;

    for (; h && h[n]; n++)
        if (!((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
            return false;
    return n == 64;
}

static int add_model(store *s, const char *sha256, const char *name, const char *engine,
                     const char *json, int32_t *id)
{
    model_entry *n, *m;
    int32_t max = 0;

    for (size_t i = 0; i < s->n_model; i++) {
        if (strcmp(s->model[i].sha256, sha256) == 0) {
            s->model[i].loaded = (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000000);
            s->model[i].written = false; /* to record last_loaded */
            s->model[i].in_txn = false;
            *id = s->model[i].id;
            return 0;
        }
        max = s->model[i].id > max ? s->model[i].id : max;
    }
    n = realloc(s->model, (s->n_model + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    s->model = n;
    m = &s->model[s->n_model];
    memset(m, 0, sizeof(*m));
    m->id = max + 1;
    memcpy(m->sha256, sha256, 65);
    m->name = name ? strdup(name) : NULL;
    m->engine = engine ? strdup(engine) : NULL;
    m->json = strdup(json);
    m->loaded = (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000000);
    if (!m->json || (name && !m->name) || (engine && !m->engine)) {
        free(m->name);
        free(m->engine);
        free(m->json);
        return -ENOMEM;
    }
    s->n_model++;
    *id = m->id;
    return 0;
}

int store_model_add(store *s, const char *sha256, const char *name, const char *engine,
                    const char *json, int32_t *id, char *err, size_t errlen)
{
    int r;

    if (!is_sha256(sha256))
        return util_err(err, errlen, -EINVAL,
                        "model %s: sha256 '%s' is not 64 lowercase hex digits",
                        name ? name : "(unnamed)", sha256 ? sha256 : "(null)");
    if (!json)
        return util_err(err, errlen, -EINVAL, "model %s: no JSON text", name ? name : "(unnamed)");
    pthread_mutex_lock(&s->lock);
    r = add_model(s, sha256, name, engine, json, id);
    pthread_mutex_unlock(&s->lock);
    if (r < 0)
        return util_err(err, errlen, r, "model %s: out of memory", name ? name : "(unnamed)");
    return 0;
}
