/* wattprof: one command with subcommands, in the style of git and perf. */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct subcommand subcommands[] = {
    {"rank", cmd_rank, "rank program variants by time or energy into performance classes"},
    {"run", cmd_run, "run a command and report the energy it used"},
    {"calibrate", cmd_calibrate, "measure idle and per-CPU power on a drained node, and keep them"},
    {"status", cmd_status, "the daemon's health: rate, sources, model, warnings"},
    {"top", cmd_top, "live view of processes by power"},
    {"ps", cmd_ps, "processes by energy over a recent window"},
    {"jobs", cmd_jobs, "batch jobs on this node and their energy"},
    {"show", cmd_show, "one process: totals, class history, recent power, model"},
    {"history", cmd_history, "power over time of a process, command, user or the host"},
    {"export", cmd_export, "stored per-second process rows as CSV or JSON"},
    {"models", cmd_models, "models the daemon has loaded"},
    {"reload", cmd_reload, "ask the daemon to load a model"},
    {"train", cmd_train, "fit linear or forest models to a dataset and report their error"},
    {"select", cmd_select, "rank features by Spearman, PCA and forest importance"},
    {"symreg", cmd_symreg, "find an equation for a measured quantity (genetic programming)"},
    {"gp", cmd_gp, "Gaussian-process regression with an analytic mean"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: wattprof COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; subcommands[i].name; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "  %-10s %s\n", "help", "this list, or one command's options: help COMMAND");
    fprintf(out, "\n`wattprof help COMMAND` (or `wattprof COMMAND --help`) describes each one.\n");
}

static const struct subcommand *find(const char *name)
{
    for (size_t i = 0; subcommands[i].name; i++)
        if (strcmp(name, subcommands[i].name) == 0)
            return &subcommands[i];
    return NULL;
}

/* Runs `sub` with argv[0] its name; its errors begin "wattprof NAME: "
 * (util_log prefixes the program's short name). */
static int run_sub(const struct subcommand *sub, int argc, char **argv)
{
    char prog[64];

    snprintf(prog, sizeof(prog), "wattprof %s", sub->name);
    program_invocation_short_name = prog;
    return sub->fn(argc, argv);
}

/* `wattprof help [COMMAND]`: the list, or COMMAND --help. */
static int help(int argc, char **argv)
{
    const struct subcommand *sub;
    char *args[3];

    if (argc < 3) {
        usage(stdout);
        return 0;
    }
    if (argc > 3 || !(sub = find(argv[2]))) {
        if (argc > 3)
            fprintf(stderr, "wattprof help: expected at most one command\n");
        else
            fprintf(stderr, "wattprof help: no command '%s' (see wattprof help)\n", argv[2]);
        return 2;
    }
    args[0] = (char *)sub->name;
    args[1] = (char *)"--help";
    args[2] = NULL;
    return run_sub(sub, 2, args);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0)
        return help(argc, argv);
    if (strcmp(argv[1], "--version") == 0) {
        printf("wattprof %s\n", WATTPROF_VERSION);
        return 0;
    }
    if (find(argv[1]))
        return run_sub(find(argv[1]), argc - 1, argv + 1);
    fprintf(stderr, "wattprof: unknown command '%s' (see wattprof --help)\n", argv[1]);
    return 2;
}
