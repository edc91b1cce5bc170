/* Process identity and events through lib/sample/procs.c, on real processes:
 * /proc of this test and of children that name themselves awkwardly, a
 * pid that is gone, and the proc connector seeing a child's fork, exec and
 * exit while staying quiet about this test's own threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Field 22 of /proc/self/stat read the plain way, for comparison. */
static unsigned long long stat_field22(pid_t pid)
{
    char path[64], buf[1024];
    FILE *f;
    unsigned long long v = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    char *p = strrchr(buf, ')') + 2;
    for (int field = 3; field < 22; field++)
        p = strchr(p, ' ') + 1;
    v = strtoull(p, NULL, 10);
    return v;
}

static void test_read_self(void **state)
{
    procs_info info;
    char comm[17] = {0};

    assert_int_equal(procs_read_info(getpid(), &info), 0);
    assert_int_equal(info.pid, getpid());
    assert_int_equal(info.ppid, getppid());
    assert_int_equal(info.uid, getuid());
    prctl(PR_GET_NAME, comm);
    assert_string_equal(info.comm, comm);
    assert_int_equal(info.start_ticks, stat_field22(getpid()));
    assert_false(info.kernel_thread);
    /* argv[0] is this program's path, joined with no trailing space */
    assert_non_null(strstr(info.cmdline, "test_procs"));
    assert_true(info.cmdline[strlen(info.cmdline) - 1] != ' ');
    assert_true(info.cgroup[0] == '/' || info.cgroup[0] == '\0');
    procs_info_clear(&info);
}

/* A child renames itself to something that looks like the end of the comm
 * field, then execs nothing: it waits for us on a pipe. */
static void test_awkward_comm(void **state)
{
    static const char *names[] = {"a) b (c) d", ") )", "x y", "((("};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int ready[2], hold[2];
        char b;
        procs_info info;

        assert_int_equal(pipe(ready), 0);
        assert_int_equal(pipe(hold), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(hold[1]);
            prctl(PR_SET_NAME, names[k]);
            if (write(ready[1], "r", 1) != 1 || read(hold[0], &b, 1) < 0)
                _exit(1);
            _exit(0);
        }
        assert_int_equal(read(ready[0], &b, 1), 1);
        assert_int_equal(procs_read_info(pid, &info), 0);
        assert_string_equal(info.comm, names[k]);
        assert_int_equal(info.ppid, getpid());
        assert_int_equal(info.start_ticks, stat_field22(pid));
        procs_info_clear(&info);
        close(hold[1]);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        close(ready[0]);
        close(ready[1]);
        close(hold[0]);
    }
}

/* The script of the shell below: it says it is running, then waits. */
#define SH_SCRIPT "echo; read x"
/* Its command line up to ARG: "sh -c echo; read x " */
#define SH_PREFIX "sh -c " SH_SCRIPT " "

/* Runs `sh -c SH_SCRIPT ARG`, which writes a line once it runs and then waits
 * on `read` until the pipe it reads closes, and reads its info after that
 * line: the exec is over by then.  Waiting for comm to become "sh" is not
 * enough: the kernel sets comm before it lays out the new argument area, and
 * in between /proc/PID/cmdline reads empty.  Returns the pid; *hold is the
 * pipe's write end, to close before waitpid. */
static pid_t sh_with_arg(const char *arg, procs_info *info, int *hold)
{
    int in[2], out[2];
    char c;

    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(in[1]);
        close(out[0]);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl("/bin/sh", "sh", "-c", SH_SCRIPT, arg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    assert_int_equal(read(out[0], &c, 1), 1); /* the shell runs its script */
    close(out[0]);
    assert_int_equal(procs_read_info(pid, info), 0);
    assert_string_equal(info->comm, "sh");
    *hold = in[1];
    return pid;
}

static void test_cmdline_joined(void **state)
{
    procs_info info;
    int hold;
    pid_t pid = sh_with_arg("a  b", &info, &hold);

    assert_string_equal(info.cmdline, SH_PREFIX "a  b");
    procs_info_clear(&info);
    close(hold);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* Anyone may give a process a command line of up to 2 MiB; the daemon keeps
 * the first PROCS_CMDLINE_MAX bytes of it. */
static void test_cmdline_cut(void **state)
{
    size_t n = 100000;
    char *arg = malloc(n + 1);
    procs_info info;
    int hold;

    assert_non_null(arg);
    memset(arg, 'z', n);
    arg[n] = '\0';
    pid_t pid = sh_with_arg(arg, &info, &hold);
    size_t len = strlen(info.cmdline);
    assert_int_equal(len, PROCS_CMDLINE_MAX);
    assert_memory_equal(info.cmdline, SH_PREFIX "zzz", strlen(SH_PREFIX) + 3);
    assert_string_equal(info.cmdline + len - 4, "z...");
    procs_info_clear(&info);
    close(hold);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    arg[PROCS_CMDLINE_MAX - strlen(SH_PREFIX)] = '\0'; /* SH_PREFIX + this = exactly the limit */
    pid = sh_with_arg(arg, &info, &hold);
    assert_int_equal(strlen(info.cmdline), PROCS_CMDLINE_MAX);
    assert_int_equal(info.cmdline[PROCS_CMDLINE_MAX - 1], 'z');
    procs_info_clear(&info);
    close(hold);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    free(arg);
}

static void test_vanished(void **state)
{
    procs_info info;
    pid_t pid = fork();

    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(procs_read_info(pid, &info), -ESRCH);
    assert_null(info.cmdline);
    assert_int_equal(procs_read_info(-1, &info), -ESRCH);
}

static void test_kernel_thread(void **state)
{
    procs_info info;

    /* kthreadd is pid 2 on every Linux since 2.6.22, in the initial pid
     * namespace; elsewhere there is no kernel thread to look at. */
    if (procs_read_info(2, &info) < 0 || strcmp(info.comm, "kthreadd") != 0) {
        procs_info_clear(&info);
        skip();
    }
    assert_true(info.kernel_thread);
    assert_string_equal(info.cmdline, "");
    procs_info_clear(&info);
    assert_int_equal(procs_read_info(getpid(), &info), 0);
    assert_false(info.kernel_thread);
    procs_info_clear(&info);
}

/* The stat-only read sees what the full read sees, for a process, a kernel
 * thread and a pid that is gone, and allocates nothing. */
static void test_read_stat_agrees(void **state)
{
    procs_info full, st;
    pid_t pids[] = {getpid(), getppid(), 1, 2};

    for (size_t k = 0; k < sizeof(pids) / sizeof(pids[0]); k++) {
        if (procs_read_info(pids[k], &full) < 0)
            continue;
        assert_int_equal(procs_read_stat(pids[k], &st), 0);
        assert_int_equal(st.pid, full.pid);
        assert_int_equal(st.ppid, full.ppid);
        assert_int_equal(st.start_ticks, full.start_ticks);
        assert_string_equal(st.comm, full.comm);
        assert_int_equal(st.kernel_thread, full.kernel_thread);
        assert_null(st.cmdline);
        assert_null(st.cgroup);
        procs_info_clear(&full);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(procs_read_stat(pid, &st), -ESRCH);
    assert_int_equal(procs_read_stat(0, &st), -ESRCH);
}

static void test_list_and_boot_id(void **state)
{
    pid_t *pids;
    size_t n;
    bool self = false;
    char id[37], id2[37];

    assert_int_equal(procs_list(&pids, &n), 0);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        self |= pids[i] == getpid();
        assert_true(pids[i] > 0);
    }
    assert_true(self);
    free(pids);
    assert_int_equal(procs_boot_id(id), 0);
    assert_int_equal(strlen(id), 36);
    assert_true(id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-');
    assert_int_equal(procs_boot_id(id2), 0);
    assert_string_equal(id, id2);
}

/* A thread's tid shows up in the connector's raw fork/exit events, which
 * procs_watch_read must drop. */
static void *thread_tid(void *arg)
{
    *(pid_t *)arg = (pid_t)syscall(SYS_gettid);
    return NULL;
}

/* Opens the connector, or skips the test where this user may not (freeing
 * ev, which may be NULL, on the way). */
static procs_watch *watch_or_skip(void *ev)
{
    procs_watch *w;
    char err[UTIL_ERRLEN];
    int r = procs_watch_open(&w, err, sizeof(err));

    if (r == -EPERM) {
        print_message("skipped: %s\n", err);
        free(ev);
        skip();
    }
    assert_int_equal(r, 0);
    return w;
}

/* Collects events until one matches (kind, pid) or 5 s pass.  *overrun (may
 * be NULL) is set when the socket overran on the way. */
static size_t collect_until(procs_watch *w, procs_event *all, size_t cap, size_t n,
                            procs_event_kind kind, pid_t pid, bool *found, bool *overrun)
{
    struct timespec t0, now;

    *found = false;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        size_t got;
        struct pollfd p = {.fd = procs_watch_fd(w), .events = POLLIN};
        poll(&p, 1, 100);
        int r = procs_watch_read(w, all + n, cap - n, &got);
        assert_true(r == 0 || r == -ENOBUFS);
        if (r == -ENOBUFS && overrun)
            *overrun = true;
        for (size_t i = n; i < n + got; i++)
            if (all[i].kind == kind && all[i].pid == pid)
                *found = true;
        n += got;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (*found || n == cap || now.tv_sec - t0.tv_sec > 5)
            return n;
    }
}

static void test_connector(void **state)
{
    enum { CAP = 1 << 16 };
    procs_watch *w;
    procs_event *ev = calloc(CAP, sizeof(*ev));
    size_t n = 0;
    bool found;
    int status;
    pid_t tid = 0;
    pthread_t th;

    assert_non_null(ev);
    w = watch_or_skip(ev);

    /* a thread: raw FORK/EXIT events with child_pid != tgid */
    assert_int_equal(pthread_create(&th, NULL, thread_tid, &tid), 0);
    assert_int_equal(pthread_join(th, NULL), 0);

    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(WEXITSTATUS(status), 3);
    n = collect_until(w, ev, CAP, n, PROCS_EV_EXIT, pid, &found, NULL);
    assert_true(found);

    int fork_i = -1, exec_i = -1, exit_i = -1;
    for (size_t i = 0; i < n; i++) {
        assert_true(ev[i].pid != tid); /* nothing about the thread */
        if (ev[i].pid != pid)
            continue;
        if (ev[i].kind == PROCS_EV_FORK) {
            fork_i = (int)i;
            assert_int_equal(ev[i].parent, getpid());
        } else if (ev[i].kind == PROCS_EV_EXEC) {
            exec_i = (int)i;
        } else if (ev[i].kind == PROCS_EV_EXIT) {
            exit_i = (int)i;
            assert_int_equal(ev[i].exit_code, status);
        }
    }
    print_message("%zu events; child %d: fork #%d exec #%d exit #%d; thread %d silent\n", n,
                  (int)pid, fork_i, exec_i, exit_i, (int)tid);
    assert_true(fork_i >= 0 && exec_i > fork_i && exit_i > exec_i);
    procs_watch_close(w);
    free(ev);
}

/* A child that renames itself and exits at once: the connector's comm
 * event carries the new name, which /proc can no longer tell; a thread's
 * rename is not the process's and is dropped. */
static void *rename_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "wp_thread_name");
    return NULL;
}

static void test_connector_comm(void **state)
{
    enum { CAP = 4096 };
    procs_watch *w;
    procs_event *ev = calloc(CAP, sizeof(*ev));
    bool found;
    int status;

    (void)state;
    assert_non_null(ev);
    w = watch_or_skip(ev);
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t th;
        if (pthread_create(&th, NULL, rename_thread, NULL) == 0)
            pthread_join(th, NULL);
        prctl(PR_SET_NAME, "wp_renamed_kid");
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    size_t n = collect_until(w, ev, CAP, 0, PROCS_EV_EXIT, pid, &found, NULL);
    assert_true(found);
    int renames = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != PROCS_EV_COMM)
            continue;
        assert_string_not_equal(ev[i].comm, "wp_thread_name");
        if (ev[i].pid == pid) {
            assert_string_equal(ev[i].comm, "wp_renamed_kid");
            renames++;
        }
    }
    assert_int_equal(renames, 1);
    procs_watch_close(w);
    free(ev);
}

/* A child that renames itself and exits; its pid. */
static pid_t renamed_child(void)
{
    int status;
    pid_t pid = fork();

    if (pid == 0) {
        prctl(PR_SET_NAME, "wp_filter_kid");
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return pid;
}

/* procs_watch_filter(w, false): the kernel drops every exit (the bpf
 * backend learns of exits from its own hook) and keeps forks and renames;
 * with `exits` again, exits come back. */
static void test_connector_filter(void **state)
{
    enum { CAP = 1 << 14 };
    procs_watch *w;
    procs_event *ev = calloc(CAP, sizeof(*ev));
    bool found;

    (void)state;
    assert_non_null(ev);
    w = watch_or_skip(ev);
    assert_int_equal(procs_watch_filter(w, false), 0);
    pid_t a = renamed_child(), b = renamed_child();
    /* b's rename follows a's exit in time: once it is here, a's exit (and
     * every exit before) was dropped, not late. */
    size_t n = collect_until(w, ev, CAP, 0, PROCS_EV_COMM, b, &found, NULL);
    assert_true(found);
    int forks = 0, renames = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_not_equal(ev[i].kind, PROCS_EV_EXIT);
        forks += ev[i].kind == PROCS_EV_FORK && (ev[i].pid == a || ev[i].pid == b);
        renames += ev[i].kind == PROCS_EV_COMM && (ev[i].pid == a || ev[i].pid == b);
    }
    assert_int_equal(forks, 2);
    assert_int_equal(renames, 2);
    assert_int_equal(procs_watch_filter(w, true), 0);
    pid_t c = renamed_child();
    collect_until(w, ev, CAP, 0, PROCS_EV_EXIT, c, &found, NULL);
    assert_true(found);
    procs_watch_close(w);
    free(ev);
}

/* KIDS children at once, then drains their events: the first read with a
 * tiny max, the rest until the last child's exit.  Counts the children's
 * forks and exits; false when the socket overran on the way, or other
 * processes' events filled ev before the last exit came. */
enum { DRAIN_KIDS = 200, DRAIN_CAP = 1 << 16 };
static bool drain_once(procs_watch *w, procs_event *ev, int *forks, int *exits)
{
    pid_t kids[DRAIN_KIDS];
    size_t n, got;
    bool found, overrun = false;
    int r;

    for (int i = 0; i < DRAIN_KIDS; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            _exit(0);
    }
    for (int i = 0; i < DRAIN_KIDS; i++)
        assert_int_equal(waitpid(kids[i], NULL, 0), kids[i]);
    /* a tiny max first: the rest stays queued for the next call */
    r = procs_watch_read(w, ev, 3, &got);
    if (r == -ENOBUFS)
        return false;
    assert_int_equal(r, 0);
    assert_int_equal(got, 3);
    n = collect_until(w, ev, DRAIN_CAP, got, PROCS_EV_EXIT, kids[DRAIN_KIDS - 1], &found, &overrun);
    if (overrun || (!found && n == DRAIN_CAP)) /* others' events filled ev first */
        return false;
    assert_true(found);
    *forks = *exits = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < DRAIN_KIDS; k++)
            if (ev[i].pid == kids[k]) {
                *forks += ev[i].kind == PROCS_EV_FORK;
                *exits += ev[i].kind == PROCS_EV_EXIT;
            }
    print_message("%zu events drained, %d forks and %d exits of %d children\n", n, *forks, *exits,
                  DRAIN_KIDS);
    return true;
}

/* Many processes at once: one read drains many events, and `max` is
 * respected when more are waiting.  The connector reports every process of
 * the machine: another program's burst (a test spawning thousands) can
 * overrun the socket (the kernel says so: -ENOBUFS) or fill ev first;
 * then the round proves nothing and runs again, up to 5 times. */
static void test_connector_drain(void **state)
{
    procs_watch *w;
    procs_event *ev = calloc(DRAIN_CAP, sizeof(*ev));
    int forks = 0, exits = 0, round = 0;

    assert_non_null(ev);
    w = watch_or_skip(ev);
    while (!drain_once(w, ev, &forks, &exits)) {
        size_t got;
        print_message("round %d: other processes' events overran the socket or ev, again\n", round);
        assert_true(++round < 5);
        /* Empty the socket first: while it stays full the kernel drops new
         * events without another -ENOBUFS. */
        while (procs_watch_read(w, ev, DRAIN_CAP, &got) == -ENOBUFS || got > 0)
            ;
    }
    assert_int_equal(forks, DRAIN_KIDS);
    assert_int_equal(exits, DRAIN_KIDS);
    procs_watch_close(w);
    free(ev);
}

/* n short-lived children, one after the other. vfork: fork copies ASan's
 * shadow mappings, too slow for thousands of children. */
static void spawn_and_reap(int n)
{
    for (volatile int i = 0; i < n; i++) {
        pid_t kid = vfork();
        if (kid == 0)
            _exit(0);
        assert_true(kid > 0);
        assert_int_equal(waitpid(kid, NULL, 0), kid);
    }
}

/* More births than any receive queue holds: the overrun is reported as
 * -ENOBUFS (so the caller rescans /proc), and the watch keeps working. */
static void test_connector_overrun(void **state)
{
    enum { KIDS = 8000 };
    procs_watch *w;
    procs_event ev[256];
    size_t got;
    int r = 0;
    bool overrun = false;

    w = watch_or_skip(NULL);
    spawn_and_reap(KIDS);
    while ((r = procs_watch_read(w, ev, 256, &got)) == -ENOBUFS || got > 0)
        overrun |= r == -ENOBUFS;
    assert_int_equal(r, 0);
    print_message("%d children without reading: overrun %s\n", KIDS,
                  overrun ? "reported" : "not reported");
    assert_true(overrun);
    /* still listening afterwards */
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    assert_int_equal(waitpid(kid, NULL, 0), kid);
    procs_event *all = calloc(1 << 16, sizeof(*all));
    bool found;
    collect_until(w, all, 1 << 16, 0, PROCS_EV_EXIT, kid, &found, NULL);
    assert_true(found);
    free(all);
    procs_watch_close(w);
}

/* SIGALRM for a process that is pid 1 of its namespace: it ignores signals
 * it has no handler for. */
static void on_alarm(int sig)
{
    _exit(3);
}

/* In a new pid namespace the kernel ignores the listen request, so opening
 * gives up after 0.5 s - by the clock, while other processes' events keep
 * coming (another listener has the connector on): counted in quiet polls,
 * the wait never ended on a busy machine.  Returns the seconds it took. */
static double open_in_pid_namespace(int *result)
{
    int p[2];
    struct {
        int r;
        double s;
    } got = {0, -1};

    assert_int_equal(pipe(p), 0);
    pid_t kid = fork();
    if (kid == 0) {
        close(p[0]);
        if (unshare(CLONE_NEWPID) < 0)
            _exit(77);
        pid_t inner = fork(); /* the first process of the namespace */
        if (inner == 0) {
            procs_watch *w = NULL;
            char err[UTIL_ERRLEN];
            uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
            signal(SIGALRM, on_alarm); /* a wait that never ends fails the test, */
            alarm(30);                 /* not the run */
            got.r = procs_watch_open(&w, err, sizeof(err));
            got.s = (double)(util_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
            procs_watch_close(w);
            _exit(write(p[1], &got, sizeof(got)) == (ssize_t)sizeof(got) ? 0 : 1);
        }
        int st;
        _exit(waitpid(inner, &st, 0) == inner && WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    close(p[1]);
    int st;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        close(p[0]);
        return -1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("procs_watch_open in a pid namespace: no answer in 30 s (exit status %d)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    assert_int_equal(read(p[0], &got, sizeof(got)), sizeof(got));
    close(p[0]);
    *result = got.r;
    return got.s;
}

static void test_connector_namespace_busy(void **state)
{
    procs_watch *w;
    int r = 0;

    w = watch_or_skip(NULL); /* turns the connector on */
    pid_t churn = fork();    /* fork and exit events every 5 ms, gaps well under the 50 ms polls */
    if (churn == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, whatever fails */
        for (int i = 0; i < 4000; i++) {  /* and within 20-30 s in any case */
            pid_t k = vfork();
            if (k == 0)
                _exit(0);
            if (k > 0)
                waitpid(k, NULL, 0);
            usleep(5000);
        }
        _exit(0);
    }
    double s = open_in_pid_namespace(&r);
    kill(churn, SIGKILL);
    assert_int_equal(waitpid(churn, NULL, 0), churn);
    procs_watch_close(w);
    if (s < 0) {
        print_message("skipped: cannot make a pid namespace (needs root)\n");
        skip();
    }
    print_message("opened in a pid namespace: %d after %.2f s\n", r, s);
    /* 0 on kernels before 6.6, which answer any namespace */
    assert_true(r == -EPERM || r == 0);
    assert_true(s < 5);
}

/* Without CAP_NET_ADMIN, kernels before 6.6 refuse the listen request: the
 * watch must then fail with -EPERM and a reason naming the capability, not
 * come back silently empty. Later kernels let anyone listen: then the watch
 * must really deliver events. Run as root: a child drops to nobody first. */
static void test_connector_unprivileged(void **state)
{
    int p[2];
    char msg[UTIL_ERRLEN + 16] = {0};

    if (geteuid() != 0) {
        print_message("skipped: dropping privileges needs root\n");
        skip();
    }
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        procs_watch *w;
        char err[UTIL_ERRLEN] = "";
        procs_event ev[4096];
        bool found = false;
        if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
            _exit(2);
        int r = procs_watch_open(&w, err, sizeof(err));
        if (r == 0) {
            pid_t kid = fork();
            if (kid == 0)
                _exit(0);
            waitpid(kid, NULL, 0);
            size_t n = collect_until(w, ev, 4096, 0, PROCS_EV_EXIT, kid, &found, NULL);
            snprintf(err, sizeof(err), "listening works (%zu events, child exit %s)", n,
                     found ? "seen" : "NOT seen");
            procs_watch_close(w);
        }
        dprintf(p[1], "%d %s", r == 0 && !found ? -EIO : r, err);
        _exit(0);
    }
    close(p[1]);
    assert_true(read(p[0], msg, sizeof(msg) - 1) > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(p[0]);
    print_message("as nobody: %s\n", msg);
    if (atoi(msg) == 0)
        return;
    assert_int_equal(atoi(msg), -EPERM);
    assert_non_null(strstr(msg, "CAP_NET_ADMIN"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_self),
        cmocka_unit_test(test_awkward_comm),
        cmocka_unit_test(test_cmdline_joined),
        cmocka_unit_test(test_cmdline_cut),
        cmocka_unit_test(test_vanished),
        cmocka_unit_test(test_kernel_thread),
        cmocka_unit_test(test_list_and_boot_id),
        cmocka_unit_test(test_connector),
        cmocka_unit_test(test_connector_drain),
        cmocka_unit_test(test_connector_overrun),
        cmocka_unit_test(test_connector_unprivileged),
        cmocka_unit_test(test_connector_namespace_busy),
        cmocka_unit_test(test_read_stat_agrees),
        cmocka_unit_test(test_connector_comm),
        cmocka_unit_test(test_connector_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
