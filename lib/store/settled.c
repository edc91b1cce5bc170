/* settled: the second file, PATH-settled, that keeps the per-second process
 * rows once maintenance has moved them (process_energy_settled and its
 * batches) and their one-minute rollups (process_energy_minute), ATTACHed
 * as schema "settled" by the writer and by every reader.
 *
 * It is a rollback-journal file, not WAL: a page new to it (most of what a
 * move writes) reaches the disk once, where the WAL wrote it as a frame and
 * a checkpoint copied it again. The minute rows live here too so that a
 * rollup (insert minute rows, delete the seconds) commits in one file.
 * A commit is atomic per file only, so the move commits the settled rows
 * here first and empties the recent rows in the main file after
 * (retention.c); an open drops the recent rows that a batch here already
 * holds, which only a crash between the two commits leaves. */
#include "store/store-internal.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The journal mode. DELETE, TRUNCATE and PERSIST wrote the same bytes at
 * 200 processes (docs/storage.md); with DELETE no journal is left between
 * commits, where the empty one TRUNCATE leaves makes every reader's
 * statement open and read it to see whether it is hot (show took 0.6
 * against 1.0 ms). A build may pick another with
 * -DSETTLED_JOURNAL='"truncate"', as the measurement did. */
#ifndef SETTLED_JOURNAL
#define SETTLED_JOURNAL "delete"
#endif

/* A reader's page cache of the settled file, KiB (SQLite's default is
 * 2,000). A process's day of settled rows is some 7,000 pages of 1 KiB
 * (720 batches), read in order: a cache smaller than that keeps none of
 * them for the next query (the least recently used page goes first), and
 * each query read them all again from the file, one pread each; `show` of
 * a process with a day of history took twice version 3's time so
 * (docs/storage.md). With this one the second query reads none: 9.5 MiB
 * of cache at 50 processes. Pages are taken only as they are read, and
 * the daemon releases them after a call of 100 ms or more. */
#define SETTLED_READER_CACHE_KIB "16384"

/* The settled tables, as version 4 and 2 made them in the main file. */
#define SETTLED_TABLES(IF_NOT)                                                                     \
    "CREATE TABLE " IF_NOT " settled.process_energy_settled ("                                     \
    " batch INTEGER NOT NULL, process_id INTEGER NOT NULL, t INTEGER NOT NULL,"                    \
    " attributed_j REAL NOT NULL, standalone_j REAL NOT NULL, cpu_s REAL NOT NULL,"                \
    " class INTEGER, model_id INTEGER, PRIMARY KEY (batch, process_id, t)) WITHOUT ROWID;"         \
    "CREATE TABLE " IF_NOT " settled.process_energy_batch ("                                       \
    " batch INTEGER PRIMARY KEY, t_min INTEGER NOT NULL, t_max INTEGER NOT NULL);"                 \
    "CREATE INDEX " IF_NOT " settled.process_energy_batch_t ON process_energy_batch(t_max);"       \
    "CREATE TABLE " IF_NOT " settled.process_energy_minute ("                                      \
    " process_id INTEGER NOT NULL, t INTEGER NOT NULL, attributed_j REAL NOT NULL,"                \
    " standalone_j REAL NOT NULL, cpu_s REAL NOT NULL, class INTEGER, model_id INTEGER,"           \
    " seconds INTEGER NOT NULL, PRIMARY KEY (process_id, t)) WITHOUT ROWID;"                       \
    "CREATE INDEX " IF_NOT " settled.process_energy_minute_t ON process_energy_minute(t);"

int settled_path(const char *db_path, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s" SETTLED_SUFFIX, db_path);

    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int exec_settled(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* The pragmas of the settled file, before its first table. */
static int settled_pragmas(sqlite3 *db)
{
    char sql[64];
    sqlite3_stmt *st;
    int rc;

    snprintf(sql, sizeof(sql), "PRAGMA settled.page_size=%d", SCHEMA_PAGE_SIZE);
    rc = exec_settled(db, sql);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "PRAGMA settled.journal_mode=" SETTLED_JOURNAL, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = strcmp((const char *)sqlite3_column_text(st, 0), SETTLED_JOURNAL) == 0
                 ? SQLITE_OK
                 : SQLITE_CANTOPEN;
    sqlite3_finalize(st);
    /* A commit here is once a minute: FULL syncs the journal before the
     * file is written and again after, as a power cut needs. */
    if (rc == SQLITE_OK)
        rc = exec_settled(db, "PRAGMA settled.synchronous=FULL");
    return rc;
}

static int attach(sqlite3 *db, const char *path)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "ATTACH ?1 AS settled", -1, &st, NULL);

    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_text(st, 1, path, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int settled_attach_writer(sqlite3 *db, const char *db_path, int version, char *err, size_t errlen)
{
    char path[4096];
    struct stat sb;
    bool existed;
    int rc, r = settled_path(db_path, path, sizeof(path));

    if (r < 0)
        return util_err(err, errlen, r, "%s: path too long for its settled file", db_path);
    existed = stat(path, &sb) == 0;
    /* 0640 whatever the umask, as the main file (its journal takes its mode) */
    r = util_open_private(path, O_RDWR);
    if (r < 0)
        return util_err(err, errlen, r, "%s: cannot open the settled rows' file: %s", path,
                        strerror(-r));
    close(r);
    if (!existed && version >= SETTLED_VERSION)
        log_warning("%s: missing beside %s: starting it empty (the settled per-second and"
                    " minute rows it held are gone)",
                    path, db_path);
    rc = attach(db, path);
    if (rc == SQLITE_OK)
        rc = settled_pragmas(db);
    /* One transaction, not one per table: at synchronous=FULL each commit
     * is four syncs, and on a busy disk twenty of them delayed the start. */
    if (rc == SQLITE_OK)
        rc = exec_settled(db, "BEGIN;" SETTLED_TABLES("IF NOT EXISTS") "COMMIT");
    if (rc != SQLITE_OK) {
        r = util_err(err, errlen, schema_errno(db, rc), "%s: cannot use the settled rows' file: %s",
                     path, sqlite3_errmsg(db));
        if (!sqlite3_get_autocommit(db))
            exec_settled(db, "ROLLBACK");
        return r;
    }
    return 0;
}

int settled_attach_reader(sqlite3 *db, const char *db_path, char *err, size_t errlen)
{
    char path[4096];
    int rc, r = settled_path(db_path, path, sizeof(path));

    if (r < 0)
        return util_err(err, errlen, r, "%s: path too long for its settled file", db_path);
    /* the connection's flags: read-only, and no file is created */
    rc = attach(db, path);
    if (rc == SQLITE_OK)
        rc = exec_settled(db, "PRAGMA settled.cache_size=-" SETTLED_READER_CACHE_KIB);
    if (rc != SQLITE_OK)
        return util_err(err, errlen, schema_errno(db, rc),
                        "%s: cannot open the settled rows' file: %s", path, sqlite3_errmsg(db));
    return 0;
}

int settled_drop_moved(sqlite3 *db, const char *db_path, char *err, size_t errlen)
{
    int rc = exec_settled(db, SCHEMA_BEGIN_MAIN);

    if (rc == SQLITE_OK)
        rc = exec_settled(db, "DELETE FROM main.process_energy_recent WHERE " SETTLED_ALREADY(
                                  "process_energy_recent"));
    if (rc == SQLITE_OK && sqlite3_changes(db) > 0)
        log_info("%s: dropped %d recent rows that its settled file held already (a stop between"
                 " the two commits of a move)",
                 db_path, sqlite3_changes(db));
    if (rc == SQLITE_OK)
        rc = exec_settled(db, "COMMIT");
    if (rc == SQLITE_OK)
        return 0;
    if (!sqlite3_get_autocommit(db))
        exec_settled(db, "ROLLBACK");
    return util_err(err, errlen, schema_errno(db, rc),
                    "%s: dropping the recent rows already settled: %s", db_path,
                    sqlite3_errmsg(db));
}

int settled_sync_main(sqlite3 *db, char *err, size_t errlen)
{
    const char *wal = sqlite3_filename_wal(sqlite3_db_filename(db, "main"));
    int fd = open(wal, O_RDONLY | O_CLOEXEC), r = 0;

    if (fd < 0)
        return errno == ENOENT ? 0 : util_err(err, errlen, -errno, "%s: %s", wal, strerror(errno));
    if (fdatasync(fd) < 0)
        r = util_err(err, errlen, -errno, "%s: syncing before a move: %s", wal, strerror(errno));
    close(fd);
    return r;
}

/* 10 -> 11, the settled file: its tables' rows are copied from the main
 * file in one transaction of the settled file (emptied first, so a crash
 * before the second commit only repeats the step), then the main file
 * drops them (and the process_energy view, which a view of the main file
 * cannot make of tables of another) in the migration's own transaction. */
int migrate_settled_file(sqlite3 *db)
{
    static const char copy[] =
        "BEGIN IMMEDIATE;"
        "DELETE FROM settled.process_energy_settled;"
        "DELETE FROM settled.process_energy_batch;"
        "DELETE FROM settled.process_energy_minute;"
        "INSERT INTO settled.process_energy_batch (batch, t_min, t_max)"
        " SELECT batch, t_min, t_max FROM main.process_energy_batch;"
        "INSERT INTO settled.process_energy_settled (batch, process_id, t, attributed_j,"
        " standalone_j, cpu_s, class, model_id) SELECT batch, process_id, t, attributed_j,"
        " standalone_j, cpu_s, class, model_id FROM main.process_energy_settled"
        " ORDER BY batch, process_id, t;"
        "INSERT INTO settled.process_energy_minute (process_id, t, attributed_j, standalone_j,"
        " cpu_s, class, model_id, seconds) SELECT process_id, t, attributed_j, standalone_j,"
        " cpu_s, class, model_id, seconds FROM main.process_energy_minute"
        " ORDER BY process_id, t;"
        "COMMIT;";
    static const char drop[] = SCHEMA_BEGIN_MAIN ";"
                                                 "DROP VIEW main.process_energy;"
                                                 "DROP TABLE main.process_energy_settled;"
                                                 "DROP TABLE main.process_energy_batch;"
                                                 "DROP TABLE main.process_energy_minute;"
                                                 "PRAGMA user_version = " SETTLED_VERSION_TEXT ";"
                                                 "COMMIT;";
    int rc = exec_settled(db, copy);

    if (rc == SQLITE_OK)
        rc = exec_settled(db, drop);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        exec_settled(db, "ROLLBACK");
    return rc;
}
