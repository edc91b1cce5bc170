/* wattprof top: a live, full-screen view of processes by power (ncurses),
 * fed by the daemon's Subscribe stream once a second.
 *
 * Keys: P power, E energy in this view, T total energy, C CPU, N pid (sort),
 * R reverse the order; Down/Up/j/k, PgDn/PgUp/space/b, Home/End/g/G scroll
 * (after End the view follows the last rows as rows come, until scrolled up);
 * / filter by command (Perl-compatible regex, empty clears); ? or h help;
 * q or Ctrl-C quit (exit 0). "J view" is the energy a process used since top
 * started (or first saw it), never more than its total. Columns narrow
 * screens cannot hold are left out (CLASS, then J view, USER, J total), and
 * CLASS is left out when every process is in class "all". When the daemon
 * goes away the last screen stays, with a line saying so, and top subscribes
 * again once a daemon answers. Without a terminal on stdout, or with
 * --json/--csv, it prints one snapshot. */
#include "commands.h"
#include "format.h"
#include "query.h"
#include "util/util.h"

#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
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
    bool reverse; /* smallest first (pid: largest first) */
    bool help;    /* the help screen is up */
    size_t first; /* the first row shown (scrolling) */
    bool follow;  /* End: keep the last rows in view as rows come and go */
    size_t page;  /* rows the screen held at the last draw */
    size_t n_rows;
    char lost[UTIL_ERRLEN + 64]; /* "the daemon stopped at ...", or "" while connected */
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
        "R reverse; Down/Up/j/k, PgDn/PgUp, Home/End scroll (End follows the last\n"
        "rows); / filter commands by regex; ? help; q or Ctrl-C quit. When the\n"
        "daemon stops, the last screen stays and top waits for it. Without a\n"
        "terminal: one snapshot.\n\n"
        "options:\n"
        "  --user USER      only this user's processes\n"
        "  -n N             at most N processes from the daemon (default all)\n" QUERY_COMMON_HELP);
}

static double view_energy(struct top *t, json_object *p)
{
    int64_t pid = query_int(p, "pid", 0);
    double st = query_num(p, "start_time"), total = query_num(p, "total_j");

    for (size_t i = 0; i < t->n_seen; i++) {
        if (t->seen[i].pid != pid || t->seen[i].start_time != st)
            continue;
        if (total < t->seen[i].first_total) /* a new daemon counts from 0 again */
            t->seen[i].first_total = 0;
        return total - t->seen[i].first_total;
    }
    if (t->n_seen == t->cap_seen) {
        size_t nc = t->cap_seen ? t->cap_seen * 2 : 64;
        struct seen *ns = realloc(t->seen, nc * sizeof(*ns));
        if (!ns)
            return NAN;
        t->seen = ns;
        t->cap_seen = nc;
    }
    /* Seen now for the first time: what it used in its last second counts,
     * but never more than its total (a process younger than that second). */
    t->seen[t->n_seen++] = (struct seen){pid, st, fmax(total - query_num(p, "energy_j"), 0)};
    return total - t->seen[t->n_seen - 1].first_total;
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
    const struct top *t = arg;
    const struct top_row *x = t->reverse ? b : a, *y = t->reverse ? a : b;
    double u, v;

    switch (t->sort) {
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
        qsort_r(rows, *n, sizeof(*rows), cmp_rows, t);
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

enum { COL_PID, COL_USER, COL_COMM, COL_CLASS, COL_W, COL_VIEW, COL_TOTAL, COL_CPU, N_COLS };

static const struct {
    const char *head;
    int width; /* 0: COMMAND, which takes what the others leave */
    bool left;
} columns[N_COLS] = {
    {"PID", 7, false}, {"USER", 8, true},    {"COMMAND", 0, true},  {"CLASS", 9, true},
    {"W", 9, false},   {"J view", 9, false}, {"J total", 9, false}, {"CPU%", 6, false},
};

#define COMM_MIN 10
#define COMM_MAX 32

/* Which columns a screen of `width` shows, and COMMAND's width: the others
 * go in this order until COMMAND has COMM_MIN. */
static int top_layout(int width, bool classes, bool show[N_COLS])
{
    static const int drop[] = {COL_CLASS, COL_VIEW, COL_USER, COL_TOTAL};
    int rest = 0;

    for (int c = 0; c < N_COLS; c++)
        show[c] = c != COL_CLASS || classes;
    for (size_t k = 0; k <= sizeof(drop) / sizeof(drop[0]); k++) {
        rest = width;
        for (int c = 0; c < N_COLS; c++)
            rest -= show[c] && c != COL_COMM ? columns[c].width + 1 : 0;
        if (rest >= COMM_MIN || k == sizeof(drop) / sizeof(drop[0]))
            break;
        show[drop[k]] = false;
    }
    return rest < COMM_MIN ? COMM_MIN : rest > COMM_MAX ? COMM_MAX : rest;
}

/* One line of cells, each cut to its column. */
static void top_line(char *out, size_t len, const bool show[N_COLS], int comm_w,
                     const char *cell[N_COLS])
{
    size_t at = 0;

    out[0] = '\0';
    for (int c = 0; c < N_COLS && at < len; c++) {
        int w = c == COL_COMM ? comm_w : columns[c].width;
        if (!show[c])
            continue;
        at += (size_t)snprintf(out + at, len - at, columns[c].left ? "%s%-*.*s" : "%s%*.*s",
                               at ? " " : "", w, w, cell[c]);
    }
}

/* printw that never wraps: the text is cut at the screen's edge. */
static void put_line(int y, int attr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put_line(int y, int attr, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    move(y, 0);
    clrtoeol();
    attron(attr);
    addnstr(buf, COLS);
    attroff(attr);
}

static void draw_help(void)
{
    static const char *lines[] = {
        "wattprof top: keys",
        "",
        "  P  sort by power            E  sort by energy in this view",
        "  T  sort by total energy     C  sort by CPU      N  sort by pid",
        "  R  reverse the order",
        "  Down, j / Up, k             one row down / up",
        "  PgDn, space / PgUp, b       one page down / up",
        "  End, G / Home, g            the last rows, following them / first rows",
        "  /  filter commands by a Perl-compatible regex (empty clears)",
        "  ?, h  this help             q, Ctrl-C  quit",
        "",
        "J view: the energy a process used since top started (or first saw it).",
        "W and CPU%: the last second. When the daemon stops, the last screen stays",
        "and top subscribes again when a daemon answers.",
        "",
        "Press any key to go back.",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]) && (int)i < LINES; i++)
        put_line((int)i, i == 0 ? A_BOLD : 0, "%s", lines[i]);
}

static bool all_one_class(const struct top_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(query_str(rows[i].p, "class"), "all") != 0)
            return false;
    return true;
}

static void draw_rows(struct top *t, const struct top_row *rows, size_t n)
{
    char line[512], pid[24], a[FMT_LEN], b[FMT_LEN], c[FMT_LEN], cpu[16];
    bool show[N_COLS];
    int comm_w = top_layout(COLS, n > 0 && !all_one_class(rows, n), show);
    const char *head[N_COLS];

    for (int k = 0; k < N_COLS; k++)
        head[k] = columns[k].head;
    top_line(line, sizeof(line), show, comm_w, head);
    put_line(3, A_REVERSE, "%-*s", COLS, line);
    t->page = LINES > 5 ? (size_t)(LINES - 5) : 1;
    t->n_rows = n;
    if (t->follow || t->first + t->page > n)
        t->first = n > t->page ? n - t->page : 0;
    for (size_t i = t->first; i < n && i - t->first < t->page; i++) {
        json_object *p = rows[i].p;
        snprintf(pid, sizeof(pid), "%lld", (long long)query_int(p, "pid", 0));
        snprintf(cpu, sizeof(cpu), "%.1f", query_num(p, "cpu") * 100);
        const char *cell[N_COLS] = {pid,
                                    query_str(p, "user"),
                                    query_str(p, "comm"),
                                    query_str(p, "class"),
                                    fmt_power(a, query_num(p, "power_w")),
                                    fmt_energy(b, rows[i].view_j),
                                    fmt_energy(c, query_num(p, "total_j")),
                                    cpu};
        top_line(line, sizeof(line), show, comm_w, cell);
        put_line((int)(i - t->first) + 4, 0, "%s", line);
    }
}

static void draw(struct top *t, time_t started)
{
    json_object *host = query_obj(t->last, "host");
    char a[FMT_LEN], b[FMT_LEN], c[FMT_LEN], d[FMT_LEN], e[FMT_LEN], un[FMT_LEN + 16], when[16];
    size_t n = 0;
    struct top_row *rows = t->last ? top_rows(t, &n) : NULL;
    struct tm tm;

    erase();
    if (t->help) {
        draw_help();
        free(rows);
        refresh();
        return;
    }
    gmtime_r(&started, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    /* As in status: below 0.00 mW it is rounding, not a figure. */
    un[0] = '\0';
    if (t->last && fabs(query_num(host, "unattributed_w")) >= 5e-6)
        snprintf(un, sizeof(un), "  unattributed %s",
                 fmt_power(e, query_num(host, "unattributed_w")));
    if (t->last)
        put_line(0, 0, "wattprof top  host: measured %s  modeled %s  idle %s  attributed %s%s",
                 fmt_power(a, query_num(host, "measured_w")),
                 fmt_power(b, query_num(host, "modeled_w")),
                 fmt_power(c, query_num(host, "idle_w")),
                 fmt_power(d, query_num(host, "attributed_w")), un);
    else
        put_line(0, 0, "wattprof top  waiting for the daemon's first update...");
    mvchgat(0, 0, 12, A_BOLD, 0, NULL);
    if (t->lost[0])
        put_line(2, A_BOLD, "%s; waiting for it", t->lost);
    else if (t->note[0])
        put_line(2, A_BOLD, "%s", t->note);
    draw_rows(t, rows, n);
    /* After draw_rows, which settles the page and so the range shown. */
    put_line(1, 0, "%zu processes  sort: %s%s  filter: %s  rows %zu-%zu  J view: since %s UTC", n,
             sort_name(t->sort), t->reverse ? ", reversed" : "", t->re ? t->filter : "none",
             n ? t->first + 1 : 0, t->first + t->page < n ? t->first + t->page : n, when);
    put_line(LINES - 1, A_BOLD, "q quit  ? help  P E T C N sort  R reverse  / filter  j k scroll");
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

static void scroll_by(struct top *t, long rows)
{
    long first = (long)t->first + rows, last = (long)t->n_rows - (long)t->page;

    if (first > last)
        first = last;
    t->first = first < 0 ? 0 : (size_t)first;
}

static bool key(struct top *t, int ch)
{
    t->note[0] = '\0';
    if (t->help) { /* any key closes the help */
        t->help = false;
        return true;
    }
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
    case 'R':
    case 'r':
        t->reverse = !t->reverse;
        break;
    case '?':
    case 'h':
    case 'H':
        t->help = true;
        break;
    case KEY_DOWN:
    case 'j':
        scroll_by(t, 1);
        break;
    case KEY_UP:
    case 'k':
        t->follow = false;
        scroll_by(t, -1);
        break;
    case KEY_NPAGE:
    case ' ':
        scroll_by(t, (long)t->page);
        break;
    case KEY_PPAGE:
    case 'b':
        t->follow = false;
        scroll_by(t, -(long)t->page);
        break;
    case KEY_HOME:
    case 'g':
        t->follow = false;
        t->first = 0;
        break;
    case KEY_END:
    case 'G':
        t->follow = true; /* draw_rows keeps the last page in view */
        scroll_by(t, (long)t->n_rows);
        break;
    case '/':
        ask_filter(t);
        break;
    default:
        break;
    }
    return true;
}

/* Subscribes again after the daemon went away; quiet when nothing answers,
 * since the screen is the curses one. */
static int resubscribe(struct top *t, json_object *params, rpc_client **c)
{
    char path[4096], err[UTIL_ERRLEN], when[16];
    time_t now = time(NULL);
    struct tm tm;

    query_socket_path(t->q.socket, path, sizeof(path));
    if (rpc_client_connect(path, c, err, sizeof(err)) < 0)
        return -ENOTCONN;
    if (query_call_more(*c, "Subscribe", params) < 0) {
        rpc_client_free(*c);
        *c = NULL;
        return -ENOTCONN;
    }
    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    t->lost[0] = '\0';
    snprintf(t->note, sizeof(t->note), "the daemon answers again (%s UTC)", when);
    return 0;
}

static void lose(struct top *t, rpc_client **c, const char *why)
{
    char when[16];
    time_t now = time(NULL);
    struct tm tm;

    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    snprintf(t->lost, sizeof(t->lost), "the daemon stopped at %s UTC (%s)", when, why);
    rpc_client_free(*c);
    *c = NULL;
}

/* SIGINT and SIGTERM as a descriptor to poll, so that Ctrl-C leaves the
 * full screen through the same door as q. *old: the mask to restore. */
static int quit_signals(sigset_t *old)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &set, old) < 0)
        return -errno;
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, old, NULL);
        return -e;
    }
    return fd;
}

/* The full-screen loop: q and Ctrl-C leave it with 0; an error is reported
 * once the terminal is back. */
static int live(struct top *t, rpc_client **c, json_object *params)
{
    time_t started = time(NULL);
    char err[UTIL_ERRLEN];
    sigset_t old;
    int r = 0, e, sfd = quit_signals(&old);
    bool run = true;

    if (sfd < 0) {
        log_error("cannot catch Ctrl-C: %s", strerror(-sfd));
        return sfd;
    }
    initscr();
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    draw(t, started);
    while (run) {
        struct pollfd pfd[3] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                {.fd = *c ? rpc_client_fd(*c) : -1, .events = POLLIN},
                                {.fd = sfd, .events = POLLIN}};
        if (poll(pfd, 3, 1000) < 0 && errno != EINTR) {
            r = -errno;
            snprintf(err, sizeof(err), "poll: %s", strerror(errno));
            break;
        }
        if (pfd[2].revents & POLLIN) {
            struct signalfd_siginfo si; /* taken, or it would end us once unblocked */
            if (read(sfd, &si, sizeof(si)) < 0)
                si.ssi_signo = 0;
            break;
        }
        if (*c && (e = drain(t, *c, err, sizeof(err))) < 0)
            lose(t, c, e == -ECONNRESET ? "connection closed" : err);
        else if (!*c && !(pfd[0].revents & POLLIN))
            resubscribe(t, params, c);
        for (int ch; run && (ch = getch()) != ERR;)
            run = key(t, ch);
        draw(t, started);
    }
    endwin();
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (r < 0)
        log_error("%s", err);
    else if (t->lost[0])
        fprintf(stderr, "wattprof top: %s\n", t->lost);
    return r;
}

/* top's own options, into the view (ctx). */
static int top_opt(void *ctx, int o, const char *arg)
{
    struct top *t = ctx;

    if (o == 'u')
        return query_parse_user(arg, &t->uid) == 0 ? 0 : -EINVAL;
    if (o != 'n')
        return QUERY_OPT_UNKNOWN;
    if (util_parse_long(arg, &t->limit) == 0 && t->limit > 0)
        return 0;
    log_error("-n '%s': expected a positive count", arg);
    return -EINVAL;
}

static int top_parse(int argc, char **argv, struct top *t)
{
    static const struct option opts[] = {
        QUERY_LONGOPTS, {"user", required_argument, NULL, 'u'}, {NULL, 0, NULL, 0}};
    static const query_cmd cmd = {"top", "hn:", opts, top_usage, top_opt, false};

    return query_parse(&cmd, &t->q, t, argc, argv);
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
    if (r == 0 && (t.q.out != QUERY_TEXT || !isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))) {
        char err[UTIL_ERRLEN];
        if ((r = query_next(c, QUERY_TIMEOUT_MS, &t.last, err, sizeof(err))) < 0)
            log_error("%s", err);
        else
            r = snapshot(&t);
    } else if (r == 0) {
        r = live(&t, &c, params);
    }
    json_object_put(params);
    rpc_client_free(c);
    json_object_put(t.last);
    free(t.seen);
    util_regex_free(t.re);
    return r < 0 ? 1 : 0;
}
