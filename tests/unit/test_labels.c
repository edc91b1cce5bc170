/* The unit and job labels of lib/sample/labels.c: cgroup paths as systemd
 * and Slurm lay them out, environment blocks, and /proc/PID/environ of a
 * real child started with a job variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "sample/sample.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_unit(void **state)
{
    static const char *const cases[][2] = {
        {"/system.slice/ssh.service", "ssh.service"},
        {"/system.slice/slurmstepd.scope/job_42/step_0/user/task_0", "slurmstepd.scope"},
        {"/user.slice/user-1000.slice/user@1000.service/app.slice/a.scope", "user@1000.service"},
        {"/user.slice/user-1000.slice/session-3.scope", "session-3.scope"},
        {"/system.slice/docker-0123.scope", "docker-0123.scope"},
        {"/init.scope", "init.scope"},
        {"/", ""},
        {"", ""},
        {"/test", ""},
        {"/user.slice", ""},
        {"/x/.service", ""}, /* a suffix alone is no unit name */
    };
    char out[LABELS_UNIT_MAX];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        labels_unit(cases[i][0], out);
        assert_string_equal(out, cases[i][1]);
    }
    labels_unit(NULL, out);
    assert_string_equal(out, "");
}

static void test_unit_too_long(void **state)
{
    char path[400] = "/system.slice/", out[LABELS_UNIT_MAX];

    memset(path + strlen(path), 'a', 300);
    strcpy(path + strlen("/system.slice/") + 300, ".service");
    labels_unit(path, out);
    assert_int_equal(strlen(out), LABELS_UNIT_MAX - 1);
}

static void test_job_cgroup(void **state)
{
    static const char *const cases[][2] = {
        {"/system.slice/slurmstepd.scope/job_42/step_0/user/task_0", "42"},
        {"/slurm/uid_1000/job_123456/step_batch", "123456"},
        {"/system.slice/slurmstepd.scope/job_/step_0", ""},
        {"/system.slice/slurmstepd.scope/job_4x/step_0", ""},
        {"/system.slice/myjob_42.service", ""},
        {"/user.slice/user-1000.slice/session-3.scope", ""},
        {"", ""},
    };
    char out[LABELS_JOB_MAX];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        labels_job_cgroup(cases[i][0], out);
        assert_string_equal(out, cases[i][1]);
    }
}

static void test_env_block(void **state)
{
    static const char env[] = "HOME=/root\0PBS_JOBID=7.server\0SLURM_JOB_ID=99\0EMPTY=\0";
    char *both[] = {"SLURM_JOB_ID", "PBS_JOBID"}, *pbs[] = {"PBS_JOBID"}, *empty[] = {"EMPTY"},
         *prefix[] = {"SLURM_JOB"}, out[LABELS_JOB_MAX];

    /* The configured order decides, not the order in the block. */
    labels_job_env_block(env, sizeof(env) - 1, both, 2, out);
    assert_string_equal(out, "99");
    labels_job_env_block(env, sizeof(env) - 1, pbs, 1, out);
    assert_string_equal(out, "7.server");
    labels_job_env_block(env, sizeof(env) - 1, empty, 1, out);
    assert_string_equal(out, "");
    labels_job_env_block(env, sizeof(env) - 1, prefix, 1, out);
    assert_string_equal(out, "");
    /* A block cut in the middle of a value (no final NUL). */
    static const char cut[] = "A=1\0SLURM_JOB_ID=99";
    labels_job_env_block(cut, sizeof(cut) - 2, both, 1, out);
    assert_string_equal(out, "9");
}

static void test_environ_of_a_child(void **state)
{
    char *names[] = {"PBS_JOBID", "SLURM_JOB_ID"}, out[LABELS_JOB_MAX];
    int pipefd[2], status;
    char c;
    pid_t pid;

    assert_int_equal(pipe(pipefd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *argv[] = {"sleep", "30", NULL}, *envp[] = {"A=1", "SLURM_JOB_ID=4242", NULL};
        close(pipefd[0]);
        /* close-on-exec: the parent's read returns once exec is done. */
        fcntl(pipefd[1], F_SETFD, FD_CLOEXEC);
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    close(pipefd[1]);
    assert_int_equal(read(pipefd[0], &c, 1), 0);
    close(pipefd[0]);
    /* The close-on-exec descriptor goes before exec has set up the new
     * stack, and /proc/PID/environ reads empty until it has: wait for it. */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    for (int i = 0; i < 2000; i++) {
        int fd = open(path, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0)
            break;
        usleep(1000);
    }
    assert_int_equal(labels_job_environ(pid, names, 2, out), 0);
    assert_string_equal(out, "4242");
    assert_int_equal(labels_job_environ(pid, names, 1, out), 0);
    assert_string_equal(out, "");
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    assert_int_equal(labels_job_environ(pid, names, 2, out), -ESRCH);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit),
        cmocka_unit_test(test_unit_too_long),
        cmocka_unit_test(test_job_cgroup),
        cmocka_unit_test(test_env_block),
        cmocka_unit_test(test_environ_of_a_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
