/* query: what the commands that ask the daemon share — finding and
 * connecting to its Varlink socket, making a call, turning Varlink errors
 * into one line a person can act on, the common options (--socket, --json,
 * --csv, --help) and the option loop around them, and reading JSON replies.
 *
 * Every function that fails has already printed its one-line error on
 * stderr; callers only propagate the negative errno. */
#ifndef WATTPROF_CLIENT_QUERY_H
#define WATTPROF_CLIENT_QUERY_H

#include "rpc/rpc.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QUERY_IFACE "io.wattprof.Monitor."
#define QUERY_SYSTEM_SOCKET "/run/wattprof/io.wattprof.sock"
#define QUERY_UID_MAX 4294967294LL /* (uid_t)-1 is no one */
#define QUERY_TIMEOUT_MS 30000     /* a daemon that answers nothing in this long is stuck */

typedef enum query_output { QUERY_TEXT, QUERY_JSON, QUERY_CSV } query_output;

/* Options every query command takes. */
typedef struct query_opts {
    const char *socket; /* --socket; NULL: query_socket_path's default */
    query_output out;
    bool color; /* colour the text output (a TTY, NO_COLOR unset) */
} query_opts;

/* getopt_long entries for the common options; put them first in a command's
 * option table. */
#define QUERY_LONGOPTS                                                                             \
    {"socket", required_argument, NULL, 'S'}, {"json", no_argument, NULL, 'J'},                    \
        {"csv", no_argument, NULL, 'C'},                                                           \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }

#define QUERY_COMMON_HELP                                                                          \
    "  --socket PATH    the daemon's socket (default: $WATTPROF_SOCKET, else the\n"                \
    "                   daemon's own default; see wattprof(1))\n"                                  \
    "  --json, --csv    machine-readable output\n"

/* Initialises opts (text output, colour when stdout is a TTY without NO_COLOR). */
void query_opts_init(query_opts *q);

/* Handles one of the common options: returns 1 when `opt` was one, 0 if not,
 * -1 (said on stderr) for --json with --csv. */
int query_common_opt(query_opts *q, int opt, const char *arg);

/* Prints "wattprof: CMD: unknown option or missing value 'ARG' (see wattprof
 * CMD --help)" and returns 2, the exit status of a usage error. */
int query_bad_option(const char *cmd, const char *arg);

/* Returned by a query_opt_fn for an option that is not one of its own. */
#define QUERY_OPT_UNKNOWN (-ENOENT)

/* A query command's own options, for query_parse: called with each option
 * getopt_long returns that is neither a common one nor --help, `arg` its
 * value (optarg). Returns 0 when it took the option, QUERY_OPT_UNKNOWN for
 * one it does not take, or another negative errno after printing why the
 * value is bad. */
typedef int query_opt_fn(void *ctx, int opt, const char *arg);

/* What query_parse needs to know of a command. */
typedef struct query_cmd {
    const char *name;              /* "ps": the command named in the errors */
    const char *shortopts;         /* getopt_long's, "h" and the command's own */
    const struct option *longopts; /* QUERY_LONGOPTS first */
    void (*usage)(FILE *out);      /* prints --help */
    query_opt_fn *opt;             /* the command's own options; NULL: none */
    bool operands;                 /* it takes operands and checks them itself after optind */
} query_cmd;

/* The getopt loop of a query command, from argv[1]: the common options go
 * into q, -h/--help prints cmd->usage on stdout, the others go to cmd->opt
 * with ctx. An option neither takes, or one missing its value, is said as
 * query_bad_option says it. Without cmd->operands, a word left after the
 * options is "unexpected argument 'ARG' (see wattprof CMD --help)".
 * Returns 0 with optind at the first operand, 1 after --help, or a negative
 * errno after one line on stderr. */
int query_parse(const query_cmd *cmd, query_opts *q, void *ctx, int argc, char **argv);

/* The socket to use: `opt` when given, else $WATTPROF_SOCKET, else the
 * system daemon's /run/wattprof/io.wattprof.sock for root; for anyone else the
 * socket of a wattprofd they run themselves
 * ($XDG_RUNTIME_DIR/wattprof/io.wattprof.sock, or
 * ~/.local/state/wattprof/io.wattprof.sock without XDG_RUNTIME_DIR) when it
 * exists, else the system one. */
void query_socket_path(const char *opt, char *buf, size_t len);

/* Connects to the daemon. */
int query_connect(const query_opts *q, rpc_client **out);

/* Calls QUERY_IFACE `method` with params (borrowed; NULL: {}) and reads its
 * reply into *reply (owned by the caller). */
int query_call(rpc_client *c, const char *method, json_object *params, json_object **reply);

/* Connects, calls, disconnects. */
int query_once(const query_opts *q, const char *method, json_object *params, json_object **reply);

/* Starts a streamed call ("more": true); read its replies with query_next. */
/* ListProcesses: one page when params has a "limit", else every page,
 * following next_offset, in one reply (params gains "offset"). */
int query_list_processes(rpc_client *c, json_object *params, json_object **reply);

/* Calls `method` and, while its reply says where the next page starts
 * (next_offset, ListJobs' next_before, or GetHistory's next_since), again
 * from there (params gains offset, before, or since and step_s), into one
 * reply whose array `list` has every page's. */
int query_pages(rpc_client *c, const char *method, json_object *params, const char *list,
                json_object **reply);
/* Connects, calls query_pages, disconnects. */
int query_once_pages(const query_opts *q, const char *method, json_object *params, const char *list,
                     json_object **reply);

int query_call_more(rpc_client *c, const char *method, json_object *params);

/* Reads the next reply of a Subscribe stream; -ETIMEDOUT after timeout_ms.
 * Unlike the other calls it prints nothing: on failure err has the line to
 * show, for a caller that must first give the terminal back (top). */
int query_next(rpc_client *c, int timeout_ms, json_object **reply, char *err, size_t errlen);

/* Prints a reply as indented JSON with a final newline. */
void query_print_json(json_object *o);

/* Reading replies: a member's value, or NAN / "" / dflt when absent or null. */
double query_num(json_object *o, const char *key);
const char *query_str(json_object *o, const char *key);
int64_t query_int(json_object *o, const char *key, int64_t dflt);
json_object *query_obj(json_object *o, const char *key);

/* A user name or a numeric uid; prints an error naming --user otherwise. */
int query_parse_user(const char *s, int64_t *uid);

/* --user ARG: adds "uid" to the call's params; prints the error otherwise. */
int query_user_opt(const char *arg, json_object *params);
/* --since (opt 's') or --until (any other) ARG, relative to `now`: adds
 * "since" or "until" to params; prints the error naming the option. */
int query_time_opt(int opt, const char *arg, double now, json_object *params);

/* Opens `path` for writing ("-": stdout); prints an error naming it. */
int query_open_out(const char *path, FILE **out);
/* Closes what query_open_out opened; a failed write (disk full) is an error
 * naming the path. */
int query_close_out(const char *path, FILE *f);

/* The Process objects of a reply as a table: PID USER COMMAND CLASS POWER
 * ENERGY (over the window) TOTAL CPU%; CSV columns pid, start_time, user,
 * comm, class, power_w, energy_j, total_j, cpu. NULL on ENOMEM. */
struct fmt_table;
struct fmt_table *query_process_table(json_object *processes);
/* Prints `t` as CSV or as a table, as q->out asks. */
void query_print_table(const query_opts *q, const struct fmt_table *t);
/* Adds a cell whose CSV value is `raw` (%.6g; empty when NAN). */
int query_table_num(struct fmt_table *t, const char *text, double raw);

#endif
