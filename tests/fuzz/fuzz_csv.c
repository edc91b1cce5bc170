/* fuzz_csv: the CSV reader (learn_csv_read, libcsv underneath) and the
 * numeric table built from it, as `wattprof train` reads its datasets: every
 * column picked, once strictly and once dropping rows that do not parse. */
#include "fuzz-file.h"
#include "learn/learn.h"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void to_table(const learn_csv *c, unsigned flags)
{
    char err[512];
    learn_table *t = NULL;
    size_t dropped;

    if (learn_table_from_csv(c, (const char *const *)c->header, c->n_cols, flags, &t, &dropped, err,
                             sizeof(err)) == 0)
        learn_table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    learn_csv *c = NULL;
    int fd = fuzz_file(data, size, path, sizeof(path));

    if (fd < 0)
        return 0;
    if (learn_csv_read(path, &c, err, sizeof(err)) == 0) {
        to_table(c, 0);
        to_table(c, LEARN_DROP_INVALID);
        learn_csv_free(c);
    }
    close(fd);
    return 0;
}
