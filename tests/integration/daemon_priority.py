#!/usr/bin/python3
"""[sampler] priority: the sampling thread, and only it, runs SCHED_FIFO at
the configured priority; a daemon that may not (nobody without CAP_SYS_NICE
or RLIMIT_RTPRIO) says so once and samples at normal priority."""
import os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import WATTPROFD, Daemon, check, finish  # noqa: E402
import varlink_peer  # noqa: E402

if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: needs root and setpriv (util-linux) to compare privileged and unprivileged runs")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="wattprofd-prio-")
os.chmod(tmp, 0o755)
cfg = os.path.join(tmp, "prio.conf")
with open(cfg, "w") as f:
    f.write("[sampler]\npriority = 3\n")
os.chmod(cfg, 0o644)


def policies(pid):
    """(policy, rt_priority) of every thread: fields 41 and 40 of stat."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out.append((int(fields[38]), int(fields[37])))
    return sorted(out)


def ticks(sock):
    with varlink_peer.Connection(sock) as c:
        return c.call("io.wattprof.Monitor.GetStatus")["status"]


# Root (CAP_SYS_NICE): one thread at SCHED_FIFO (1) priority 3, the rest normal.
d = Daemon("--config", cfg, state=os.path.join(tmp, "root"))
time.sleep(1.5)
pol = policies(d.proc.pid)
check("exactly one thread is SCHED_FIFO priority 3, the others SCHED_OTHER",
      pol.count((1, 3)) == 1 and all(p == (0, 0) for p in pol if p != (1, 3)), str(pol))
st = d.call("io.wattprof.Monitor.GetStatus")["status"]
check("it samples", st["achieved_hz"] > 40, f'{st["achieved_hz"]:.1f} Hz')
check("the log says so", "SCHED_FIFO priority 3" in d.read_log(), d.read_log()[-300:])
check("SIGTERM exits 0", d.stop() == 0)


def as_nobody(name, caps):
    state = os.path.join(tmp, name)
    os.makedirs(state)
    os.chown(state, 65534, 65534)
    log = open(os.path.join(state, "log"), "w+")
    capargs = ([f"--inh-caps=-all,{caps}", f"--ambient-caps={caps}"] if caps
               else ["--inh-caps=-all"])
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *capargs,
                          WATTPROFD, "--config", cfg, "--state-dir", state, "--socket",
                          os.path.join(state, "sock")], stdout=log, stderr=subprocess.STDOUT)
    try:
        varlink_peer.wait_for_socket(os.path.join(state, "sock"), timeout=10)
        time.sleep(1.5)
        pol = policies(p.pid)
        st = ticks(os.path.join(state, "sock"))
    finally:
        p.terminate()
        rc = p.wait(timeout=30)
    log.seek(0)
    return pol, st, log.read(), rc


# nobody with CAP_SYS_NICE only: still allowed.
pol, st, log, rc = as_nobody("nice", "+sys_nice")
check("as nobody with CAP_SYS_NICE the sampling thread is SCHED_FIFO 3", pol.count((1, 3)) == 1,
      str(pol))

# nobody without it (and RLIMIT_RTPRIO 0): refused, said once, still sampling.
pol, st, log, rc = as_nobody("plain", "")
check("as nobody without CAP_SYS_NICE every thread stays SCHED_OTHER",
      all(p == (0, 0) for p in pol), str(pol))
check("the log says why, once",
      log.count("[sampler] priority 3: Operation not permitted; the sampling thread keeps "
                "normal scheduling") == 1, log[-400:])
check("it samples at normal priority", st["achieved_hz"] > 40, f'{st["achieved_hz"]:.1f} Hz')
check("SIGTERM exits 0", rc == 0, str(rc))
shutil.rmtree(tmp, ignore_errors=True)
finish()
