/* schema: the tables, and the migrations that bring any older database
 * forward.
 *
 * migrations[i] takes a database from user_version i to i + 1. A new file
 * has version 0 and runs them all, so every step is exercised on every
 * fresh database; each runs in its own transaction with its version bump, so
 * an interrupted migration leaves the previous version intact. */
#include "store/packed.h"
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* processes.job: the batch job (Slurm's job id) a process belongs to, NULL
 * outside a job.  Per-job energy is the sum of its processes' rows, as
 * per-user energy is: a job costs no rows of its own. */
static const char migration_process_job[] =
    "ALTER TABLE processes ADD COLUMN job TEXT;"
    "CREATE INDEX processes_job ON processes(job) WHERE job IS NOT NULL;";

/* 6: which calibration each second of the host's split was attributed
 * under: where idle came from and the time of the fit (docs/storage.md).
 * Rows from before say nothing (NULL). A minute row keeps its last
 * second's. */
static const char migrate_host_attribution_calibration[] =
    "ALTER TABLE host_attribution ADD COLUMN idle_source TEXT;"
    "ALTER TABLE host_attribution ADD COLUMN calib_t INTEGER;"
    "ALTER TABLE host_attribution_minute ADD COLUMN idle_source TEXT;"
    "ALTER TABLE host_attribution_minute ADD COLUMN calib_t INTEGER;";

/* 6 -> 7, the fold watermark: a process's row no longer takes each second
 * as it is written, but every few seconds all the rows of
 * process_energy_recent from process_fold.t up to a new one (fold.c). A
 * version 6 row counted every second written, so all are folded. */
#define MIGRATE_FOLD_WATERMARK                                                                     \
    "CREATE TABLE process_fold (t INTEGER NOT NULL);"                                              \
    "INSERT INTO process_fold SELECT coalesce(max(t) + 1, 0) FROM process_energy_recent;"

/* 7 -> 8, process totals in a table of their own: a fold (every few
 * seconds) rewrites the row of every process that ran, and with the
 * identity, command line and cgroup in the same row that was one page per
 * few processes, or per process with long command lines: as much as the
 * per-second rows themselves (docs/storage.md). process_totals holds what a
 * fold changes, about 40 bytes a process; process_info what is written once.
 * `processes` becomes a view of both with its old columns, so readers and
 * ad-hoc SQL are unchanged; INSTEAD OF triggers keep it writable by hand. */
static const char migrate_process_totals[] =
    "CREATE TABLE process_info ("
    " id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL, pid INTEGER NOT NULL,"
    " start_time INTEGER NOT NULL, comm TEXT, cmdline TEXT, uid INTEGER, cgroup TEXT,"
    " first_seen INTEGER NOT NULL, exit_time INTEGER, job TEXT,"
    " UNIQUE (boot_id, pid, start_time));"
    "CREATE TABLE process_totals ("
    " id INTEGER PRIMARY KEY, last_seen INTEGER NOT NULL, class INTEGER,"
    " attributed_j REAL NOT NULL DEFAULT 0, standalone_j REAL NOT NULL DEFAULT 0,"
    " cpu_s REAL NOT NULL DEFAULT 0);"
    "INSERT INTO process_info SELECT id, boot_id, pid, start_time, comm, cmdline, uid, cgroup,"
    " first_seen, exit_time, job FROM processes;"
    "INSERT INTO process_totals SELECT id, last_seen, class, attributed_j, standalone_j, cpu_s"
    " FROM processes;"
    "DROP TABLE processes;"
    "CREATE INDEX processes_pid ON process_info(pid);"
    "CREATE INDEX processes_job ON process_info(job) WHERE job IS NOT NULL;"
    "CREATE INDEX processes_last_seen ON process_totals(last_seen);"
    "CREATE VIEW processes AS SELECT i.id AS id, i.boot_id AS boot_id, i.pid AS pid,"
    " i.start_time AS start_time, i.comm AS comm, i.cmdline AS cmdline, i.uid AS uid,"
    " i.cgroup AS cgroup, i.first_seen AS first_seen, t.last_seen AS last_seen,"
    " i.exit_time AS exit_time, t.class AS class, t.attributed_j AS attributed_j,"
    " t.standalone_j AS standalone_j, t.cpu_s AS cpu_s, i.job AS job"
    " FROM process_info i JOIN process_totals t ON t.id = i.id;"
    "CREATE TRIGGER processes_insert INSTEAD OF INSERT ON processes BEGIN"
    " INSERT INTO process_info (id, boot_id, pid, start_time, comm, cmdline, uid, cgroup,"
    " first_seen, exit_time, job) VALUES (NEW.id, NEW.boot_id, NEW.pid, NEW.start_time,"
    " NEW.comm, NEW.cmdline, NEW.uid, NEW.cgroup, NEW.first_seen, NEW.exit_time, NEW.job);"
    " INSERT INTO process_totals (id, last_seen, class, attributed_j, standalone_j, cpu_s)"
    " VALUES (last_insert_rowid(), NEW.last_seen, NEW.class, coalesce(NEW.attributed_j, 0),"
    " coalesce(NEW.standalone_j, 0), coalesce(NEW.cpu_s, 0)); END;"
    "CREATE TRIGGER processes_update INSTEAD OF UPDATE ON processes BEGIN"
    " UPDATE process_info SET id = NEW.id, boot_id = NEW.boot_id, pid = NEW.pid,"
    " start_time = NEW.start_time, comm = NEW.comm, cmdline = NEW.cmdline, uid = NEW.uid,"
    " cgroup = NEW.cgroup, first_seen = NEW.first_seen, exit_time = NEW.exit_time,"
    " job = NEW.job WHERE id = OLD.id;"
    " UPDATE process_totals SET id = NEW.id, last_seen = NEW.last_seen, class = NEW.class,"
    " attributed_j = NEW.attributed_j, standalone_j = NEW.standalone_j, cpu_s = NEW.cpu_s"
    " WHERE id = OLD.id; END;"
    "CREATE TRIGGER processes_delete INSTEAD OF DELETE ON processes BEGIN"
    " DELETE FROM process_info WHERE id = OLD.id;"
    " DELETE FROM process_totals WHERE id = OLD.id; END;";

/* 8 -> 9, the node's per-event calibration kept across restarts: the
 * latest fit of one coefficient per model event that was used, for each set
 * of target domains, with the SHA-256 and the events of the model it is of
 * (a daemon uses it only for that model). events, coef and coef_se are JSON
 * arrays in the model's event order; a null standard error is a column
 * that did not vary and kept the single scale. Nothing to carry over. */
static const char migrate_node_event_calibration[] =
    "CREATE TABLE node_event_calibration ("
    " target TEXT PRIMARY KEY, t INTEGER NOT NULL, model_sha256 TEXT NOT NULL,"
    " events TEXT NOT NULL, coef TEXT NOT NULL, coef_se TEXT NOT NULL, scale REAL,"
    " alpha REAL NOT NULL, idle_w REAL NOT NULL, idle_se_w REAL, rows INTEGER NOT NULL);";

/* 9 -> 10, packed recent rows: each second's per-process rows become a
 * few rows of process_energy_packed, chunks of records sorted by process
 * id that each fit a leaf cell (packed.h), so a commit writes a second's
 * chunks, not one row per process, and a process's seek reads one page;
 * the virtual table process_energy_recent (packed.c, registered on every
 * connection lib/store opens) reads them back as the old table's rows, so
 * the readers and the process_energy view are unchanged. The old table is
 * dropped after migrate_packed_recent moved its rows; its pages go to the
 * free list. */
static const char migrate_packed_recent_sql[] =
    "CREATE TABLE process_energy_packed (k INTEGER PRIMARY KEY, rows BLOB NOT NULL);";

static int migrate_packed_recent(sqlite3 *db)
{
    sqlite3_stmt *get = NULL, *put = NULL;
    packed_rec *r = NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, cap_buf = 0, max_len;
    int64_t t = 0, page = 0;
    int rc = schema_int(db, "PRAGMA page_size", 0, &page);

    max_len = packed_chunk_max(page);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "SELECT t, process_id, attributed_j, standalone_j, cpu_s, class,"
                                " model_id FROM main.process_energy_recent ORDER BY t, process_id",
                                -1, &get, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO process_energy_packed (k, rows) VALUES (?1, ?2)",
                                -1, &put, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(get)) == SQLITE_ROW) {
        int64_t rt = sqlite3_column_int64(get, 0);
        rc = SQLITE_OK;
        if (n > 0 && rt != t) {
            rc = packed_write_second(NULL, put, t, r, n, max_len, &buf, &cap_buf);
            n = 0;
        }
        if (rc == SQLITE_OK && n == cap) {
            packed_rec *v = realloc(r, (cap ? cap * 2 : 256) * sizeof(*v));
            if (!v)
                rc = SQLITE_NOMEM;
            else {
                r = v;
                cap = cap ? cap * 2 : 256;
            }
        }
        if (rc != SQLITE_OK)
            break;
        t = rt;
        r[n++] = (packed_rec){
            .process_id = sqlite3_column_int64(get, 1),
            .attributed_j = sqlite3_column_double(get, 2),
            .standalone_j = sqlite3_column_double(get, 3),
            .cpu_s = sqlite3_column_double(get, 4),
            .has_class = sqlite3_column_type(get, 5) != SQLITE_NULL,
            .klass = sqlite3_column_int64(get, 5),
            .has_model = sqlite3_column_type(get, 6) != SQLITE_NULL,
            .model_id = sqlite3_column_int64(get, 6),
        };
    }
    if (rc == SQLITE_DONE)
        rc = n > 0 ? packed_write_second(NULL, put, t, r, n, max_len, &buf, &cap_buf) : SQLITE_OK;
    sqlite3_finalize(get);
    sqlite3_finalize(put);
    free(r);
    free(buf);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "DROP TABLE process_energy_recent", NULL, NULL, NULL);
    return rc;
}

static const char *const migrations[STORE_SCHEMA_VERSION] = {
    /* 1: processes, their per-second energy, host energy per domain, models */
    "CREATE TABLE models ("
    " id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE, name TEXT, engine TEXT,"
    " json TEXT NOT NULL, first_loaded INTEGER NOT NULL, last_loaded INTEGER NOT NULL);"
    "CREATE TABLE processes ("
    " id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL, pid INTEGER NOT NULL,"
    " start_time INTEGER NOT NULL, comm TEXT, cmdline TEXT, uid INTEGER, cgroup TEXT,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, exit_time INTEGER,"
    " class INTEGER, attributed_j REAL NOT NULL DEFAULT 0,"
    " standalone_j REAL NOT NULL DEFAULT 0, cpu_s REAL NOT NULL DEFAULT 0,"
    " UNIQUE (boot_id, pid, start_time));"
    "CREATE INDEX processes_pid ON processes(pid);"
    "CREATE INDEX processes_last_seen ON processes(last_seen);"
    "CREATE TABLE process_energy ("
    " process_id INTEGER NOT NULL, t INTEGER NOT NULL, attributed_j REAL NOT NULL,"
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"
    " PRIMARY KEY (process_id, t)) WITHOUT ROWID;"
    "CREATE INDEX process_energy_t ON process_energy(t);"
    "CREATE TABLE host_energy ("
    " t INTEGER NOT NULL, domain TEXT NOT NULL, measured_j REAL, modeled_j REAL,"
    " PRIMARY KEY (t, domain)) WITHOUT ROWID;",

    /* 2: one-minute rollups, the host's attribution split, calibration */
    "CREATE TABLE process_energy_minute ("
    " process_id INTEGER NOT NULL, t INTEGER NOT NULL, attributed_j REAL NOT NULL,"
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"
    " seconds INTEGER NOT NULL, PRIMARY KEY (process_id, t)) WITHOUT ROWID;"
    "CREATE INDEX process_energy_minute_t ON process_energy_minute(t);"
    "CREATE TABLE host_energy_minute ("
    " t INTEGER NOT NULL, domain TEXT NOT NULL, measured_j REAL, modeled_j REAL,"
    " seconds INTEGER NOT NULL, PRIMARY KEY (t, domain)) WITHOUT ROWID;"
    "CREATE TABLE host_attribution ("
    " t INTEGER PRIMARY KEY, duration_s REAL NOT NULL, host_j REAL NOT NULL,"
    " idle_j REAL NOT NULL, attributed_j REAL NOT NULL, unattributed_j REAL NOT NULL,"
    " modeled_j REAL NOT NULL, measured INTEGER NOT NULL, model_id INTEGER);"
    "CREATE TABLE host_attribution_minute ("
    " t INTEGER PRIMARY KEY, duration_s REAL NOT NULL, host_j REAL NOT NULL,"
    " idle_j REAL NOT NULL, attributed_j REAL NOT NULL, unattributed_j REAL NOT NULL,"
    " modeled_j REAL NOT NULL, measured INTEGER NOT NULL, model_id INTEGER,"
    " seconds INTEGER NOT NULL);"
    "CREATE TABLE calibration ("
    " t INTEGER PRIMARY KEY, duration_s REAL NOT NULL, model_id INTEGER,"
    " power_w TEXT NOT NULL, rates TEXT NOT NULL);",

    /* 3: the node's own fit of idle power, kept across restarts */
    "CREATE TABLE node_calibration ("
    " target TEXT PRIMARY KEY, t INTEGER NOT NULL, idle_w REAL NOT NULL,"
    " idle_se_w REAL NOT NULL, scale REAL, r2 REAL, spread_w REAL,"
    " rows INTEGER NOT NULL, model_sha256 TEXT);",

    /* 4: per-second process rows in the order they arrive. Each second's rows
     * go to process_energy_recent, keyed (t, process_id): a commit appends
     * to the end of one b-tree instead of touching one page per process.
     * Maintenance moves them, all at once, to process_energy_settled under a
     * new batch number, keyed (batch, process_id, t): appended again, and
     * each process's seconds of a batch lie together for per-process reads;
     * process_energy_batch says which seconds a batch spans. The rows of
     * version 3 become one batch per two minutes. process_energy is now a view of both. */
    "CREATE TABLE process_energy_recent ("
    " t INTEGER NOT NULL, process_id INTEGER NOT NULL, attributed_j REAL NOT NULL,"
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"
    " PRIMARY KEY (t, process_id)) WITHOUT ROWID;"
    "CREATE TABLE process_energy_settled ("
    " batch INTEGER NOT NULL, process_id INTEGER NOT NULL, t INTEGER NOT NULL,"
    " attributed_j REAL NOT NULL, standalone_j REAL NOT NULL, cpu_s REAL NOT NULL,"
    " class INTEGER, model_id INTEGER, PRIMARY KEY (batch, process_id, t)) WITHOUT ROWID;"
    "CREATE TABLE process_energy_batch ("
    " batch INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL);"
    "CREATE INDEX process_energy_batch_t ON process_energy_batch(t_max);"
    "INSERT INTO process_energy_batch SELECT 1 + (t - m.t0) / 120, min(t), max(t)"
    " FROM process_energy, (SELECT min(t) AS t0 FROM process_energy) m GROUP BY (t - m.t0) / 120;"
    "INSERT INTO process_energy_settled SELECT 1 + (t - m.t0) / 120, process_id, t, attributed_j,"
    " standalone_j, cpu_s, class, model_id"
    " FROM process_energy, (SELECT min(t) AS t0 FROM process_energy) m ORDER BY 1, 2, 3;"
    "DROP TABLE process_energy;"
    "CREATE VIEW process_energy AS"
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"
    " FROM process_energy_settled UNION ALL"
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"
    " FROM process_energy_recent;",

    /* 5: the job of each process */
    migration_process_job,

    /* 6: which calibration each second was attributed under */
    migrate_host_attribution_calibration,

    /* 7: processes' totals folded every few seconds, not every second */
    MIGRATE_FOLD_WATERMARK,

    /* 8: the totals a fold rewrites apart from what is written once */
    migrate_process_totals,

    /* 9: the node's per-event calibration */
    migrate_node_event_calibration,

    /* 10: the recent rows of all processes in page-sized chunks a second */
    migrate_packed_recent_sql,

    /* 11: the settled rows in a file of their own: migrate_settled_file
     * (settled.c), two files, two transactions */
};

/* The steps with C code, indexed like migrations[]: `run` after the SQL,
 * in its transaction (rows to move); or, with own_txn, `run` alone in place
 * of migrate_one, opening the transactions it needs (two files). */
static const struct migration_code {
    int (*run)(sqlite3 *db);
    bool own_txn;
} migration_code[STORE_SCHEMA_VERSION] = {
    [9] = {migrate_packed_recent, false},
    [10] = {migrate_settled_file, true},
};

int store_sqlite_register(sqlite3 *db)
{
    return packed_register(db);
}

int schema_errno(sqlite3 *db, int rc)
{
    int sys = db ? sqlite3_system_errno(db) : 0;

    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return 0;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return -EBADMSG;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
        return sys > 0 ? -sys : -EIO;
    default:
        return -EIO;
    }
}

int schema_int(sqlite3 *db, const char *sql, int64_t null_value, int64_t *v)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_type(st, 0) == SQLITE_NULL ? null_value : sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static int user_version(sqlite3 *db, int *version)
{
    int64_t v = 0;
    int rc = schema_int(db, "PRAGMA user_version", 0, &v);

    *version = (int)v;
    return rc;
}

/* Runs migration `from` -> from + 1 in one transaction. */
static int migrate_one(sqlite3 *db, int from)
{
    char bump[64];
    int rc;

    snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", from + 1);
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_exec(db, migrations[from], NULL, NULL, NULL);
    if (rc == SQLITE_OK && migration_code[from].run)
        rc = migration_code[from].run(db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, bump, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int schema_migrate(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    int version = 0, rc = user_version(db, &version);

    if (rc != SQLITE_OK)
        return util_err(err, errlen, schema_errno(db, rc), "%s: cannot read the schema version: %s",
                        path, sqlite3_errmsg(db));
    if (version > STORE_SCHEMA_VERSION || version < 0)
        return util_err(err, errlen, -EPROTO,
                        "%s: schema version %d is newer than this wattprof's (%d)", path, version,
                        STORE_SCHEMA_VERSION);
    for (int v = version; v < STORE_SCHEMA_VERSION; v++) {
        const struct migration_code *c = &migration_code[v];
        rc = c->own_txn ? c->run(db) : migrate_one(db, v);
        if (rc != SQLITE_OK)
            return util_err(err, errlen, schema_errno(db, rc),
                            "%s: migrating the schema from version %d to %d: %s", path, v, v + 1,
                            sqlite3_errmsg(db));
    }
    return 0;
}

/* A new file gets SCHEMA_PAGE_SIZE-byte pages (SQLite ignores the pragma
 * for a file that has a page size already): every commit rewrites the last,
 * partly filled page of each table it appends to and every page of a
 * process row it updates, and with 1 KiB pages that is a quarter of the
 * bytes of 4 KiB ones; queries measured the same (docs/storage.md). WAL
 * lets readers run beside the writer; synchronous=NORMAL keeps every
 * committed transaction across a process crash without an fsync per commit
 * (only a power cut can lose the last ones). When the WAL is checkpointed
 * is the writer's own policy (checkpoint.c), not SQLite's default. */

static int pragmas(sqlite3 *db, int64_t max_db_bytes)
{
    char sql[96];
    sqlite3_stmt *st;
    int64_t page = 0;
    int rc;

    snprintf(sql, sizeof(sql), "PRAGMA page_size=%d", SCHEMA_PAGE_SIZE);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0 ? SQLITE_OK
                                                                          : SQLITE_CANTOPEN;
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_exec(db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
    /* Some builds (Debian's) default to secure_delete=ON, which overwrites
     * every freed page with zeros: each move out of process_energy_recent
     * then wrote all its pages once more, as much as the move itself. FAST
     * still clears deleted rows from the pages a change writes anyway. */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "PRAGMA secure_delete=FAST", NULL, NULL, NULL);
    /* the rows a move keeps back (retention.c) and the sorts stay off the disk */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "PRAGMA temp_store=MEMORY", NULL, NULL, NULL);
    if (rc == SQLITE_OK && max_db_bytes > 0)
        rc = schema_int(db, "PRAGMA page_size", 0, &page);
    if (rc == SQLITE_OK && max_db_bytes > 0) {
        /* max_page_count is per connection and only shrinks to the pages in use. */
        snprintf(sql, sizeof(sql), "PRAGMA max_page_count=%lld",
                 (long long)(max_db_bytes / page > 1 ? max_db_bytes / page : 1));
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    }
    return rc;
}

int schema_open(const char *path, int64_t max_db_bytes, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int rc, r, version = 0;

    /* The database holds every user's command lines: created 0640 whatever
     * the umask (SQLite gives its -wal and -shm files the database's mode). */
    r = util_open_private(path, O_RDWR);
    if (r < 0)
        return util_err(err, errlen, r, "%s: cannot open the database: %s", path, strerror(-r));
    close(r);
    /* One thread at a time uses the connection (the opener, then the
     * writer): no mutex around every call. */
    rc = sqlite3_open_v2(path, &db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);

    if (rc != SQLITE_OK) {
        int sys = db ? sqlite3_system_errno(db) : 0;
        r = util_err(err, errlen, schema_errno(db, rc), "%s: cannot open the database: %s%s%s",
                     path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), sys > 0 ? ": " : "",
                     sys > 0 ? strerror(sys) : "");
        sqlite3_close(db);
        return r;
    }
    sqlite3_busy_timeout(db, SCHEMA_BUSY_MS);
    sqlite3_extended_result_codes(db, 1);
    rc = packed_register(db);
    if (rc == SQLITE_OK)
        rc = pragmas(db, max_db_bytes);
    if (rc != SQLITE_OK) {
        r = util_err(err, errlen, schema_errno(db, rc), "%s: cannot use the database: %s", path,
                     sqlite3_errmsg(db));
        sqlite3_close(db);
        return r;
    }
    rc = user_version(db, &version);
    if (rc != SQLITE_OK) {
        r = util_err(err, errlen, schema_errno(db, rc), "%s: cannot read the schema version: %s",
                     path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return r;
    }
    /* a newer file is refused by schema_migrate, before anything is made */
    r = version <= STORE_SCHEMA_VERSION ? settled_attach_writer(db, path, version, err, errlen) : 0;
    if (r == 0)
        r = schema_migrate(db, path, err, errlen);
    if (r < 0) {
        sqlite3_close(db);
        return r;
    }
    *out = db;
    return 0;
}
