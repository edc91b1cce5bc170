#!/usr/bin/python3
"""wattprofd near its limit of open files: counters stop 256 descriptors
short of it, so the database and the clients keep theirs.

The daemon runs under a limit of 320 open files (prlimit) with 60 sleepers
to track, more than 64 descriptors' worth of counters:
  - no perf event descriptor is numbered 64 or above (the kernel hands out
    the lowest free one, so a higher one would eat into the reserve);
  - some sleepers are tracked, not all, and the log says once why the
    rest are not (one line, however many processes it refuses);
  - the database still answers: ListProcesses, ListJobs, GetHistory and
    `wattprof ps` succeed while the counters are at their ceiling.
That is the perf backend (--backend perf), whose descriptors grow with the
processes. The bpf backend's do not (its counters are opened once per
CPU): under the same limit it tracks all 60, with as many perf
descriptors as it has at the start, and the log has no such line. It
skips, saying why, where bpf cannot load."""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, cleaned_up, finish  # noqa: E402

M = "io.wattprof.Monitor."
LIMIT, RESERVE, SLEEPERS = 320, 256, 60
name = f"fdl{os.getpid() % 100000}"
tmp = tempfile.mkdtemp(prefix="wattprofd-fdlimit-")
conf = os.path.join(tmp, "wattprofd.conf")
with open(conf, "w") as f:  # only this test's sleepers: the host is shared
    f.write(f"[track]\ncomm = ^{name}$\n")

# Named by the link they are started through: the comm the config tracks.
link = os.path.join(tmp, name)
os.symlink("/bin/sleep", link)
sleepers = [subprocess.Popen([link, "120"]) for _ in range(SLEEPERS)]


def perf_fds(pid):
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                out.append(int(fd))
        except OSError:
            pass
    return out


def bpf_run():
    """The same sleepers and limit under the bpf backend."""
    try:
        d = Daemon("--config", conf, "--backend", "bpf", state=os.path.join(tmp, "bpf"),
                   prefix=("prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"))
    except RuntimeError as e:
        print("skip: bpf: the backend cannot load here: " + " ".join(str(e).split())[-300:])
        return
    with cleaned_up(d):
        start = len(perf_fds(d.proc.pid))
        deadline = time.monotonic() + 30
        tracked = 0
        while time.monotonic() < deadline and tracked < SLEEPERS:
            tracked = d.call(M + "GetStatus")["status"]["tracked"]
            time.sleep(0.5)
        fds = perf_fds(d.proc.pid)
        print(f"# bpf: {tracked} of {SLEEPERS} tracked; {len(fds)} perf descriptors"
              f" ({start} at the start)")
        check("bpf: every sleeper is tracked under the same limit", tracked == SLEEPERS,
              str(tracked))
        check("bpf: no more perf descriptors than at the start", len(fds) == start, str(len(fds)))
        check("bpf: no line about descriptors", "until descriptors" not in d.read_log(),
              d.read_log()[-600:])
        check("bpf: SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])


d = Daemon("--config", conf, "--backend", "perf", state=os.path.join(tmp, "perf"),
           prefix=("prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"))
try:
    with cleaned_up(d, tmp):
        deadline = time.monotonic() + 30
        tracked = 0
        while time.monotonic() < deadline:
            tracked = d.call(M + "GetStatus")["status"]["tracked"]
            if tracked and "until descriptors" in d.read_log():
                break
            time.sleep(0.5)
        fds = perf_fds(d.proc.pid)
        print(f"# {tracked} of {SLEEPERS} tracked; {len(fds)} perf descriptors, "
              f"highest {max(fds, default=-1)}")
        check("some sleepers are tracked", tracked > 0, str(tracked))
        check("... not all: the counters stopped at their ceiling", tracked < SLEEPERS, str(tracked))
        check(f"no perf descriptor at or above {LIMIT - RESERVE}",
              fds and max(fds) < LIMIT - RESERVE, str(sorted(fds)[-5:]))
        log = d.read_log()
        check("the log says why, once", log.count("until descriptors are free again") == 1,
              log[-600:])
        check("... naming the limit", f"limit of open files ({LIMIT})" in log, log[-600:])
        jobs = d.call(M + "ListJobs", {})
        check("ListJobs answers", "jobs" in jobs, str(jobs)[:200])
        hist = d.call(M + "GetHistory", {"host": True, "since": time.time() - 60, "step_s": 1})
        check("GetHistory answers", isinstance(hist, dict), str(hist)[:200])
        p = subprocess.run([os.environ["WATTPROF"], "ps", "--socket", d.sock],
                           capture_output=True, text=True, timeout=30)
        check("`wattprof ps` exits 0", p.returncode == 0, p.stderr)
        check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
        bpf_run()
finally:
    for p in sleepers:
        p.kill()
        p.wait()
finish()
