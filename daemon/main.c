/* wattprofd: the per-process energy monitor of a measurement node.
 *
 * Wires the parts together: configuration, the store's writer thread, the
 * sampler's 50 Hz thread and the Varlink server thread. The main thread
 * handles signals (SIGTERM stops and flushes, SIGHUP reloads the model),
 * tells systemd how it is doing (READY, STATUS, WATCHDOG only while the
 * sampler is ticking, RELOADING, STOPPING) and feeds Subscribe streams. */
#include "daemon.h"
#include "util/util.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <linux/capability.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* True when this process may count every user's processes: root, or the
 * service user holding CAP_PERFMON (wattprofd.service runs as user wattprof
 * with ambient capabilities). Such a daemon is the node's system daemon: it
 * uses /etc, /var/lib and /run paths and watches everyone. */
static bool watches_everyone(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

    if (geteuid() == 0)
        return true;
    if (syscall(SYS_capget, &h, d) < 0)
        return false;
    return (d[CAP_PERFMON / 32].effective >> (CAP_PERFMON % 32)) & 1;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: wattprofd [--config FILE] [--state-dir DIR] [--db PATH] [--socket PATH]\n"
                 "                 [--model FILE] [--rate HZ] [--record FILE]\n"
                 "                 [--replay FILE [--speed X|max]] [--pid-file PATH]\n"
                 "                 [--backend auto|bpf|perf]\n");
}

static int set(char **dst, const char *v)
{
    free(*dst);
    *dst = strdup(v);
    return *dst ? 0 : -ENOMEM;
}

/* Flags override the config file, so the file is read first. */
static int parse_args(int argc, char **argv, config *c)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},  {"state-dir", required_argument, NULL, 'S'},
        {"db", required_argument, NULL, 'd'},      {"socket", required_argument, NULL, 's'},
        {"model", required_argument, NULL, 'm'},   {"rate", required_argument, NULL, 'r'},
        {"record", required_argument, NULL, 'R'},  {"replay", required_argument, NULL, 'P'},
        {"speed", required_argument, NULL, 'x'},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {"pid-file", required_argument, NULL, 'p'},
        {"backend", required_argument, NULL, 'b'}, {NULL, 0, NULL, 0}};
    const char *config_path = NULL;
    char err[UTIL_ERRLEN];
    int o, r = 0;

    opterr = 0;
    while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        if (o == 'c')
            config_path = optarg;
        else if (o == 'h') {
            usage(stdout);
            exit(0);
        } else if (o == 'V') {
            printf("wattprofd %s\n", WATTPROF_VERSION);
            exit(0);
        } else if (o == '?') {
            log_error("unknown option or missing value '%s' (see wattprofd --help)",
                      argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (!config_path && watches_everyone() && access("/etc/wattprof/wattprofd.conf", R_OK) == 0)
        config_path = "/etc/wattprof/wattprofd.conf";
    if (config_path && (r = config_load(c, config_path, err, sizeof(err))) < 0) {
        log_error("%s", err);
        return r;
    }
    optind = 1;
    while (r == 0 && (o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (o) {
        case 'S':
            r = set(&c->state_dir, optarg);
            c->state_dir_set = true;
            break;
        case 'd':
            r = set(&c->db_path, optarg);
            break;
        case 's':
            r = set(&c->socket_path, optarg);
            break;
        case 'm':
            r = set(&c->model_path, optarg);
            break;
        case 'R':
            r = set(&c->record_path, optarg);
            break;
        case 'P':
            r = set(&c->replay_path, optarg);
            break;
        case 'p':
            if (!*optarg) {
                log_error("--pid-file '': expected a path");
                r = -EINVAL;
            } else
                r = set(&c->pid_file, optarg);
            break;
        case 'b':
            if (config_parse_backend(optarg, &c->backend) < 0) {
                log_error("--backend '%s': expected auto, bpf or perf", optarg);
                r = -EINVAL;
            }
            break;
        case 'r':
            if (config_parse_rate(optarg, &c->rate_hz) < 0) {
                log_error("--rate '%s': expected ticks per second from %g to %g", optarg,
                          CONFIG_MIN_RATE_HZ, CONFIG_MAX_RATE_HZ);
                r = -EINVAL;
            }
            break;
        case 'x':
            if (strcmp(optarg, "max") == 0)
                c->replay_speed = 0;
            else if (util_parse_double(optarg, &c->replay_speed) < 0 || c->replay_speed <= 0) {
                log_error("--speed '%s': expected a positive factor or 'max'", optarg);
                r = -EINVAL;
            }
            break;
        }
    }
    if (r == 0 && optind < argc) {
        log_error("unexpected argument '%s' (see wattprofd --help)", argv[optind]);
        r = -EINVAL;
    }
    if (r == 0 && (r = config_finish(c, err, sizeof(err))) < 0)
        log_error("%s", err);
    return r;
}

/* Creates path and its missing parents (0755); path itself, when this
 * creates it, gets exactly `mode` whatever the umask. */
static int mkdir_p(const char *path, mode_t mode)
{
    char tmp[4096];

    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(tmp, mode) < 0)
        return errno == EEXIST ? 0 : -errno;
    return chmod(tmp, mode) < 0 ? -errno : 0;
}

static int dir_of(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return -EINVAL;
    snprintf(out, len, "%.*s", (int)(slash - path), path);
    return 0;
}

/* 200 processes x one group of 5 events is 1000 descriptors: the usual soft
 * limit of 1024 fails with EMFILE. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The database's folder, when the daemon creates it: 0750, the files in it
 * 0640 (they hold every user's command lines); others may still pass
 * through it (0751) when the socket is in it too, to reach the socket. */
static mode_t state_dir_mode(const config *c, const char *db_dir)
{
    char sock_dir[4096];

    if (dir_of(c->socket_path, sock_dir, sizeof(sock_dir)) == 0 && strcmp(sock_dir, db_dir) == 0)
        return 0751;
    return 0750;
}

static int open_store(const config *c, store **st)
{
    store_config sc;
    char err[UTIL_ERRLEN], dir[4096];
    int r;

    if (dir_of(c->db_path, dir, sizeof(dir)) == 0 &&
        (r = mkdir_p(dir, state_dir_mode(c, dir))) < 0) {
        log_error("cannot create %s: %s", dir, strerror(-r));
        return r;
    }
    store_config_default(&sc);
    sc.second_retention_s = c->second_retention_s;
    sc.minute_retention_s = c->minute_retention_s;
    if (c->replay_path)
        sc.clock = STORE_CLOCK_DATA; /* a replay's old rows are not expired */
    if ((r = store_open(c->db_path, &sc, st, err, sizeof(err))) < 0)
        log_error("%s", err);
    return r;
}

/* `*bound` tells whether the daemon made the socket file itself (and so
 * removes it at exit) or was handed it by systemd's socket activation. */
static int open_socket(const config *c, int *fd, bool *bound)
{
    char err[UTIL_ERRLEN], dir[4096];
    int r = rpc_listen_activated(fd, err, sizeof(err));

    *bound = false;
    if (r < 0) {
        log_error("%s", err);
        return r;
    }
    if (r == 1)
        return 0;
    if (dir_of(c->socket_path, dir, sizeof(dir)) == 0)
        mkdir_p(dir, 0755);
    /* 0666: who sees what is decided per peer, inside the daemon. */
    if ((r = rpc_listen_unix(c->socket_path, 0666, fd, err, sizeof(err))) < 0)
        log_error("%s", err);
    *bound = r >= 0;
    return r;
}

/* The pid file appears whole (written beside, then renamed) once the daemon
 * serves, so that `kill "$(cat FILE)"` never reads a partial number. */
static int write_pid_file(const char *path)
{
    char tmp[4200];
    FILE *f;
    int r = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(f = fopen(tmp, "we")))
        r = -errno;
    else {
        fprintf(f, "%ld\n", (long)getpid());
        if (fclose(f) != 0)
            r = -errno;
        else if (rename(tmp, path) < 0)
            r = -errno;
        if (r < 0)
            unlink(tmp);
    }
    if (r < 0)
        log_error("--pid-file %s: cannot write it: %s", path, strerror(-r));
    return r;
}

static gid_t privileged_gid(const config *c)
{
    struct group *g = c->group ? getgrnam(c->group) : NULL;
    return g ? g->gr_gid : (gid_t)-1;
}

static void notify_status(daemon_ctx *ctx)
{
    snapshot *snap = sampler_snapshot(ctx->smp);
    char line[512];

    if (!snap)
        return;
    if (isfinite(snap->st.host_measured_w))
        snprintf(line, sizeof(line),
                 "STATUS=%zu processes, %.1f Hz, host %.1f W measured / %.1f W modeled",
                 snap->st.tracked, snap->st.achieved_hz, snap->st.host_measured_w,
                 snap->st.host_modeled_w);
    else
        snprintf(line, sizeof(line), "STATUS=%zu processes, %.1f Hz, host %.1f W modeled (no RAPL)",
                 snap->st.tracked, snap->st.achieved_hz, snap->st.host_modeled_w);
    sd_notify(0, line);
    sampler_snapshot_unref(snap);
}

static void reload(daemon_ctx *ctx)
{
    char err[UTIL_ERRLEN];
    int32_t id;

    sd_notify(0, "RELOADING=1");
    if (methods_load_model(ctx, ctx->cfg->model_path, NULL, &id, err, sizeof(err)) < 0)
        log_error("reload refused, keeping the current model: %s", err);
    else
        log_info("reloaded model %s", ctx->model->name);
    sd_notify(0, "READY=1");
}

/* While drift is flagged, a file "drift" beside the socket (in
 * /run/wattprof for the system daemon) holds the error: wattprof-train.path
 * starts a retraining when it is written. It is removed when drift clears. */
static void drift_flag(daemon_ctx *ctx, bool *flagged)
{
    snapshot *snap = sampler_snapshot(ctx->smp);
    char dir[4096], path[4200];
    bool now;

    if (!snap)
        return;
    now = snap->st.drift_flagged;
    if (now != *flagged && dir_of(ctx->cfg->socket_path, dir, sizeof(dir)) == 0) {
        snprintf(path, sizeof(path), "%s/drift", dir);
        if (now) {
            FILE *f = fopen(path, "w");
            if (f) {
                fprintf(f, "%.4f\n", snap->st.drift);
                fclose(f);
            }
            log_warning("model drift %.1f %% is over the %.0f %% threshold", snap->st.drift * 100,
                        ctx->cfg->drift_threshold * 100);
        } else {
            unlink(path);
            log_info("model drift is back under the threshold");
        }
        *flagged = now;
    }
    sampler_snapshot_unref(snap);
}

/* The node's stored calibrations for the model's domains, handed to the
 * sampler before it starts; saved_t[0] is the single-scale fit's time,
 * saved_t[1] the per-event fit's (0 when none). */
static void load_calibration(daemon_ctx *ctx, int64_t saved_t[2])
{
    char err[UTIL_ERRLEN], target[64];
    store_node_calib c;
    store_reader *r;
    int ret;

    saved_t[0] = saved_t[1] = 0;
    model_target_key(ctx->model, target, sizeof(target));
    if ((ret = store_reader_open(ctx->cfg->db_path, &r, err, sizeof(err))) < 0) {
        log_warning("cannot read the stored calibration: %s", err);
        return;
    }
    ret = store_node_calib_get(r, target, &c, err, sizeof(err));
    if (ret < 0 && ret != -ENOENT) /* none: status says where idle comes from */
        log_warning("cannot read the stored calibration: %s", err);
    if (ret == 0) {
        sampler_set_stored_calib(ctx->smp, &c);
        saved_t[0] = c.t;
        log_info("stored calibration for %s: idle %.2f +- %.2f W, from %lld s of this node", target,
                 c.idle_w, c.idle_se_w, (long long)c.rows);
    }
    store_node_evcal e;
    if (methods_stored_evcal(ctx, r, ctx->model, &e) == 0 &&
        !sampler_set_stored_evcal(ctx->smp, &e))
        saved_t[1] = e.t;
    store_reader_close(r);
}

/* Keeps the node's latest identifiable fit, and its latest per-event fit
 * that was used, in the database, each at most once a minute (and at exit:
 * `final`). */
static void save_calibration(daemon_ctx *ctx, int64_t saved_t[2], bool final)
{
    snapshot *snap = sampler_snapshot(ctx->smp);
    const store_node_calib *b = snap ? &snap->st.calib.best : NULL;
    const store_node_evcal *e = snap ? &snap->st.calib.ev_best : NULL;

    if (b && b->t > saved_t[0] && (final || b->t >= saved_t[0] + 60)) {
        if (saved_t[0] == 0)
            log_info("idle identified: %.2f +- %.2f W (scale %.3f, R2 %.4f, %lld s)", b->idle_w,
                     b->idle_se_w, b->scale, b->r2, (long long)b->rows);
        if (store_node_calib_save(ctx->st, b) == 0)
            saved_t[0] = b->t;
    }
    if (e && e->t > saved_t[1] && (final || e->t >= saved_t[1] + 60)) {
        int r = store_node_evcal_save(ctx->st, e);
        if (r < 0)
            log_warning("cannot keep the per-event calibration of %s: %s", e->target, strerror(-r));
        else
            saved_t[1] = e->t;
    }
    sampler_snapshot_unref(snap);
}

/* Until SIGTERM/SIGINT: READY=1 once the sampler has ticked, then once a
 * second, streams and health. */
static void main_loop(daemon_ctx *ctx, int sfd, int64_t *calib_saved)
{
    uint64_t watchdog_us = 0;
    bool watchdog = sd_watchdog_enabled(0, &watchdog_us) > 0, replay_reported = false;
    bool ready = false, drift = false;

    for (;;) {
        struct pollfd pfd = {.fd = sfd, .events = POLLIN};
        int timeout = watchdog && watchdog_us / 2000 < 1000 ? (int)(watchdog_us / 2000) : 1000;
        /* Ready means sampling: a daemon that never ticks never says so,
         * and systemd's start timeout catches it. */
        if (!ready && sampler_progressed(ctx->smp)) {
            ready = true;
            sd_notify(0, "READY=1");
        }
        if (!ready)
            timeout = 5;
        if (poll(&pfd, 1, timeout) > 0) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGHUP) {
                    reload(ctx);
                    continue;
                }
                log_info("received %s, stopping", strsignal((int)si.ssi_signo));
                return;
            }
        }
        if (!ready)
            continue;
        methods_publish(ctx);
        notify_status(ctx);
        drift_flag(ctx, &drift);
        save_calibration(ctx, calib_saved, false);
        /* The watchdog means "the sampler is alive", not "main is alive". */
        if (watchdog && sampler_progressed(ctx->smp))
            sd_notify(0, "WATCHDOG=1");
        if (!replay_reported && sampler_replay_done(ctx->smp)) {
            replay_reported = true;
            sd_notify(0, "STATUS=replay finished; serving queries");
        }
    }
}

static void log_start(const daemon_ctx *ctx)
{
    const rapl *power = sampler_rapl(ctx->smp);
    const sample_eventset *es = sampler_events(ctx->smp);

    log_info("wattprofd %s: model %s (sha256 %.12s%s), %zu events, %s", WATTPROF_VERSION,
             ctx->model->name, ctx->model->sha256,
             ctx->model->training.present ? "" : ", uncalibrated", es->n, power->state);
    log_info("database %s, socket %s%s", ctx->cfg->db_path, ctx->cfg->socket_path,
             watches_everyone() ? "" : "; no CAP_PERFMON: watching only this user's processes");
    log_info("counter backend: %s (%s)", sampler_backend_name(ctx->smp),
             sampler_backend_why(ctx->smp));
}

static int run(config *cfg)
{
    daemon_ctx ctx = {.cfg = cfg};
    rpc_server *srv = NULL;
    exporter *exp = NULL;
    model *m = NULL;
    int32_t model_id = 0;
    int fd = -1, sfd = -1, r;
    bool socket_bound = false, pid_written = false;
    int64_t calib_saved[2] = {0, 0};
    char err[UTIL_ERRLEN];
    sigset_t mask;

    /* Blocked before any thread starts (the store's writer is the first),
     * so that only the signalfd sees them. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&ctx.lock, NULL);
    ctx.started_ns = (int64_t)util_now_ns(CLOCK_REALTIME);
    if (!watches_everyone() && cfg->n_track_uids == 0 && !cfg->replay_path) {
        cfg->track_uids[0] = getuid(); /* unprivileged: our own processes */
        cfg->n_track_uids = 1;
    }
    raise_nofile();
    if ((r = open_store(cfg, &ctx.st)) < 0)
        goto out;
    if ((r = methods_load_model(&ctx, cfg->model_path, &m, &model_id, err, sizeof(err))) < 0) {
        log_error("%s", err);
        goto out;
    }
    if ((r = sampler_new(cfg, m, ctx.st, model_id, &ctx.smp, err, sizeof(err))) < 0) {
        log_error("%s", err);
        model_free(m);
        goto out;
    }
    if ((r = open_socket(cfg, &fd, &socket_bound)) < 0)
        goto out;
    rpc_server_config rc = {.vendor = "wattprof",
                            .product = "wattprofd",
                            .version = WATTPROF_VERSION,
                            .url = "https://wattprof.invalid/",
                            .priv_gid = privileged_gid(cfg),
                            .max_clients = cfg->max_clients,
                            .max_clients_per_uid = cfg->max_clients_per_user,
                            .idle_timeout_ms = (unsigned)(cfg->client_timeout_s * 1000),
                            .refuse_error = "io.wattprof.Monitor.TooManyClients"};
    if ((r = rpc_server_new(&rc, fd, &srv)) < 0) {
        close(fd);
        log_error("rpc server: %s", strerror(-r));
        goto out;
    }
    if ((r = methods_register(&ctx, srv, err, sizeof(err))) < 0) {
        log_error("rpc methods: %s", err);
        goto out;
    }
    /* Before sampling starts: a port in use stops the daemon at once. */
    if ((r = exporter_start(&ctx, &exp, err, sizeof(err))) < 0) {
        log_error("%s", err);
        goto out;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    load_calibration(&ctx, calib_saved);
    if ((r = rpc_server_start(srv)) < 0 || (r = sampler_start(ctx.smp)) < 0) {
        log_error("starting threads: %s", strerror(-r));
        goto out;
    }
    if (cfg->pid_file && (r = write_pid_file(cfg->pid_file)) < 0)
        goto out;
    pid_written = cfg->pid_file != NULL;
    log_start(&ctx);
    main_loop(&ctx, sfd, calib_saved);
    sd_notify(0, "STOPPING=1");
out:
    exporter_stop(exp);
    sampler_stop(ctx.smp);
    if (ctx.smp && ctx.st)
        save_calibration(&ctx, calib_saved, true);
    rpc_server_free(srv);
    methods_free(&ctx);
    sampler_free(ctx.smp);
    if (ctx.st && store_close(ctx.st) < 0 && r == 0)
        r = -EIO;
    if (sfd >= 0)
        close(sfd);
    /* Removed last: whoever waits for the pid file to go sees a daemon whose
     * database is flushed and whose socket is gone. */
    if (socket_bound)
        unlink(cfg->socket_path);
    if (pid_written)
        unlink(cfg->pid_file);
    pthread_mutex_destroy(&ctx.lock);
    return r;
}

int main(int argc, char **argv)
{
    config cfg;
    int r;

    if (config_init(&cfg, watches_everyone()) < 0)
        return 1;
    r = parse_args(argc, argv, &cfg);
    if (r == 0)
        r = run(&cfg);
    config_free(&cfg);
    return r < 0 ? 1 : 0;
}
