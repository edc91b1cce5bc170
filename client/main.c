/* wattprof: one command with subcommands, in the style of git and perf. */
#include "commands.h"

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
    fprintf(out, "\n`wattprof COMMAND --help` describes each one.\n");
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
    if (strcmp(argv[1], "--version") == 0) {
        printf("wattprof %s\n", WATTPROF_VERSION);
        return 0;
    }
    for (size_t i = 0; subcommands[i].name; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "wattprof: unknown command '%s' (see wattprof --help)\n", argv[1]);
    return 2;
}
