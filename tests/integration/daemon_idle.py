#!/usr/bin/python3
"""Processes that sleep through ticks cost wattprofd no work per tick, and
are still booked exactly as a tick with zero rates books them: no dynamic
power, so no attributed energy, and the standalone estimate p_k(0)*dt for
every tick (docs/design.md, "Sampling and energy", step 4). The booking is lazy
(accounting.c, account_settle_idle), so this checks it from outside: over several
published snapshots a process that never runs gains exactly 57 W x elapsed
time of standalone energy under the built-in model (p(0) = 57 W), and one
that wakes every 100 ms for microseconds gains the same plus its tiny
dynamic part. A tick lost or booked twice is 1.14 J either way."""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import varlink_peer  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

P0_W = 57.0       # models/cputime.json: intercept 57, all scaler minimums 0
PER_CPU_W = 6.6   # its task-clock coefficient per busy core
TOLERANCE_S = 0.03  # snapshot times jitter with the tick that publishes them

state = tempfile.mkdtemp(prefix="wattprofd-idle-")
# Names of this run's own, so no other process on the host matches.
base = f"wpidl{os.getpid()}"[:13]
sleeper_name, waker_name = base + "s", base + "w"
os.symlink("/bin/sleep", os.path.join(state, sleeper_name))
os.symlink(os.path.join(os.environ["BUILDDIR"], "tests", "bench_idle_proc"),
           os.path.join(state, waker_name))
conf = os.path.join(state, "wattprofd.conf")
with open(conf, "w") as f:
    f.write(f"[track]\ncomm = ^({sleeper_name}|{waker_name})$\n")

sleeper = subprocess.Popen([os.path.join(state, sleeper_name), "120"])
waker = subprocess.Popen([os.path.join(state, waker_name), "100"])
time.sleep(0.3)
d = Daemon("--config", conf, "--rate", "50", state=os.path.join(state, "d"))
try:
    deadline = time.monotonic() + 10
    while d.call("io.wattprof.Monitor.GetStatus")["status"]["tracked"] < 2:
        if time.monotonic() > deadline:
            sys.exit("the two processes were not tracked within 10 s")
        time.sleep(0.1)

    snaps = []
    with varlink_peer.Connection(d.sock, timeout=10) as c:
        for params, more in c.stream("io.wattprof.Monitor.Subscribe", {"interval_s": 1, "limit": 0}):
            procs = {p["pid"]: p for p in params["processes"]}
            if sleeper.pid in procs and waker.pid in procs:
                snaps.append((params["t"], procs))
            if len(snaps) == 7 or not more:
                break
    st = d.call("io.wattprof.Monitor.GetStatus")["status"]
finally:
    rc = d.stop()
    sleeper.kill()
    waker.kill()
check("daemon exits 0", rc == 0, str(rc))
check("7 snapshots with both processes", len(snaps) == 7, str(len(snaps)))
check("most reads were skipped", st["reads_skipped"] is not None and st["reads_skipped"] > 0.5,
      str(st["reads_skipped"]))

(t0, a), (t1, b) = snaps[1], snaps[-1]
dt = t1 - t0
for pid, name in ((sleeper.pid, "sleeper"), (waker.pid, "waker")):
    gained = b[pid]["standalone_j"] - a[pid]["standalone_j"]
    dyn_bound = PER_CPU_W * 0.01 * dt  # the waker runs far below 1 % of a core
    print(f"{name}: standalone +{gained:.4f} J over {dt:.3f} s = {gained / dt:.4f} W; "
          f"attributed total {b[pid]['total_j']:.6f} J, cpu {b[pid]['cpu']:.6f}")
    check(f"{name}: standalone grows by p(0) = 57 W for every tick, within {TOLERANCE_S} s",
          P0_W * (dt - TOLERANCE_S) <= gained <= P0_W * (dt + TOLERANCE_S) + dyn_bound,
          f"{gained:.4f} J vs {P0_W * dt:.4f} J")
check("the sleeper never ran: no attributed energy", b[sleeper.pid]["total_j"] == 0,
      str(b[sleeper.pid]["total_j"]))
check("the waker ran: some attributed energy", b[waker.pid]["total_j"] > 0,
      str(b[waker.pid]["total_j"]))
finish()
