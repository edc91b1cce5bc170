/* rank_measure: one measurement of one command for `wattprof rank
 * --measure` — its wall time, its energy (through `wattprof run --json`, so
 * RAPL or the model decide exactly as they do for `run`), or a number it
 * prints itself. */
#include "rank_cli.h"

#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The wattprof binary itself, which measures energy with its `run`.
 * WATTPROF_SELF overrides it for a build whose `run` lives elsewhere. */
static const char *self_path(void)
{
    const char *env = getenv("WATTPROF_SELF");

    return env && *env ? env : "/proc/self/exe";
}

/* The descriptor on which `wattprof run` writes its report for us, so the
 * command's own stdout and stderr stay out of it. */
#define REPORT_FD 3
#define STR_(x) #x
#define STR(x) STR_(x)

/* In the child: stdin and stdout on /dev/null, `pipe_wr` (if >= 0) as
 * descriptor `target`, then exec argv. Never returns. */
static void child_exec(char *const argv[], int pipe_wr, int target)
{
    int null_fd = open("/dev/null", O_RDWR);

    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
    }
    if (pipe_wr >= 0) {
        if (pipe_wr == target)
            fcntl(pipe_wr, F_SETFD, 0); /* dup2 onto itself keeps CLOEXEC */
        else
            dup2(pipe_wr, target);
    }
    execv(argv[0], argv);
    _exit(127);
}

/* Reads all of fd into a NUL-terminated malloc'd buffer. */
static int read_all(int fd, char **out)
{
    size_t used = 0, cap = 4096;
    char *buf = malloc(cap);

    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t got;
        if (used + 1 == cap) {
            char *n = realloc(buf, cap *= 2);
            if (!n) {
                free(buf);
                return -ENOMEM;
            }
            buf = n;
        }
        got = read(fd, buf + used, cap - used - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
    }
    buf[used] = '\0';
    *out = buf;
    return 0;
}

/* Runs argv, capturing what it writes to descriptor `target` when
 * `captured` is not NULL; *status gets the wait status and *seconds the wall
 * time from fork to reaping. */
static int spawn(char *const argv[], int target, char **captured, int *status, double *seconds)
{
    int pipefd[2] = {-1, -1}, r = 0;
    uint64_t t0;
    pid_t pid;

    if (captured && pipe2(pipefd, O_CLOEXEC) < 0)
        return -errno;
    t0 = util_now_ns(CLOCK_MONOTONIC);
    pid = fork();
    if (pid < 0) {
        r = -errno;
        if (captured) {
            close(pipefd[0]);
            close(pipefd[1]);
        }
        return r;
    }
    if (pid == 0)
        child_exec(argv, pipefd[1], target);
    if (captured) {
        close(pipefd[1]);
        r = read_all(pipefd[0], captured);
        close(pipefd[0]);
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    *seconds = (double)(util_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    if (r < 0 && captured)
        *captured = NULL;
    return r;
}

static int check_status(const char *cmd, int status, char *err, size_t errlen)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        return util_err(err, errlen, -ECHILD, "command '%s' was killed by signal %d (%s)", cmd,
                        WTERMSIG(status), strsignal(WTERMSIG(status)));
    return util_err(err, errlen, -ECHILD, "command '%s' failed with exit status %d", cmd,
                    WEXITSTATUS(status));
}

/* The number on the last non-empty line of text. */
static int last_number(const char *cmd, char *text, double *out, char *err, size_t errlen)
{
    char *end = text + strlen(text), *line;

    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        *--end = '\0';
    line = strrchr(text, '\n');
    line = line ? line + 1 : text;
    if (util_parse_double(line, out) < 0 || *out < 0)
        return util_err(err, errlen, -EINVAL,
                        "command '%s' printed '%.40s' where a non-negative number was expected",
                        cmd, line);
    return 0;
}

static int energy_from_json(const char *cmd, const char *text, double *out, char source[16],
                            char *err, size_t errlen)
{
    json_object *j = json_tokener_parse(text), *e, *src;
    int r = 0;

    if (!j || !json_object_object_get_ex(j, "energy_j", &e) ||
        !(json_object_is_type(e, json_type_double) || json_object_is_type(e, json_type_int)))
        r = util_err(err, errlen, -EINVAL,
                     "command '%s': `wattprof run --json` gave no number \"energy_j\"", cmd);
    else
        *out = json_object_get_double(e);
    if (r == 0 && json_object_object_get_ex(j, "energy_source", &src))
        snprintf(source, 16, "%s", json_object_get_string(src));
    json_object_put(j);
    return r;
}

int rank_measure_once(const char *cmd, enum rank_metric metric, double *out, char source[16],
                      char *err, size_t errlen)
{
    char ignored[16];
    char *sh[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    char *run[] = {
        (char *)self_path(), "run", "--json",    "--output", "/dev/fd/" STR(REPORT_FD), "--",
        "/bin/sh",           "-c",  (char *)cmd, NULL};
    char *text = NULL;
    double seconds = 0;
    int status = 0, r;

    if (metric == RANK_METRIC_TIME)
        r = spawn(sh, -1, NULL, &status, &seconds);
    else if (metric == RANK_METRIC_OUTPUT)
        r = spawn(sh, STDOUT_FILENO, &text, &status, &seconds);
    else
        r = spawn(run, REPORT_FD, &text, &status, &seconds);
    if (r < 0)
        r = util_err(err, errlen, r, "command '%s': %s", cmd, strerror(-r));
    if (r == 0)
        r = check_status(cmd, status, err, errlen);
    if (r == 0 && metric == RANK_METRIC_TIME)
        *out = seconds;
    else if (r == 0 && metric == RANK_METRIC_OUTPUT)
        r = last_number(cmd, text, out, err, errlen);
    else if (r == 0)
        r = energy_from_json(cmd, text, out, source ? source : ignored, err, errlen);
    if (r == 0 && source && metric != RANK_METRIC_ENERGY)
        snprintf(source, 16, "%s", metric == RANK_METRIC_TIME ? "wall clock" : "output");
    free(text);
    return r;
}
