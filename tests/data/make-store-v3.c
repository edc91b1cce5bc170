/* make-store-v3: writes tests/data/store-v3.db, a database of schema
 * version 3 made by lib/store as it was before version 4 (commit faa41db),
 * for the test of the migration (tests/unit/test_store_layout.c).
 *
 * Three processes over two stretches of time, through the public API with
 * the data clock: five minutes a day and more before T0 (rolled up into
 * minute rows by store_maintain) and the two minutes before T0 (left as
 * per-second rows); process 300 exits; host rows and one RAPL domain.
 *
 *   git archive faa41db lib | tar -x -C /tmp/v3
 *   cc -std=c11 -D_GNU_SOURCE -I/tmp/v3/lib tests/data/make-store-v3.c \
 *      /tmp/v3/lib/store/\*.c /tmp/v3/lib/util/\*.c \
 *      $(pkg-config --cflags --libs sqlite3 json-c libmd libpcre2-8) -lpthread -lm
 *   ./a.out tests/data/store-v3.db
 * (then remove the -wal, -shm and -lock files the run leaves: the store
 * checkpoints on close, so the .db holds everything). */
#include "store/store.h"
#include "util/util.h"

#include <stdio.h>
#include <string.h>

#define NS 1000000000LL
#define T0 1700000000LL

static const struct {
    pid_t pid;
    const char *comm;
    int64_t uid;
} procs[] = {{100, "alpha", 1000}, {200, "beta", 1000}, {300, "gamma", 0}};

static int push_second(store *s, int64_t t)
{
    int r = 0;

    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]) && r == 0; i++) {
        store_proc_tick k = {.t_ns = t * NS + NS / 2,
                             .pid = procs[i].pid,
                             .start_time = 7,
                             .attributed_j = 0.25 * (double)(i + 1) + 0.01 * (double)(t % 7),
                             .standalone_j = 0.5 * (double)(i + 1),
                             .cpu_s = 0.001 * (double)(t % 11),
                             .klass = (int)((t / 30) % 2),
                             .model_id = 0};
        if (procs[i].pid == 300 && t >= T0 - 30)
            continue;
        r = store_push_proc(s, &k);
    }
    if (r == 0) {
        store_host_tick h = {.t_ns = t * NS + NS / 2,
                             .dt_s = 1.0,
                             .measured = true,
                             .host_j = 10.0,
                             .idle_j = 4.0,
                             .attributed_j = 3.0,
                             .unattributed_j = 3.0,
                             .modeled_j = 9.5};
        r = store_push_host(s, &h);
    }
    if (r == 0)
        r = store_push_domain(s, t * NS + NS / 2, "package", 8.0, 7.5);
    return r;
}

int main(int argc, char **argv)
{
    char err[UTIL_ERRLEN];
    store_config c;
    store *s;
    int r;

    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT.db\n", argv[0]);
        return 2;
    }
    store_config_default(&c);
    strcpy(c.boot_id, "fixture-boot");
    c.clock = STORE_CLOCK_DATA;
    r = store_open(argv[1], &c, &s, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        store_proc_info info = {.t_ns = (T0 - 86400 - 300) * NS,
                                .pid = procs[i].pid,
                                .start_time = 7,
                                .comm = procs[i].comm,
                                .cmdline = procs[i].comm,
                                .cgroup = "/user.slice",
                                .uid = procs[i].uid};
        r = r < 0 ? r : store_push_proc_info(s, &info);
    }
    for (int64_t t = T0 - 86400 - 300; t < T0 - 86400 && r == 0; t++)
        r = push_second(s, t);
    for (int64_t t = T0 - 120; t < T0 && r == 0; t++)
        r = push_second(s, t);
    if (r == 0)
        r = store_push_proc_exit(s, 300, 7, (T0 - 30) * NS);
    if (r == 0)
        r = store_flush(s);
    while (r == 1 || r == 0)
        if ((r = store_maintain(s, T0)) == 0)
            break;
    if (r < 0)
        fprintf(stderr, "writing %s failed: %d\n", argv[1], r);
    return store_close(s) < 0 || r < 0;
}
