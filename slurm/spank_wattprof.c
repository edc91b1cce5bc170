/* spank_wattprof: Slurm's view of wattprof, a SPANK plugin.
 *
 * `srun --energy` (or sbatch/salloc --energy): when the step ends, srun asks
 * the wattprofd of the node it runs on for the energy of the job's
 * processes since the step began and prints one line on its stderr, the
 * job's stderr. When the last task of a step on a node exits, slurmstepd
 * (as root, while the job is still running: slurmctld refuses updates of
 * finished jobs, so the job epilog and the step's end are too late) asks its node's wattprofd for
 * the job's energy there so far and stores it in the job's AdminComment ("wattprof:NODE=JOULES J";
 * the last step's is the job's total), which `scontrol show job` and
 * `sacct --format=AdminComment` show: unlike Comment, users cannot write
 * it, so it can be trusted for accounting, and it needs no accounting
 * storage plugin of its own. A job on several nodes has one node's figure
 * there; the cluster-wide sum is the exporter's (docs/slurm.md).
 *
 * Nothing here can make a job fail: every hook returns success, an absent
 * daemon is one line ("wattprof: no energy report: ..."), and the calls
 * time out. Enabled by one line in plugstack.conf:
 *   optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_wattprof.so [socket=PATH]
 */
#include "rpc/rpc.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

SPANK_PLUGIN(wattprof, 1);

#define WP_DEFAULT_SOCKET "/run/wattprof/io.wattprof.sock"
#define WP_TIMEOUT_MS 5000
/* The daemon's store makes a second visible once it has ended and a query
 * flushes at most a second late: the last ticks of a step that just ended
 * are in after this long. */
#define WP_SETTLE_US 1500000
#define WP_SCONTROL_TIMEOUT_S 10

/* One step's state in srun (local context); a plugin instance serves one. */
static int wp_energy;
static time_t wp_step_start;
static uint32_t wp_job, wp_step;
static uint32_t wp_tasks_exited; /* in slurmstepd */

static int wp_opt(int val, const char *optarg, int remote)
{
    wp_energy = 1;
    return 0;
}

static struct spank_option wp_option = {
    "energy",
    NULL,
    "report the step's energy on stderr when it ends, and keep the job's in its AdminComment "
    "(wattprof)",
    0,
    0,
    wp_opt};

static const char *wp_socket(int ac, char **av)
{
    for (int i = 0; i < ac; i++)
        if (strncmp(av[i], "socket=", 7) == 0)
            return av[i] + 7;
    return WP_DEFAULT_SOCKET;
}

/* The job's energy on this node since `since` (0: all), from ListJobs:
 * *found 0 when the daemon saw no process of it. */
static int wp_job_energy(const char *socket, uint32_t job, time_t since, double *energy_j,
                         double *cpu_s, int *found, char *err, size_t errlen)
{
    rpc_client *c = NULL;
    rpc_reply_msg r = {0};
    json_object *p = json_object_new_object(), *jobs = NULL;
    char id[16];
    int ret;

    snprintf(id, sizeof(id), "%u", job);
    json_object_object_add(p, "job", json_object_new_string(id));
    if (since > 0)
        json_object_object_add(p, "since", json_object_new_double((double)since));
    *found = 0;
    ret = rpc_client_connect(socket, &c, err, errlen);
    if (ret == 0)
        ret = rpc_client_call(c, "io.wattprof.Monitor.ListJobs", p, 0, WP_TIMEOUT_MS, err, errlen);
    if (ret == 0)
        ret = rpc_client_read(c, WP_TIMEOUT_MS, &r, err, errlen);
    if (ret == 0 && r.error)
        ret = util_err(err, errlen, -EPROTO, "%s answered %s", socket, r.error);
    if (ret == 0 && json_object_object_get_ex(r.params, "jobs", &jobs) &&
        json_object_array_length(jobs) > 0) {
        json_object *j = json_object_array_get_idx(jobs, 0);
        *energy_j = json_object_get_double(json_object_object_get(j, "energy_j"));
        *cpu_s = json_object_get_double(json_object_object_get(j, "cpu_s"));
        *found = 1;
    }
    rpc_reply_msg_clear(&r);
    rpc_client_free(c);
    json_object_put(p);
    return ret;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context();

    if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE)
        spank_option_register(sp, &wp_option);
    return ESPANK_SUCCESS;
}

/* srun, once the step has its ids. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    if (!wp_energy)
        return ESPANK_SUCCESS;
    wp_step_start = time(NULL);
    if (spank_get_item(sp, S_JOB_ID, &wp_job) != ESPANK_SUCCESS)
        wp_job = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &wp_step) != ESPANK_SUCCESS)
        wp_step = 0;
    return ESPANK_SUCCESS;
}

static void wp_step_report(int ac, char **av)
{
    const char *socket = wp_socket(ac, av);
    char err[UTIL_ERRLEN], host[256] = "";
    double e = 0, cpu = 0;
    int found;

    usleep(WP_SETTLE_US);
    gethostname(host, sizeof(host) - 1);
    if (wp_job_energy(socket, wp_job, wp_step_start, &e, &cpu, &found, err, sizeof(err)) < 0) {
        fprintf(stderr, "wattprof: no energy report for job %u step %u: %s\n", wp_job, wp_step,
                err);
        return;
    }
    if (!found) {
        fprintf(stderr, "wattprof: job %u step %u: wattprofd on %s saw no process of the job\n",
                wp_job, wp_step, host);
        return;
    }
    double wall = difftime(time(NULL), wp_step_start) - WP_SETTLE_US / 1e6;
    fprintf(
        stderr,
        "wattprof: job %u step %u on %s: %.3f J (%.6f Wh), %.2f CPU s, mean %.2f W over %.0f s\n",
        wp_job, wp_step, host, e, e / 3600, cpu, wall > 0 ? e / wall : 0, wall);
}

/* Runs scontrol (argv) for at most WP_SCONTROL_TIMEOUT_S (an epilog must
 * not hang on a slow controller); the start of what it said on failure in
 * `said`. */
static int wp_run(char *const argv[], char *said, size_t saidlen)
{
    int out[2], status = 0, ret = -ETIMEDOUT;
    size_t got = 0;
    pid_t pid;

    said[0] = '\0';
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if ((pid = fork()) < 0) {
        ret = -errno;
        close(out[0]);
        close(out[1]);
        return ret;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0)
            dup2(fd, STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    for (int i = 0; i < WP_SCONTROL_TIMEOUT_S * 10; i++) {
        ssize_t n = got + 1 < saidlen ? read(out[0], said + got, saidlen - 1 - got) : 0;
        if (n > 0)
            got += (size_t)n;
        said[got] = '\0';
        if (waitpid(pid, &status, WNOHANG) == pid) {
            ret = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
            break;
        }
        usleep(100000);
    }
    if (ret == -ETIMEDOUT) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    close(out[0]);
    said[strcspn(said, "\n")] = '\0';
    return ret;
}

/* In slurmstepd, as root, when the last task of a step of a job with
 * --energy exits on this node: the job's energy here so far into its
 * AdminComment. */
static void wp_keep_job_total(spank_t sp, int ac, char **av)
{
    char err[UTIL_ERRLEN], host[256] = "", jobarg[32], comment[512];
    double e = 0, cpu = 0;
    uint32_t job = 0;
    int found;

    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || !job)
        return;
    usleep(WP_SETTLE_US);
    gethostname(host, sizeof(host) - 1);
    if (wp_job_energy(wp_socket(ac, av), job, 0, &e, &cpu, &found, err, sizeof(err)) < 0) {
        slurm_info("wattprof: job %u: no energy to keep: %s", job, err);
        return;
    }
    if (!found)
        return;
    snprintf(jobarg, sizeof(jobarg), "JobId=%u", job);
    snprintf(comment, sizeof(comment), "AdminComment=wattprof:%s=%.3f J", host, e);
    char *argv[] = {"scontrol", "update", jobarg, comment, NULL}, said[256];
    int r = wp_run(argv, said, sizeof(said));
    if (r < 0)
        slurm_info("wattprof: job %u: scontrol update %s failed: %s%s%s", job, comment,
                   strerror(-r), said[0] ? ": " : "", said);
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    uint32_t tasks = 0;

    if (!wp_energy || spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS)
        return ESPANK_SUCCESS;
    if (++wp_tasks_exited == tasks)
        wp_keep_job_total(sp, ac, av);
    return ESPANK_SUCCESS;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (wp_energy && spank_context() == S_CTX_LOCAL && wp_job)
        wp_step_report(ac, av);
    return ESPANK_SUCCESS;
}
