#!/usr/bin/python3
"""wattprofd's two counter backends ([sampler] backend, --backend) in one
run, one daemon after the other, on the same workload:

- two burners of 0.5 and 0.7 s of CPU (after 0.3 s asleep), then two of
  0.5 s that end together: the bpf backend stores each burner's CPU time
  within 1 % of what the kernel's rusage says
  (it counts task-clock from the scheduler's run time, as rusage does); the
  perf backend within 3 %, as daemon_live holds it (a per-task task-clock
  event also counts the interrupts taken while the task ran, and on a
  virtual machine the time the hypervisor took: 1.7 % over rusage seen at
  load 9, 4.5 % once in a loaded fresh tree, so the host's steal time over
  the burners' run is allowed on top), and the two backends agree within
  3 % (and that steal time);
- the bpf backend, which takes context switches and page faults from the
  kernel's per-thread counts (rusage's), records (--record) those of a
  process that sleeps 300 times and of a burner that takes 6,000 page
  faults as rusage gives them, within 1 % (and 2 switches: a last one after
  the exit that rusage may miss);
- a process that burns 1 ms and exits: the bpf backend counts and stores it
  (the kernel side kept its final count until a tick took it);
- each of these processes has its exit time stored (with bpf the daemon
  learns of exits from the kernel side: the connector's are filtered out);
- a child that lives 1 ms, of a parent started in a job ([exporter]
  job_env): the bpf backend, which takes such a child from what the kernel
  recorded (no /proc reads), stores it with its parent's job;
- a tracked process that renames itself (PR_SET_NAME) and one that execs
  are stored under their new names, with either backend (bpf: from its
  rename and exec hooks; it opens no proc connector, and says in GetStatus
  that process events arrive as they happen);
- GetStatus and `wattprof status` say which backend runs;
- auto runs bpf where it loads and perf where it does not (the build
  without libbpf, or no CAP_BPF), with one log line that says why; bpf
  asked for without CAP_BPF (nor CAP_SYS_ADMIN: setpriv drops both from
  the bounding set) stops the daemon with a line that names it.

Needs root (the proc connector, BPF): skips otherwise; the bpf parts skip,
saying why, where BPF cannot load here."""
import json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish, steal_s, workload_env  # noqa: E402

BURN_S = 0.5
burn = os.environ["BURN"]
def short_process():
    """A child of this process that burns 1 ms of CPU and exits."""
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.001
        while time.process_time() < end:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


JOB = "4242"
if sys.argv[1:] == ["--job-parent"]:  # job_child's parent, with the job in its environment
    time.sleep(0.5)  # tracked first
    print(short_process(), flush=True)
    time.sleep(1.5)  # still tracked when the child is adopted
    sys.exit(0)


def job_child():
    """The pid of a 1 ms child of a parent whose environment names job JOB."""
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--job-parent"],
                       capture_output=True, text=True, check=True,
                       env=dict(os.environ, WP_BACKENDS_JOB=JOB))
    return int(p.stdout)


if os.geteuid() != 0:
    print("skip: needs root (the proc connector, and BPF for the bpf backend)")
    sys.exit(77)
state = tempfile.mkdtemp(prefix="wattprofd-backends-")


def wait_status(d):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        st = d.call("io.wattprof.Monitor.GetStatus")["status"]
        if st.get("backend"):
            return st
        time.sleep(0.1)
    return st


SLEEPER = "import time\ntime.sleep(0.3)\nfor _ in range(300):\n    time.sleep(0.001)\n"


def counted_pair(env):
    """{pid: (context switches, page faults)} by rusage of a process that
    sleeps 300 times and of a burner that takes 6,000 page faults."""
    procs = [subprocess.Popen([sys.executable, "-c", SLEEPER], env=env),
             subprocess.Popen([burn, "--wait", "0.3", "--faults", "20000", "0.3"], env=env)]
    ru = {}
    for p in procs:
        _, _, r = os.wait4(p.pid, 0)
        ru[p.pid] = (r.ru_nvcsw + r.ru_nivcsw, r.ru_minflt + r.ru_majflt)
    return ru


RENAMER = ("import ctypes, time\ntime.sleep(0.5)\n"
           "ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b'wp_renamed'), 0, 0, 0)\ntime.sleep(0.5)\n")


def renamed_pair(env):
    """The pids of a process that renames itself (PR_SET_NAME) and of one
    that execs `sleep 0.4`, each after 0.5 s (tracked by then)."""
    procs = [subprocess.Popen([sys.executable, "-c", RENAMER], env=env),
             subprocess.Popen(["/bin/sh", "-c", "sleep 0.5; exec sleep 0.4"], env=env)]
    for p in procs:
        p.wait()
    return [p.pid for p in procs]


def connector_sockets(pid):
    """How many proc connector sockets (netlink family 11) process pid holds."""
    with open("/proc/net/netlink") as f:
        rows = [x.split() for x in f.read().splitlines()[1:]]
    inodes = {r[-1] for r in rows if r[1] == "11"}
    fds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return sum(1 for x in fds if x.startswith("socket:[") and x[8:-1] in inodes)


def check_counts(trace, counted):
    """Each process of `counted` has its context switches and page faults
    in the recording as rusage gives them."""
    with open(trace) as f:
        lines = [json.loads(x) for x in f]
    events = lines[0]["events"]
    cs, pf = events.index("perf::CONTEXT-SWITCHES"), events.index("perf::PAGE-FAULTS")
    got = {pid: [0.0, 0.0] for pid in counted}
    for x in lines:
        for p in x.get("tick", {}).get("procs", []):
            if p["pid"] in got:
                got[p["pid"]][0] += p["d"][cs]
                got[p["pid"]][1] += p["d"][pf]
    for i, (pid, (ru_cs, ru_pf)) in enumerate(counted.items()):
        # The sleeper switches at each sleep; the burner only when preempted.
        check(f"bpf: process {pid}: recorded {got[pid][0]:.0f} context switches, rusage {ru_cs}",
              (i > 0 or ru_cs >= 300) and abs(got[pid][0] - ru_cs) <= 0.01 * ru_cs + 2)
        check(f"bpf: process {pid}: recorded {got[pid][1]:.0f} page faults, rusage {ru_pf}",
              ru_pf >= 500 and abs(got[pid][1] - ru_pf) <= 0.01 * ru_pf)


def run(backend):
    """The workload under a daemon with `backend`; None if it cannot run."""
    os.makedirs(os.path.join(state, backend), exist_ok=True)
    cfg = os.path.join(state, backend, "wattprofd.conf")
    with open(cfg, "w") as f:
        f.write("[exporter]\njob_env = WP_BACKENDS_JOB\n")
    trace = os.path.join(state, backend, "trace.jsonl")
    try:
        d = Daemon("--backend", backend, "--config", cfg, "--record", trace,
                   state=os.path.join(state, backend))
    except RuntimeError as e:  # it exits at once when the backend cannot load
        return None, str(e)
    st = wait_status(d)
    check(f"{backend}: GetStatus says backend {backend}", st.get("backend") == backend,
          str(st.get("backend")))
    out = subprocess.run([os.environ["WATTPROF"], "status", "--socket", d.sock],
                         capture_output=True, text=True).stdout
    check(f"{backend}: wattprof status says it", f"; counters: {backend}\n" in out, out[:300])
    socks = connector_sockets(d.proc.pid)
    check(f"{backend}: proc connector sockets: {socks}", socks == (0 if backend == "bpf" else 1))
    check(f"{backend}: GetStatus: no warning that processes are found by rescans only",
          not any("no proc connector" in w for w in st["warnings"]), str(st["warnings"]))
    # They sleep 0.3 s first: the perf backend counts from the open of its
    # counters, which follows the fork by a few ms (more under a sanitizer).
    env = workload_env()

    def burn_pair(seconds):
        steal0 = steal_s()
        procs = [subprocess.Popen([burn, "--wait", "0.3", str(x)], env=env) for x in seconds]
        ru = {}
        for b in procs:
            _, _, r = os.wait4(b.pid, 0)
            ru[b.pid] = r.ru_utime + r.ru_stime
        stolen.update({pid: steal_s() - steal0 for pid in ru})
        return ru

    stolen = {}  # burner: the host's steal time over its pair's run, s
    apart = burn_pair([BURN_S, BURN_S + 0.2])  # they end 0.2 s apart
    together = burn_pair([BURN_S, BURN_S])     # they end within a tick or two
    counted = counted_pair(env)
    renamer, execer = renamed_pair(env)
    short = short_process()
    child = job_child()
    time.sleep(2.5)  # past a second boundary and the store's commit
    check(f"{backend}: SIGTERM exits 0", d.stop() == 0)
    cpu = {}
    for pid in list(apart) + list(together) + [short]:
        cpu[pid] = d.sql("SELECT sum(e.cpu_s) FROM process_energy e JOIN processes p"
                         " ON p.id = e.process_id WHERE p.pid = ?", pid)[0][0] or 0.0
    tol = 0.01 if backend == "bpf" else 0.03
    for pid, ru in {**apart, **together}.items():
        # perf may exceed rusage by the time the hypervisor took meanwhile
        # (the host's steal time over the pair's run: an upper bound).
        over = stolen[pid] if backend == "perf" else 0.0
        check(f"{backend}: burner {pid}: stored CPU {cpu[pid]:.4f} s is its rusage "
              f"{ru:.4f} s within {tol:.0%} (+ {over:.3f} s stolen)",
              -tol * ru <= cpu[pid] - ru <= tol * ru + over)
    ended = [p for p in cpu
             if d.sql("SELECT exit_time FROM processes WHERE pid = ?", p) not in ([], [(None,)])]
    check(f"{backend}: each burner's exit is stored (bpf: from its exit hook, the connector's "
          f"exits are filtered out)", len(ended) == len(cpu), f"{ended} of {list(cpu)}")
    log = d.read_log()
    check(f"{backend}: the log says once which backend runs",
          log.count("counter backend:") == 1, log[-400:])
    job = d.sql("SELECT job FROM processes WHERE pid = ?", child)
    names = d.sql("SELECT comm, cmdline FROM processes WHERE pid = ?", renamer)
    check(f"{backend}: the process that renamed itself is stored as wp_renamed",
          [n[0] for n in names] == ["wp_renamed"], str(names))
    names = d.sql("SELECT comm, cmdline FROM processes WHERE pid = ?", execer)
    check(f"{backend}: the process that exec'd is stored as sleep 0.4",
          names == [("sleep", "sleep 0.4")], str(names))
    if backend == "bpf":
        check_counts(trace, counted)
    return ([(cpu[p] / apart[p], stolen[p] / apart[p]) for p in apart],
            (short, cpu[short], d, child, job))


perf, _ = run("perf")
bpf, extra = run("bpf")
# auto: bpf where it loads, else perf; either way one log line saying why.
d = Daemon(state=os.path.join(state, "auto"))
st = wait_status(d)
d.stop()
lines = [x for x in d.read_log().splitlines() if "counter backend" in x]
if bpf is None:
    check("auto, where bpf cannot load: perf", st.get("backend") == "perf", str(st.get("backend")))
    check("... with one log line that says why, and GetStatus's reason", len(lines) == 1
          and "perf (auto: " in lines[0] and lines[0].endswith(f"({st.get('backend_reason')})"),
          f"{lines} {st.get('backend_reason')}")
    print("skip: the bpf backend cannot load here: " + " ".join(extra.split())[-300:])
else:
    check("auto, where bpf loads: bpf", st.get("backend") == "bpf", str(st.get("backend")))
    check("... with one log line that says so, and GetStatus's reason",
          lines == ["wattprofd: counter backend: bpf (auto: it loaded)"]
          and st.get("backend_reason") == "auto: it loaded", f"{lines} {st.get('backend_reason')}")
    for i, ((a, over), (b, _)) in enumerate(zip(perf, bpf)):
        check(f"burner {i}: bpf and perf agree (stored/rusage {b:.4f} vs {a:.4f}, perf's "
              f"with {over:.4f} of steal time)", -0.03 <= a - b <= 0.03 + over)
    short, short_cpu, d, child, job = extra
    check(f"bpf: the 1 ms child {child} is stored with its parent's job {JOB}",
          job == [(JOB,)], str(job))
    stored = d.sql("SELECT count(*) FROM processes WHERE pid = ?", short)[0][0]
    check(f"bpf: the 1 ms process {short} is stored", stored == 1, str(stored))
    check(f"bpf: with its CPU time, {short_cpu * 1e3:.2f} ms", 0.0009 <= short_cpu <= 0.02)

    # bpf asked for without the capabilities it needs: the daemon stops,
    # naming them.
    if shutil.which("setpriv"):
        try:
            d = Daemon("--backend", "bpf", state=os.path.join(state, "nocap"),
                       prefix=("setpriv", "--bounding-set=-bpf,-sys_admin"))
            d.stop()
            check("bpf without CAP_BPF: the daemon refuses to start", False, "it started")
        except RuntimeError as e:
            check("bpf without CAP_BPF: the daemon refuses to start, naming it",
                  "CAP_BPF" in str(e), str(e)[-300:])
        # auto without CAP_BPF: perf, and one line naming what was missing.
        d = Daemon(state=os.path.join(state, "auto-nocap"),
                   prefix=("setpriv", "--bounding-set=-bpf,-sys_admin"))
        st = wait_status(d)
        out = subprocess.run([os.environ["WATTPROF"], "status", "--socket", d.sock],
                             capture_output=True, text=True).stdout
        check("auto without CAP_BPF: perf", st.get("backend") == "perf", str(st.get("backend")))
        d.stop()
        lines = [x for x in d.read_log().splitlines() if "counter backend" in x]
        check("... with one log line that says why", len(lines) == 1 and "perf (auto:" in lines[0]
              and "CAP_BPF" in lines[0], str(lines))
        why = st.get("backend_reason") or ""
        check("... GetStatus's reason says it", why.startswith("auto: ") and "CAP_BPF" in why, why)
        check("... and wattprof status shows it", f"; counters: perf ({why})\n" in out, out[:400])
    else:
        print("skip: no setpriv for the checks without CAP_BPF")
finish()
