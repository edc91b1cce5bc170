#!/usr/bin/python3
"""An hour of wattprofd, compressed: a fd and memory leak soak.

A recording of one hour at 50 Hz (180,000 ticks) with process churn —
LIVE processes at any time, one exiting and a new one appearing every
second, 3,600 in all, with one RAPL zone — is replayed at --speed max,
which runs every path a live hour runs but the hardware reads: tracking,
attribution, per-second rows, process exits, the store's commits and
retention passes. TEST_SLOW=0 (the ASan build) replays the first 18,000
ticks (six minutes).

Checked:
  - the replay finishes, no record is dropped (a replay waits for the
    store's queue rather than outrun its writer) and every process and
    second is stored;
  - the daemon's open fds, counted in /proc/PID/fd ten times a second, stay
    flat (after the first tenth: max - min <= 2);
  - its resident memory stays flat (normal build: growth over the second
    half <= 8 MiB; under ASan, whose allocator quarantines memory, it is
    reported only);
  - SIGTERM exits 0 with no leak: in the ASan build LeakSanitizer checks
    at exit (a leak makes the exit status non-zero and prints a report);
    in a normal build, valgrind --leak-check=full runs a 3,000-tick replay
    of the same recording and must find no definite or indirect leak."""
import json, os, shutil, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

SLOW = os.environ.get("TEST_SLOW") == "1"
TICKS = 180_000 if SLOW else 18_000
LIVE, DT = 8, 20_000_000
opts = json.load(open(os.path.join(BUILDDIR, "meson-info", "intro-buildoptions.json")))
ASAN = "address" in next(o["value"] for o in opts if o["name"] == "b_sanitize")
print(f"note - {TICKS} ticks ({TICKS / 50 / 60:.0f} min at 50 Hz), "
      f"{'ASan build: LeakSanitizer' if ASAN else 'normal build: valgrind'}; "
      f"host load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

work = tempfile.mkdtemp(prefix="wattprofd-soak-")
trace = os.path.join(work, "hour.trace")
EVENTS = json.load(open(os.path.join(SRCDIR, "models", "cputime.json")))["events"]
t0 = 10**12
start_real = time.time_ns() - TICKS * DT - 10**9  # the hour ends now


def write_trace(path, ticks):
    """LIVE processes at once; every 50 ticks the oldest exits and one more
    appears. Deltas vary by process and tick; lines are built by hand,
    json.dumps would take minutes for an hour."""
    born = 0
    with open(path, "w") as f:
        f.write(json.dumps({"format": "wattprof-trace/1", "events": EVENTS,
                            "zones": [{"id": "intel-rapl:0", "name": "package-0"}],
                            "rate_hz": 50, "boot_id": "00000000-0000-0000-0000-0000000050a4",
                            "realtime_offset_ns": start_real - t0}) + "\n")
        live = []

        def appear():
            nonlocal born
            pid = 10000 + born
            f.write(f'{{"proc":{{"pid":{pid},"ppid":1,"start":{1000 + born},"uid":0,'
                    f'"comm":"soak{born % 97}","cmdline":"soak --n {born}","cgroup":"/soak"}}}}\n')
            live.append((pid, 1000 + born))
            born += 1

        for _ in range(LIVE):
            appear()
        for k in range(ticks):
            if k and k % 50 == 0:
                pid, start = live.pop(0)
                f.write(f'{{"exit":{{"pid":{pid},"start":{start}}}}}\n')
                appear()
            procs = ",".join(
                f'{{"pid":{pid},"start":{st},"d":[{(pid * 7 + k) % 20 * 1000000},{k % 3},0,'
                f'{k % 5}],"r":[1,1,1,1]}}' for pid, st in live)
            f.write(f'{{"tick":{{"t":{t0 + (k + 1) * DT},"dt":{DT},'
                    f'"energy_j":[{1 + k % 4 * 0.25}],"procs":[{procs}]}}}}\n')
    return born


born = write_trace(trace, TICKS)
print(f"note - recording: {os.path.getsize(trace) / 2**20:.0f} MiB, {born} processes")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


started = time.monotonic()
d = Daemon("--replay", trace, "--speed", "max", state=os.path.join(work, "d"))
samples = []  # (seconds since start, fds, rss KiB)
limit = 1500 if SLOW else 300
while "finished after" not in d.read_log() and d.proc.poll() is None:
    if time.monotonic() - started > limit:
        break
    try:
        samples.append((time.monotonic() - started, fds(d.proc.pid), rss_kib(d.proc.pid)))
    except (OSError, StopIteration):
        break
    time.sleep(0.1)
took = time.monotonic() - started
check("the replay finished", f"finished after {TICKS} ticks" in d.read_log(),
      d.read_log()[-300:])
time.sleep(1.5)
if d.proc.poll() is None:
    samples.append((time.monotonic() - started, fds(d.proc.pid), rss_kib(d.proc.pid)))
    warn = [w for w in d.call("io.wattprof.Monitor.GetStatus")["status"]["warnings"]
            if "dropped" in w]
    check("no record dropped: a replay waits for the store", not warn, str(warn))
rc = d.stop()
log = d.read_log()
check("SIGTERM exits 0" + (" (LeakSanitizer found no leak)" if ASAN else ""),
      rc == 0 and "LeakSanitizer" not in log, f"exit {rc}: {log[-1500:]}")
n_procs = d.sql("SELECT count(*) FROM processes")[0][0]
n_secs = d.sql("SELECT count(*), sum(duration_s) FROM host_attribution")[0]
check("every process and second is stored", n_procs == born and
      abs((n_secs[1] or 0) - TICKS * DT / 1e9) < 1e-3,
      f"{n_procs} of {born} processes; {n_secs[0]} seconds, {n_secs[1]} s stored")

steady = [s for s in samples if s[0] >= took / 10]
fd_counts = [s[1] for s in steady]
check(f"open fds stay flat ({len(steady)} samples over {took:.0f} s)",
      len(steady) >= 3 and max(fd_counts) - min(fd_counts) <= 2,
      f"min {min(fd_counts, default=None)}, max {max(fd_counts, default=None)}")
half = [s[2] for s in samples if s[0] >= took / 2]
growth = (max(half) - half[0]) / 1024 if half else None
detail = (f"RSS {samples[0][2] / 1024:.1f} MiB at start, {half[0] / 1024:.1f} at half way, "
          f"max {max(s[2] for s in samples) / 1024:.1f}; growth over the second half "
          f"{growth:.1f} MiB" if half else str(samples))
if ASAN:
    print(f"note - memory under ASan (quarantine: not checked): {detail}")
else:
    check("resident memory stays flat (second half grows <= 8 MiB)",
          growth is not None and growth <= 8, detail)
print(f"note - replayed {TICKS} ticks in {took:.1f} s ({TICKS / took:.0f} ticks/s); "
      f"fds {min(fd_counts, default=0)}-{max(fd_counts, default=0)}; {detail}")

if not ASAN:
    vg = shutil.which("valgrind")
    if not vg:
        print("skip - valgrind leak check: valgrind is not installed (Debian package valgrind)")
    else:
        short = os.path.join(work, "short.trace")
        write_trace(short, 3000)
        state = os.path.join(work, "vg")
        os.makedirs(state)
        vlog = os.path.join(work, "valgrind.log")
        p = subprocess.Popen([vg, "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                              "--error-exitcode=99", f"--log-file={vlog}",
                              os.path.join(BUILDDIR, "daemon", "wattprofd"), "--state-dir", state,
                              "--socket", os.path.join(state, "sock"), "--replay", short,
                              "--speed", "max"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 240
        out = ""
        while time.monotonic() < end and p.poll() is None:
            time.sleep(1)
            if os.path.exists(vlog) and os.path.exists(os.path.join(state, "wattprof.db")):
                # the replay is done once a query sees its last second
                try:
                    import sqlite3
                    con = sqlite3.connect(f"file:{state}/wattprof.db?mode=ro", uri=True,
                                          timeout=5)
                    secs = con.execute("SELECT sum(duration_s) FROM host_attribution").fetchone()
                    con.close()
                    if secs[0] and secs[0] >= 3000 * DT / 1e9 - 1.01:
                        break
                except sqlite3.Error:
                    pass
        p.terminate()
        try:
            _, out = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            _, out = p.communicate()
        report = open(vlog).read() if os.path.exists(vlog) else ""
        summary = [line.split("== ", 1)[-1] for line in report.splitlines()
                   if "definitely lost" in line or "indirectly lost" in line
                   or "ERROR SUMMARY" in line]
        check("valgrind: a 3,000-tick replay and SIGTERM leave no leak",
              p.returncode == 0 and "finished after 3000 ticks" in out, f"exit {p.returncode}: "
              f"{summary}; {out[-300:]}")
        print(f"note - valgrind: {summary}")
if not daemon_harness.failures:
    shutil.rmtree(work, ignore_errors=True)
finish()
