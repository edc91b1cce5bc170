/* writer: the thread that owns the database connection, and when it
 * commits.
 *
 * It empties the queue into per-second accumulators (agg.c), waking as
 * rarely as the queue and the commits allow (next_wake). When a record of a new second shows the
 * previous ones complete, it writes them in one transaction (conn.c): one per second while sampling
 * live, each row written once, whole, so its sums do not depend on when
 * commits happened. A failed commit keeps the rows in memory and is tried
 * again min_commit_gap_ms later, so a full disk or a removed state directory
 * costs no data until the memory bound; before each commit it checks that
 * the file at its path is still the one it has open, and opens a fresh one
 * when it was removed or replaced. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NS_PER_S 1000000000LL
#define NS_PER_MS 1000000LL

static int64_t now_ns(clockid_t clock)
{
    return (int64_t)util_now_ns(clock);
}

/* ---- Commits and their failures --------------------------------------------- */

/* Records the outcome of a commit or maintenance run for store_get_stats,
 * logging only changes so a full disk does not flood the journal. */
static void set_error(store *s, int r, const char *text)
{
    pthread_mutex_lock(&s->lock);
    if (r < 0) {
        if (s->stats.error == 0 || strcmp(s->stats.error_text, text) != 0)
            log_error("%s", text);
        snprintf(s->stats.error_text, sizeof(s->stats.error_text), "%s", text);
    } else if (s->stats.error != 0) {
        log_info("%s: writing again", s->path);
        s->stats.error_text[0] = '\0';
    }
    s->stats.error = r;
    pthread_mutex_unlock(&s->lock);
}

/* True when the files at our path and beside it are still the ones we
 * have open. */
static bool same_file(store *s)
{
    char settled[4096];
    struct stat st;

    if (stat(s->path, &st) != 0 || st.st_dev != s->db_dev || st.st_ino != s->db_ino)
        return false;
    return settled_path(s->path, settled, sizeof(settled)) == 0 && stat(settled, &st) == 0 &&
           st.st_dev == s->settled_dev && st.st_ino == s->settled_ino;
}

/* Makes sure a connection to the file at s->path is open. */
static int ensure_connected(store *s, char *err, size_t errlen)
{
    int r;

    if (s->db && same_file(s))
        return 0;
    if (s->db) {
        log_warning("%s or its settled file was removed or replaced: opening them again", s->path);
        conn_close(s);
    }
    r = conn_open(s, err, errlen);
    if (r == 0)
        conn_models_unwritten(s);
    return r;
}

static void commit_done(store *s, uint64_t rows, int64_t t0)
{
    int64_t t1 = now_ns(CLOCK_MONOTONIC);
    double ms = (double)(t1 - t0) / NS_PER_MS;

    pthread_mutex_lock(&s->lock);
    s->stats.commits++;
    s->stats.rows_written += rows;
    s->stats.last_commit_ms = ms;
    if (ms > s->stats.max_commit_ms)
        s->stats.max_commit_ms = ms;
    s->stats.last_commit_ns = now_ns(CLOCK_REALTIME);
    s->stats.pending_rows = s->acc.rows;
    pthread_mutex_unlock(&s->lock);
}

/* Past the memory bound the rows held for a broken database are given up. */
static void commit_failed(store *s)
{
    pthread_mutex_lock(&s->lock);
    s->stats.commit_failures++;
    if (s->acc.rows > s->cfg.max_pending_rows) {
        s->stats.rows_lost += s->acc.rows;
        agg_discard(&s->acc);
    }
    s->stats.pending_rows = s->acc.rows;
    pthread_mutex_unlock(&s->lock);
}

/* What a commit writes: the complete seconds (before the watermark), or
 * with `flush` every second held too, and with `all` (closing) the
 * calibration second in progress as well. */
typedef struct commit_scope {
    int64_t until, calib_until;
} commit_scope;

static commit_scope scope(store *s, bool flush, bool all)
{
    commit_scope c = {.until = s->acc.watermark, .calib_until = s->acc.watermark};

    if (flush || all)
        c.until = INT64_MAX;
    if (all)
        c.calib_until = INT64_MAX;
    return c;
}

/* True when a commit in this scope would write something. */
static bool has_work(store *s, commit_scope c)
{
    return s->acc.n_event > 0 || s->acc.oldest < c.until ||
           (c.calib_until == INT64_MAX && s->acc.watermark + 1 > s->fold_t) ||
           (c.calib_until == INT64_MAX && s->acc.rows > 0) || conn_models_pending(s);
}

/* Folds the recent rows into their processes' rows every FOLD_INTERVAL_S
 * seconds of data: those of complete seconds (before the watermark, the
 * second in progress), and at close all. A second that a flush wrote in
 * progress is never complete before the watermark passes it. */
static int fold(store *s, commit_scope c)
{
    int64_t cut = c.calib_until == INT64_MAX ? s->acc.watermark + 1 : s->acc.watermark;

    if (c.calib_until != INT64_MAX && cut - s->fold_t < FOLD_INTERVAL_S)
        return SQLITE_OK;
    return conn_fold(s, cut);
}

/* One transaction with what `c` covers. */
static int commit(store *s, commit_scope c)
{
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    char err[UTIL_ERRLEN];
    uint64_t rows = 0;
    int rc, r;

    if (!has_work(s, c))
        return 0;
    r = ensure_connected(s, err, sizeof(err));
    if (r < 0)
        goto fail;
    rc = sqlite3_exec(s->db, SCHEMA_BEGIN_MAIN, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = conn_write_rows(s, c.until, c.calib_until, &rows);
    if (rc == SQLITE_OK)
        rc = fold(s, c);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        r = util_err(err, sizeof(err), schema_errno(s->db, rc), "%s: commit failed: %s", s->path,
                     sqlite3_errmsg(s->db));
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    conn_models_end_txn(s, true);
    conn_fold_end_txn(s, true);
    /* Every second before c.until is whole in the database now, but a
     * flush also writes the second in progress, which later ticks add to. */
    if (c.until > s->acc.watermark)
        s->partial_from = s->acc.watermark;
    else if (s->partial_from < c.until)
        s->partial_from = INT64_MAX;
    agg_clear(&s->acc, c.until, c.calib_until);
    commit_done(s, rows, t0);
    set_error(s, 0, "");
    return 0;
fail:
    conn_models_end_txn(s, false);
    conn_fold_end_txn(s, false);
    commit_failed(s);
    set_error(s, r, err);
    return r;
}

/* Folds every complete second before a move, which takes folded rows
 * only: a second committed later than its fold is added to its process's
 * row directly (conn.c). */
static int fold_for_move(store *s, char *err, size_t errlen)
{
    int64_t cut = s->acc.watermark < s->partial_from ? s->acc.watermark : s->partial_from;
    int rc;

    if (cut <= s->fold_t)
        return 0;
    rc = sqlite3_exec(s->db, SCHEMA_BEGIN_MAIN, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = conn_fold(s, cut);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    conn_fold_end_txn(s, rc == SQLITE_OK);
    if (rc != SQLITE_OK)
        return util_err(err, errlen, schema_errno(s->db, rc), "%s: folding process totals: %s",
                        s->path, sqlite3_errmsg(s->db));
    return 0;
}

static int maintain(store *s, int64_t now_s, int64_t held_s)
{
    char err[UTIL_ERRLEN];
    int r;

    if (now_s < 0) /* the data clock before any data */
        return 0;
    r = ensure_connected(s, err, sizeof(err));
    if (r == 0)
        r = fold_for_move(s, err, sizeof(err));
    if (r == 0)
        /* only folded rows move: the readers add the others to the totals */
        r = retention_run(s->db, &s->cfg, now_s, held_s,
                          s->partial_from < s->fold_t ? s->partial_from : s->fold_t, err,
                          sizeof(err));
    if (r < 0) {
        set_error(s, r, err);
        return r;
    }
    if (r == RETENTION_BUSY && !s->settle_deferred)
        log_warning("%s" SETTLED_SUFFIX ": a reader holds it past %d ms: the move of the recent"
                    " rows waits for the next maintenance",
                    s->path, SETTLED_BUSY_MS);
    if (r != RETENTION_BUSY && s->settle_deferred)
        log_info("%s" SETTLED_SUFFIX ": moving the recent rows again", s->path);
    s->settle_deferred = r == RETENTION_BUSY;
    pthread_mutex_lock(&s->lock);
    s->stats.maintenance_runs++;
    s->stats.moves_deferred += r == RETENTION_BUSY;
    pthread_mutex_unlock(&s->lock);
    return r == RETENTION_BUSY ? 0 : r;
}

/* ---- The thread ------------------------------------------------------------- */

/* Empties the queue into the accumulators; returns how many records. */
static size_t drain(store *s)
{
    size_t first, n = ring_readable(&s->queue, &first);
    uint64_t lost = 0;

    for (size_t i = 0; i < n; i++) {
        store_item *it = ring_slot(&s->queue, first + i);
        if (agg_add(&s->acc, it) < 0) {
            lost++;
            if (it->kind == ITEM_INFO)
                store_proc_info_blob_free(it->u.proc_id.info);
        }
    }
    ring_release(&s->queue, n);
    pthread_mutex_lock(&s->lock);
    s->stats.rows_lost += lost;
    s->stats.pending_rows = s->acc.rows;
    s->stats.drains++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* How long the writer may sleep before the queue, filling at `rate`
 * records per ns (as over the last drain), would be a third full: room for
 * the rate to triple meanwhile. At least one drain interval, and just that
 * until a rate is known. */
static int64_t fill_wait(store *s, double rate, int64_t drain_ns)
{
    double ns = rate > 0 ? (double)(s->queue.mask + 1) / 3 / rate : 0;

    return ns > (double)drain_ns ? (int64_t)ns : drain_ns;
}

/* When the writer wakes next (CLOCK_MONOTONIC ns). Every wake costs a
 * context switch, and most of the drain_interval_ms wakes of a live second
 * found nothing to commit: the second in progress can only be committed
 * once the first record of the next one is in, just after the wall-clock
 * second ends. So while the held rows are all of the current wall-clock
 * second, it sleeps until the end of that second (plus WAKE_MARGIN_NS, two
 * 50 Hz ticks) or until the queue would be a third full, whichever
 * is first. Otherwise (complete seconds waiting for a commit or its retry,
 * a maintenance backlog, records not yet of the wall-clock second, the data
 * clock of replays) it polls every drain interval, as the contract says. */
#define WAKE_MARGIN_NS (40 * NS_PER_MS)

static int64_t next_wake(store *s, int64_t next_maint, double rate, int64_t drain_ns)
{
    int64_t now = now_ns(CLOCK_MONOTONIC), wall = now_ns(CLOCK_REALTIME);
    int64_t wall_s = wall / NS_PER_S, wait;

    if (s->cfg.clock == STORE_CLOCK_DATA || next_maint <= now || s->acc.oldest < s->acc.watermark ||
        (s->acc.rows > 0 && s->acc.watermark < wall_s) || s->acc.n_event > 0)
        return now + drain_ns;
    wait = (wall_s + 1) * NS_PER_S + WAKE_MARGIN_NS - wall;
    if (wait > fill_wait(s, rate, drain_ns))
        wait = fill_wait(s, rate, drain_ns);
    return now + wait;
}

static struct timespec to_timespec(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / NS_PER_S, .tv_nsec = ns % NS_PER_S};
}

/* Sleeps until `deadline` (CLOCK_MONOTONIC ns), a stop or a request. */
static void wait_for_work(store *s, int64_t deadline, bool *stop, uint64_t *req, int64_t *mnow)
{
    struct timespec ts = to_timespec(deadline);

    pthread_mutex_lock(&s->lock);
    while (!s->stop && s->req_seq == s->done_seq && now_ns(CLOCK_MONOTONIC) < deadline)
        pthread_cond_timedwait(&s->wake, &s->lock, &ts);
    *stop = s->stop;
    *req = s->req_seq;
    *mnow = s->maintain_now;
    s->maintain_now = 0;
    pthread_mutex_unlock(&s->lock);
}

/* Now for the writer's own maintenance: the data clock's newest second, or
 * the clock live rows are stamped with (wallclock.c), with *held_s the
 * forward steps by which the per-second cut is held back. */
static int64_t maintain_clock(store *s, int64_t *held_s)
{
    int64_t mono = now_ns(CLOCK_MONOTONIC), wall = now_ns(CLOCK_REALTIME);

    *held_s = 0;
    if (s->cfg.clock == STORE_CLOCK_DATA)
        return s->acc.watermark;
    return wallclock_read(&s->clock, mono, wall, s->cfg.second_retention_s, held_s);
}

void *writer_main(void *arg)
{
    store *s = arg;
    int64_t gap_ns = (int64_t)s->cfg.min_commit_gap_ms * NS_PER_MS;
    int64_t drain_ns = (int64_t)s->cfg.drain_interval_ms * NS_PER_MS;
    int64_t maint_ns = (int64_t)s->cfg.maintain_interval_s * NS_PER_S;
    int64_t now = now_ns(CLOCK_MONOTONIC), last_commit = now, next_maint = now + maint_ns;
    int64_t last_drain = now;
    double rate = 0; /* records per ns, over the last drain */
    uint64_t done = 0;
    int64_t held_s;

    wallclock_init(&s->clock);
    maintain_clock(s, &held_s); /* the offset at start: steps are seen from here */
    for (;;) {
        int64_t mnow, drained_at, drained_real;
        bool stop, asked, committed;
        uint64_t req;
        size_t n;
        int r = 0;

        wait_for_work(s, next_wake(s, next_maint, rate, drain_ns), &stop, &req, &mnow);
        drained_at = now_ns(CLOCK_MONOTONIC); /* what a flush covers */
        drained_real = now_ns(CLOCK_REALTIME);
        n = drain(s);
        if (drained_at > last_drain)
            rate = (double)n / (double)(drained_at - last_drain);
        last_drain = drained_at;
        asked = req != done;
        now = now_ns(CLOCK_MONOTONIC);
        if (stop || asked || now - last_commit >= gap_ns) {
            commit_scope c = scope(s, asked, stop);
            if (has_work(s, c)) {
                r = commit(s, c);
                last_commit = now;
            }
        }
        committed = r == 0;
        if (!stop && (mnow > 0 || now >= next_maint)) {
            int64_t at = maintain_clock(s, &held_s);
            int m = mnow > 0 ? maintain(s, mnow, 0) : maintain(s, at, held_s);
            if (mnow > 0) /* asked by store_maintain; else only in stats */
                r = r < 0 ? r : m;
            /* more due: the next chunk after the next drain and commit */
            next_maint = m == 1 ? now : now + maint_ns;
        }
        if (asked) {
            pthread_mutex_lock(&s->lock);
            s->done_seq = done = req;
            s->req_result = r;
            /* after a failure the next flush asks again, and sees why */
            s->flushed_ns = committed ? drained_at : 0;
            s->flushed_real_ns = committed ? drained_real : 0;
            pthread_cond_broadcast(&s->done);
            pthread_mutex_unlock(&s->lock);
        }
        if (stop) {
            pthread_mutex_lock(&s->lock);
            s->req_result = r;
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
    }
}
