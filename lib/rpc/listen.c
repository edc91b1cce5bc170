/* rpc listen: the server's listening socket, made here or handed over by
 * systemd socket activation. */
#include "rpc/internal.h"

#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static int make_addr(const char *path, struct sockaddr_un *sa, char *err, size_t errlen)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa->sun_path))
        return util_err(err, errlen, -ENAMETOOLONG, "%s: socket path longer than %zu bytes", path,
                        sizeof(sa->sun_path) - 1);
    strcpy(sa->sun_path, path);
    return 0;
}

/* True when a server answers at sa: then its socket file must stay. */
static bool someone_listens(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live;

    if (fd < 0)
        return true; /* cannot tell: do not remove anything */
    live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno != ECONNREFUSED;
    close(fd);
    return live;
}

int rpc_listen_unix(const char *path, mode_t mode, int *out, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int fd, r = make_addr(path, &sa, err, errlen);

    if (r < 0)
        return r;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return util_err(err, errlen, -errno, "socket: %s", strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        r = -errno;
    if (r == -EADDRINUSE) {
        struct stat st;
        if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
            close(fd);
            return util_err(err, errlen, -EEXIST, "%s: exists and is not a socket", path);
        }
        if (someone_listens(&sa)) {
            close(fd);
            return util_err(err, errlen, -EADDRINUSE, "%s: another server is listening there",
                            path);
        }
        unlink(path); /* a stale file left by a server that died */
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    }
    if (r == 0 && chmod(path, mode) < 0)
        r = -errno;
    if (r == 0 && listen(fd, SOMAXCONN) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return util_err(err, errlen, r, "%s: cannot listen: %s", path, strerror(-r));
    }
    *out = fd;
    return 0;
}

int rpc_listen_activated(int *out, char *err, size_t errlen)
{
    int n = sd_listen_fds(1), fd = SD_LISTEN_FDS_START, flags;

    if (n < 0)
        return util_err(err, errlen, n, "socket activation: %s", strerror(-n));
    if (n == 0)
        return 0;
    if (n != 1)
        return util_err(err, errlen, -EINVAL,
                        "socket activation: expected one socket, systemd passed %d", n);
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0)
        return util_err(err, errlen, -EINVAL,
                        "socket activation: the socket passed is not a listening Unix stream "
                        "socket");
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return util_err(err, errlen, -errno, "socket activation: %s", strerror(errno));
    *out = fd;
    return 1;
}
