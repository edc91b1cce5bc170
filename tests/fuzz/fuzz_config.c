/* fuzz_config: the daemon config parser (daemon/config.c).  Each input is a
 * wattprofd.conf read over the defaults of an unprivileged run, then
 * finished as the daemon does at start-up. */
#include "../../daemon/daemon.h"
#include "fuzz-file.h"

#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    config c;
    int fd = fuzz_file(data, size, path, sizeof(path));

    if (fd < 0)
        return 0;
    if (config_init(&c, false) == 0 && config_load(&c, path, err, sizeof(err)) == 0)
        config_finish(&c, err, sizeof(err));
    config_free(&c);
    close(fd);
    return 0;
}
