#!/usr/bin/python3
"""wattprofd's [track] comm filter on live processes: it tracks exactly the
matching ones, those running at start (found by the first /proc scan) and
those started later (fork then exec: found by the proc connector, or by the
rescan without it), and stops tracking them when they exit. Processes that
do not match (here `sleep`) are never tracked, whichever way they came."""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402

state = tempfile.mkdtemp(prefix="wattprofd-track-")
# A name of this run's own (comm is 15 bytes at most), so that another copy
# of this test or a benchmark on the same host cannot match the regex.
NAME = f"wptrk{os.getpid()}"[:15]
idle = os.path.join(state, NAME)
os.symlink(os.path.join(os.environ["BUILDDIR"], "tests", "bench_idle_proc"), idle)
conf = os.path.join(state, "wattprofd.conf")
with open(conf, "w") as f:
    f.write(f"[track]\ncomm = ^{NAME}$\n")

others = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
early = [subprocess.Popen([idle, "50"]) for _ in range(4)]
time.sleep(0.3)
d = Daemon("--config", conf, "--rate", "50", state=os.path.join(state, "d"))


def tracked_pids(want, timeout=8):
    """Waits until the live list holds `want` processes; returns their pids."""
    deadline = time.monotonic() + timeout
    while True:
        procs = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})["processes"]
        pids = {p["pid"] for p in procs if p.get("exited") is None}
        st = d.call("io.wattprof.Monitor.GetStatus")["status"]
        if (st["tracked"] == want and len(pids) == want) or time.monotonic() > deadline:
            return st["tracked"], pids, procs
        time.sleep(0.2)


n, pids, procs = tracked_pids(4)
check("the 4 matching processes running at start are tracked", n == 4 and pids == {p.pid for p in early},
      f"tracked {n}: {sorted(pids)} vs {sorted(p.pid for p in early)}")
late = [subprocess.Popen([idle, "50"]) for _ in range(3)]
later_others = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
n, pids, procs = tracked_pids(7)
check("3 started later are tracked too, and nothing else", n == 7 and
      pids == {p.pid for p in early + late}, f"tracked {n}: {sorted(pids)}")
check("every tracked process matches the regex",
      all(p["comm"] == NAME for p in procs), str({p["comm"] for p in procs}))
for p in early[:2]:
    p.kill()
    p.wait()
n, pids, _ = tracked_pids(5)
check("exited processes are no longer tracked", n == 5 and
      pids == {p.pid for p in early[2:] + late}, f"tracked {n}: {sorted(pids)}")
check("SIGTERM exits 0", d.stop() == 0)
for p in early[2:] + late + others + later_others:
    p.kill()
    p.wait()
finish()
