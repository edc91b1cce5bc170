#!/usr/bin/python3
"""1,000 short-lived processes do not leave 1,000 series behind.

A live wattprofd tracks only processes named wpxshort (a link to the burn
helper: it sleeps 0.5 s, so the daemon finds it even by rescanning /proc,
then burns 10 ms of CPU) and exports per-pid series for its top 5 with a
grace period of 2 s. The test runs 1,000 of them, 80 at a time, scraping
all along. It checks that the daemon really tracked them (the exited
counter), that the command's energy and CPU counters never went down while
processes came and went, that its energy counter equals the sum of the
daemon's own per-process totals (over Varlink), and that once the grace period has passed the
command is down to its four per-command series and no per-pid ones."""
import os, re, subprocess, sys, tempfile, threading, time, urllib.request

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

N, AT_ONCE, GRACE_S, TOP = 1000, 80, 2, 5
if os.environ.get("TEST_SLOW") == "0":
    print("TEST_SLOW=0: 1,000 processes under a sanitized daemon take over a minute here")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="wattprof-card-")
short = os.path.join(tmp, "wpxshort")
os.symlink(os.environ["BURN"], short)
with open(f"{tmp}/d.conf", "w") as f:
    f.write(f"[daemon]\nrescan_s = 0.05\n[track]\ncomm = ^wpxshort$\n"
            f"[exporter]\nlisten = 127.0.0.1:0\ntop_pids = {TOP}\ngrace = {GRACE_S}s\n")
d = Daemon("--config", f"{tmp}/d.conf", state=f"{tmp}/state")
url = None
for _ in range(100):
    m = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", d.read_log())
    if m:
        url = m.group(1)
        break
    time.sleep(0.05)


def scrape():
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def value(text, name, labels=""):
    """Sum of the samples of `name` whose labels contain `labels`."""
    total = 0.0
    for line in text.splitlines():
        head, _, v = line.rpartition(" ")
        if head.split("{")[0] == name and labels in head:
            total += float(v)
    return total


def series(text, pattern):
    return [ln for ln in text.splitlines() if not ln.startswith("#") and pattern in ln]


for _ in range(100):  # the first snapshot comes after one second of ticks
    try:
        before = scrape()
        break
    except OSError:
        time.sleep(0.1)
exited0 = value(before, "wattprof_exited_processes_total")

# Scrapes while processes come and go: counters must only grow.
seen, stop = [], threading.Event()


def scraper():
    while not stop.is_set():
        t = scrape()
        seen.append((value(t, "wattprof_process_energy_joules_total", 'command="wpxshort"'),
                     value(t, "wattprof_process_cpu_seconds_total", 'command="wpxshort"'),
                     len(series(t, 'command="wpxshort"'))))
        time.sleep(0.2)


th = threading.Thread(target=scraper)
th.start()
t0 = time.monotonic()
running = []
for i in range(N):
    running.append(subprocess.Popen([short, "--wait", "0.5", "0.01"]))
    if len(running) >= AT_ONCE:
        running.pop(0).wait()
for p in running:
    p.wait()
spawn_s = time.monotonic() - t0
time.sleep(1.5)  # the last exits reach a published snapshot
stop.set()
th.join()
time.sleep(GRACE_S + 1.5)
after = scrape()

exited = value(after, "wattprof_exited_processes_total") - exited0
check(f"the daemon tracked most of the {N} processes ({spawn_s:.1f} s)", exited >= 0.9 * N,
      f"{exited:.0f} exited")
energy = [s[0] for s in seen]
cpu = [s[1] for s in seen]
check(f"energy and CPU counters never went down over {len(seen)} scrapes",
      len(seen) >= 5 and all(b >= a for a, b in zip(energy, energy[1:]))
      and all(b >= a for a, b in zip(cpu, cpu[1:])), f"{energy[:3]}...{energy[-3:]}")
final_cpu = value(after, "wattprof_process_cpu_seconds_total", 'command="wpxshort"')
check(f"the command's CPU counter kept the ended processes' CPU ({final_cpu:.2f} s of "
      f"{N * 0.01:.0f} s burned)", final_cpu >= 0.5 * min(exited, N) * 0.01, f"{final_cpu:.3f} s")
# The daemon's own per-process totals (Varlink, from its database) add up
# to the command's counter: no ended process's energy was dropped.
procs, page = [], {"next_offset": 0}
while page["next_offset"] is not None:  # pages of at most 1000
    page = d.call("io.wattprof.Monitor.ListProcesses",
                  {"window_s": 3600.0, "include_exited": True, "comm": "^wpxshort$",
                   "offset": page["next_offset"]})
    procs += page["processes"]
want = sum(p["total_j"] for p in procs)
got = value(after, "wattprof_process_energy_joules_total", 'command="wpxshort"')
check(f"the command's energy counter {got:.4f} J = the sum of its {len(procs)} processes' "
      f"totals over Varlink {want:.4f} J", len(procs) >= 0.9 * N and abs(got - want) <= 1e-9 * want)
check("at most 4 + 2 x top_pids series at any scrape",
      max(s[2] for s in seen) <= 4 + 2 * TOP, str(max(s[2] for s in seen)))
left = series(after, 'command="wpxshort"')
check("after the grace period: the 4 per-command series, no per-pid ones",
      len(left) == 4 and not any("pid=" in ln for ln in left), "\n".join(left))
check("per-pid series were exported during the run", max(s[2] for s in seen) > 4)
check("the whole exposition stays small", len(series(after, "")) < 100,
      str(len(series(after, ""))))
check("SIGTERM exits 0", d.stop() == 0)
if not daemon_harness.failures:
    subprocess.run(["rm", "-rf", tmp])
finish()
