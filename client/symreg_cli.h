/* symreg_cli: the parts of `wattprof symreg` shared between its files:
 * the configuration (symreg_config.c) and the command (cmd_symreg.c). */
#ifndef WATTPROF_SYMREG_CLI_H
#define WATTPROF_SYMREG_CLI_H

#include "learn/learn.h"
#include "util/util.h"

#include <stdbool.h>

struct config {
    const char *path;
    char *dir; /* data paths are relative to the config file's folder */
    symreg_params p;
    enum symreg_rule rule; /* [selection] rule */
    char *train, *test, *target;
    char **features;
    size_t n_features;
    int line; /* line being parsed */
    int train_line, test_line;
    bool train_given; /* --data FILE: [data] train is ignored */
    char err[UTIL_ERRLEN];
};

/* Reads c->path (set by the caller) into c, defaults first; fills c->err
 * with FILE:LINE: what is wrong. */
int symreg_config_read(struct config *c);
void symreg_config_free(struct config *c);

#endif
