#!/usr/bin/python3
"""wattprof calibrate on the fake RAPL rig (docs/calibration.md).

A fake RAPL meter (tests/helpers/fake-powercap) whose package counter
energy-writer advances at 20 W + 30 W per busy CPU of the test's own cgroup;
wattprof calibrate runs in that cgroup with --meter-cgroup, so that the other
work of a shared machine neither moves the meter nor makes the node look
busy. Checked:
  - it recovers idle 20 W and 30 W per busy CPU within 2 %;
  - the fit is stored in the daemon's database, and a daemon started on it
    takes idle from it (source stored);
  - it refuses, with one line saying why and exit 1, and stores nothing:
    when a process in the meter's cgroup keeps the node busy while idle is
    measured, when there is no RAPL, when the database cannot be written;
  - a bad option is one line naming it, exit 2."""
import json, os, shutil, sqlite3, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
WATTPROF = os.environ["WATTPROF"]
IDLE_W, PER_CPU_W = 20.0, 30.0

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import CgroupMeter, Daemon, check, finish  # noqa: E402

work = tempfile.mkdtemp(prefix="wattprof-calibrate-")
meter = CgroupMeter("wattprof-calibrate", IDLE_W, PER_CPU_W, work)
cgroup = meter.cgroup


def in_cgroup():
    meter.add(os.getpid())


def calibrate(*args, db=None, prefix=()):
    return subprocess.run([*prefix, WATTPROF, "calibrate", "--meter-cgroup", cgroup, *args]
                          + (["--db", db] if db else []),
                          capture_output=True, text=True, timeout=120, preexec_fn=in_cgroup)


def stored_rows(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT target, idle_w, scale, rows FROM node_calibration").fetchall()
    finally:
        con.close()


burner = d = None
try:
    # A database made by the daemon, as on a node.
    d = Daemon(state=os.path.join(work, "node"))
    db = d.db
    check("a fresh daemon exits 0", d.stop() == 0)

    # ---- bad option, and refusals that store nothing ---------------------
    p = calibrate("--step", "0", db=db)
    check("--step 0: exit 2, one line naming it", p.returncode == 2 and "--step '0'" in p.stderr
          and p.stderr.count("\n") == 1, f"{p.returncode} {p.stderr!r}")
    p = calibrate("--cpus", "1", "--step", "1",
                  prefix=["unshare", "-m", "sh", "-c",
                          'mount -t tmpfs none /sys/class/powercap && exec "$@"', "sh"], db=db)
    check("no RAPL: exit 1, one line saying so", p.returncode == 1 and
          "no RAPL meter to calibrate against" in p.stderr and p.stderr.count("\n") == 1,
          f"{p.returncode} {p.stderr!r}")
    burner = subprocess.Popen([os.environ["BURN"], "--duty", "0.5", "600"], preexec_fn=in_cgroup)
    time.sleep(0.3)
    p = calibrate("--cpus", "1", "--step", "1", db=db)
    check("a busy node: exit 1, one line saying it is not quiet", p.returncode == 1 and
          "the node is not quiet" in p.stderr and p.stderr.count("\n") == 1,
          f"{p.returncode} {p.stderr!r}")
    burner.kill()
    burner.wait()
    burner = None
    check("... and nothing was stored", stored_rows(db) == [], str(stored_rows(db)))
    p = calibrate("--cpus", "1", "--step", "2", db=os.path.join(work, "none", "wattprof.db"))
    check("a database that cannot be opened: exit 1, one line naming it",
          p.returncode == 1 and "none/wattprof.db: cannot store the calibration" in p.stderr
          and p.stderr.count("\n") == 1, f"{p.returncode} {p.stderr!r}")

    # ---- the calibration -------------------------------------------------
    p = calibrate("--cpus", "2", "--step", "3", "--json", db=db)
    check("calibrate exits 0", p.returncode == 0, p.stderr)
    r = json.loads(p.stdout) if p.returncode == 0 else {}
    levels = [(lv["burners"], round(lv["cpus"], 2), round(lv["power_w"], 2))
              for lv in r.get("levels", [])]
    print(f"levels (burners, busy CPUs, W): {levels}; load {os.getloadavg()[0]:.1f}")
    idle, per_cpu = r.get("idle_w", 0), r.get("per_cpu_w", 0)
    check(f"idle is {IDLE_W:g} W within 2 %", abs(idle - IDLE_W) <= 0.02 * IDLE_W,
          f"{idle:.3f} W +- {r.get('idle_se_w', 0):.3f}")
    check(f"{PER_CPU_W:g} W per busy CPU within 2 %", abs(per_cpu - PER_CPU_W) <= 0.02 * PER_CPU_W,
          f"{per_cpu:.3f} W (scale {r.get('scale', 0):.4f}, R2 {r.get('r2', 0):.5f})")
    rows = stored_rows(db)
    check("it is stored for the package", len(rows) == 1 and rows[0][0] == "package" and
          abs(rows[0][1] - idle) < 1e-9 and r.get("stored") == db, str(rows))

    # ---- the daemon starts from it -----------------------------------------
    d = Daemon(state=os.path.join(work, "node"))
    deadline = time.monotonic() + 5
    while not (c := d.call("io.wattprof.Monitor.GetStatus")["status"]["calibration"]):
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    c = c or {"source": None, "idle_w": None}
    check("a daemon started on the database takes idle from it",
          c["source"] == "stored" and abs(c["idle_w"] - idle) < 1e-9,
          f"{c['source']} {c['idle_w']}")
    check("SIGTERM exits 0", d.stop() == 0)

    p = calibrate("--cpus", "1", "--step", "3", "--no-store", db=db)
    check("--no-store: a text report, and the stored row left alone",
          p.returncode == 0 and "per busy CPU" in p.stdout and "stored in" not in p.stdout
          and stored_rows(db) == rows, p.stdout + p.stderr)
finally:
    if d and d.proc.poll() is None:  # the body failed with a daemon up
        d.stop()
    if burner:
        burner.kill()
        burner.wait()
    meter.close()
    shutil.rmtree(work, ignore_errors=True)
finish()
