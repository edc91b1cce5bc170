/* rpc peer: who the client is, from the kernel's credentials of the socket,
 * and whether it may see everything (root, or a member of the configured
 * group). */
#include "rpc/internal.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/* The peer's supplementary groups as the kernel recorded them at connect
 * time (no race with a pid being reused).  malloc'd array in *groups. */
static int peer_groups_kernel(int fd, gid_t **groups, size_t *n)
{
    socklen_t len = 16 * sizeof(gid_t);

    for (int tries = 0; tries < 4; tries++) {
        gid_t *g = malloc(len ? len : sizeof(gid_t));
        if (!g)
            return -ENOMEM;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
            *groups = g;
            *n = len / sizeof(gid_t);
            return 0;
        }
        free(g);
        if (errno != ERANGE)
            return -errno;
    }
    return -ERANGE;
}

/* Fallback for kernels without SO_PEERGROUPS: the groups the user database
 * gives the peer's user. */
static bool in_group_db(uid_t uid, gid_t gid, gid_t want)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    gid_t groups[256];
    int n = 256;

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
        return false;
    if (getgrouplist(pw.pw_name, gid, groups, &n) < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (groups[i] == want)
            return true;
    return false;
}

static bool in_group(int fd, const struct ucred *cred, gid_t want)
{
    gid_t *groups = NULL;
    size_t n = 0;
    bool found = false;

    if (cred->gid == want)
        return true;
    if (peer_groups_kernel(fd, &groups, &n) < 0)
        return in_group_db(cred->uid, cred->gid, want);
    for (size_t i = 0; i < n && !found; i++)
        found = groups[i] == want;
    free(groups);
    return found;
}

int rpc_peer_get(int fd, gid_t priv_gid, rpc_peer *peer)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -errno;
    peer->uid = cred.uid;
    peer->gid = cred.gid;
    peer->pid = cred.pid;
    peer->privileged = cred.uid == 0 || (priv_gid != (gid_t)-1 && in_group(fd, &cred, priv_gid));
    return 0;
}
