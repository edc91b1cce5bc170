/* fuzz_trace: the record/replay reader (lib/sample/trace_read.c).  Each input is
 * a trace file: its header is validated, then every record read until the
 * end or the first malformed line, as `wattprofd --replay` does. */
#include "fuzz-file.h"
#include "sample/sample.h"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    trace_reader *r = NULL;
    trace_record_kind kind;
    trace_tick tick;
    procs_info proc;
    int fd = fuzz_file(data, size, path, sizeof(path));

    if (fd < 0)
        return 0;
    if (trace_reader_open(path, &r, err, sizeof(err)) == 0) {
        while (trace_read(r, &kind, &tick, &proc, err, sizeof(err)) > 0)
            ;
        trace_reader_close(r);
    }
    close(fd);
    return 0;
}
