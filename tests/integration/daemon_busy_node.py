#!/usr/bin/python3
"""Right joules on a node that never idles (docs/calibration.md).

A fake RAPL meter (tests/helpers/fake-powercap) whose package counter
energy-writer advances at 20 W + 30 W per busy CPU of the test's own cgroup,
and the built-in, uncalibrated model (6.6 W per busy CPU, idle 57 W). A
background load that never stops keeps changing between 20 % and 90 % of a
CPU; burners of known CPU time (the kernel's rusage) run after a warm-up.

Checked, each source of idle in turn (and first a quiet node, where
burners of 1 and 2 CPU s must be within 2 % as before):
  fitted      a fresh daemon on the busy, varying node identifies idle
              within 60 s (status: source fitted, identifiable, idle within
              1 W of 20 W), and each burner's attributed energy is within
              2 % of 30 W x its CPU time;
  stored      restarted on the same database under a steady load (the fit
              cannot tell idle), it starts from the stored fit: source
              stored, and a burner within 3 %;
  percentile  a fresh database under the same steady load: source
              percentile, not identifiable, with the reason, and a warning;
  model       a model trained to the meter under the steady load: source
              model; then, beside a load no tracked process explains, that
              load's energy (30 W per CPU of it) is unattributed within
              50 % (measured -10 % to -27 %; a tracked burner beside it is
              reported, not asserted).
On a host whose load is past 4 x its CPUs the bounds are widened (4 x),
and the output says so; where the fake meter itself stalled in over a
fifth of the seconds, accuracy is not asserted (skip, with the reason).
Every second stored: host = idle + attributed + unattributed, none negative.
Figures, with the host's load, are printed for docs/calibration.md."""
import os, shutil, subprocess, sys, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
IDLE_W, PER_CPU_W = 20.0, 30.0

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import (Daemon, busy_rig, check, cpu_of, fake_meter_model,  # noqa: E402
                            meter_stalled, rig_status, steal_s, workload_env)

work, meter, wpburn, conf = busy_rig("busy", "wpbn", IDLE_W, PER_CPU_W)
untracked = os.path.join(work, f"wpbg{os.getpid()}"[:15])  # a load no tracked process explains
shutil.copy(os.environ["BURN"], untracked)
os.chmod(untracked, 0o755)
state = os.path.join(work, "node")
loads = []


def spawn(*args, prog=None):
    """A burner in the meter's cgroup; it waits first so that the daemon
    tracks it before it works."""
    p = subprocess.Popen([prog or wpburn, "--wait", "1", *args], env=workload_env())
    meter.add(p.pid)
    return p


def proc_cpu(pid):
    """CPU seconds so far of a running process (utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def calib_line(c):
    return (f"source {c['source']}, idle {c['idle_w']:.2f} W"
            + (f" +- {c['idle_se_w']:.2f}" if c["idle_se_w"] is not None else "")
            + (f", scale {c['scale']:.3f}, R2 {c['r2']:.4f}" if c["scale"] is not None else "")
            + f"; live fit: {c['rows']} s kept, {c['rejected']} left out, spread "
            + (f"{c['spread_w']:.1f} W" if c["spread_w"] is not None else "-")
            + (f", idle {c['live_idle_w']:.2f} +- {c['live_idle_se_w']:.2f} W"
               if c["live_idle_w"] is not None and c["live_idle_se_w"] is not None else "")
            + ("" if c["identifiable"] else f", not identifiable: {c['reason']}"))


def overloaded():
    """A run queue over four times the CPUs (load past 8 on 2 CPUs): the
    meter, the daemon and the burners then wait for a CPU for tens of
    milliseconds, and energy moves between ticks with different mixes of
    processes (measured at load 14: two burners sharing a quiet node
    -6.1 % and +2.6 %, their sum right to 0.3 %)."""
    return os.getloadavg()[0] > 4 * os.cpu_count()


class Stalled(Exception):
    """The meter stalled too often for the rest of the test to mean anything."""


def burners(d, cpu_s, tol, what):
    """Runs one burner per CPU time in cpu_s; checks each one's energy
    within tol (2.5 tol on an overloaded host, saying so)."""
    steal0 = steal_s()
    ps = [spawn(str(s)) for s in cpu_s]
    cpus = [cpu_of(p) for p in ps]
    stolen = steal_s() - steal0
    time.sleep(2.5)  # past a second boundary and the store's commit
    stalled = meter_stalled(d)
    if stalled:
        for p, cpu in zip(ps, cpus):
            got = d.call("io.wattprof.Monitor.GetProcess", {"pid": p.pid})["process"]["total_j"]
            print(f"skip - {what}: {stalled}: a burner of {cpu:.2f} CPU s got {got:.2f} J,"
                  f" not asserted")
        return
    if overloaded():
        tol *= 4
        what += f" (overloaded host: load {os.getloadavg()[0]:.1f}, bound widened)"
    for p, cpu in zip(ps, cpus):
        got = d.call("io.wattprof.Monitor.GetProcess", {"pid": p.pid})["process"]["total_j"]
        want = PER_CPU_W * cpu
        check(f"{what}: a burner of {cpu:.2f} CPU s gets {PER_CPU_W:g} W per CPU within"
              f" {tol:.0%}", abs(got - want) <= tol * want,
              f"{got:.2f} J against {want:.2f} J ({(got - want) / want:+.2%});"
              f" load {os.getloadavg()[0]:.1f}, {stolen:.2f} s stolen by the hypervisor")


def conserved(d, what):
    rows = d.sql("SELECT host_j, idle_j, attributed_j, unattributed_j FROM host_attribution")
    bad = [r for r in rows if min(r) < 0 or abs(r[0] - r[1] - r[2] - r[3]) > 1e-9 * max(1, r[0])]
    check(f"{what}: every second, host = idle + attributed + unattributed, none negative",
          rows and not bad, f"{len(rows)} rows, {bad[:2]}")


background, skipped, d = None, None, None
try:
    # ---- a quiet node: no regression --------------------------------------
    d = Daemon("--config", conf, state=os.path.join(work, "quiet"))
    time.sleep(2)
    burners(d, [1.0, 2.0], 0.02, "quiet node")
    print(f"quiet node: {calib_line(rig_status(d, loads)['calibration'])}")
    conserved(d, "quiet node")
    check("quiet node: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

    # ---- fitted: the busy, varying node ----------------------------------
    background = spawn("--vary", "3", "120", "0.2,0.9,0.5,0.3,0.8,0.6")
    t0, steal0 = time.monotonic(), steal_s()
    d = Daemon("--config", conf, state=state)
    st = rig_status(d, loads)
    while st["calibration"] is None or st["calibration"]["source"] != "fitted":
        if time.monotonic() - t0 > 60:
            break
        time.sleep(1)
        st = rig_status(d, loads)
    took = time.monotonic() - t0
    c = st["calibration"]
    # The meter charges the cgroup's CPU time, which leaves out the time
    # the hypervisor took (steal); a per-task task-clock keeps it.
    print(f"after {took:.0f} s: {calib_line(c)}; {steal_s() - steal0:.2f} s stolen by the"
          f" hypervisor")
    stalled = meter_stalled(d)
    if stalled:
        d.stop()
        raise Stalled(f"{stalled}: too few measured seconds to identify idle, and nothing to"
                      f" check the rest against; {calib_line(c)}")
    check("busy node: idle is fitted within 60 s", c["source"] == "fitted" and c["identifiable"],
          calib_line(c))
    check("busy node: the fitted idle is the meter's 20 W within 1 W",
          abs(c["idle_w"] - IDLE_W) <= 1.0, calib_line(c))
    powers = sorted(r[0] / r[1] for r in d.sql("SELECT host_j, duration_s FROM host_attribution"
                                               " WHERE measured AND duration_s > 0.9"))
    print(f"note - measured power over the warm-up: 5th percentile"
          f" {powers[len(powers) // 20]:.1f} W, median {powers[len(powers) // 2]:.1f} W"
          f" (the idle a percentile would have taken)")
    burners(d, [2.0, 4.0], 0.02, "busy node, fitted")
    st = rig_status(d, loads)
    print(f"after the burners: {calib_line(st['calibration'])}")
    fitted_idle = st["calibration"]["idle_w"]
    conserved(d, "busy node")
    used = d.sql("SELECT DISTINCT idle_source, calib_t IS NOT NULL FROM host_attribution")
    check("busy node: the history says the seconds were attributed under the percentile, then"
          " a fit", ("percentile", 0) in used and ("fitted", 1) in used, str(used))
    check("busy node: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
    background.kill()
    background.wait()
    stored = d.sql("SELECT target, idle_w, idle_se_w, rows FROM node_calibration")
    check("the node's fit is stored", len(stored) == 1 and stored[0][0] == "package"
          and abs(stored[0][1] - fitted_idle) <= 0.5, str(stored))

    # ---- stored: restarted under a steady load ----------------------------
    background = spawn("--duty", "0.7", "1000")
    time.sleep(1.5)
    d = Daemon("--config", conf, state=state)
    time.sleep(1.5)
    st = rig_status(d, loads)
    c = st["calibration"]
    print(f"restarted, steady load: {calib_line(c)}")
    check("restarted: idle is the stored fit from the first second",
          c["source"] == "stored" and abs(c["idle_w"] - stored[0][1]) < 1e-9, calib_line(c))
    burners(d, [2.0], 0.03, "steady node, stored")
    conserved(d, "steady node, stored")
    used = d.sql("SELECT DISTINCT idle_source, calib_t FROM host_attribution WHERE idle_source"
                 " = 'stored'")
    check("restarted: the history names the stored fit its seconds were attributed under",
          used and all(u[1] is not None for u in used), str(used))
    check("restarted: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

    # ---- percentile: the same steady load, a fresh database ---------------
    d = Daemon("--config", conf, state=os.path.join(work, "fresh"))
    time.sleep(3.5)
    st = rig_status(d, loads)
    c = st["calibration"]
    print(f"fresh database, steady load: {calib_line(c)}")
    check("fresh database, steady load: idle is the percentile, and not identifiable",
          c["source"] == "percentile" and not c["identifiable"] and c["reason"], calib_line(c))
    check("... and a warning says the percentile is idle only if the node idles",
          any("5th percentile" in w for w in st["warnings"]), str(st["warnings"]))
    out = subprocess.run([os.environ["WATTPROF"], "status", "--socket", d.sock],
                         capture_output=True, text=True)
    check("wattprof status shows where idle comes from", out.returncode == 0 and
          "percentile" in out.stdout and "not identifiable" in out.stdout, out.stdout[-600:])
    check("fresh database: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

    # ---- model: a model trained to the meter ------------------------------
    model = fake_meter_model(os.path.join(work, "model.json"), IDLE_W, PER_CPU_W)
    d = Daemon("--config", conf, "--model", model, state=os.path.join(work, "trained"))
    time.sleep(2.5)
    c = rig_status(d, loads)["calibration"]
    print(f"trained model, steady load: {calib_line(c)}")
    check("trained model: idle is the model's", c["source"] == "model" and c["idle_w"] == IDLE_W,
          calib_line(c))

    # ---- beside a load no tracked process explains ------------------------
    background.kill()
    background.wait()
    background = spawn("--duty", "0.7", "1000", prog=untracked)
    time.sleep(2.5)
    t_a, cpu_a = time.time(), proc_cpu(background.pid)
    # The untracked CPU is read once a second and booked over the next
    # seconds' ticks: a tracked burner beside it came out +4.1 % to +21 %
    # at load 12-16 on 2 CPUs (docs/calibration.md), so it is reported,
    # not asserted.
    p = spawn("2.0")
    cpu = cpu_of(p)
    time.sleep(2.5)
    got = d.call("io.wattprof.Monitor.GetProcess", {"pid": p.pid})["process"]["total_j"]
    print(f"note - a tracked burner beside the untracked load (not asserted: the untracked"
          f" CPU is known per second only): {got:.2f} J against {PER_CPU_W * cpu:.2f} J"
          f" ({got / (PER_CPU_W * cpu) - 1:+.2%}), load {os.getloadavg()[0]:.1f}")
    t_b, cpu_b = time.time(), proc_cpu(background.pid)
    # What the untracked load did is unattributed: 30 W per CPU of it.
    rows = d.sql("SELECT sum(unattributed_j), sum(duration_s) FROM host_attribution"
                 " WHERE t >= ? AND t < ?", int(t_a) + 1, int(t_b) - 1)
    want = PER_CPU_W * (cpu_b - cpu_a) / (t_b - t_a) * rows[0][1]
    # Measured -9.6 % to -27 % at load 12-19 (the per-second reading, see
    # docs/calibration.md): the bound says the energy is unattributed, not
    # spread over the tracked processes (as it was, all of it, before).
    tol = 0.5
    st = rig_status(d, loads)
    check(f"the untracked load's energy is unattributed (30 W per CPU of it, within {tol:.0%})",
          abs(rows[0][0] - want) <= tol * want,
          f"{rows[0][0]:.2f} J unattributed against {want:.2f} J over {rows[0][1]:.1f} s;"
          f" status: {st['host']['untracked_cpu']:.2f} cores untracked,"
          f" {st['host']['untracked_dynamic_w']:.2f} W of the model's")
    check("trained model: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
except Stalled as e:
    skipped = str(e)
finally:
    if d and d.proc.poll() is None:  # the body failed with a daemon up
        d.stop()
    if background:
        background.kill()
        background.wait()
    meter.close()
daemon_harness.finish_rig(work, loads, skipped)
