/* wattprof top: a live, full-screen view of processes by power (ncurses),
 * fed by the daemon's Subscribe stream once a second.
 *
 * Keys: P power, E energy in this view, T total energy, C CPU, N pid (sort);
 * / filter by command (Perl-compatible regex, empty clears); q quit. "J view"
 * is the energy a process used since top started (or first saw it). Without
 * a terminal on stdout, or with --json/--csv, it prints one snapshot. */
#include "commands.h"
#include "format.h"
#include "query.h"
#include "util/util.h"

#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum top_sort { SORT_POWER, SORT_VIEW, SORT_TOTAL, SORT_CPU, SORT_PID };

/* A process's total when this view first saw it. */
struct seen {
    int64_t pid;
    double start_time, first_total;
};

struct top_row {
    json_object *p;
    double view_j;
};

struct top {
    query_opts q;
    long limit;
    int64_t uid; /* -1: every visible user */
    enum top_sort sort;
    char filter[128];
    char note[256]; /* shown on the status line until the next key */
    util_regex *re; /* the filter compiled; NULL = none */
    struct seen *seen;
    size_t n_seen, cap_seen;
    json_object *last; /* latest Subscribe reply */
};

static void top_usage(FILE *out)
{
    fprintf(
        out,
        "usage: wattprof top [--user USER] [-n N] [--socket PATH] [--json|--csv]\n"
        "A live view of processes by power, refreshed every second.\n"
        "Keys: P/E/T/C/N sort by power, energy in view, total energy, CPU, pid;\n"
        "/ filter commands by regex; q quit. Without a terminal: one snapshot.\n\n"
        "options:\n"
        "  --user USER      only this user's processes\n"
        "  -n N             at most N processes from the daemon (default all)\n" QUERY_COMMON_HELP);
}

static double view_energy(struct top *t, json_object *p)
{
    int64_t pid = query_int(p, "pid", 0);
    double st = query_num(p, "start_time"), total = query_num(p, "total_j");

    for (size_t i = 0; i < t->n_seen; i++)
        if (t->seen[i].pid == pid && t->seen[i].start_time == st)
            return total - t->seen[i].first_total;
    if (t->n_seen == t->cap_seen) {
        size_t nc = t->cap_seen ? t->cap_seen * 2 : 64;
        struct seen *ns = realloc(t->seen, nc * sizeof(*ns));
        if (!ns)
            return NAN;
        t->seen = ns;
        t->cap_seen = nc;
    }
    /* Seen now for the first time: what it used in its last second counts. */
    t->seen[t->n_seen++] = (struct seen){pid, st, total - query_num(p, "energy_j")};
    return query_num(p, "energy_j");
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
    const struct top_row *x = a, *y = b;
    enum top_sort s = *(const enum top_sort *)arg;
    double u, v;

    switch (s) {
    case SORT_VIEW:
        u = x->view_j, v = y->view_j;
        break;
    case SORT_TOTAL:
        u = query_num(x->p, "total_j"), v = query_num(y->p, "total_j");
        break;
    case SORT_CPU:
        u = query_num(x->p, "cpu"), v = query_num(y->p, "cpu");
        break;
    case SORT_PID:
        return (int)(query_int(x->p, "pid", 0) - query_int(y->p, "pid", 0));
    default:
        u = query_num(x->p, "power_w"), v = query_num(y->p, "power_w");
        break;
    }
    return (u < v) - (u > v);
}

/* The processes of the latest reply, filtered and sorted; *n rows. */
static struct top_row *top_rows(struct top *t, size_t *n)
{
    json_object *procs = query_obj(t->last, "processes");
    size_t m = json_object_array_length(procs);
    struct top_row *rows = calloc(m ? m : 1, sizeof(*rows));

    *n = 0;
    for (size_t i = 0; rows && i < m; i++) {
        json_object *p = json_object_array_get_idx(procs, i);
        double vj = view_energy(t, p);
        if (t->re && util_regex_match(t->re, query_str(p, "comm")) <= 0)
            continue;
        rows[(*n)++] = (struct top_row){p, vj};
    }
    if (rows)
        qsort_r(rows, *n, sizeof(*rows), cmp_rows, &t->sort);
    return rows;
}

/* ---- One snapshot, for pipes and scripts ---------------------------------- */

static int snapshot(struct top *t)
{
    json_object *host = query_obj(t->last, "host");
    char a[FMT_LEN], b[FMT_LEN], c[FMT_LEN];

    if (t->q.out == QUERY_JSON) {
        query_print_json(t->last);
        return 0;
    }
    fmt_table *tb = query_process_table(query_obj(t->last, "processes"));
    if (!tb)
        return -ENOMEM;
    if (t->q.out == QUERY_TEXT)
        printf("host: measured %s, modeled %s, idle %s\n",
               fmt_power(a, query_num(host, "measured_w")),
               fmt_power(b, query_num(host, "modeled_w")), fmt_power(c, query_num(host, "idle_w")));
    if (t->q.out == QUERY_CSV)
        fmt_table_print_csv(tb, stdout);
    else
        fmt_table_print(tb, stdout, t->q.color);
    fmt_table_free(tb);
    return 0;
}

/* ---- The live screen -------------------------------------------------------- */

static const char *sort_name(enum top_sort s)
{
    static const char *names[] = {"power", "energy in view", "total energy", "CPU", "pid"};
    return names[s];
}

static void draw(struct top *t, time_t started)
{
    json_object *host = query_obj(t->last, "host");
    char a[FMT_LEN], b[FMT_LEN], c[FMT_LEN], d[FMT_LEN], e[FMT_LEN], when[16];
    size_t n = 0;
    struct top_row *rows = t->last ? top_rows(t, &n) : NULL;
    struct tm tm;

    erase();
    gmtime_r(&started, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    attron(A_BOLD);
    mvprintw(0, 0, "wattprof top");
    attroff(A_BOLD);
    if (t->last) {
        printw("  host: measured %s  modeled %s  idle %s  attributed %s",
               fmt_power(a, query_num(host, "measured_w")),
               fmt_power(b, query_num(host, "modeled_w")), fmt_power(c, query_num(host, "idle_w")),
               fmt_power(d, query_num(host, "attributed_w")));
        /* As in status: below 0.00 mW it is rounding, not a figure. */
        if (fabs(query_num(host, "unattributed_w")) >= 5e-6)
            printw("  unattributed %s", fmt_power(e, query_num(host, "unattributed_w")));
    } else
        printw("  waiting for the daemon's first update...");
    mvprintw(1, 0, "%zu processes  sort: %s  filter: %s  J view: since %s UTC", n,
             sort_name(t->sort), t->re ? t->filter : "none", when);
    if (t->note[0]) {
        attron(A_BOLD);
        mvprintw(2, 0, "%s", t->note);
        attroff(A_BOLD);
    }
    attron(A_REVERSE);
    mvprintw(3, 0, "%7s %-10s %-16s %-9s %9s %9s %9s %6s", "PID", "USER", "COMMAND", "CLASS", "W",
             "J view", "J total", "CPU%");
    for (int x = getcurx(stdscr); x < COLS; x++)
        addch(' ');
    attroff(A_REVERSE);
    for (size_t i = 0; i < n && (int)i + 4 < LINES - 1; i++) {
        json_object *p = rows[i].p;
        mvprintw((int)i + 4, 0, "%7lld %-10.10s %-16.16s %-9.9s %9s %9s %9s %6.1f",
                 (long long)query_int(p, "pid", 0), query_str(p, "user"), query_str(p, "comm"),
                 query_str(p, "class"), fmt_power(a, query_num(p, "power_w")),
                 fmt_energy(b, rows[i].view_j), fmt_energy(c, query_num(p, "total_j")),
                 query_num(p, "cpu") * 100);
    }
    attron(A_BOLD);
    mvprintw(LINES - 1, 0, "q quit  P power  E energy  T total  C cpu  N pid  / filter");
    attroff(A_BOLD);
    free(rows);
    refresh();
}

/* Reads a regex on the last line: an empty one clears the filter, a bad one
 * keeps the current filter and says why on the status line. */
static void ask_filter(struct top *t)
{
    char buf[sizeof(t->filter)] = "", why[sizeof(t->note) - sizeof(t->filter) - 16];
    util_regex *re = NULL;

    move(LINES - 1, 0);
    clrtoeol();
    printw("filter (regex on command, empty clears): ");
    echo();
    nodelay(stdscr, FALSE);
    getnstr(buf, (int)sizeof(buf) - 1);
    nodelay(stdscr, TRUE);
    noecho();
    if (buf[0] && util_regex_new(buf, &re, why, sizeof(why)) < 0) {
        snprintf(t->note, sizeof(t->note), "bad regex '%s': %s", buf, why);
        return;
    }
    util_regex_free(t->re);
    t->re = re;
    snprintf(t->filter, sizeof(t->filter), "%s", buf);
}

/* Takes every reply waiting on the socket, keeping the newest. */
static int drain(struct top *t, rpc_client *c, char *err, size_t errlen)
{
    json_object *r;
    int e;

    while ((e = query_next(c, 0, &r, err, errlen)) == 0) {
        json_object_put(t->last);
        t->last = r;
    }
    return e == -ETIMEDOUT ? 0 : e;
}

static bool key(struct top *t, int ch)
{
    t->note[0] = '\0';
    switch (ch) {
    case 'q':
    case 'Q':
        return false;
    case 'P':
    case 'p':
        t->sort = SORT_POWER;
        break;
    case 'E':
    case 'e':
        t->sort = SORT_VIEW;
        break;
    case 'T':
    case 't':
        t->sort = SORT_TOTAL;
        break;
    case 'C':
    case 'c':
        t->sort = SORT_CPU;
        break;
    case 'N':
    case 'n':
        t->sort = SORT_PID;
        break;
    case '/':
        ask_filter(t);
        break;
    default:
        break;
    }
    return true;
}

/* The full-screen loop; an error is reported once the terminal is back. */
static int live(struct top *t, rpc_client *c)
{
    time_t started = time(NULL);
    char err[UTIL_ERRLEN];
    int r = 0;
    bool run = true;

    initscr();
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    draw(t, started);
    while (run) {
        struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                {.fd = rpc_client_fd(c), .events = POLLIN}};
        if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
            break;
        if ((r = drain(t, c, err, sizeof(err))) < 0)
            break;
        for (int ch; run && (ch = getch()) != ERR;)
            run = key(t, ch);
        draw(t, started);
    }
    endwin();
    if (r < 0)
        log_error("%s", err);
    return r;
}

static int top_parse(int argc, char **argv, struct top *t)
{
    static const struct option opts[] = {
        QUERY_LONGOPTS, {"user", required_argument, NULL, 'u'}, {NULL, 0, NULL, 0}};
    int o, r;

    optind = 1;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "hn:", opts, NULL)) != -1) {
        if ((r = query_common_opt(&t->q, o, optarg)) != 0) {
            if (r < 0)
                return -EINVAL;
            continue;
        }
        if (o == 'h') {
            top_usage(stdout);
            return 1;
        }
        if (o == 'u' && query_parse_user(optarg, &t->uid) == 0)
            continue;
        if (o == 'n' && util_parse_long(optarg, &t->limit) == 0 && t->limit > 0)
            continue;
        if (o == 'n')
            log_error("-n '%s': expected a positive count", optarg);
        else if (o != 'u')
            query_bad_option("top", argv[optind - 1]);
        return -EINVAL;
    }
    if (optind < argc) {
        log_error("unexpected argument '%s' (see wattprof top --help)", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

int cmd_top(int argc, char **argv)
{
    struct top t = {.uid = -1};
    json_object *params = json_object_new_object();
    rpc_client *c = NULL;
    int r;

    setlocale(LC_ALL, "");
    query_opts_init(&t.q);
    if ((r = top_parse(argc, argv, &t)) != 0) {
        json_object_put(params);
        return r > 0 ? 0 : 2;
    }
    json_object_object_add(params, "interval_s", json_object_new_double(1));
    json_object_object_add(params, "limit", json_object_new_int64(t.limit));
    if (t.uid >= 0)
        json_object_object_add(params, "uid", json_object_new_int64(t.uid));
    r = query_connect(&t.q, &c);
    if (r == 0)
        r = query_call_more(c, "Subscribe", params);
    json_object_put(params);
    if (r == 0 && (t.q.out != QUERY_TEXT || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))) {
        char err[UTIL_ERRLEN];
        if ((r = query_next(c, QUERY_TIMEOUT_MS, &t.last, err, sizeof(err))) < 0)
            log_error("%s", err);
        else
            r = snapshot(&t);
    } else if (r == 0) {
        r = live(&t, c);
    }
    rpc_client_free(c);
    json_object_put(t.last);
    free(t.seen);
    util_regex_free(t.re);
    return r < 0 ? 1 : 0;
}
