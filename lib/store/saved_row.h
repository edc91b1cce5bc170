/* saved_row: one row that another thread saves for the writer's next
 * commit (the node's calibrations: node.c, node_events.c). The latest save
 * replaces the one before; the writer writes it inside a transaction and
 * counts it written only when that transaction commits, so a save made
 * while the transaction ran, or a transaction that failed, leaves it due.
 * Everything here runs under the caller's lock, which also guards the row. */
#ifndef WATTPROF_STORE_SAVED_ROW_H
#define WATTPROF_STORE_SAVED_ROW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct saved_row {
    pthread_mutex_t *lock; /* guards the row and the counters */
    void *row;             /* the latest row saved */
    size_t size;
    uint64_t saved;     /* saves so far (the first is 1) */
    uint64_t committed; /* the save the database holds (0: none) */
    uint64_t txn;       /* the save the transaction under way wrote (0: none) */
} saved_row;

/* A slot for rows of `size` bytes at `row`, guarded by `lock`. */
void saved_row_init(saved_row *r, pthread_mutex_t *lock, void *row, size_t size);
/* Copies `row` in as the latest save. */
void saved_row_save(saved_row *r, const void *row);
/* When a save is due: write(row, arg) under the lock, inside the caller's
 * transaction, the save counted as that transaction's. Returns write's
 * SQLite code, or SQLITE_OK (0) when none was due. */
int saved_row_write(saved_row *r, int (*write)(const void *row, void *arg), void *arg);
/* Whether a save is due. */
bool saved_row_pending(saved_row *r);
/* After the transaction: its save is done when it committed. */
void saved_row_end_txn(saved_row *r, bool committed);
/* A new database file holds no save: whatever was saved is due again. */
void saved_row_unwritten(saved_row *r);

#endif
