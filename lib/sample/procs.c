/* procs: which processes exist, who they are, and when they come and go.
 *
 * Identity and metadata come from /proc/PID/{stat,status,cmdline,cgroup}.
 * All four are read through one descriptor of the /proc/PID directory: that
 * descriptor stays bound to the process it was opened for, so if the process
 * dies and its pid is reused half-way, the later reads fail instead of
 * silently describing the newcomer.
 *
 * Births, execs and deaths come from the netlink proc connector. It reports
 * every task, threads included; only thread-group events are passed on,
 * because counters follow threads by inheritance (see counters.c). */
#include "sample/sample.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROCS_PF_KTHREAD 0x00200000u /* task->flags bit of kernel threads */

/* ---- /proc ---------------------------------------------------------------- */

/* A vanished process shows as ENOENT on lookup and ESRCH on read. */
static int procs_gone(int e)
{
    return e == ENOENT || e == ESRCH ? -ESRCH : -e;
}

/* Reads file `name` of the process directory `dirfd` into a malloc'd,
 * NUL-terminated buffer (/proc files have no size, so read to EOF, or until
 * more than `max` bytes came: *len > max then says the file was longer). */
static int procs_read_at(int dirfd, const char *name, size_t max, char **buf, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    size_t used = 0, cap = 1024;
    char *data;

    if (fd < 0)
        return procs_gone(errno);
    data = malloc(cap);
    if (!data) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (used + 1 == cap) {
            char *n = realloc(data, cap *= 2);
            if (!n) {
                free(data);
                close(fd);
                return -ENOMEM;
            }
            data = n;
        }
        ssize_t got = read(fd, data + used, cap - used - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            free(data);
            close(fd);
            return procs_gone(e);
        }
        if (got == 0)
            break;
        used += (size_t)got;
        if (used > max)
            break;
    }
    close(fd);
    data[used] = '\0';
    *buf = data;
    if (len)
        *len = used;
    return 0;
}

/* /proc/PID/stat: "pid (comm) state ppid ...". comm is whatever the process
 * named itself, spaces and parentheses included, so it ends at the LAST ')'. */
static int procs_parse_stat(const char *stat, procs_info *out)
{
    const char *open = strchr(stat, '(');
    const char *close = strrchr(stat, ')');
    unsigned long long flags = 0;

    if (!open || !close || close < open)
        return -EBADMSG;
    size_t len = (size_t)(close - open - 1);
    if (len >= sizeof(out->comm))
        len = sizeof(out->comm) - 1;
    memcpy(out->comm, open + 1, len);
    out->comm[len] = '\0';

    const char *p = close + 1;
    for (int field = 3; field <= 22; field++) {
        char *end;
        while (*p == ' ')
            p++;
        if (!*p)
            return -EBADMSG;
        if (field == 3) { /* state: one letter */
            p++;
            continue;
        }
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            return -EBADMSG;
        if (field == 4)
            out->ppid = (pid_t)v;
        else if (field == 9)
            flags = v;
        else if (field == 22)
            out->start_ticks = v;
        p = end;
    }
    out->kernel_thread = (flags & PROCS_PF_KTHREAD) != 0;
    return 0;
}

/* Real uid: the first number of the "Uid:" line of /proc/PID/status. */
static int procs_parse_uid(const char *status, uid_t *uid)
{
    const char *line = strstr(status, "\nUid:");
    char *end;

    if (!line)
        return -EBADMSG;
    unsigned long v = strtoul(line + 5, &end, 10);
    if (end == line + 5)
        return -EBADMSG;
    *uid = (uid_t)v;
    return 0;
}

/* The unified hierarchy's line of /proc/PID/cgroup is "0::PATH"; a path may
 * itself hold ':' so everything after the prefix is kept. A host with only
 * cgroup v1 has no such line: the path is then "". */
static int procs_parse_cgroup(const char *cgroup, char **out)
{
    const char *p = cgroup;

    while (p && *p) {
        if (strncmp(p, "0::", 3) == 0) {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p - 3) : strlen(p + 3);
            *out = strndup(p + 3, len);
            return *out ? 0 : -ENOMEM;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    *out = strdup("");
    return *out ? 0 : -ENOMEM;
}

/* Arguments are NUL-separated (and NUL-terminated): join them by spaces.
 * More than PROCS_CMDLINE_MAX bytes (len says how many were read) are cut
 * to that length, ending in "...". */
static void procs_join_cmdline(char *cmdline, size_t len)
{
    while (len > 0 && cmdline[len - 1] == '\0')
        len--;
    if (len > PROCS_CMDLINE_MAX) {
        len = PROCS_CMDLINE_MAX;
        memcpy(cmdline + len - 3, "...", 3);
    }
    cmdline[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (cmdline[i] == '\0')
            cmdline[i] = ' ';
}

static int procs_read_all(int dirfd, procs_info *out)
{
    char *buf = NULL;
    size_t len;
    int r;

    if ((r = procs_read_at(dirfd, "stat", SIZE_MAX, &buf, NULL)) < 0)
        return r;
    r = procs_parse_stat(buf, out);
    free(buf);
    if (r < 0)
        return r;
    if ((r = procs_read_at(dirfd, "status", SIZE_MAX, &buf, NULL)) < 0)
        return r;
    r = procs_parse_uid(buf, &out->uid);
    free(buf);
    if (r < 0)
        return r;
    if ((r = procs_read_at(dirfd, "cgroup", SIZE_MAX, &buf, NULL)) < 0)
        return r;
    r = procs_parse_cgroup(buf, &out->cgroup);
    free(buf);
    if (r < 0)
        return r;
    /* One byte more: the last argument's NUL. */
    if ((r = procs_read_at(dirfd, "cmdline", PROCS_CMDLINE_MAX + 1, &out->cmdline, &len)) < 0)
        return r;
    procs_join_cmdline(out->cmdline, len);
    return 0;
}

int procs_read_stat(pid_t pid, procs_info *out)
{
    char path[40], *buf = NULL;
    int r;

    memset(out, 0, sizeof(*out));
    if (pid <= 0)
        return -ESRCH;
    out->pid = pid;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    r = procs_read_at(AT_FDCWD, path, SIZE_MAX, &buf, NULL);
    if (r == 0)
        r = procs_parse_stat(buf, out);
    free(buf);
    return r;
}

int procs_read_info(pid_t pid, procs_info *out)
{
    char path[32];
    int dirfd, r;

    memset(out, 0, sizeof(*out));
    if (pid <= 0)
        return -ESRCH;
    out->pid = pid;
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return procs_gone(errno);
    r = procs_read_all(dirfd, out);
    close(dirfd);
    if (r < 0)
        procs_info_clear(out);
    return r;
}

void procs_info_clear(procs_info *info)
{
    free(info->cmdline);
    free(info->cgroup);
    info->cmdline = NULL;
    info->cgroup = NULL;
}

int procs_list(pid_t **pids, size_t *n)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    size_t cap = 256, k = 0;
    pid_t *v;

    if (!d)
        return -errno;
    v = malloc(cap * sizeof(pid_t));
    if (!v) {
        closedir(d);
        return -ENOMEM;
    }
    /* /proc lists thread-group leaders only; threads hide under task/. */
    while ((de = readdir(d))) {
        long pid;
        if (de->d_name[0] < '1' || de->d_name[0] > '9' || util_parse_long(de->d_name, &pid) < 0)
            continue;
        if (k == cap) {
            pid_t *nv = realloc(v, (cap *= 2) * sizeof(pid_t));
            if (!nv) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = nv;
        }
        v[k++] = (pid_t)pid;
    }
    closedir(d);
    *pids = v;
    *n = k;
    return 0;
}

int procs_boot_id(char out[37])
{
    char *buf;
    size_t len;
    int r = util_read_file("/proc/sys/kernel/random/boot_id", &buf, &len);

    if (r < 0)
        return r;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (len != 36) {
        free(buf);
        return -EBADMSG;
    }
    memcpy(out, buf, 37);
    free(buf);
    return 0;
}

/* ---- The proc connector --------------------------------------------------- */

/* Room for many connector messages per recv() batch; each is one datagram of
 * about 80 bytes, so the kernel queue (rmem) is what bounds a burst. */
#define PROCS_NL_BUF 8192
#define PROCS_RCVBUF (4 << 20) /* bytes; the kernel counts ~1 KiB per queued event */

/* Events are received PROCS_BATCH datagrams a call (recvmmsg): under
 * 1,000 process starts a second, one recvmsg per event was a tenth of the
 * daemon's time. The kernel sends one event a datagram, under 100 bytes. */
#define PROCS_BATCH 32
#define PROCS_SLOT 512

struct procs_watch {
    int fd;
    uint32_t nonce;
    char buf[PROCS_NL_BUF] __attribute__((aligned(NLMSG_ALIGNTO)));
    size_t len, off; /* datagram being consumed: a caller's `max` may end mid-way */
    char slot[PROCS_BATCH][PROCS_SLOT] __attribute__((aligned(NLMSG_ALIGNTO)));
    struct mmsghdr mm[PROCS_BATCH];
    struct iovec iov[PROCS_BATCH];
    struct sockaddr_nl from[PROCS_BATCH];
    unsigned got, next; /* datagrams of the last batch, the next to consume */
};

/* The listen request: netlink header, connector header, the operation. */
struct procs_listen_msg {
    struct nlmsghdr nl;
    struct cn_msg cn;
    enum proc_cn_mcast_op op;
} __attribute__((packed));

static int procs_send_listen(procs_watch *w)
{
    struct procs_listen_msg m;

    memset(&m, 0, sizeof(m));
    m.nl.nlmsg_len = sizeof(m);
    m.nl.nlmsg_type = NLMSG_DONE;
    m.nl.nlmsg_pid = 0;
    m.cn.id.idx = CN_IDX_PROC;
    m.cn.id.val = CN_VAL_PROC;
    m.cn.ack = w->nonce;
    m.cn.len = sizeof(m.op);
    m.op = PROC_CN_MCAST_LISTEN;
    if (send(w->fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
        return -errno;
    return 0;
}

/* Copies the proc event carried by netlink message `nh` into `out` (the
 * payload sits 4 bytes off the 8-byte alignment proc_event needs) and its
 * connector ack number into `ack`; false when it is not a proc event. */
static bool procs_nl_event(const struct nlmsghdr *nh, struct proc_event *out, uint32_t *ack)
{
    const struct cn_msg *cn;

    if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct cn_msg)))
        return false;
    cn = NLMSG_DATA(nh);
    if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC)
        return false;
    /* The union is as large as its largest member; older kernels send the
     * same layout, so the fork/exec/exit fields are always present. */
    if (cn->len < offsetof(struct proc_event, event_data) + sizeof(struct exit_proc_event) ||
        nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct cn_msg) + cn->len))
        return false;
    memset(out, 0, sizeof(*out));
    memcpy(out, cn->data, cn->len < sizeof(*out) ? cn->len : sizeof(*out));
    *ack = cn->ack;
    return true;
}

/* Receives one datagram from the kernel into w->buf. 0 when one arrived,
 * -EAGAIN when none is waiting, -ENOBUFS after an overrun. */
static int procs_recv(procs_watch *w)
{
    struct sockaddr_nl from;
    struct iovec iov = {.iov_base = w->buf, .iov_len = sizeof(w->buf)};
    struct msghdr mh = {
        .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1};

    for (;;) {
        ssize_t got = recvmsg(w->fd, &mh, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
        /* Only the kernel (port 0) speaks for the connector. */
        if (from.nl_pid != 0 || (mh.msg_flags & MSG_TRUNC))
            continue;
        w->len = (size_t)got;
        w->off = 0;
        return 0;
    }
}

/* Moves the next datagram of a batch (received when none is left) into
 * w->buf; as procs_recv. */
static int procs_recv_batch(procs_watch *w)
{
    for (;;) {
        if (w->next >= w->got) {
            for (unsigned i = 0; i < PROCS_BATCH; i++) {
                w->iov[i] = (struct iovec){.iov_base = w->slot[i], .iov_len = PROCS_SLOT};
                w->mm[i].msg_hdr = (struct msghdr){.msg_name = &w->from[i],
                                                   .msg_namelen = sizeof(w->from[i]),
                                                   .msg_iov = &w->iov[i],
                                                   .msg_iovlen = 1};
            }
            int got = recvmmsg(w->fd, w->mm, PROCS_BATCH, MSG_DONTWAIT, NULL);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
            w->got = (unsigned)got;
            w->next = 0;
            continue;
        }
        unsigned i = w->next++;
        /* Only the kernel (port 0) speaks for the connector. */
        if (w->from[i].nl_pid != 0 || (w->mm[i].msg_hdr.msg_flags & MSG_TRUNC))
            continue;
        w->len = w->mm[i].msg_len;
        w->off = 0;
        memcpy(w->buf, w->slot[i], w->len);
        return 0;
    }
}

/* The acknowledgement of our listen request is queued while send() runs, so
 * it is already waiting; a short poll covers kernels that defer it. Events
 * queued before it are dropped: callers scan /proc after opening anyway. The
 * kernel says nothing at all to requests from a non-initial user or pid
 * namespace: no acknowledgement then means no events either. */
static int procs_wait_ack(procs_watch *w, char *err, size_t errlen)
{
    /* 500 ms by the clock: other processes' events keep arriving when another
     * listener has the connector on, and a wait counted in quiet polls never
     * ended on a busy machine. */
    uint64_t deadline = util_now_ns(CLOCK_MONOTONIC) + 500 * 1000000ULL;

    while (util_now_ns(CLOCK_MONOTONIC) < deadline) {
        int r = procs_recv(w);
        if (r == -EAGAIN) {
            struct pollfd p = {.fd = w->fd, .events = POLLIN};
            poll(&p, 1, 50);
            continue;
        }
        if (r < 0 && r != -ENOBUFS)
            return util_err(err, errlen, r, "proc connector: %s", strerror(-r));
        if (r < 0)
            continue;
        size_t left = w->len;
        for (const struct nlmsghdr *nh = (const void *)w->buf; NLMSG_OK(nh, left);
             nh = NLMSG_NEXT(nh, left)) {
            struct proc_event pe;
            const struct proc_event *ev = &pe;
            uint32_t ack;
            if (!procs_nl_event(nh, &pe, &ack) || pe.what != PROC_EVENT_NONE || ack != w->nonce + 1)
                continue;
            /* Kernels before 6.6 allow listening with CAP_NET_ADMIN only. */
            if (ev->event_data.ack.err == EPERM)
                return util_err(err, errlen, -EPERM,
                                "proc connector: listening needs CAP_NET_ADMIN on this kernel; "
                                "new processes are found by /proc rescans only");
            if (ev->event_data.ack.err)
                return util_err(err, errlen, -(int)ev->event_data.ack.err,
                                "proc connector: listen refused: %s",
                                strerror((int)ev->event_data.ack.err));
            w->len = w->off = 0;
            return 0;
        }
    }
    return util_err(err, errlen, -EPERM,
                    "proc connector: no answer to the listen request (the kernel ignores "
                    "requests from outside the initial user and pid namespaces); new processes "
                    "are found by /proc rescans only");
}

/* Where the kernel's proc event fields sit in a datagram: the netlink
 * header, the connector header, then struct proc_event (what, cpu,
 * timestamp, then the event's own fields). */
#define PROCS_AT_EVENT (NLMSG_HDRLEN + sizeof(struct cn_msg))
#define PROCS_AT_WHAT (PROCS_AT_EVENT + offsetof(struct proc_event, what))
#define PROCS_AT(member) (PROCS_AT_EVENT + offsetof(struct proc_event, event_data.member))

/* Three instructions: whether a thread-id field equals the thread group
 * id beside it; then a jump, `jt` to keep, `jf` to drop. */
#define PROCS_LEADER(pid, tgid, jt, jf)                                                            \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PROCS_AT(pid)), BPF_STMT(BPF_MISC | BPF_TAX, 0),            \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PROCS_AT(tgid)),                                        \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, jt, jf)

int procs_watch_filter(procs_watch *w, bool exits)
{
    /* A classic socket filter: it runs as the kernel queues each datagram,
     * so a dropped event costs no receive. Loads are in network order: the
     * constants are swapped the same way (ntohl), and two fields are only
     * compared with each other. Jumps count the instructions skipped. */
    struct sock_filter code[] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PROCS_AT_WHAT),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(PROC_EVENT_EXIT), exits ? 3 : 16, 0),
        /* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(PROC_EVENT_FORK), 6, 0),
        /* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(PROC_EVENT_COMM), 9, 0),
        /* 4 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffff), /* exec, the listen ack, the rest */
        /* 5 */ PROCS_LEADER(exit.process_pid, exit.process_tgid, 8, 9),
        /* 9 */ PROCS_LEADER(fork.child_pid, fork.child_tgid, 4, 5),
        /* 13 */ PROCS_LEADER(comm.process_pid, comm.process_tgid, 0, 1),
        /* 17 */ BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
        /* 18 */ BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};

    if (setsockopt(w->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
        return -errno;
    return 0;
}

int procs_watch_open(procs_watch **out, char *err, size_t errlen)
{
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC};
    procs_watch *w = calloc(1, sizeof(*w));
    int r;

    if (!w)
        return -ENOMEM;
    w->fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR);
    if (w->fd < 0) {
        r = util_err(err, errlen, -errno, "proc connector: netlink socket: %s", strerror(errno));
        goto fail;
    }
    /* A burst of process births (a parallel build) outruns the default
     * receive queue of about 200 messages; a larger one absorbs it. Only
     * root may exceed rmem_max, so try that first and fall back. */
    int rcvbuf = PROCS_RCVBUF;
    if (setsockopt(w->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
        setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    /* nl_pid 0: the kernel picks a port, so several watches can coexist. */
    if (bind(w->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int e = errno;
        r = util_err(err, errlen, -e, "proc connector: joining the process-event group: %s%s",
                     strerror(e), e == EPERM ? " (needs CAP_NET_ADMIN)" : "");
        goto fail;
    }
    /* Acknowledgements are multicast to the whole group; the kernel answers
     * with our ack number plus one, which tells ours from other listeners'. */
    w->nonce = ((uint32_t)getpid() ^ (uint32_t)(uintptr_t)w) & 0x7fffffff;
    if ((r = procs_send_listen(w)) < 0) {
        r = util_err(err, errlen, r, "proc connector: listen request: %s", strerror(-r));
        goto fail;
    }
    if ((r = procs_wait_ack(w, err, errlen)) < 0)
        goto fail;
    procs_watch_filter(w, true); /* without it, the same events, dropped later */
    *out = w;
    return 0;
fail:
    procs_watch_close(w);
    return r;
}

void procs_watch_close(procs_watch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

int procs_watch_fd(const procs_watch *w)
{
    return w->fd;
}

/* Turns a kernel event into ours; false for thread events and the kinds
 * nobody here needs (uid, comm, ptrace...). */
static bool procs_convert(const struct proc_event *ev, procs_event *out)
{
    switch (ev->what) {
    case PROC_EVENT_FORK:
        if (ev->event_data.fork.child_pid != ev->event_data.fork.child_tgid)
            return false; /* a new thread */
        *out = (procs_event){.kind = PROCS_EV_FORK,
                             .pid = ev->event_data.fork.child_tgid,
                             .parent = ev->event_data.fork.parent_tgid};
        return true;
    case PROC_EVENT_EXEC:
        /* exec makes the calling thread the leader before this is sent */
        *out = (procs_event){.kind = PROCS_EV_EXEC, .pid = ev->event_data.exec.process_tgid};
        return true;
    case PROC_EVENT_EXIT:
        if (ev->event_data.exit.process_pid != ev->event_data.exit.process_tgid)
            return false; /* a thread ended, the process goes on */
        *out = (procs_event){.kind = PROCS_EV_EXIT,
                             .pid = ev->event_data.exit.process_tgid,
                             .parent = ev->event_data.exit.parent_tgid,
                             .exit_code = (int)ev->event_data.exit.exit_code};
        return true;
    case PROC_EVENT_COMM:
        /* A child that renames itself and exits within a tick is known by
         * its new name only from this event: /proc is gone by then. */
        if (ev->event_data.comm.process_pid != ev->event_data.comm.process_tgid)
            return false; /* a thread's name; the process keeps its leader's */
        *out = (procs_event){.kind = PROCS_EV_COMM, .pid = ev->event_data.comm.process_tgid};
        memcpy(out->comm, ev->event_data.comm.comm, sizeof(out->comm) - 1);
        return true;
    default:
        return false;
    }
}

int procs_watch_read(procs_watch *w, procs_event *ev, size_t max, size_t *n)
{
    *n = 0;
    while (*n < max) {
        if (w->off >= w->len) {
            int r = procs_recv_batch(w);
            if (r == -EAGAIN)
                return 0;
            if (r < 0)
                return r; /* -ENOBUFS: the socket overran, events were lost */
        }
        const struct nlmsghdr *nh = (const void *)(w->buf + w->off);
        size_t left = w->len - w->off;
        if (!NLMSG_OK(nh, left)) {
            w->off = w->len;
            continue;
        }
        w->off += NLMSG_ALIGN(nh->nlmsg_len);
        struct proc_event pe;
        uint32_t ack;
        if (procs_nl_event(nh, &pe, &ack) && procs_convert(&pe, &ev[*n]))
            (*n)++;
    }
    return 0;
}
