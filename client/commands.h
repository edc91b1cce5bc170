/* commands: the subcommands of `wattprof`, one file each (cmd_NAME.c).
 *
 * Each takes the arguments after its name (argv[0] is the subcommand) and
 * returns the process exit status. Errors are printed as one line on stderr
 * naming the input at fault. */
#ifndef WATTPROF_COMMANDS_H
#define WATTPROF_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_reload(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_select(int argc, char **argv);
int cmd_rank(int argc, char **argv);
int cmd_symreg(int argc, char **argv);
int cmd_gp(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

#endif
