#!/usr/bin/python3
"""wattprofd live, with real software events: it samples at 50 Hz, finds a
new process and measures its CPU time, stores per-second rows whose host
split adds up, answers the socket, and flushes on SIGTERM. A --record of the
run replayed with --speed max gives every process the same energy. The
perf backend (--backend perf): its per-process reads are skipped for
processes that slept, through their context-switch buffers; the bpf
backend, which auto takes as root, has its own test (daemon_backends)."""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, cpu_of, finish, steal_s, workload_env  # noqa: E402

burn = os.environ["BURN"]
state = tempfile.mkdtemp(prefix="wattprofd-live-")
trace = os.path.join(state, "run.trace")
d = Daemon("--backend", "perf", "--rate", "50", "--record", trace,
           state=os.path.join(state, "live"))

# The shell sleeps first so that even a daemon without the proc connector
# (not root) finds it by rescanning before it execs the burner: same pid.
steal0 = steal_s()
p = subprocess.Popen(["sh", "-c", f"sleep 1.5; exec {burn} 1"], env=workload_env())
burned = cpu_of(p)
stolen = steal_s() - steal0  # the kernel's count: a second of burning, and its start and exit
time.sleep(2.5)  # past a second boundary and the store's commit

st = d.call("io.wattprof.Monitor.GetStatus")["status"]
check("achieved rate near 50 Hz", abs(st["achieved_hz"] - 50) <= 5, f'{st["achieved_hz"]:.2f} Hz')
check("tick work percentiles are published and ordered",
      0 < st["tick_p50_ms"] <= st["tick_p99_ms"] < 1000, f'{st["tick_p50_ms"]} <= {st["tick_p99_ms"]} ms')
check("tracking processes", st["tracked"] >= 1, str(st["tracked"]))
# Most processes on a host sleep through most ticks: their reads are skipped
# (exactness is tests/unit/test_runwatch.c's; the burner's CPU time below
# is still checked to 3 %).
check("reads of idle processes are skipped", st["reads_skipped"] is not None
      and 0.2 < st["reads_skipped"] <= 1, str(st["reads_skipped"]))
check("every tracked process has its context-switch buffer", st["reads_unskippable"] == 0,
      f'{st["reads_unskippable"]}; {st["warnings"]}')
check("model is the built-in one", st["model"]["name"] == "cputime-generic", st["model"]["name"])
check("no RAPL here is a warning, not an error",
      any("RAPL" in w for w in st["warnings"]) or st["zones"][0]["error"] is None, str(st["warnings"]))

procs = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})["processes"]
mine = [x for x in procs if x["pid"] == p.pid]
check("the burner is listed", len(mine) == 1, f"pid {p.pid} among {[x['pid'] for x in procs]}")
if mine:
    check("its energy is positive", mine[0]["energy_j"] > 0, str(mine[0]["energy_j"]))
    check("its command is burn", mine[0]["comm"] == "burn", mine[0]["comm"])

one = d.call("io.wattprof.Monitor.GetProcess", {"pid": p.pid})
check("GetProcess has a series", len(one["series"]) >= 1, str(len(one["series"])))

status = d.stop()
check("SIGTERM exits 0", status == 0, str(status))
cpu = d.sql("SELECT sum(e.cpu_s) FROM process_energy e JOIN processes p ON p.id = e.process_id"
            " WHERE p.pid = ?", p.pid)[0][0] or 0
# The stored CPU time is the burner's task-clock, which can read up to about
# 1 % more than its rusage (1.0138 s for 1.0037 s once) with no fault of the
# daemon's: its recording holds the same sum tick by tick (1.0121 s for
# 1.0037 s in one run; 2.0033 s for 2.0032 s and 0.5048 s for 0.5033 s in
# the same daemon run), and a plain perf_event_open of task-clock on a child
# of a test program, without the daemon, read +0.0 to +5.7 ms over eight
# 1 s burners and +0.2 to +15 ms over five 3 s ones. rusage (and the
# burner's own CLOCK_THREAD_CPUTIME_ID) is the scheduler's sum_exec_runtime,
# from which a kernel with CONFIG_PARAVIRT_TIME_ACCOUNTING (a virtual
# machine: this one is) takes the time the hypervisor ran something else;
# task-clock is perf's clock while the task is switched in, and keeps it.
# That is the one difference between the two clocks on this kernel we know
# of, and it fits: the excess comes and goes from run to run, as the host's
# other guests do. So the bound stays at 3 %, and the stored time may exceed
# it by the host's steal time over the burner's run (all CPUs: an upper
# bound), as in daemon_backends.
check("stored CPU time of the burner is the kernel's within 3 % (plus steal time)",
      -0.03 * burned <= cpu - burned <= 0.03 * burned + stolen,
      f"{cpu:.4f} s stored, {burned:.4f} s in its rusage, {stolen:.2f} s of steal time")
rows = d.sql("SELECT host_j, idle_j, attributed_j, unattributed_j FROM host_attribution")
check("host rows stored", len(rows) >= 4, str(len(rows)))
bad = [r for r in rows if abs(r[0] - (r[1] + r[2] + r[3])) > 1e-9 * max(1, r[0]) or min(r) < 0]
check("every second: host = idle + attributed + unattributed, none negative", not bad, str(bad[:3]))
live = dict(d.sql("SELECT p.pid, sum(e.attributed_j) FROM process_energy e"
                  " JOIN processes p ON p.id = e.process_id GROUP BY p.id"))

# Replay the recording as fast as possible: same model, same energies.
r = Daemon("--replay", trace, "--speed", "max", state=os.path.join(state, "replay"))
check("replay finished", r.wait_log("finished after"), r.read_log()[-300:])
check("replay stops cleanly", r.stop() == 0)
replayed = dict(r.sql("SELECT p.pid, sum(e.attributed_j) FROM process_energy e"
                      " JOIN processes p ON p.id = e.process_id GROUP BY p.id"))
diff = {k: (live.get(k), replayed.get(k)) for k in set(live) | set(replayed)
        if abs((live.get(k) or 0) - (replayed.get(k) or 0)) > 1e-9 * max(1, abs(live.get(k) or 0))}
check("replayed energy per process equals the live run's", not diff and len(live) > 0,
      f"{len(live)} processes; differing: {list(diff.items())[:3]}")
finish()
