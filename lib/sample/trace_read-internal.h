/* trace_read-internal: what the --replay reader's files share (trace_read.c,
 * the records; trace_fields.c, locating and checking a line's values): the
 * reader and the path of a value in its line. */
#ifndef WATTPROF_TRACE_READ_INTERNAL_H
#define WATTPROF_TRACE_READ_INTERNAL_H

#include "sample/sample.h"
#include "sample/trace-internal.h"

#include <json-c/json.h>
#include <stdio.h>

struct trace_reader {
    FILE *f;
    char *path;
    char *line; /* current line, from getline */
    size_t line_cap, line_len;
    unsigned long lineno;
    json_tokener *tok;
    json_object *obj; /* the current line parsed, kept while its values are in use */
    trace_header h;
    /* storage for the last record returned */
    double *energy;
    trace_proc_delta *procs;
    double *values; /* 2 * n_events per process: scaled, then ratios */
    size_t procs_cap;
    char *cmdline, *cgroup;
    uint64_t last_t;
    bool any_tick, ended;
    /* The processes declared by a proc record and not ended by an exit. */
    struct trace_ident *ids;
    size_t ids_cap, ids_used; /* used: live and deleted slots */
};

/* Where in the line a value is: the keys and indexes leading to it. */
typedef struct trace_path {
    const char *key[8]; /* NULL: an array index, in idx */
    size_t idx[8];
    int depth;
} trace_path;

/* p past blanks. */
const char *trace_skip_ws(const char *p);
/* "FILE:LINE:COL: PATH MESSAGE", the column being where PATH's value starts. */
int trace_bad(trace_reader *r, const trace_path *path, char *err, size_t errlen, const char *fmt,
              ...) __attribute__((format(printf, 5, 6)));
void trace_push_key(trace_path *p, const char *key);
void trace_push_idx(trace_path *p, size_t idx);
/* Field `key` of object `o`, which must have type `type` (json_type_double
 * also accepts integers). */
int trace_field(trace_reader *r, json_object *o, trace_path *path, const char *key, json_type type,
                json_object **out, char *err, size_t errlen);
/* -EBADMSG naming the first field of `o` not among the n `keys`. */
int trace_known_fields(trace_reader *r, json_object *o, trace_path *path, const char *const *keys,
                       size_t n, char *err, size_t errlen);
/* An unsigned integer field no larger than `max`. */
int trace_u64(trace_reader *r, json_object *o, trace_path *path, const char *key, uint64_t max,
              uint64_t *out, char *err, size_t errlen);
/* A string field without NUL characters, pointing into `o`. */
int trace_string(trace_reader *r, json_object *o, trace_path *path, const char *key,
                 const char **out, char *err, size_t errlen);
/* Array field `key` of exactly `n` numbers, each allowed as `kind`. */
int trace_numbers(trace_reader *r, json_object *o, trace_path *path, const char *key, size_t n,
                  const char *per, enum trace_value kind, double *out, char *err, size_t errlen);

#endif
