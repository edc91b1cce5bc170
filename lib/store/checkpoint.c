/* checkpoint: when the writer copies the WAL back into the database file.
 *
 * A checkpoint writes each page the WAL holds once, however often commits
 * rewrote it there. The pages rewritten all the time (process_energy_recent,
 * whose pages every move frees and the next minute's rows take again; the
 * processes rows each fold updates; the last page of each table that grows)
 * cost one write per checkpoint, so the fewer checkpoints the less the disk
 * sees; the new pages of the tables that grow cost one write each whatever
 * the policy. SQLite's default, a checkpoint every 1,000 pages of WAL, made
 * about two a minute at 200 processes, each copying the recent table again.
 * The writer checkpoints instead when the WAL holds CHECKPOINT_FRAMES pages
 * or its oldest commit not copied back is CHECKPOINT_MAX_S old, whichever
 * comes first (docs/storage.md has the measurements). A process crash loses
 * nothing either way (the WAL is the data); a power cut can lose the commits
 * since the last checkpoint (synchronous=NORMAL), so at most
 * CHECKPOINT_MAX_S of them. */
#include "store/store-internal.h"
#include "util/util.h"

#include <time.h>

#define CHECKPOINT_FRAMES 10000
#define CHECKPOINT_MAX_S 300

static int64_t now_s(void)
{
    return (int64_t)(util_now_ns(CLOCK_MONOTONIC) / 1000000000ULL);
}

/* Called by SQLite after each commit, with the pages the WAL holds. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
    store *s = arg;
    int64_t now = now_s();

    if (s->ckpt_since == 0)
        s->ckpt_since = now;
    if (frames < CHECKPOINT_FRAMES && now - s->ckpt_since < CHECKPOINT_MAX_S)
        return SQLITE_OK;
    /* PASSIVE: never waits for readers; what it cannot copy yet stays in
     * the WAL for the next one. A failure is not the commit's: log it. */
    int rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        log_warning("%s: checkpoint of %d WAL pages failed: %s", s->path, frames,
                    sqlite3_errmsg(db));
    s->ckpt_since = 0;
    return SQLITE_OK;
}

void checkpoint_policy(store *s)
{
    s->ckpt_since = 0;
    sqlite3_wal_hook(s->db, on_commit, s);
}
