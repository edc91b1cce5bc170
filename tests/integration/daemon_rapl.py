#!/usr/bin/python3
"""wattprofd on a node with a power meter whose truth is known:
the daemon runs in a fake RAPL tree (tests/helpers/fake-powercap)
whose package counter energy-writer advances at IDLE + K x busy CPUs. Two
burners with known CPU shares (one a whole core, one a 50 % duty cycle) and
idle sleepers run under it; a third burner runs as nobody.

Checked, through the independent Varlink client and the SQLite file:
  - the achieved rate is >= 49 Hz;
  - every stored second: host = idle + attributed + unattributed, none
    negative, and host is the writer's energy of that second;
  - the busier burner's share of the two burners' attributed energy is its
    share of their CPU time (from the kernel's rusage, not the daemon)
    within 5 %;
  - burners that exited keep their totals (GetProcess after the exit);
  - an unprivileged user sees only its own processes and no finer than 1 s;
  - replaying the recording twice stores identical rows, table by table."""
import json, os, shutil, signal, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
IDLE_W, PER_CPU_W = 10.0, 15.0

# Everything runs inside the fake tree: re-run this script there.
sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

import varlink_peer  # noqa: E402
from daemon_harness import (Daemon, check, cpu_of, fake_meter_model, finish, steal_s,  # noqa: E402
                            workload_env)

burn = os.environ["BURN"]
work = tempfile.mkdtemp(prefix="wattprofd-rapl-")
os.chmod(work, 0o755)  # the unprivileged peer goes through it to the socket
writer_log = os.path.join(work, "writer.log")
truth = os.path.join(work, "truth")
trace = os.path.join(work, "run.trace")

# The test's processes are one program, wpburn (a copy of burn), in one
# cpuacct cgroup: the daemon tracks exactly them ([track] comm) and the
# meter's "load" is exactly their CPU (energy-writer --cpuacct), so other
# work on a shared machine neither moves the meter nor takes a share.
# Named for this run alone: other runs of this test on a shared machine
# have burners too, and a daemon tracking theirs would give them shares.
name = f"wpburn{os.getpid()}"[:15]
wpburn = os.path.join(work, name)
shutil.copy(burn, wpburn)
os.chmod(wpburn, 0o755)
cgroup = f"/sys/fs/cgroup/cpuacct/wattprof-test-{os.getpid()}"
try:
    os.mkdir(cgroup)
except OSError as e:
    print(f"note - no cpuacct cgroup ({e}): the meter follows the whole host's load")
    cgroup = None
# A real RAPL counter is advanced by the hardware and never stalls; a writer
# delayed by a busy host would leave the daemon reading stale energy. As root
# it runs at real-time priority.
rt = ["chrt", "-f", "10"] if os.getuid() == 0 and shutil.which("chrt") else []
writer = subprocess.Popen(rt + [os.path.join(BUILDDIR, "tests", "energy-writer"), "--truth", truth,
                           "--log", writer_log, f"intel-rapl:0={IDLE_W}+{PER_CPU_W}*load"]
                          + (["--cpuacct", cgroup] if cgroup else []))
deadline = time.monotonic() + 5
while not os.path.exists(truth) and time.monotonic() < deadline:
    time.sleep(0.01)

conf = os.path.join(work, "wattprofd.conf")
with open(conf, "w") as f:
    f.write(f"[track]\ncomm = ^{name}$\n")
    # The meter sees the cgroup: so does the daemon's count of the CPU no
    # tracked process used (else the shared machine's other work would be
    # booked unattributed, out of a meter that never saw it).
    if cgroup:
        f.write(f"[sampler]\nmeter_cgroup = {cgroup}\n")
# A model calibrated to this meter: IDLE W plus K W per busy core.
model_path = fake_meter_model(os.path.join(work, "model.json"), IDLE_W, PER_CPU_W)
d = Daemon("--config", conf, "--model", model_path, "--rate", "50", "--record", trace,
           state=os.path.join(work, "live"))
os.chmod(d.dir, 0o755)


def spawn(*args, user=None):
    """A wpburn that waits first, so that the daemon (which may only find
    processes by its 1 s rescans here) tracks it before it works."""
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if user else []
    p = subprocess.Popen(pre + [wpburn, "--wait", "1.5", *args], env=workload_env())
    if cgroup:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
    return p


unpriv = os.getuid() == 0 and shutil.which("setpriv")
steal0 = steal_s()
sleepers = [spawn("--wait", "60", "0.001") for _ in range(3)]
busy = spawn("4")
half = spawn("--duty", "0.5", "2")
nobody = spawn("1", user=True) if unpriv else None

rates, late = [], []
for _ in range(3):
    time.sleep(1.5)
    st = d.call("io.wattprof.Monitor.GetStatus")["status"]
    rates.append(st["achieved_hz"])
    late.append(st["lateness_p99_ms"])
cpu_busy, cpu_half = cpu_of(busy), cpu_of(half)
# The meter charges the cgroup's CPU time, which leaves out the time the
# hypervisor took (steal); the daemon's task-clock keeps it: said with
# the shares below.
stolen = steal_s() - steal0
if nobody:
    nobody.wait()
time.sleep(2.5)  # past a second boundary and the store's commit
st = d.call("io.wattprof.Monitor.GetStatus")["status"]
rates.append(st["achieved_hz"])
# On a shared machine whose run queue is longer than its CPUs, a tick can be
# late past its period whatever the daemon does: the bound is then 45 Hz,
# and the output says so.
load = os.getloadavg()[0]
detail = (f"{[round(r, 2) for r in rates]} Hz; lateness p99 {late} ms; host load {load:.1f}"
          f" on {os.cpu_count()} CPUs")
if load > 4 * os.cpu_count():
    print(f"skip - achieved rate: the host is overloaded, no rate can be asked: {detail}")
else:
    floor = 49 if load <= os.cpu_count() else 45
    # The mean over the samples: one second that lost ticks to another
    # process on a loaded 2-CPU machine is not the daemon's rate.
    check(f"achieved rate >= {floor} Hz (mean of {len(rates)} seconds)",
          sum(rates) / len(rates) >= floor,
          detail + ("" if floor == 49 else " (overloaded: 49 Hz not asked)"))
check("the fake RAPL package zone is read", [z["name"] for z in st["zones"]] == ["package-0"]
      and st["zones"][0]["error"] is None, json.dumps(st["zones"]))
check("measured host power is reported", st["host"]["measured_w"] is not None
      and st["host"]["measured_w"] >= IDLE_W * 0.9, json.dumps(st["host"]))
check("the package zone's power is the measured host power of the same second",
      st["zones"][0]["power_w"] is not None and st["host"]["measured_w"] is not None
      and abs(st["zones"][0]["power_w"] - st["host"]["measured_w"]) <= 1e-9 * st["host"]["measured_w"],
      json.dumps(st["zones"]) + " " + json.dumps(st["host"]))

# Exited processes keep their totals: asked after the exit.
totals = {}
for name, p in (("busy", busy), ("half", half)):
    try:
        got = d.call("io.wattprof.Monitor.GetProcess", {"pid": p.pid})["process"]
    except varlink_peer.VarlinkError as e:
        check(f"GetProcess of the exited {name} burner", False, str(e))
        continue
    totals[name] = got
    check(f"the exited {name} burner is marked exited", got["exited"] is not None, str(got))
    check(f"the exited {name} burner keeps its energy", got["total_j"] > 0, str(got["total_j"]))
listed = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60, "include_exited": False})
gone = [x["pid"] for x in listed["processes"] if x["pid"] in (busy.pid, half.pid)]
check("include_exited=false leaves exited processes out", not gone, str(gone))
listed = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60, "include_exited": True})
kept = {x["pid"] for x in listed["processes"]}
check("include_exited=true lists the exited burners", {busy.pid, half.pid} <= kept,
      f"{busy.pid}, {half.pid} among {sorted(kept)}")

# An unprivileged user: only its own processes, never below 1 s.
PEER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from varlink_peer import Connection, VarlinkError
sock, root_pid, own_pid = sys.argv[1], int(sys.argv[3]), int(sys.argv[4])
out = {}
def err(fn):
    try:
        fn()
        return None
    except VarlinkError as e:
        return e.name
c = Connection(sock)
out["list"] = [(p["pid"], p["uid"]) for p in
               c.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})["processes"]]
out["list_uid0"] = err(lambda: c.call("io.wattprof.Monitor.ListProcesses",
                                      {"window_s": 60, "uid": 0}))
out["own"] = c.call("io.wattprof.Monitor.GetProcess", {"pid": own_pid})["process"]["uid"]
out["root_proc"] = err(lambda: c.call("io.wattprof.Monitor.GetProcess", {"pid": root_pid}))
since = time.time() - 60
out["hist_root_pid"] = err(lambda: c.call("io.wattprof.Monitor.GetHistory",
                                          {"pid": root_pid, "since": since}))
out["hist_uid0"] = err(lambda: c.call("io.wattprof.Monitor.GetHistory",
                                      {"uid": 0, "since": since}))
out["hist_fine"] = err(lambda: c.call("io.wattprof.Monitor.GetHistory",
                                      {"host": True, "since": since, "step_s": 0.5}))
h = c.call("io.wattprof.Monitor.GetHistory", {"host": True, "since": since})
out["hist_host_step"] = h["step_s"]
out["hist_own"] = len(c.call("io.wattprof.Monitor.GetHistory",
                             {"pid": own_pid, "since": since, "step_s": 1})["samples"])
out["sub_fine"] = err(lambda: next(c.stream("io.wattprof.Monitor.Subscribe",
                                            {"interval_s": 0.5})))
s = Connection(sock)
reply, _ = next(s.stream("io.wattprof.Monitor.Subscribe", {"interval_s": 1, "limit": 0}))
out["sub_uids"] = sorted({p["uid"] for p in reply["processes"]})
print(json.dumps(out))
"""
if not unpriv:
    print("skip - unprivileged visibility: needs root and setpriv to run a peer as nobody")
else:
    peer_dir = tempfile.mkdtemp(prefix="wattprofd-peer-")
    os.chmod(peer_dir, 0o755)
    shutil.copy(os.path.join(SRCDIR, "tests", "varlink_peer.py"), peer_dir)
    os.chmod(os.path.join(peer_dir, "varlink_peer.py"), 0o644)
    # A process of nobody's that is still running, for Subscribe.
    nobody_sleep = spawn("--wait", "30", "0.001", user=True)
    time.sleep(1.5)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "/usr/bin/python3", "-c", PEER, d.sock, peer_dir, str(busy.pid),
                        str(nobody.pid)], capture_output=True, text=True, timeout=30, cwd="/")
    nobody_sleep.kill()
    nobody_sleep.wait()
    if r.returncode != 0:
        check("the unprivileged peer ran", False, r.stderr[-1000:])
    else:
        u = json.loads(r.stdout)
        check("nobody lists only its own processes", u["list"] and
              all(uid == 65534 for _, uid in u["list"]), str(u["list"]))
        check("nobody's burner is among them", nobody.pid in [p for p, _ in u["list"]],
              f"{nobody.pid} not in {u['list']}")
        check("ListProcesses of uid 0 is PermissionDenied, as GetHistory's is",
              u["list_uid0"] == "org.varlink.service.PermissionDenied", str(u["list_uid0"]))
        check("GetProcess of its own burner", u["own"] == 65534, str(u["own"]))
        check("GetProcess of root's burner is NoSuchProcess",
              u["root_proc"] == "io.wattprof.Monitor.NoSuchProcess", str(u["root_proc"]))
        check("GetHistory of root's pid is NoSuchProcess",
              u["hist_root_pid"] == "io.wattprof.Monitor.NoSuchProcess", str(u["hist_root_pid"]))
        check("GetHistory of uid 0 is refused",
              u["hist_uid0"] == "org.varlink.service.PermissionDenied", str(u["hist_uid0"]))
        check("GetHistory step_s 0.5 is refused",
              u["hist_fine"] == "org.varlink.service.InvalidParameter", str(u["hist_fine"]))
        check("GetHistory's default step is at least 1 s", u["hist_host_step"] >= 1,
              str(u["hist_host_step"]))
        check("GetHistory of its own pid has samples", u["hist_own"] >= 1, str(u["hist_own"]))
        check("Subscribe interval_s 0.5 is refused",
              u["sub_fine"] == "org.varlink.service.InvalidParameter", str(u["sub_fine"]))
        check("Subscribe shows only its own processes", u["sub_uids"] == [65534],
              str(u["sub_uids"]))

for s in sleepers:
    s.kill()
    s.wait()
check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-500:])
writer.send_signal(signal.SIGTERM)
check("the meter ran to the end", writer.wait() == 0)
if cgroup:
    os.rmdir(cgroup)

# Energy is conserved every second, and host is what the meter wrote.
rows = d.sql("SELECT t, duration_s, host_j, idle_j, attributed_j, unattributed_j, measured"
             " FROM host_attribution ORDER BY t")
check("host rows stored", len(rows) >= 8, str(len(rows)))
bad = [r for r in rows if min(r[2:6]) < 0 or
       abs(r[2] - (r[3] + r[4] + r[5])) > 1e-9 * max(1.0, r[2])]
check("every second: host = idle + attributed + unattributed, none negative",
      not bad, str(bad[:3]))

log = []
with open(writer_log) as f:
    for line in f:
        if not line.startswith("#"):
            t_ns, j = line.split()
            log.append((int(t_ns), float(j)))


def around(mono_ns):
    """The writer's updates just before and after a CLOCK_MONOTONIC instant."""
    lo, hi = 0, len(log) - 1
    if not log[0][0] <= mono_ns <= log[-1][0]:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if log[mid][0] <= mono_ns else (lo, mid)
    return log[lo], log[hi]


def written(mono_ns):
    """The writer's energy at an instant (linear between updates)."""
    if around(mono_ns) is None:
        return None
    (t0, j0), (t1, j1) = around(mono_ns)
    return j0 if t1 == t0 else j0 + (j1 - j0) * (mono_ns - t0) / (t1 - t0)


def gap_s(mono_ns):
    """How stale a reading of the meter at that instant can be: the writer's
    update interval there (5 ms, or longer when a busy host delays it)."""
    (t0, _), (t1, _) = around(mono_ns)
    return (t1 - t0) / 1e9


# Which ticks made each second, and the CLOCK_MONOTONIC span they covered,
# from the recording: a tick's row is its second (the daemon stamps it at
# its end); the meter's energy over that span is what host_j must be,
# however late the ticks were.
spans = {}
with open(trace) as f:
    offset = json.loads(f.readline())["realtime_offset_ns"]
    for line in f:
        tick = json.loads(line).get("tick")
        if tick:
            sec = (tick["t"] + offset) // 10**9
            a, b = spans.get(sec, (tick["t"] - tick["dt"], tick["t"]))
            spans[sec] = (min(a, tick["t"] - tick["dt"]), max(b, tick["t"]))
# A second is measured unless the meter itself stalled: a writer starved
# for 200 ms or more on a saturated host (the daemon then falls back to the
# model, as it must for a RAPL zone that stops advancing).
stalls = [(a[0], b[0]) for a, b in zip(log, log[1:]) if b[0] - a[0] >= 2 * 10**8]
unmeasured = [r[0] for r in rows if not r[6] and not (r[0] in spans and any(
    a <= spans[r[0]][1] + 3 * 10**8 and spans[r[0]][0] - 3 * 10**8 <= b for a, b in stalls))]
check("every second is measured, but where the meter itself stalled", not unmeasured,
      f"unmeasured {unmeasured[:5]}; meter stalls (ms) {[(b - a) // 10**6 for a, b in stalls]}")
p_max = IDLE_W + PER_CPU_W * os.cpu_count()
compared, off = 0, []
for t, dur, host, *_ in rows[1:-1]:
    if t not in spans or None in (written(spans[t][0]), written(spans[t][1])):
        continue
    truth_j = written(spans[t][1]) - written(spans[t][0])
    # a reading lags the meter by up to its update interval at each end
    tol = (gap_s(spans[t][0]) + gap_s(spans[t][1]) + 0.005) * p_max + 0.01 * truth_j
    compared += 1
    if abs(host - truth_j) > tol:
        off.append((t, round(host, 3), round(truth_j, 3)))
check("host energy is the meter's in every second", compared >= 6 and not off,
      f"{compared} seconds compared; off (t, stored, meter): {off[:4]}")
total_host = sum(r[2] for r in rows if r[6])  # the model's seconds depend on the model
first_t, last_t = rows[0][0], rows[-1][0]

# The busier burner's share of energy is its share of CPU time.
energy = dict(d.sql("SELECT p.pid, sum(e.attributed_j) FROM process_energy e"
                    " JOIN processes p ON p.id = e.process_id GROUP BY p.id"))
e_busy, e_half = energy.get(busy.pid, 0), energy.get(half.pid, 0)
if not cgroup:
    print("skip - energy share against CPU share: without a cgroup the meter counts the whole"
          " host, whose untracked work is shared among the tracked processes")
elif e_busy + e_half > 0:
    share_e = e_busy / (e_busy + e_half)
    share_c = cpu_busy / (cpu_busy + cpu_half)
    check("the busier burner's energy share matches its CPU share within 5 %",
          abs(share_e - share_c) <= 0.05 * share_c,
          f"energy {share_e:.4f}, CPU {share_c:.4f} ({cpu_busy:.2f} s vs {cpu_half:.2f} s);"
          f" {stolen:.2f} s stolen by the hypervisor over the burners' run")
else:
    check("the burners have energy", False, str(energy))
if cgroup:
    # Each burner's energy is the meter's K W per core of its kernel-counted
    # CPU. Asserted only with a writer that cannot stall: idle is capped at
    # each tick's measured energy, so a tick that reads a stale meter books
    # less idle and the next one attributes the difference.
    # On a host busier than its CPUs, or under the sanitizers (whose
    # LeakSanitizer runs a tracer task in the burners' cgroup at exit), the
    # meter's view of the cgroup's load and the burners' own CPU time part
    # by several per cent (16.0 W per core seen at load 11 under ASan); the
    # shares above stay within 5 % there. The bound is then 12 %, and says so.
    loaded = os.getloadavg()[0] > (os.cpu_count() or 1) or os.environ.get("TEST_SLOW") == "0"
    tol = 0.12 if loaded else 0.05
    for name, e, cpu in (("busy", e_busy, cpu_busy), ("half", e_half, cpu_half)):
        detail = f"{e:.3f} J for {cpu:.3f} CPU s, {e / cpu:.2f} W per core"
        if loaded:
            detail += f" (loaded host or sanitizers: load {os.getloadavg()[0]:.1f}, bound {tol:.0%})"
        if rt:
            check(f"the {name} burner's energy is the meter's {PER_CPU_W:g} W per core"
                  f" within {tol:.0%}", abs(e - PER_CPU_W * cpu) <= tol * PER_CPU_W * cpu, detail)
        else:
            print(f"note - the {name} burner (meter not real-time, not asserted): {detail}")
idle_j = [energy.get(s.pid, 0) for s in sleepers]
check("idle sleepers get next to nothing", max(idle_j) <= 0.01 * (e_busy + e_half), str(idle_j))
for name, p in (("busy", busy), ("half", half)):
    if name in totals:
        stored = energy.get(p.pid, 0)
        check(f"{name}'s total through the socket is its stored rows' sum",
              abs(totals[name]["total_j"] - stored) <= 1e-6 * max(1, stored),
              f"{totals[name]['total_j']} vs {stored}")

# Replaying the recording twice stores the same rows.
TABLES = {"processes": "*", "process_energy": "*", "host_energy": "*",
          "host_attribution": "*", "calibration": "*",
          "models": "id, sha256, name, engine, json"}  # load times are wall clock


def replay(name):
    r = Daemon("--replay", trace, "--speed", "max", state=os.path.join(work, name))
    check(f"{name} finished", r.wait_log("finished after"), r.read_log()[-300:])
    check(f"{name} stops cleanly", r.stop() == 0)
    return {t: r.sql(f"SELECT {cols} FROM {t} ORDER BY 1, 2") for t, cols in TABLES.items()}


one, two = replay("replay1"), replay("replay2")
for t in TABLES:
    diff = [(a, b) for a, b in zip(one[t], two[t]) if a != b]
    check(f"replays store identical {t} rows", len(one[t]) == len(two[t]) and not diff
          and (t in ("calibration",) or len(one[t]) > 0),
          f"{len(one[t])} vs {len(two[t])} rows; first difference {diff[:1]}")
rep_host = sum(r[2] for r in one["host_attribution"] if r[7])
check("the replay's host energy is the live run's", abs(rep_host - total_host) <= 1e-6 * total_host,
      f"{rep_host} vs {total_host}")
if not daemon_harness.failures:  # kept for a look when something failed
    shutil.rmtree(work, ignore_errors=True)
shutil.rmtree(peer_dir, ignore_errors=True) if unpriv else None
finish()
