/* saved_row: a row saved for the writer's next commit (saved_row.h). */
#include "store/saved_row.h"

#include <string.h>

void saved_row_init(saved_row *r, pthread_mutex_t *lock, void *row, size_t size)
{
    *r = (saved_row){.lock = lock, .row = row, .size = size};
}

void saved_row_save(saved_row *r, const void *row)
{
    pthread_mutex_lock(r->lock);
    memcpy(r->row, row, r->size);
    r->saved++;
    pthread_mutex_unlock(r->lock);
}

int saved_row_write(saved_row *r, int (*write)(const void *row, void *arg), void *arg)
{
    int rc = 0;

    pthread_mutex_lock(r->lock);
    if (r->saved != r->committed) {
        rc = write(r->row, arg);
        r->txn = r->saved;
    }
    pthread_mutex_unlock(r->lock);
    return rc;
}

bool saved_row_pending(saved_row *r)
{
    pthread_mutex_lock(r->lock);
    bool pending = r->saved != r->committed;
    pthread_mutex_unlock(r->lock);
    return pending;
}

/* A row saved while the transaction ran stays due: only the one written is
 * done. */
void saved_row_end_txn(saved_row *r, bool committed)
{
    pthread_mutex_lock(r->lock);
    if (r->txn && committed)
        r->committed = r->txn;
    r->txn = 0;
    pthread_mutex_unlock(r->lock);
}

void saved_row_unwritten(saved_row *r)
{
    pthread_mutex_lock(r->lock);
    r->committed = 0; /* saves start at 1: whatever was saved is due */
    pthread_mutex_unlock(r->lock);
}
