#!/usr/bin/python3
"""A RAPL zone that stops advancing, and one that vanishes, mid-run.
The daemon runs in a fake RAPL tree (tests/helpers/fake-powercap,
one package zone) that energy-writer advances at a constant POWER_W, with a
model calibrated to it (IDLE_W + PER_CPU_W per busy core); it tracks one
burner. The run has five phases of a few seconds each:

  A  normal;
  B  the counter stalls (the writer is stopped: energy_uj stays put);
  C  normal again (the writer resumes: its next write jumps by the whole
     stall's energy at once);
  D  the zone vanishes (energy_uj renamed away: every read fails);
  E  normal again.

Checked, through the independent Varlink client and the SQLite file:
  - during B and D, GetStatus's warnings name the zone (and, in D, that
    reading it fails), and the log says so once; after each, the warning
    clears and the log says so; GetStatus's measured host power is null
    during them and POWER_W outside them;
  - every second wholly inside B or D is stored as not measured, its host
    energy is the model's (host_j == modeled_j), energy is conserved against
    it (host = idle + attributed + unattributed, none negative), and the
    burner is still attributed energy;
  - every second wholly inside A, C and E is measured at POWER_W (5 %);
  - no second, anywhere, holds the outage's energy in one lump (host_j
    <= 1.5 x POWER_W x its duration): the jump after a stall is not a
    measurement;
  - sampling holds its rate throughout."""
import os, shutil, signal, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
IDLE_W, PER_CPU_W, POWER_W = 10.0, 15.0, 30.0
PHASE_S = 4.3

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import Daemon, check, fake_meter_model, finish  # noqa: E402

work = tempfile.mkdtemp(prefix="wattprofd-rapl-fault-")
zone = os.path.join(os.environ["FAKE_POWERCAP"], "intel-rapl:0")
energy = os.path.join(zone, "energy_uj")
truth = os.path.join(work, "truth")
rt = ["chrt", "-f", "10"] if os.getuid() == 0 and shutil.which("chrt") else []
writer = subprocess.Popen(rt + [os.path.join(BUILDDIR, "tests", "energy-writer"), "--truth", truth,
                                f"intel-rapl:0={POWER_W}"])
deadline = time.monotonic() + 5
while not os.path.exists(truth) and time.monotonic() < deadline:
    time.sleep(0.01)

wpburn = os.path.join(work, "wpburn")
shutil.copy(os.environ["BURN"], wpburn)
conf = os.path.join(work, "wattprofd.conf")
with open(conf, "w") as f:
    f.write("[track]\ncomm = ^wpburn$\n")
# A model calibrated to this meter: IDLE W plus K W per busy core.
model_path = fake_meter_model(os.path.join(work, "model.json"), IDLE_W, PER_CPU_W)
burner = subprocess.Popen([wpburn, "--duty", "0.5", "600"])
d = Daemon("--config", conf, "--model", model_path, "--rate", "50", state=os.path.join(work, "d"))


measured_w = {}  # phase -> GetStatus host.measured_w late in it
zone_w = {}  # phase -> GetStatus zones[0].power_w late in it


def warnings():
    st = d.call("io.wattprof.Monitor.GetStatus")["status"]
    measured_w[len(phases)] = st["host"]["measured_w"]
    zone_w[len(phases)] = st["zones"][0]["power_w"] if st["zones"] else "no zones"
    return [w for w in st["warnings"] if "RAPL zone" in w]


phases = []  # (name, start, end) in CLOCK_REALTIME seconds
rates = []


def phase(name, action=None, undo=None):
    start = time.time()
    if action:
        action()
    time.sleep(PHASE_S - 1.2)
    seen = warnings()
    time.sleep(1.2)
    rates.append(d.call("io.wattprof.Monitor.GetStatus")["status"]["achieved_hz"])
    if undo:
        undo()
    phases.append((name, start, time.time()))
    return seen


def vanish():
    writer.send_signal(signal.SIGSTOP)
    os.rename(energy, energy + ".gone")


def come_back():
    os.rename(energy + ".gone", energy)
    writer.send_signal(signal.SIGCONT)


time.sleep(1.5)  # the burner is found by a rescan
phase("A")
seen_b = phase("B", lambda: writer.send_signal(signal.SIGSTOP),
               lambda: writer.send_signal(signal.SIGCONT))
seen_c = phase("C")
seen_d = phase("D", vanish, come_back)
seen_e = phase("E")
time.sleep(1.5)  # the last second committed

check("a stalled zone is reported in GetStatus warnings",
      len(seen_b) == 1 and "intel-rapl:0 (package-0) has not advanced" in seen_b[0], str(seen_b))
check("... and the warning clears once it advances", seen_c == [], str(seen_c))
check("a vanished zone is reported, with the read's failure",
      len(seen_d) == 1 and "intel-rapl:0" in seen_d[0] and "reading it fails" in seen_d[0],
      str(seen_d))
check("... and the warning clears once it is back", seen_e == [], str(seen_e))
check("GetStatus shows no measured power during the outages, and 30 W outside them",
      measured_w[1] is None and measured_w[3] is None and
      all(abs(measured_w[k] - POWER_W) <= 0.05 * POWER_W for k in (0, 2, 4)), str(measured_w))
check("... and so does the zone's power in GetStatus",
      zone_w[1] is None and zone_w[3] is None and
      all(isinstance(zone_w[k], float) and abs(zone_w[k] - POWER_W) <= 0.05 * POWER_W
          for k in (0, 2, 4)), str(zone_w))
log = d.read_log()
check("the log says when each outage starts and ends, once each",
      log.count("has not advanced") == 2 and log.count("advance again") == 2, log[-600:])

rows = d.sql("SELECT t, duration_s, host_j, idle_j, attributed_j, unattributed_j, modeled_j,"
             " measured FROM host_attribution ORDER BY t")
burn_rows = dict(d.sql("SELECT e.t, e.attributed_j FROM process_energy e JOIN processes p"
                       " ON p.id = e.process_id WHERE p.comm = 'wpburn'"))
by_phase = {name: [r for r in rows if start + 1 <= r[0] and r[0] + 1 <= end - 0.2]
            for name, start, end in phases}
for name in "BD":
    rs = by_phase[name]
    check(f"phase {name}: its whole seconds are stored as not measured",
          len(rs) >= 2 and all(r[7] == 0 for r in rs), str([(r[0], r[7]) for r in rs]))
    check(f"phase {name}: host energy is the model's",
          rs and all(abs(r[2] - r[6]) <= 1e-9 * max(1, r[6]) for r in rs),
          str([(round(r[2], 3), round(r[6], 3)) for r in rs]))
    check(f"phase {name}: host = idle + attributed + unattributed, none negative",
          rs and all(abs(r[2] - r[3] - r[4] - r[5]) <= 1e-6 * max(1, r[2]) and min(r[3:6]) >= 0
                     for r in rs), str([r[2:6] for r in rs]))
    check(f"phase {name}: the burner is still attributed energy",
          rs and all(burn_rows.get(r[0], 0) > 0 for r in rs),
          str([burn_rows.get(r[0]) for r in rs]))
for name in "ACE":
    rs = by_phase[name]
    check(f"phase {name}: its whole seconds are measured at {POWER_W} W (5 %)",
          len(rs) >= 2 and all(r[7] == 1 and abs(r[2] / r[1] - POWER_W) <= 0.05 * POWER_W
                               for r in rs),
          str([(r[7], round(r[2] / r[1], 2)) for r in rs]))
lumps = [(r[0], round(r[2], 2)) for r in rows if r[2] > 1.5 * POWER_W * r[1]]
check("no second holds an outage's energy in one lump", not lumps, str(lumps))
load = os.getloadavg()[0]
floor = 49 if load <= os.cpu_count() else 45
check(f"sampling holds >= {floor} Hz through the outages (mean of the phases)",
      sum(rates) / len(rates) >= floor or load > 4 * os.cpu_count(),
      f"{[round(r, 2) for r in rates]} Hz, host load {load:.1f} on {os.cpu_count()} CPUs")
check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
burner.kill()
burner.wait()
writer.terminate()
writer.wait()
if not daemon_harness.failures:
    shutil.rmtree(work, ignore_errors=True)
finish()
