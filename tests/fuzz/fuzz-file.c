/* fuzz-file: see fuzz-file.h. */
#include "fuzz-file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int fuzz_file(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    size_t done = 0;

    if (fd < 0)
        return -1;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (!s)
        return NULL;
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
