#!/usr/bin/python3
"""CLOCK_REALTIME steps under a running wattprofd.

The system clock is shared with everyone on the machine, and a time
namespace cannot move CLOCK_REALTIME, so the daemon alone sees the steps:
tests/helpers/clock-shift (LD_PRELOAD) adds the seconds written in a file to
every CLOCK_REALTIME it reads. The daemon tracks a burner at 50 Hz for three
phases of PHASE_S seconds: the clock as it is, stepped back 6 s (into seconds already stored), then
stepped forward to 10 s ahead of the real time.

Checked:
  - the shim works on a C program (date(1) sees the shift);
  - tick spacing is undisturbed: in every phase, GetStatus's achieved rate
    (ticks in the last second) and lateness p99 hold, and every stored
    second (below) lasts no more than a second;
  - timestamps stay monotonic in storage: no stored second holds ticks of
    two different moments (each host row's duration is <= 1 s, each burner
    row's CPU time is <= 1 s: a step back would have merged later ticks
    into seconds already stored), and the stored durations add up to the
    time the daemon ran;
  - the step back is not followed (stored seconds run on without a gap),
    the step forward is (exactly one gap, of about 10 s, and the newest
    second is 10 s ahead of the real time)."""
import os, shutil, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
PHASE_S = 4.1
sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

shim = os.path.join(BUILDDIR, "tests", "libclock-shift.so")
work = tempfile.mkdtemp(prefix="wattprofd-clock-")
shift = os.path.join(work, "shift")


def set_shift(seconds):
    with open(shift + ".tmp", "w") as f:
        f.write(f"{seconds}\n")
    os.rename(shift + ".tmp", shift)


env = dict(os.environ, LD_PRELOAD=shim, CLOCK_SHIFT_FILE=shift,
           # An ASan daemon: the shim comes before its runtime, harmlessly.
           ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
set_shift(-30)
seen = int(subprocess.run(["date", "+%s"], env=env, capture_output=True, text=True).stdout)
check("the shim shifts a C program's CLOCK_REALTIME", abs(seen - (time.time() - 30)) <= 2,
      f"date says {seen}, real time {time.time():.0f}")
set_shift(0)

conf = os.path.join(work, "wattprofd.conf")
with open(conf, "w") as f:
    f.write("[track]\ncomm = ^burn$\n")
burner = subprocess.Popen([os.environ["BURN"], "600"])
saved = dict(os.environ)
os.environ.update(env)
d = Daemon("--config", conf, "--rate", "50", state=os.path.join(work, "d"))
os.environ.clear()
os.environ.update(saved)
started = time.monotonic()

load = os.getloadavg()[0]
# A step the tick schedule followed would stall or bunch ticks by whole
# periods (20 ms at 50 Hz) or seconds; below a period, lateness is the
# scheduler's on a shared machine (6 ms seen in a run with no step), which
# the daemon benchmark measures, not this test.
floor, max_p99 = (49, 20) if load <= os.cpu_count() else (45, 30)
phases = [("as it is", 0), ("stepped back 6 s", -6), ("stepped forward to +10 s", 10)]
newest_back = None
try:
    for name, step in phases:
        set_shift(step)
        time.sleep(1.1)  # the step is in; each status covers a whole second after it
        hz = []
        for _ in range(int(PHASE_S - 1.1)):
            time.sleep(1)
            st = d.call("io.wattprof.Monitor.GetStatus")["status"]
            hz.append(st["achieved_hz"])
        if step < 0:
            # Windows are measured back from the stamps' clock, not the
            # stepped one: the newest seconds stay in view.
            real = time.time()
            h = d.call("io.wattprof.Monitor.GetHistory",
                       {"host": True, "since": real - 10, "step_s": 1})["samples"]
            newest_back = (max([x["t"] for x in h], default=0), real)
        if load > 4 * os.cpu_count():
            print(f"skip - tick spacing with the clock {name}: host load {load:.1f}")
            continue
        check(f"clock {name}: ticks per second hold the rate (>= {floor}, mean of {len(hz)})",
              sum(hz) / len(hz) >= floor, f"{[round(h, 2) for h in hz]} Hz")
        check(f"clock {name}: lateness p99 <= {max_p99} ms", st["lateness_p99_ms"] <= max_p99,
              f'{st["lateness_p99_ms"]:.2f} ms')
finally:
    burner.kill()
    burner.wait()
real_end = time.time()
check("stepped back 6 s, GetHistory still shows the newest seconds (within 3.5 s of now)",
      newest_back and newest_back[0] >= newest_back[1] - 3.5,
      f"newest {newest_back[0] - newest_back[1]:+.1f} s from now" if newest_back else "")
check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
check("the step back is logged, once", d.read_log().count("CLOCK_REALTIME stepped back") == 1,
      d.read_log()[-300:])
ran_s = time.monotonic() - started

rows = d.sql("SELECT t, duration_s FROM host_attribution ORDER BY t")
cpu = d.sql("SELECT e.t, e.cpu_s FROM process_energy e JOIN processes p ON p.id = e.process_id"
            " WHERE p.pid = ? ORDER BY e.t", burner.pid)
# A late tick can push a second a little past 1 s; a merged one is ~2 s.
long_rows = [r for r in rows if r[1] > 1.25]
check("no stored second holds ticks of two moments (host rows <= 1 s)", rows and not long_rows,
      f"{len(long_rows)} of {len(rows)} rows longer: {long_rows[:4]}")
busy = [r for r in cpu if r[1] > 1.25]
check("... nor CPU time of two moments (burner rows <= 1 s of CPU)", cpu and not busy,
      f"{len(busy)} of {len(cpu)} rows over: {busy[:4]}")
total = sum(r[1] for r in rows)
check("the stored durations add up to the time the daemon ran", abs(total - ran_s) <= 1.5,
      f"{total:.2f} s stored, ran {ran_s:.2f} s")
gaps = [(a[0], b[0] - a[0]) for a, b in zip(rows, rows[1:]) if b[0] - a[0] != 1]
check("the step back is not followed, the step forward is: one gap of about 10 s",
      len(gaps) == 1 and 9 <= gaps[0][1] <= 11, str(gaps))
check("the newest stored second is 10 s ahead of the real time",
      rows and abs(rows[-1][0] - (real_end + 10)) <= 2,
      f"newest {rows[-1][0] if rows else None}, real end {real_end:.0f}")
if not daemon_harness.failures:
    shutil.rmtree(work, ignore_errors=True)
finish()
