/* rapl-probe: reads the RAPL zones through lib/sample (rapl_open, rapl_read,
 * rapl_sum_domains), for tests that run it inside a fake tree
 * (tests/helpers/fake-powercap) or on a real machine.
 *
 * Usage:
 *   rapl-probe list
 *       "state TEXT", "n N", then one line per zone:
 *       "zone ID NAME DOMAIN PACKAGE DEPTH MAX_ENERGY_RANGE_UJ"
 *   rapl-probe delta CMD [ARGS...]
 *       opens the zones, runs CMD, reads once, and prints "ID UJ" per zone:
 *       the energy in whole microjoules that rapl_read saw across CMD (CMD
 *       may rewrite energy_uj files to stage a wrap)
 *   rapl-probe measure SECONDS [--hz HZ] [--domains LIST]
 *       reads every 1/HZ s (default 50) for SECONDS and prints the totals:
 *         start_ns NS, end_ns NS   CLOCK_MONOTONIC just after the first
 *                                  read (the one that sets the starting
 *                                  values, after rapl_open) and just after
 *                                  the last
 *         elapsed_s S
 *         ID J                     per zone
 *         sum J                    rapl_sum_domains over LIST (default
 *                                  "package,dram")
 *         power_w W                sum / elapsed_s
 *
 * Exit status: 0; 1 when delta or measure find no zones (the state, which
 * says why, goes to stderr; list prints it and exits 0), or a read or CMD
 * failed; 2 for bad arguments. */
#include "sample/sample.h"
#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "rapl-probe: %s: '%s' (see the top of tests/helpers/rapl-probe.c)\n", what,
            arg);
    return 2;
}

static int probe_list(const rapl *r)
{
    printf("state %s\nn %zu\n", r->state, r->n);
    for (size_t i = 0; i < r->n; i++) {
        const rapl_zone *z = &r->zone[i];
        printf("zone %s %s %s %u %" PRIu32 " %" PRIu64 "\n", z->id, z->name, z->domain, z->package,
               z->depth, z->max_energy_range_uj);
    }
    return 0;
}

static int run_command(char **argv)
{
    int status;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "rapl-probe: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static int probe_delta(rapl *r, char **cmd)
{
    double *d = calloc(r->n + 1, sizeof(*d));
    int ret;

    if (!d)
        return 1;
    ret = run_command(cmd);
    if (ret < 0) {
        fprintf(stderr, "rapl-probe: %s failed\n", cmd[0]);
        free(d);
        return 1;
    }
    ret = rapl_read(r, d);
    if (ret < 0)
        fprintf(stderr, "rapl-probe: rapl_read: %s\n", strerror(-ret));
    for (size_t i = 0; i < r->n; i++)
        printf("%s %lld\n", r->zone[i].id, llround(d[i] * 1e6));
    free(d);
    return ret < 0 ? 1 : 0;
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u),
                          .tv_nsec = (long)(t_ns % 1000000000u)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int probe_measure(rapl *r, double seconds, double hz, char **domains, size_t n_domains)
{
    uint64_t period = (uint64_t)(1e9 / hz), start_ns, end, next, last;
    double *d = calloc(r->n + 1, sizeof(*d)), *total = calloc(r->n + 1, sizeof(*total));
    double sum = 0;
    int failed = 0, ret;

    if (!d || !total) {
        free(d);
        free(total);
        return 1;
    }
    /* The interval starts at a read timed as the others are: rapl_open's own
     * reads come at an unknown point of a call that may stall on a loaded
     * machine, and the energy before it is not in the totals. */
    if ((ret = rapl_read(r, d)) < 0 && failed++ == 0)
        fprintf(stderr, "rapl-probe: rapl_read: %s\n", strerror(-ret));
    start_ns = next = last = util_now_ns(CLOCK_MONOTONIC);
    end = start_ns + (uint64_t)(seconds * 1e9);
    while (last < end) {
        next += period;
        sleep_until(next < end ? next : end);
        ret = rapl_read(r, d);
        last = util_now_ns(CLOCK_MONOTONIC);
        if (ret < 0 && failed++ == 0)
            fprintf(stderr, "rapl-probe: rapl_read: %s\n", strerror(-ret));
        for (size_t i = 0; i < r->n; i++)
            total[i] += d[i];
        sum += rapl_sum_domains(r, d, (const char *const *)domains, n_domains);
    }
    printf("start_ns %" PRIu64 "\nend_ns %" PRIu64 "\nelapsed_s %.9f\n", start_ns, last,
           (double)(last - start_ns) * 1e-9);
    for (size_t i = 0; i < r->n; i++)
        printf("%s %.6f\n", r->zone[i].id, total[i]);
    printf("sum %.6f\npower_w %.6f\n", sum, sum / ((double)(last - start_ns) * 1e-9));
    free(d);
    free(total);
    return failed ? 1 : 0;
}

static int measure_args(int argc, char **argv, double *seconds, double *hz, const char **domains)
{
    char *end;

    if (argc < 3)
        return usage_error("measure needs SECONDS", "");
    *seconds = strtod(argv[2], &end);
    if (end == argv[2] || *end != '\0' || !(*seconds > 0))
        return usage_error("bad SECONDS", argv[2]);
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage_error("missing value", argv[i]);
        if (strcmp(argv[i], "--hz") == 0) {
            *hz = strtod(argv[i + 1], &end);
            if (end == argv[i + 1] || *end != '\0' || !(*hz > 0))
                return usage_error("bad --hz", argv[i + 1]);
        } else if (strcmp(argv[i], "--domains") == 0) {
            *domains = argv[i + 1];
        } else {
            return usage_error("unknown argument", argv[i]);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *domain_list = "package,dram";
    double seconds = 0, hz = 50;
    char **domains = NULL;
    size_t n_domains = 0;
    rapl *r;
    int ret;

    if (argc < 2 || (strcmp(argv[1], "list") != 0 && strcmp(argv[1], "delta") != 0 &&
                     strcmp(argv[1], "measure") != 0))
        return usage_error("expected list, delta or measure", argc < 2 ? "" : argv[1]);
    if (strcmp(argv[1], "delta") == 0 && argc < 3)
        return usage_error("delta needs a command", "");
    if (strcmp(argv[1], "measure") == 0) {
        if ((ret = measure_args(argc, argv, &seconds, &hz, &domain_list)) != 0)
            return ret;
        if (util_split_list(domain_list, ',', &domains, &n_domains) < 0)
            return usage_error("bad --domains", domain_list);
    }

    ret = rapl_open(&r);
    if (ret < 0) {
        fprintf(stderr, "rapl-probe: rapl_open: %s\n", strerror(-ret));
        util_strv_free(domains, n_domains);
        return 1;
    }
    if (strcmp(argv[1], "list") == 0)
        ret = probe_list(r);
    else if (r->n == 0)
        ret = 1;
    else if (strcmp(argv[1], "delta") == 0)
        ret = probe_delta(r, argv + 2);
    else
        ret = probe_measure(r, seconds, hz, domains, n_domains);
    if (r->n == 0)
        fprintf(stderr, "rapl-probe: %s\n", r->state);
    rapl_close(r);
    util_strv_free(domains, n_domains);
    return ret;
}
