/* methods-internal.h: what the files of io.wattprof.Monitor's methods share
 * (methods*.c): parameter checks, the JSON of the interface's types, the
 * store's reader, the subscribers' list.  Only daemon/methods*.c include it. */
#ifndef WATTPROFD_METHODS_INTERNAL_H
#define WATTPROFD_METHODS_INTERNAL_H

#include "daemon.h"

#include <stdbool.h>
#include <stdint.h>

struct subscriber {
    rpc_call *call;
    rpc_peer peer;
    double interval_s;
    int64_t next_ns;
    size_t limit;
    int64_t uid; /* filter, -1 = all visible */
    subscriber *next;
};

#define USER_CACHE_SLOTS 8
typedef struct user_cache {
    size_t n;
    uid_t uid[USER_CACHE_SLOTS];
    char name[USER_CACHE_SLOTS][64];
} user_cache;

/* Every method's parameters as the interface declares them: a wrong type or
 * an unknown field is InvalidParameter naming it, before any handler reads
 * a value (json-c would otherwise turn "1" or {} into a number). */
#define CHECK_PARAMS(call, params, ...)                                                            \
    do {                                                                                           \
        static const rpc_param_spec spec_[] = {__VA_ARGS__};                                       \
        if (rpc_params_check(call, params, spec_, sizeof(spec_) / sizeof(spec_[0])) < 0)           \
            return 0;                                                                              \
    } while (0)
#define OPT(name_, type_)                                                                          \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .optional = true                                     \
    }
#define REQ(name_, type_)                                                                          \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_                                                       \
    }
/* A number in [lo, hi], optional or required. */
#define OPT_IN(name_, type_, lo, hi)                                                               \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .optional = true, .ranged = true, .min = lo,         \
        .max = hi                                                                                  \
    }
#define REQ_IN(name_, type_, lo, hi)                                                               \
    {                                                                                              \
        .name = name_, .type = RPC_T_##type_, .ranged = true, .min = lo, .max = hi                 \
    }

/* The ranges of the interface's numbers: what lies outside is a mistake
 * (or an attack), refused with InvalidParameter naming the field. */
#define P_UID_MAX 4294967294.0 /* (uid_t)-1 is no one */
#define P_PID_MAX 4194304.0    /* the kernel's PID_MAX_LIMIT */
#define P_TIME_MAX 1e10        /* seconds since the epoch: the year 2286 */
#define P_SPAN_MAX 1e9         /* seconds: 31 years */
#define P_LIMIT_MAX 100000.0   /* processes in one Subscribe reply (from memory) */
/* Stored processes in one ListProcesses reply: a page; the rest by offset.
 * A page of 1000 is about 0.3 MB of JSON (4 MB with the longest command
 * lines), where all of them could be tens of MB and seconds of the server
 * thread. */
#define P_PAGE_MAX 1000.0

/* The bytes of one reply's JSON, at most (docs/reliability.md): a page of
 * ListProcesses, GetHistory or ListJobs stops early at it and says where
 * the next starts; any other reply past it is ReplyTooLarge, naming the
 * parameter to reduce.  A reply's fields besides its list are kept within
 * REPLY_RESERVE_BYTES. */
#define REPLY_MAX_BYTES (4 * 1024 * 1024)
#define REPLY_RESERVE_BYTES (64 * 1024)

/* What is left of one reply's bytes for its list. */
typedef struct reply_budget {
    size_t left;
} reply_budget;
void methods_reply_budget_init(reply_budget *b);
/* Charges the JSON of o (a member of the reply's list) to b: false, and
 * nothing charged, when it does not fit. */
bool methods_reply_budget_take(reply_budget *b, json_object *o);
/* Answers ReplyTooLarge: the reply would pass REPLY_MAX_BYTES; `parameter`
 * (NULL: none) is the one to reduce, the reason says by how much. */
int methods_reply_too_large(rpc_call *call, const char *parameter, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int64_t methods_now_s(void);
int64_t methods_data_now_s(daemon_ctx *ctx);
json_object *methods_num_or_null(double v);
const char *methods_class_name(const model *m, int k);
json_object *methods_model_json(const model *m, bool in_use, double loaded);
const char *methods_cached_user(user_cache *c, uid_t uid);
json_object *methods_host_json(const daemon_status *st);
json_object *methods_live_json(const live_proc *p, const model *m, user_cache *users);
json_object *methods_stored_json(const store_process *p, const model *m, double window_s,
                                 bool windowed, user_cache *users);
void methods_sync_store(daemon_ctx *ctx);
int methods_invalid_regex(rpc_call *call, const char *pattern);
int methods_storage_unavailable(rpc_call *call, const char *why);
int methods_reader(daemon_ctx *ctx, rpc_call *call);
/* Answers a failed query: QueryTimeLimit for -ETIME (the call's queries
 * ran past [daemon] query_time_limit), else StorageUnavailable; returns r. */
int methods_store_failed(daemon_ctx *ctx, rpc_call *call, int r, const char *err);
double methods_param_double(json_object *params, const char *key, double dflt);
const char *methods_param_string(json_object *params, const char *key);
bool methods_other_uid(json_object *params, const rpc_peer *peer);
bool methods_param_present(json_object *params, const char *key);

/* The methods, one file per concern. */
int m_get_status(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_list_processes(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_get_process(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_get_history(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_subscribe(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_list_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_reload_models(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
int m_list_jobs(rpc_call *call, json_object *params, const rpc_peer *peer, void *u);
/* Whether `peer` may see job `job`'s energy: 1 when privileged, or the job
 * is its own (or unknown: then there is nothing to see), 0 when not, or a
 * negative errno when the jobs could not be read (err says why; -ETIME past
 * the call's time limit). Needs ctx->reader. */
int methods_job_visible(daemon_ctx *ctx, const char *job, const rpc_peer *peer, char *err,
                        size_t errlen);

#endif
