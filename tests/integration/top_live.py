#!/usr/bin/python3
"""wattprof top's live screen under tmux, against a real wattprofd.

Twelve processes of the test's own (a link to the burn helper named wptop,
each at a 2 % duty cycle) are filtered in and sorted by pid, so the rows are
known. Checks: the columns fit 80 and 60 columns (CPU% whole, the status
line on one line); J view never above J total; scrolling (j, Down, PgDn,
End, Home, k); after End the view follows the last rows as processes come,
until k scrolls up; reverse sort; the help key; when the daemon stops, the last
screen stays with a line saying so and top subscribes again to the next
daemon; Ctrl-C and q exit 0."""
import os, re, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, cleaned_up, finish  # noqa: E402

WATTPROF = os.environ["WATTPROF"]
N_PROCS, PAGE_LINES = 12, 12  # a pane of 12 lines holds 7 rows
if not shutil.which("tmux"):
    print("SKIP: tmux is not installed (Debian package tmux)")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="wattprof-top-")
tsock = f"{tmp}/tmux.sock"
link = f"{tmp}/wptop"
procs = []  # the test's processes, all ended at the end


def tmx(*args):
    return subprocess.run(["tmux", "-S", tsock, *args], capture_output=True, text=True)


def pane(session):
    return tmx("capture-pane", "-p", "-t", session).stdout.split("\n")


def wait_for(session, pred, timeout=10):
    """Waits until pred(lines) holds on a settled screen; returns the last lines seen.

    A capture can land while top is half-way through writing a frame (curses
    sends only the characters that changed), which mixes rows of two frames;
    a screen counts as settled when two captures 0.1 s apart are the same."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        lines = pane(session)
        if (pred(lines) and lines == last) or time.monotonic() > deadline:
            return lines
        last = lines
        time.sleep(0.1)


def row_pids(lines):
    return [int(m.group(1)) for ln in lines[4:] if (m := re.match(r"\s*(\d+) ", ln))]


def joules(s):
    m = re.fullmatch(r"([-\d.]+) (µJ|mJ|J|kJ|MJ|kWh)", s.strip())
    scale = {"µJ": 1e-6, "mJ": 1e-3, "J": 1, "kJ": 1e3, "MJ": 1e6, "kWh": 3.6e6}
    return float(m.group(1)) * scale[m.group(2)] if m else None


def start_top(session, width, sock, rc):
    tmx("new-session", "-d", "-s", session, "-x", str(width), "-y", str(PAGE_LINES),
        f"{WATTPROF} top --socket {sock} 2>{rc}.err; echo $? >{rc}; sleep 60")


def keys(session, *k):
    tmx("send-keys", "-t", session, *k)


def spawn(n):
    """Starts n more of the test's processes; returns their pids."""
    new = [subprocess.Popen([link, "--duty", "0.02", "1"]) for _ in range(n)]
    procs.extend(new)
    return [p.pid for p in new]


def exit_status(rc, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(rc) and open(rc).read().strip():
            return open(rc).read().strip()
        time.sleep(0.1)
    return None


def main():
    if tmx("new-session", "-d", "-s", "probe", "sleep 600").returncode != 0:
        print("SKIP: tmux cannot start a server here")
        sys.exit(77)
    os.symlink(os.environ["BURN"], link)
    pids = sorted(spawn(N_PROCS))
    d = Daemon(state=f"{tmp}/state")
    try:
        with cleaned_up(d):
            body(d, pids)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        tmx("kill-server")
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


def body(d, pids):
    s, rc = "top80", f"{tmp}/rc80"
    start_top(s, 80, d.sock, rc)
    lines = wait_for(s, lambda ls: "host: measured" in ls[0])
    check("top draws its host line", "host: measured" in lines[0], lines[0])
    keys(s, "/", "^wptop$", "Enter")
    time.sleep(0.2)
    keys(s, "N")
    lines = wait_for(s, lambda ls: row_pids(ls)[:1] == pids[:1] and "sort: pid" in ls[1])
    check("filtered to the test's processes, sorted by pid", row_pids(lines) == pids[:7],
          f"{row_pids(lines)} want {pids[:7]}\n" + "\n".join(lines))
    check("at 80 columns the header ends with the whole CPU% column",
          lines[3].rstrip().endswith("CPU%"), repr(lines[3]))
    check("the status line says which rows are shown", f"{N_PROCS} processes" in lines[1]
          and "rows 1-7" in lines[1], lines[1])
    bad = []
    for ln in [ln for ln in lines[4:] if re.match(r"\s*\d+ ", ln)]:
        js = [joules(c) for c in re.findall(r"[-\d.]+ (?:µJ|mJ|J|kJ|MJ|kWh)\b", ln)]
        if len(js) == 2 and js[0] > js[1] * (1 + 1e-9) + 1e-12:
            bad.append(ln)
        elif len(js) != 2:
            bad.append(f"unparsed: {ln}")
    check("J view is never above J total", not bad, "\n".join(bad))

    for k, want_first, want_range in [("j", 1, "rows 2-8"), ("Down", 2, "rows 3-9"),
                                      ("k", 1, "rows 2-8"), ("NPage", 5, "rows 6-12"),
                                      ("Home", 0, "rows 1-7"), ("End", 5, "rows 6-12"),
                                      ("g", 0, "rows 1-7"), ("G", 5, "rows 6-12")]:
        keys(s, k)
        lines = wait_for(s, lambda ls: want_range in ls[1])
        check(f"key {k}: {want_range}", want_range in lines[1]
              and row_pids(lines)[:1] == pids[want_first:want_first + 1],
              f"{lines[1]} {row_pids(lines)}")
    keys(s, "g", "R")
    lines = wait_for(s, lambda ls: "reversed" in ls[1])
    check("key R reverses the order", "sort: pid, reversed" in lines[1]
          and row_pids(lines) == pids[::-1][:7], f"{lines[1]} {row_pids(lines)}")
    keys(s, "?")
    lines = wait_for(s, lambda ls: "keys" in ls[0])
    check("key ? shows the help", lines[0].startswith("wattprof top: keys")
          and any("reverse" in ln for ln in lines), "\n".join(lines))
    keys(s, "x")
    lines = wait_for(s, lambda ls: "host: measured" in ls[0])
    check("any key leaves the help", "host: measured" in lines[0], lines[0])

    # After End the last rows stay in view as processes come, until k.
    keys(s, "R", "G")
    lines = wait_for(s, lambda ls: "sort: pid " in ls[1] and "rows 6-12" in ls[1])
    check("key G at the end again", "rows 6-12" in lines[1], lines[1])
    now = sorted(pids + spawn(3))
    lines = wait_for(s, lambda ls: f"{N_PROCS + 3} processes" in ls[1], timeout=20)
    check("after End, new rows scroll into view: the last page is shown",
          f"{N_PROCS + 3} processes" in lines[1] and "rows 9-15" in lines[1]
          and row_pids(lines) == now[-7:], f"{lines[1]} {row_pids(lines)} want {now[-7:]}")
    keys(s, "k")
    lines = wait_for(s, lambda ls: "rows 8-14" in ls[1])
    check("key k leaves the end: rows 8-14", "rows 8-14" in lines[1], lines[1])
    now = sorted(now + spawn(1))
    lines = wait_for(s, lambda ls: f"{N_PROCS + 4} processes" in ls[1], timeout=20)
    check("after k, new rows no longer move the view", f"{N_PROCS + 4} processes" in lines[1]
          and "rows 8-14" in lines[1] and row_pids(lines) == now[7:14],
          f"{lines[1]} {row_pids(lines)} want {now[7:14]}")

    # The daemon stops: the screen and its rows stay, with a line saying so.
    d.stop()
    lines = wait_for(s, lambda ls: "the daemon stopped at" in ls[2])
    check("when the daemon stops, top says so on its screen",
          re.match(r"the daemon stopped at \d\d:\d\d:\d\d UTC \(connection closed\); waiting",
                   lines[2]) is not None, "\n".join(lines))
    check("and keeps the last screen", "host: measured" in lines[0]
          and len(row_pids(lines)) == 7, "\n".join(lines))
    check("and is still running", exit_status(rc, timeout=1.5) is None)
    d2 = Daemon(state=d.dir)
    with cleaned_up(d2):
        lines = wait_for(s, lambda ls: "answers again" in ls[2])
        check("a new daemon: top subscribes again", "the daemon answers again" in lines[2],
              "\n".join(lines))
        keys(s, "C-c")
        check("Ctrl-C exits 0", exit_status(rc) == "0", str(exit_status(rc)))

        # 60 columns: the columns that do not fit are left out, nothing wraps.
        s, rc = "top60", f"{tmp}/rc60"
        start_top(s, 60, d2.sock, rc)
        lines = wait_for(s, lambda ls: "host: measured" in ls[0] and row_pids(ls))
        check("at 60 columns the header still ends with CPU%",
              lines[3].rstrip().endswith("CPU%"), repr(lines[3]))
        check("at 60 columns the status line stays on one line",
              re.match(r"\d+ processes", lines[1]) is not None and lines[2].strip() == "",
              "\n".join(lines[:4]))
        check("at 60 columns J view is left out first", "J view" not in lines[3]
              and "J total" in lines[3], repr(lines[3]))
        d2.stop()
        wait_for(s, lambda ls: "the daemon stopped at" in ls[2])
        keys(s, "q")
        check("q exits 0 after the daemon stopped", exit_status(rc) == "0", str(exit_status(rc)))
        err = open(f"{rc}.err").read()
        check("and leaves one line saying the daemon stopped",
              re.fullmatch(r"wattprof top: the daemon stopped at \d\d:\d\d:\d\d UTC "
                           r"\(connection closed\)\n", err) is not None, repr(err))


if __name__ == "__main__":
    main()
