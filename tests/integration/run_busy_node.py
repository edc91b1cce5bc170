#!/usr/bin/python3
"""wattprof run on a node that never idles (docs/calibration.md).

The fake RAPL meter of daemon_busy_node (20 W + 30 W per busy CPU of the
test's own cgroup) and a background load in that cgroup stepping every 3 s
through 20-90 % of a CPU. `wattprof run` takes idle from the node's
calibration and books the host CPU its command did not use (through the
model, --meter-cgroup) as unattributed. Checked:
  daemon    with a daemon whose fit identified idle (waited for before each
            run), three runs of a burner of 1 CPU s each get 30 W x their
            CPU time within 2 %, and agree with each other within 2 %; the
            report says the idle is the daemon's, and it is one the daemon
            reported while the run asked (GetStatus watched through the
            run): its fitted idle within 1 %, or, when the live fit stopped
            being identifiable just then, exactly its stored one. A run
            whose source the daemon never showed in that time proves
            nothing either way and is done again (three tries);
  stored    without a daemon, idle is the fit stored in its database, and
            the burner is within 3 %;
  measured  with neither, idle is measured before the run, and the report
            says that no calibration was found and why.
The host's load average is printed with the figures."""
import json, os, re, shutil, subprocess, sys, threading, time

SRCDIR = os.environ["SRCDIR"]
WATTPROF = os.environ["WATTPROF"]
IDLE_W, PER_CPU_W = 20.0, 30.0

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import Daemon, busy_rig, check, finish  # noqa: E402

work, meter, bg, conf = busy_rig("run-busy", "wprb", IDLE_W, PER_CPU_W)
loads = []


def run(tag, *opts):
    """One `wattprof run` of a 1 CPU-second burner, started inside the
    meter's cgroup; its JSON report."""
    out = os.path.join(work, f"{tag}.json")
    p = subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', meter.cgroup,
                        WATTPROF, "run", "--json", "--output", out, "--meter-cgroup",
                        meter.cgroup, *opts, "--", os.environ["BURN"], "1.0"],
                       capture_output=True, text=True)
    loads.append(os.getloadavg()[0])
    check(f"{tag}: wattprof run exits 0", p.returncode == 0, p.stderr[-400:])
    with open(out) as f:
        return json.load(f)


def accurate(tag, rep, tol):
    """The burner's energy against the meter's truth, 30 W x its rusage CPU
    time. The run subtracts the meter's busy CPU that the burner's
    task-clock does not cover; where the task-clock reads more than rusage
    (on a loaded VM both clocks have been seen to part, as in daemon_live),
    that much of the background is left in the burner's share, so the bound
    above the truth grows by 30 W x the gap, printed with the figures."""
    want = PER_CPU_W * rep["cpu_s"]
    err = rep["energy_j"] / want - 1
    tc = [e["count"] / 1e9 for e in rep["events"] if e["name"] == "perf::TASK-CLOCK"]
    gap = max(0.0, tc[0] - rep["cpu_s"]) if tc else 0.0
    check(f"{tag}: the burner gets {PER_CPU_W:g} W per CPU within {tol:.0%}"
          " (more by the task-clock's excess over rusage)",
          -tol <= err <= tol + PER_CPU_W * gap / want,
          f"{rep['energy_j']:.2f} J against {want:.2f} J ({err:+.2%}); idle {rep['idle_w']:.2f} W"
          f" ({rep['idle_source']}); untracked {rep['untracked_cpu_s']:.2f} CPU s;"
          f" task-clock {tc[0] if tc else float('nan'):.4f} s against rusage"
          f" {rep['cpu_s']:.4f} s; load {os.getloadavg()[0]:.1f}")
    return err


def fitted(daemon, limit_s):
    """The daemon's calibration once GetStatus says it is fitted, or the last
    one seen after limit_s seconds."""
    t0 = time.monotonic()
    while True:
        c = daemon.call("io.wattprof.Monitor.GetStatus")["status"]["calibration"] or {}
        if c.get("source") == "fitted" or time.monotonic() - t0 >= limit_s:
            return c
        time.sleep(0.5)


class Watch:
    """The daemon's calibration, (source, idle_w), from every GetStatus
    snapshot between its start and stop(): a poll every 0.1 s, snapshots
    being made once a second."""

    def __init__(self, daemon):
        self.daemon, self.seen, self.done = daemon, [], threading.Event()
        self.poll()
        self.thread = threading.Thread(target=self.loop)
        self.thread.start()

    def poll(self):
        c = self.daemon.call("io.wattprof.Monitor.GetStatus")["status"]["calibration"] or {}
        self.seen.append((c.get("source"), c.get("idle_w")))

    def loop(self):
        while not self.done.wait(0.1):
            self.poll()

    def stop(self):
        self.done.set()
        self.thread.join()
        self.poll()
        return self.seen


def takes_daemons(rep, seen):
    """Whether the run took the daemon's idle, given what the daemon said
    meanwhile (Watch): its live fit's idle (within 1 %: it moves every
    second), or, when that fit stopped being identifiable as the run asked,
    exactly its stored one (the last identifiable fit, or the stored
    per-event fit's intercept: docs/calibration.md, "Where idle comes
    from"). None when the daemon never showed the source the run names."""
    m = re.match(r"the daemon's, (fitted|stored)\b", rep["idle_source"] or "")
    if rep["idle_note"] is not None or not m:
        return False
    same = [idle for src, idle in seen if src == m.group(1) and idle is not None]
    if not same:
        return None
    tol = 0.01 if m.group(1) == "fitted" else 1e-9
    return any(abs(rep["idle_w"] - idle) <= tol * idle for idle in same)


def daemon_run(tag, d):
    """A run beside the daemon once its fit is identified; (calibration
    before, report, whether it took the daemon's idle)."""
    for attempt in range(3):
        c = fitted(d, 60)
        watch = Watch(d)
        rep = run(tag, "--socket", d.sock)
        seen = watch.stop()
        took = takes_daemons(rep, seen)
        if took is not None:
            return c, rep, took, seen
        print(f"note - {tag}: the run took the daemon's {rep['idle_source']!r}, a source the"
              f" daemon's status never showed meanwhile ({seen}); again")
    return c, rep, False, seen


background = subprocess.Popen([bg, "--vary", "3", "300", "0.2,0.9,0.5,0.3,0.8,0.6"])
meter.add(background.pid)
d = None
try:
    d = Daemon("--config", conf, state=os.path.join(work, "state"))
    t0 = time.monotonic()
    c = fitted(d, 90)
    print(f"daemon: source {c.get('source')}, idle {c.get('idle_w', float('nan')):.2f} W after"
          f" {time.monotonic() - t0:.0f} s")
    check("the daemon identifies idle", c.get("source") == "fitted", str(c))

    errs = []
    for k in range(3):
        tag = f"daemon, run {k + 1}"
        c, rep, took, seen = daemon_run(tag, d)
        check(f"{tag}: the daemon's calibration is fitted before it (60 s at most)",
              c.get("source") == "fitted",
              f"source {c.get('source')}, identifiable {c.get('identifiable')}: {c.get('reason')}")
        check(f"{tag}: idle is the daemon's, one it reported while the run asked", took,
              f"{rep['idle_source']}; {rep['idle_note']}; {rep['idle_w']:.4f} W; the daemon's"
              f" meanwhile: " + ", ".join(sorted({f"{s} {i:.4f} W" for s, i in seen if i})))
        errs.append(accurate(tag, rep, 0.02))
    check("the repeats agree within 2 %", max(errs) - min(errs) <= 0.02,
          ", ".join(f"{e:+.2%}" for e in errs))
    check("the daemon exits 0", d.stop() == 0, d.read_log()[-300:])

    rep = run("stored", "--socket", os.path.join(work, "none"), "--db", d.db)
    check("stored: idle is the database's, and the report says the daemon was not there",
          rep["idle_source"].startswith("stored in ") and "no daemon at" in rep["idle_note"],
          f"{rep['idle_source']}; {rep['idle_note']}")
    accurate("stored", rep, 0.03)

    rep = run("measured", "--socket", os.path.join(work, "none"), "--db",
              os.path.join(work, "none.db"))
    check("neither: idle is measured before the run, and the report says why",
          rep["idle_source"].startswith("measured before the run")
          and "no database at" in rep["idle_note"], f"{rep['idle_source']}; {rep['idle_note']}")
    print(f"note - idle measured before the run on the busy node: {rep['idle_w']:.1f} W"
          f" (truth {IDLE_W:g} W); the burner {rep['energy_j']:.2f} J against"
          f" {PER_CPU_W * rep['cpu_s']:.2f} J")
finally:
    if d and d.proc.poll() is None:
        d.stop()
    background.kill()
    background.wait()
    meter.close()
print(f"host load average during the test: {min(loads, default=0):.1f} to"
      f" {max(loads, default=0):.1f} on {os.cpu_count()} CPUs")
if not daemon_harness.failures:
    shutil.rmtree(work, ignore_errors=True)
finish()
