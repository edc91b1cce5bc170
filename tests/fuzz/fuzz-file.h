/* fuzz-file: hands a fuzz input to a reader that takes a path.  The bytes go
 * into an anonymous memory file (memfd), read back through /proc/self/fd,
 * so the readers run unchanged and nothing is left on disk. */
#ifndef WATTPROF_FUZZ_FILE_H
#define WATTPROF_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Stores size bytes of data in a new memfd and writes its path into path
 * (pathlen bytes).  Returns the fd, which the caller closes, or -1 with
 * errno set. */
int fuzz_file(const uint8_t *data, size_t size, char *path, size_t pathlen);

/* A malloc'd copy of data with a NUL after it, for parsers that take a
 * string; NULL when out of memory. */
char *fuzz_string(const uint8_t *data, size_t size);

#endif
