/* conn: the writer's connection — opening it, its prepared statements, and
 * the rows one commit writes through them. Only the writer thread calls
 * these, except that the model list is shared under s->lock with
 * store_model_add. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NS_PER_S 1000000000LL

_Static_assert(ST_COUNT <= sizeof(((store *)0)->stmt) / sizeof(sqlite3_stmt *),
               "store.stmt too small");

static const char *const statements[ST_COUNT] = {
    /* A process's row is written when it is first seen, not every second:
     * its lifetime totals, last second and class are those of the seconds
     * before the fold watermark (process_fold.t), folded in every
     * FOLD_INTERVAL_S seconds (ST_FOLD); readers add the rows of
     * process_energy_recent from the watermark on. An update every second
     * rewrote the page of every running process's row, most of what a
     * commit wrote. */
    [ST_PROC] = "INSERT INTO process_info (boot_id, pid, start_time, first_seen)"
                " VALUES (?1, ?2, ?3, ?4)"
                " ON CONFLICT (boot_id, pid, start_time) DO UPDATE SET"
                " first_seen = min(first_seen, excluded.first_seen)",
    /* A process already written: its row by id, checked against its key
     * (the id is the writer's hint, and a rolled-back or deleted row's id
     * can come back for another process). A read: it changes no page. */
    [ST_PROC_CHECK] = "SELECT 1 FROM process_info"
                      " WHERE id = ?4 AND pid = ?2 AND start_time = ?3 AND boot_id = ?1",
    /* The fold (conn_fold): the rows of seconds [?1, ?2) by process, each
     * process's in time order, added to its row one by one as they used to
     * be, so the totals' rounding does not depend on when folds ran. */
    [ST_FOLD] = "SELECT process_id, t, attributed_j, standalone_j, cpu_s, class"
                " FROM process_energy_recent WHERE t >= ?1 AND t < ?2 ORDER BY process_id, t",
    [ST_FOLD_ROW] = "SELECT attributed_j, standalone_j, cpu_s, last_seen, class FROM process_totals"
                    " WHERE id = ?1",
    [ST_FOLD_SET] = "UPDATE process_totals SET attributed_j = ?2, standalone_j = ?3, cpu_s = ?4,"
                    " last_seen = ?5, class = ?6 WHERE id = ?1",
    /* The same when last_seen stays (a process that ended within its
     * second, most under churn): its index entry is not rewritten. */
    [ST_FOLD_SUMS] = "UPDATE process_totals SET attributed_j = ?2, standalone_j = ?3, cpu_s = ?4,"
                     " class = ?6 WHERE id = ?1",
    [ST_FOLD_MARK] = "UPDATE process_fold SET t = ?1",
    [ST_FOLD_GET] = "SELECT t FROM process_fold",
    /* Not RETURNING on ST_PROC: that opens a temporary b-tree (a pager and a
     * 64 KiB page, malloc'ed and freed) on every step. */
    [ST_PROC_ID] =
        "SELECT id FROM process_info WHERE boot_id = ?1 AND pid = ?2 AND start_time = ?3",
    /* A second's rows for all processes as a few page-sized chunks
     * (packed.h): a commit appends them, where a row per process took a
     * b-tree entry each. A second that a flush wrote in progress is read
     * back, its later ticks added, and written whole again. */
    [ST_PACKED_GET] = "SELECT rows FROM process_energy_packed WHERE k BETWEEN ?1 AND ?2 ORDER BY k",
    [ST_PACKED_DEL] = "DELETE FROM process_energy_packed WHERE k BETWEEN ?1 AND ?2",
    [ST_PACKED_PUT] = "INSERT INTO process_energy_packed (k, rows) VALUES (?1, ?2)",
    [ST_INFO] =
        "INSERT INTO process_info (boot_id, pid, start_time, comm, cmdline, uid, cgroup,"
        " first_seen, job) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        " ON CONFLICT (boot_id, pid, start_time) DO UPDATE SET"
        " comm = coalesce(excluded.comm, comm), cmdline = coalesce(excluded.cmdline, cmdline),"
        " uid = coalesce(excluded.uid, uid), cgroup = coalesce(excluded.cgroup, cgroup),"
        " job = coalesce(excluded.job, job),"
        " first_seen = min(first_seen, excluded.first_seen)",
    [ST_EXIT] = "INSERT INTO process_info (boot_id, pid, start_time, first_seen, exit_time)"
                " VALUES (?1, ?2, ?3, ?4, ?4)"
                " ON CONFLICT (boot_id, pid, start_time) DO UPDATE SET"
                " exit_time = excluded.exit_time",
    /* A process's totals row, made with its info row (ST_PROC, ST_INFO,
     * ST_EXIT): last seen ?4, class ?5 when new; an exit (?6) moves
     * last_seen on to the exit time. */
    [ST_TOTALS] = "INSERT INTO process_totals (id, last_seen, class)"
                  " SELECT id, ?4, ?5 FROM process_info"
                  " WHERE boot_id = ?1 AND pid = ?2 AND start_time = ?3"
                  " ON CONFLICT (id) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen)"
                  " WHERE ?6",
    /* A new process's rows, written once with all a commit knows of it
     * (conn_new_process): its info, exit and first second. Nothing when it
     * has a row already: the writer then updates that row as above. */
    [ST_NEW] = "INSERT INTO process_info (boot_id, pid, start_time, comm, cmdline, uid, cgroup,"
               " first_seen, job, exit_time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
               " ON CONFLICT (boot_id, pid, start_time) DO NOTHING",
    /* Its totals row, by the id the insert made (ST_TOTALS on a stale row). */
    [ST_NEW_TOTALS] = "INSERT INTO process_totals (id, last_seen, class) VALUES (?1, ?2, ?3)"
                      " ON CONFLICT (id) DO UPDATE SET"
                      " last_seen = max(last_seen, excluded.last_seen) WHERE ?4",
    [ST_DOMAIN] =
        "INSERT INTO host_energy (t, domain, measured_j, modeled_j) VALUES (?1, ?2, ?3, ?4)"
        " ON CONFLICT (t, domain) DO UPDATE SET"
        " measured_j = coalesce(measured_j + excluded.measured_j, measured_j,"
        " excluded.measured_j), modeled_j = coalesce(modeled_j + excluded.modeled_j,"
        " modeled_j, excluded.modeled_j)",
    [ST_HOST] = "INSERT INTO host_attribution (t, duration_s, host_j, idle_j, attributed_j,"
                " unattributed_j, modeled_j, measured, model_id, idle_source, calib_t)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                " ON CONFLICT (t) DO UPDATE SET duration_s = duration_s + excluded.duration_s,"
                " host_j = host_j + excluded.host_j, idle_j = idle_j + excluded.idle_j,"
                " attributed_j = attributed_j + excluded.attributed_j,"
                " unattributed_j = unattributed_j + excluded.unattributed_j,"
                " modeled_j = modeled_j + excluded.modeled_j,"
                " measured = min(measured, excluded.measured), model_id = excluded.model_id,"
                " idle_source = excluded.idle_source, calib_t = excluded.calib_t",
    [ST_CALIB] = "INSERT OR REPLACE INTO calibration (t, duration_s, model_id, power_w, rates)"
                 " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_MODEL] = "INSERT INTO models (id, sha256, name, engine, json, first_loaded, last_loaded)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (sha256) DO UPDATE SET"
                 " last_loaded = max(last_loaded, excluded.last_loaded)",
    [ST_NODE] = NODE_CALIB_UPSERT,
};

static int64_t now_ns(clockid_t clock)
{
    return (int64_t)util_now_ns(clock);
}

void conn_close(store *s)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(s->stmt[i]);
        s->stmt[i] = NULL;
    }
    sqlite3_close(s->db);
    s->db = NULL;
}

int conn_open(store *s, char *err, size_t errlen)
{
    char settled[4096];
    struct stat st;
    int64_t page = 0;
    int rc, r = schema_open(s->path, s->cfg.max_db_bytes, &s->db, err, errlen);

    if (r < 0)
        return r;
    for (int i = 0; i < ST_COUNT; i++) {
        rc = sqlite3_prepare_v3(s->db, statements[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
                                NULL);
        if (rc != SQLITE_OK) {
            r = util_err(err, errlen, schema_errno(s->db, rc), "%s: preparing a statement: %s",
                         s->path, sqlite3_errmsg(s->db));
            conn_close(s);
            return r;
        }
    }
    rc = schema_int(s->db, "PRAGMA page_size", 0, &page);
    if (rc != SQLITE_OK) {
        r = util_err(err, errlen, schema_errno(s->db, rc), "%s: reading the page size: %s", s->path,
                     sqlite3_errmsg(s->db));
        conn_close(s);
        return r;
    }
    s->chunk_max = packed_chunk_max(page);
    rc = sqlite3_step(s->stmt[ST_FOLD_GET]);
    s->fold_t = rc == SQLITE_ROW ? sqlite3_column_int64(s->stmt[ST_FOLD_GET], 0) : 0;
    sqlite3_reset(s->stmt[ST_FOLD_GET]);
    if (rc != SQLITE_ROW) {
        r = util_err(err, errlen, schema_errno(s->db, rc), "%s: reading the fold watermark: %s",
                     s->path, rc == SQLITE_DONE ? "no row" : sqlite3_errmsg(s->db));
        conn_close(s);
        return r;
    }
    s->fold_txn = 0;
    if (stat(s->path, &st) < 0) {
        r = util_err(err, errlen, -errno, "%s: %s", s->path, strerror(errno));
        conn_close(s);
        return r;
    }
    s->db_dev = st.st_dev;
    s->db_ino = st.st_ino;
    r = settled_path(s->path, settled, sizeof(settled));
    if (r == 0 && stat(settled, &st) < 0)
        r = util_err(err, errlen, -errno, "%s: %s", settled, strerror(errno));
    else if (r < 0)
        r = util_err(err, errlen, r, "%s: path too long for its settled file", s->path);
    /* A damaged settled file fails this: the per-second commits, which do
     * not read it, go on, and the next move leaves out what it holds. */
    if (r == 0 && settled_drop_moved(s->db, s->path, err, errlen) < 0)
        log_error("%s", err);
    if (r < 0) {
        conn_close(s);
        return r;
    }
    s->settled_dev = st.st_dev;
    s->settled_ino = st.st_ino;
    checkpoint_policy(s);
    return 0;
}

int conn_load_models(store *s, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, sha256, name, engine, json, last_loaded FROM models"
                                " ORDER BY id",
                                -1, &st, NULL);

    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        model_entry *n = realloc(s->model, (s->n_model + 1) * sizeof(*n)), *m;
        const char *name = (const char *)sqlite3_column_text(st, 2);
        const char *engine = (const char *)sqlite3_column_text(st, 3);

        if (!n) {
            rc = SQLITE_NOMEM;
            break;
        }
        s->model = n;
        m = &s->model[s->n_model];
        memset(m, 0, sizeof(*m));
        m->id = sqlite3_column_int(st, 0);
        snprintf(m->sha256, sizeof(m->sha256), "%s", sqlite3_column_text(st, 1));
        m->name = name ? strdup(name) : NULL;
        m->engine = engine ? strdup(engine) : NULL;
        m->json = strdup((const char *)sqlite3_column_text(st, 4));
        m->loaded = sqlite3_column_int64(st, 5);
        m->written = true;
        s->n_model++;
        if (!m->json) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return util_err(err, errlen, schema_errno(s->db, rc), "%s: reading the models: %s", s->path,
                        sqlite3_errmsg(s->db));
    return 0;
}

/* ---- Writing the accumulated rows ------------------------------------------ */

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

void conn_bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_model(sqlite3_stmt *st, int i, int32_t id)
{
    if (id > 0)
        sqlite3_bind_int(st, i, id);
    else
        sqlite3_bind_null(st, i);
}

int conn_run(sqlite3_stmt *st)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int write_models(store *s, int64_t now)
{
    sqlite3_stmt *st = s->stmt[ST_MODEL];
    int rc = SQLITE_OK;

    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_model && rc == SQLITE_OK; i++) {
        model_entry *m = &s->model[i];
        if (m->written)
            continue;
        sqlite3_bind_int(st, 1, m->id);
        sqlite3_bind_text(st, 2, m->sha256, -1, SQLITE_STATIC);
        bind_text_or_null(st, 3, m->name);
        bind_text_or_null(st, 4, m->engine);
        sqlite3_bind_text(st, 5, m->json, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, m->loaded ? m->loaded : now);
        rc = conn_run(st);
        m->in_txn = true;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* After a transaction: the models it wrote are written when it committed.
 * Only those: store_model_add may have added one meanwhile. */
void conn_models_end_txn(store *s, bool committed)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_model; i++) {
        if (s->model[i].in_txn && committed)
            s->model[i].written = true;
        s->model[i].in_txn = false;
    }
    pthread_mutex_unlock(&s->lock);
    saved_row_end_txn(&s->node_row, committed);
    saved_row_end_txn(&s->evcal_row, committed);
}

/* A new database file has none of the models. */
void conn_models_unwritten(store *s)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_model; i++)
        s->model[i].written = false;
    pthread_mutex_unlock(&s->lock);
    saved_row_unwritten(&s->node_row);
    saved_row_unwritten(&s->evcal_row);
}

static void bind_identity(store *s, sqlite3_stmt *st, int32_t pid, uint64_t start_time)
{
    sqlite3_bind_text(st, 1, s->cfg.boot_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, pid);
    sqlite3_bind_int64(st, 3, (int64_t)start_time);
}

/* Makes process (pid, start_time)'s totals row once its info row is
 * written: last seen t and class *klass (NULL: none) when new; an exit moves
 * last_seen on to t. */
static int write_totals(store *s, int32_t pid, uint64_t start_time, int64_t t, const int *klass,
                        bool exited)
{
    sqlite3_stmt *st = s->stmt[ST_TOTALS];

    bind_identity(s, st, pid, start_time);
    sqlite3_bind_int64(st, 4, t);
    if (klass)
        sqlite3_bind_int(st, 5, *klass);
    else
        sqlite3_bind_null(st, 5);
    sqlite3_bind_int(st, 6, exited);
    return conn_run(st);
}

/* One info or exit event by its own statements, on the process's row as it
 * is: for a process that has a row already. */
static int write_event(store *s, const agg_event *e)
{
    sqlite3_stmt *st = s->stmt[e->kind == ITEM_INFO ? ST_INFO : ST_EXIT];
    int rc;

    bind_identity(s, st, e->pid, e->start_time);
    if (e->kind == ITEM_INFO) {
        bind_text_or_null(st, 4, e->info->comm);
        bind_text_or_null(st, 5, e->info->cmdline);
        if (e->info->uid >= 0)
            sqlite3_bind_int64(st, 6, e->info->uid);
        bind_text_or_null(st, 7, e->info->cgroup);
        bind_text_or_null(st, 9, e->info->job);
        sqlite3_bind_int64(st, 8, e->t);
    } else {
        sqlite3_bind_int64(st, 4, e->t);
    }
    rc = conn_run(st);
    if (rc == SQLITE_OK)
        rc = write_totals(s, e->pid, e->start_time, e->t, NULL, e->kind != ITEM_INFO);
    return rc;
}

/* A new process's rows as one commit's events and first second leave them:
 * what write_event for each in turn, then insert_process, would have. */
typedef struct new_rows {
    const char *comm, *cmdline, *cgroup, *job;
    int64_t uid, exit_time; /* -1: none */
    int64_t first_seen, last_seen;
    const int *klass; /* NULL: none */
    bool exited;
} new_rows;

/* Writes process p's rows, one insert into each table with the id the first
 * made, when it has none; *made false when it had (and nothing changed). */
static int write_new(store *s, agg_proc *p, const new_rows *n, bool *made)
{
    sqlite3_stmt *st = s->stmt[ST_NEW];
    sqlite3_int64 before = sqlite3_total_changes64(s->db);
    int rc;

    bind_identity(s, st, p->pid, p->start_time);
    bind_text_or_null(st, 4, n->comm);
    bind_text_or_null(st, 5, n->cmdline);
    if (n->uid >= 0)
        sqlite3_bind_int64(st, 6, n->uid);
    bind_text_or_null(st, 7, n->cgroup);
    sqlite3_bind_int64(st, 8, n->first_seen);
    bind_text_or_null(st, 9, n->job);
    if (n->exit_time >= 0)
        sqlite3_bind_int64(st, 10, n->exit_time);
    rc = conn_run(st);
    *made = rc == SQLITE_OK && sqlite3_total_changes64(s->db) > before;
    if (!*made)
        return rc;
    p->row_id = sqlite3_last_insert_rowid(s->db);
    p->row_txn = s->txn;
    st = s->stmt[ST_NEW_TOTALS];
    sqlite3_bind_int64(st, 1, p->row_id);
    sqlite3_bind_int64(st, 2, n->last_seen);
    if (n->klass)
        sqlite3_bind_int(st, 3, *n->klass);
    sqlite3_bind_int(st, 4, n->exited);
    return conn_run(st);
}

/* Process p's first second that a commit up to `until` writes, or NULL. */
static const agg_sec *first_second(const agg_proc *p, int64_t until)
{
    for (size_t k = 0; k < p->n_sec; k++)
        if (p->sec[k].t < until)
            return &p->sec[k];
    return NULL;
}

/* Merges process p's events (in order) and its first second into n. */
static void merge_events(const agg *a, const agg_proc *p, int64_t until, new_rows *n)
{
    const agg_sec *first = first_second(p, until);

    *n = (new_rows){.uid = -1, .exit_time = -1};
    n->first_seen = n->last_seen = a->event[p->ev_first - 1].t;
    for (size_t i = p->ev_first; i; i = a->event[i - 1].next) {
        const agg_event *e = &a->event[i - 1];

        if (e->kind == ITEM_EXIT) {
            n->exit_time = e->t;
            n->last_seen = e->t > n->last_seen ? e->t : n->last_seen;
            n->exited = true;
            continue;
        }
        n->first_seen = e->t < n->first_seen ? e->t : n->first_seen;
        n->comm = e->info->comm ? e->info->comm : n->comm;
        n->cmdline = e->info->cmdline ? e->info->cmdline : n->cmdline;
        n->cgroup = e->info->cgroup ? e->info->cgroup : n->cgroup;
        n->job = e->info->job ? e->info->job : n->job;
        n->uid = e->info->uid >= 0 ? e->info->uid : n->uid;
    }
    if (first && first->t < n->first_seen)
        n->first_seen = first->t;
}

/* Process p's events of this commit: with its first second in one write of
 * each of its rows when it is new (most processes under churn: an info, an
 * exit and a second in the same commit), else one by one. */
static int write_proc_events(store *s, agg_proc *p, int64_t until)
{
    bool made = false;
    int rc = SQLITE_OK;

    if (p->row_id == 0) {
        new_rows n;

        merge_events(&s->acc, p, until, &n);
        rc = write_new(s, p, &n, &made);
    }
    for (size_t i = p->ev_first; rc == SQLITE_OK && !made && i; i = s->acc.event[i - 1].next)
        rc = write_event(s, &s->acc.event[i - 1]);
    return rc;
}

/* The events in the order they came, each process's all at its first, so
 * rows are made (and ids given) in the same order as one by one. */
static int write_events(store *s, int64_t until)
{
    int rc = SQLITE_OK;

    for (size_t i = 0; i < s->acc.n_event && rc == SQLITE_OK; i++) {
        const agg_event *e = &s->acc.event[i];
        agg_proc *p = e->proc ? &s->acc.proc[e->proc - 1] : NULL;

        if (!p)
            rc = write_event(s, e);
        else if (p->ev_first == i + 1)
            rc = write_proc_events(s, p, until);
    }
    return rc;
}

/* True when row `p->row_id` is still process p's. */
static int check_row(store *s, const agg_proc *p, bool *ok)
{
    sqlite3_stmt *st = s->stmt[ST_PROC_CHECK];
    int rc;

    bind_identity(s, st, p->pid, p->start_time);
    sqlite3_bind_int64(st, 4, p->row_id);
    rc = sqlite3_step(st);
    *ok = rc == SQLITE_ROW;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Creates the process row when new, from its first second written, and
 * learns its id. */
static int insert_process(store *s, agg_proc *p, const agg_sec *e)
{
    new_rows n = {
        .uid = -1, .exit_time = -1, .first_seen = e->t, .last_seen = e->t, .klass = &e->klass};
    sqlite3_stmt *st = s->stmt[ST_PROC];
    bool made;
    int rc = write_new(s, p, &n, &made);

    if (rc != SQLITE_OK || made)
        return rc;
    bind_identity(s, st, p->pid, p->start_time);
    sqlite3_bind_int64(st, 4, e->t);
    rc = conn_run(st);
    if (rc == SQLITE_OK)
        rc = write_totals(s, p->pid, p->start_time, e->t, &e->klass, false);
    if (rc != SQLITE_OK)
        return rc;
    st = s->stmt[ST_PROC_ID];
    bind_identity(s, st, p->pid, p->start_time);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        p->row_id = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_reset(st);
    return rc;
}

/* Makes sure process p has its row, given its first second of this commit,
 * and knows the row's id. */
static int ensure_process(store *s, agg_proc *p, const agg_sec *e)
{
    bool ok = false;
    int rc = SQLITE_OK;

    if (p->row_id > 0 && p->row_txn == s->txn)
        ok = true; /* made in this transaction */
    else if (p->row_id > 0)
        rc = check_row(s, p, &ok);
    if (rc == SQLITE_OK && !ok)
        rc = insert_process(s, p, e);
    if (rc != SQLITE_OK)
        p->row_id = 0;
    return rc;
}

/* Grows *buf to hold n elements of `size` bytes. */
static int grow(void **buf, size_t *cap, size_t n, size_t size)
{
    size_t c = *cap ? *cap : 256;
    void *v;

    if (n <= *cap)
        return SQLITE_OK;
    while (c < n)
        c *= 2;
    if (!(v = realloc(*buf, c * size)))
        return SQLITE_NOMEM;
    *buf = v;
    *cap = c;
    return SQLITE_OK;
}

/* Writes second t's n records (s->pack, sorted by process id) as its
 * chunks, added to those a commit before wrote of it, if any (a flush, a
 * restart or a replay within the second): the sums are those the
 * per-process upsert made, old + new, and class and model the new ones. */
static int write_packed(store *s, int64_t t, size_t n)
{
    const packed_rec *rec = s->pack;
    size_t n_old = 0;
    int rc = packed_read_second(s->stmt[ST_PACKED_GET], t, &s->old, &s->cap_old, &n_old);

    if (rc == SQLITE_CORRUPT) {
        log_error("%s: process_energy_packed: a chunk of second %lld is not a packed blob:"
                  " rewriting the second with the new rows only",
                  s->path, (long long)t);
        n_old = 0;
        /* the damaged chunk must go */
        rc = packed_write_second(s->stmt[ST_PACKED_DEL], s->stmt[ST_PACKED_PUT], t, rec, 0,
                                 s->chunk_max, &s->pack_blob, &s->cap_blob);
    }
    if (rc == SQLITE_OK && n_old > 0) {
        rc = packed_merge(s->old, n_old, s->pack, n, &s->merged, &s->cap_merged, &n) < 0
                 ? SQLITE_NOMEM
                 : SQLITE_OK;
        rec = s->merged;
    }
    if (rc != SQLITE_OK)
        return rc;
    return packed_write_second(n_old > 0 ? s->stmt[ST_PACKED_DEL] : NULL, s->stmt[ST_PACKED_PUT], t,
                               rec, n, s->chunk_max, &s->pack_blob, &s->cap_blob);
}

static packed_rec to_packed(const conn_row *r)
{
    return (packed_rec){.process_id = r->process_id,
                        .attributed_j = r->sec->attributed_j,
                        .standalone_j = r->sec->standalone_j,
                        .cpu_s = r->sec->cpu_s,
                        .klass = r->sec->klass,
                        .has_class = true,
                        .model_id = r->sec->model_id,
                        .has_model = r->sec->model_id > 0};
}

static int by_key(const void *a, const void *b)
{
    const conn_row *x = a, *y = b;

    if (x->sec->t != y->sec->t)
        return x->sec->t < y->sec->t ? -1 : 1;
    return (x->process_id > y->process_id) - (x->process_id < y->process_id);
}

/* Makes sure each process has its row, then writes the per-second rows
 * sorted by (t, process_id), each second's as its packed chunks: every insert
 * lands at the end of the b-tree, which fills its pages whole instead of
 * splitting them. */
static int write_procs(store *s, int64_t until, uint64_t *rows)
{
    size_t n = 0;
    int rc = SQLITE_OK;

    for (size_t i = 0; i < s->acc.n_proc && rc == SQLITE_OK; i++) {
        agg_proc *p = &s->acc.proc[i];
        bool known = false;

        for (size_t k = 0; k < p->n_sec && rc == SQLITE_OK; k++) {
            if (p->sec[k].t >= until)
                continue;
            if (n == s->cap_order) {
                size_t cap = s->cap_order ? s->cap_order * 2 : 256;
                conn_row *v = realloc(s->order, cap * sizeof(*v));
                if (!v)
                    return SQLITE_NOMEM;
                s->order = v;
                s->cap_order = cap;
            }
            if (!known)
                rc = ensure_process(s, p, &p->sec[k]);
            known = true;
            if (rc == SQLITE_OK && p->sec[k].t < s->fold_t)
                rc = fold_add_late(s, p->row_id, &p->sec[k]);
            s->order[n++] = (conn_row){.process_id = p->row_id, .sec = &p->sec[k]};
        }
    }
    if (rc != SQLITE_OK)
        return rc;
    if (n > 1)
        qsort(s->order, n, sizeof(*s->order), by_key);
    for (size_t i = 0, k; i < n && rc == SQLITE_OK; i = k) {
        for (k = i; k < n && s->order[k].sec->t == s->order[i].sec->t; k++)
            ;
        rc = grow((void **)&s->pack, &s->cap_pack, k - i, sizeof(*s->pack));
        for (size_t j = i; j < k && rc == SQLITE_OK; j++)
            s->pack[j - i] = to_packed(&s->order[j]);
        if (rc == SQLITE_OK)
            rc = write_packed(s, s->order[i].sec->t, k - i);
        *rows += k - i;
    }
    return rc;
}

static int write_host(store *s, int64_t until, uint64_t *rows)
{
    int rc = SQLITE_OK;

    for (size_t i = 0; i < s->acc.n_domain && rc == SQLITE_OK; i++) {
        const agg_domain *d = &s->acc.domain[i];
        sqlite3_stmt *st = s->stmt[ST_DOMAIN];
        if (d->t >= until)
            continue;
        sqlite3_bind_int64(st, 1, d->t);
        sqlite3_bind_text(st, 2, d->name, -1, SQLITE_STATIC);
        conn_bind_real(st, 3, d->measured_j);
        conn_bind_real(st, 4, d->modeled_j);
        rc = conn_run(st);
        (*rows)++;
    }
    for (size_t i = 0; i < s->acc.n_host && rc == SQLITE_OK; i++) {
        const agg_host *h = &s->acc.host[i];
        sqlite3_stmt *st = s->stmt[ST_HOST];
        if (h->t >= until)
            continue;
        sqlite3_bind_int64(st, 1, h->t);
        sqlite3_bind_double(st, 2, h->dt_s);
        sqlite3_bind_double(st, 3, h->host_j);
        sqlite3_bind_double(st, 4, h->idle_j);
        sqlite3_bind_double(st, 5, h->attributed_j);
        sqlite3_bind_double(st, 6, h->unattributed_j);
        sqlite3_bind_double(st, 7, h->modeled_j);
        sqlite3_bind_int(st, 8, h->measured);
        bind_model(st, 9, h->model_id);
        if (h->idle_source)
            sqlite3_bind_text(st, 10, h->idle_source, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 10);
        if (h->calib_t > 0)
            sqlite3_bind_int64(st, 11, h->calib_t);
        else
            sqlite3_bind_null(st, 11);
        rc = conn_run(st);
        (*rows)++;
    }
    return rc;
}

static int write_calibration(store *s, int64_t until, uint64_t *rows)
{
    int rc = SQLITE_OK;

    for (size_t i = 0; i < s->acc.n_calib && rc == SQLITE_OK; i++) {
        const agg_calib *c = &s->acc.calib[i];
        sqlite3_stmt *st = s->stmt[ST_CALIB];
        char *power = NULL, *rates = NULL;

        if (c->t >= until || !c->has_rates || !(c->duration_s > 0))
            continue;
        if (store_calib_json(c, &power, &rates) < 0)
            return SQLITE_NOMEM;
        sqlite3_bind_int64(st, 1, c->t);
        sqlite3_bind_double(st, 2, c->duration_s);
        bind_model(st, 3, c->model_id);
        sqlite3_bind_text(st, 4, power, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, rates, -1, SQLITE_STATIC);
        rc = conn_run(st);
        free(power);
        free(rates);
        (*rows)++;
    }
    return rc;
}

int conn_write_rows(store *s, int64_t until, int64_t calib_until, uint64_t *rows)
{
    int rc = write_models(s, now_ns(CLOCK_REALTIME) / NS_PER_S);

    s->txn++;
    if (rc == SQLITE_OK)
        rc = write_events(s, until);
    if (rc == SQLITE_OK)
        rc = write_procs(s, until, rows);
    if (rc == SQLITE_OK)
        rc = write_host(s, until, rows);
    if (rc == SQLITE_OK)
        rc = write_calibration(s, calib_until, rows);
    if (rc == SQLITE_OK)
        rc = node_calib_write(s, s->stmt[ST_NODE]);
    if (rc == SQLITE_OK)
        rc = node_evcal_write(s);
    return rc;
}

bool conn_models_pending(store *s)
{
    bool pending = false;

    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_model; i++)
        pending = pending || !s->model[i].written;
    pthread_mutex_unlock(&s->lock);
    return pending || saved_row_pending(&s->node_row) || saved_row_pending(&s->evcal_row);
}
