"""Runs a real wattprofd for integration tests and talks to it through the
independent Varlink client (varlink_peer). Also reads its SQLite file
directly, as a second, independent view of what it stored."""
import contextlib, fcntl, json, os, shutil, signal, socket, sqlite3, subprocess, sys, tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import varlink_peer  # noqa: E402

BUILDDIR = os.environ["BUILDDIR"]
WATTPROFD = os.path.join(BUILDDIR, "daemon", "wattprofd")


def steal_s():
    """The host's steal time so far, all CPUs, in seconds (/proc/stat): time
    the hypervisor ran something else while a vCPU had work. A per-task
    task-clock (what the daemon stores) keeps it, rusage leaves it out
    (CONFIG_PARAVIRT_TIME_ACCOUNTING), so over a window it bounds by how
    much the first can exceed the second."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


# A daemon starts in a quarter of a second here; one that took over 10 s
# once, on a loaded CI machine, failed a test and left nothing to say why.
# Past SLOW_START_S the harness notes where each thread is, and waits on.
SLOW_START_S = 10
START_TIMEOUT_S = 30


def where_is(pid):
    """What each thread of `pid` is doing: its state, CPU seconds, the
    kernel function it waits in and (as root) its kernel stack; and the
    load and steal so far, to tell a busy machine from a hung daemon."""
    tick = os.sysconf("SC_CLK_TCK")
    lines = [f"  load {os.getloadavg()[0]:.1f}, steal so far {steal_s():.2f} s"]
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError as e:
        return f"  /proc/{pid}/task: {e}"
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                stat = f.read()
            with open(f"{base}/wchan") as f:
                wchan = f.read().strip() or "-"
        except OSError:
            continue  # ended meanwhile
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        cpu = (int(rest[11]) + int(rest[12])) / tick
        lines.append(f"  thread {tid} ({comm}): state {rest[0]}, {cpu:.2f} CPU s, in {wchan}")
        with contextlib.suppress(OSError):
            with open(f"{base}/stack") as f:
                lines += ["    " + ln.split(" ", 1)[-1] for ln in f.read().splitlines()[:8]]
    return "\n".join(lines)


failures = 0


def check(desc, ok, detail=""):
    global failures
    print(("ok - " if ok else "FAIL - ") + desc + (f": {detail}" if detail else ""))
    if not ok:
        failures += 1


def finish():
    if failures:
        print(f"{failures} check(s) failed")
        sys.exit(1)
    sys.exit(0)


def workload_env():
    """The environment for a workload the test starts (a burner, say) whose
    CPU time it compares with the daemon's: the test's own, with
    LeakSanitizer off in a sanitized build. Its exit check runs in a
    tracer process of its own, whose CPU rusage books to the workload and a
    per-process counter does not (6 ms of 0.5 s seen)."""
    asan = os.environ.get("ASAN_OPTIONS", "")
    return dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") + "detect_leaks=0")


def end_rig(meter, d, cycler=None, background=None):
    """Stops what a test on the fake meter started: a FaultCycle, the daemon
    when the body failed with one up, a background burner, the meter."""
    if cycler:
        cycler.stop()
    if d and d.proc.poll() is None:
        d.stop()
    if background:
        background.kill()
        background.wait()
    meter.close()


def finish_rig(work, loads, skipped):
    """Ends a test on the fake meter: prints the host's load over it, keeps
    `work` for a look when a check failed, and exits 77 with the reason
    when the rest was `skipped` (a string), else as finish()."""
    if loads:
        print(f"host load average during the test: {min(loads):.1f} to {max(loads):.1f}"
              f" on {os.cpu_count()} CPUs")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
        if skipped:
            print(f"SKIP: {skipped}")
            sys.exit(77)
    finish()


def in_fake_powercap(script, subzones=None, args=()):
    """Runs the test `script` (its __file__) again inside
    tests/helpers/fake-powercap, unless it already is: a private
    /sys/class/powercap of plain files (FAKE_POWERCAP names it) that the
    test's energy-writer advances. subzones: the package zone's sub-zones,
    comma-separated ("" for the package alone); None: the helper's default.
    args: the script's own arguments. Returns only inside the fake tree."""
    if "FAKE_POWERCAP" in os.environ:
        return
    fake = os.path.join(os.environ["SRCDIR"], "tests", "helpers", "fake-powercap")
    sub = [] if subzones is None else ["--subzones", subzones]
    sys.stdout.flush()
    os.execv(fake, [fake, *sub, "--", sys.executable, os.path.abspath(script), *args])


@contextlib.contextmanager
def cleaned_up(daemon, *dirs):
    """Runs the body; then, whether it passed, failed or raised, stops the
    daemon if the body left it running and removes the folders."""
    try:
        yield daemon
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


class CgroupMeter:
    """A fake RAPL package meter (inside tests/helpers/fake-powercap) that
    energy-writer advances at idle_w plus per_cpu_w per busy CPU of a cpuacct
    cgroup of the test's own, so that the other work of a shared machine
    neither moves it nor takes a share; the writer runs at real-time
    priority, since a starved writer is a stalled meter. Exits 77 (skip),
    saying why, where that cannot be had. `cgroup` is the folder; add()
    puts a process in it; close() stops the writer and removes the folder.
    event_j: also that many joules per page fault of the group's processes,
    counted in a cgroup v2 folder of the same name (perf's cgroup mode)."""

    def __init__(self, name, idle_w, per_cpu_w, work, event_j=None):
        self.cgroup = f"/sys/fs/cgroup/cpuacct/{name}-{os.getpid()}"
        self.event_cgroup = None
        if os.getuid() != 0 or not shutil.which("chrt"):
            print("SKIP: the meter must run at real-time priority (root and chrt): a starved"
                  " writer is a stalled meter")
            sys.exit(77)
        try:
            os.mkdir(self.cgroup)
        except OSError as e:
            print(f"SKIP: no cpuacct cgroup for a meter that sees only the test's processes: {e}")
            sys.exit(77)
        power = f"intel-rapl:0={idle_w}+{per_cpu_w}*load"
        events = []
        if event_j is not None:
            self.event_cgroup = f"/sys/fs/cgroup/unified/{name}-{os.getpid()}"
            try:
                os.mkdir(self.event_cgroup)
            except OSError as e:
                os.rmdir(self.cgroup)
                print(f"SKIP: no cgroup v2 folder to count the meter's page faults in: {e}")
                sys.exit(77)
            power += f"+{event_j}*event"
            events = ["--event", "page-faults", "--event-cgroup", self.event_cgroup]
        truth = os.path.join(work, "truth")
        self.writer = subprocess.Popen(
            ["chrt", "-f", "10", os.path.join(BUILDDIR, "tests", "energy-writer"), "--truth",
             truth, "--cpuacct", self.cgroup, *events, power])
        deadline = time.monotonic() + 5
        while not os.path.exists(truth) and time.monotonic() < deadline:
            time.sleep(0.01)

    def add(self, pid):
        for group in (self.cgroup, self.event_cgroup):
            if group:
                with open(os.path.join(group, "cgroup.procs"), "w") as f:
                    f.write(str(pid))

    def close(self):
        self.writer.send_signal(signal.SIGTERM)
        self.writer.wait()
        time.sleep(0.2)  # the group empties once its last process is reaped
        for group in (self.cgroup, self.event_cgroup):
            try:
                if group:
                    os.rmdir(group)
            except OSError as e:
                print(f"note - {group} left: {e}")


def busy_rig(tag, prefix, idle_w, per_cpu_w, event_j=None):
    """The busy-node rig: a folder of the test's own, a CgroupMeter named
    after `tag` (event_j as there), a copy of $BURN named `prefix` and the
    test's pid (a name of this run's own: other tests on a shared machine
    run burners too), and a wattprofd.conf that tracks that name and counts
    the CPU no tracked process used in the meter's cgroup. Returns (work,
    meter, burner, conf)."""
    work = tempfile.mkdtemp(prefix=f"wattprofd-{tag}-")
    meter = CgroupMeter(f"wattprof-{tag}", idle_w, per_cpu_w, work, event_j=event_j)
    name = f"{prefix}{os.getpid()}"[:15]
    burner = os.path.join(work, name)
    shutil.copy(os.environ["BURN"], burner)
    os.chmod(burner, 0o755)
    conf = os.path.join(work, "wattprofd.conf")
    with open(conf, "w") as f:
        f.write(f"[track]\ncomm = ^{name}$\n[sampler]\nmeter_cgroup = {meter.cgroup}\n")
    return work, meter, burner, conf


def fake_meter_model(path, idle_w, per_cpu_w):
    """Writes to `path` the built-in cputime model calibrated to a fake meter
    of IDLE_W plus PER_CPU_W per busy core of task-clock (the generic model's
    idle would be the 5th percentile of the seconds measured so far, which in
    a short run are mostly busy ones). Returns `path`."""
    src = os.path.join(os.environ["SRCDIR"], "models", "cputime.json")
    with open(src) as f:
        model = json.load(f)
    model.update(name="fake-meter", idle_power_w=idle_w,
                 training={"rows": 3600, "cv_mape": 0.01, "created": "2026-11-30T00:00:00Z"})
    model["classes"]["models"][0].update(intercept=idle_w, coef=[per_cpu_w, 0, 0, 0])
    with open(path, "w") as f:
        json.dump(model, f)
    return path


def page_fault_model(path, per_cpu_w, per_fault_j):
    """Writes to `path` the built-in cputime model with page faults worth
    2 W per 100,000 a second (task-clock 6.6 W per CPU), uncalibrated, for a
    fake meter of per_cpu_w per busy CPU and per_fault_j per page fault.
    Returns the coefficients one per event should find: {event: scale}."""
    src = os.path.join(os.environ["SRCDIR"], "models", "cputime.json")
    with open(src) as f:
        model = json.load(f)
    assert model["events"][0] == "perf::TASK-CLOCK" and model["events"][3] == "perf::PAGE-FAULTS"
    model["name"] = "cputime-faults"
    model["scaler"]["max"][3] = 1e5
    model["classes"]["models"][0]["coef"] = [6.6, 0, 0, 2.0]
    with open(path, "w") as f:
        json.dump(model, f)
    return {"perf::TASK-CLOCK": per_cpu_w / 6.6, "perf::PAGE-FAULTS": per_fault_j * 1e5 / 2.0}


def reap(p):
    """CPU seconds and page faults of a finished child (the kernel's rusage)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, ru.ru_minflt + ru.ru_majflt


def cpu_of(p):
    """Waits for the child p; its CPU seconds from the kernel (rusage)."""
    return reap(p)[0]


def rig_status(d, loads):
    """The daemon's status, noting the host's load in `loads` (finish_rig
    prints its range)."""
    loads.append(os.getloadavg()[0])
    return d.call("io.wattprof.Monitor.GetStatus")["status"]


def meter_stalled(d):
    """Why the fake meter cannot be trusted, or None. A meter that did not
    advance for 200 ms (its writer starved, even at real-time priority, on
    a host whose run queue holds other real-time work) is no measurement:
    the daemon falls back to the model for those ticks, as it must, and
    says so; accuracy against the meter is then not asserted."""
    n, measured = d.sql("SELECT count(*), sum(measured) FROM host_attribution")[0]
    if n and measured < 0.8 * n:
        return (f"the fake meter stalled in {n - measured} of {n} seconds"
                f" (load {os.getloadavg()[0]:.1f})")
    return None


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultCycle:
    """A background of burners (spawn(*args) starts one) taking 0 to 60,000
    page faults per CPU-second, one after another, until stop(): with a
    varying CPU load beside it, what lets a fit tell page faults from CPU."""

    def __init__(self, spawn):
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(spawn,))
        self.thread.start()

    def run(self, spawn):
        rates = ["0", "40000", "10000", "60000", "20000", "50000"]
        i = 0
        while not self.done.is_set():
            reap(spawn("--faults", rates[i % len(rates)], "0.8"))
            i += 1

    def stop(self):
        self.done.set()
        self.thread.join()


def one_event_model(path):
    """Writes to `path` a model of task-clock alone (10 W + 40 W per core,
    idle 20 W), for replays of recordings that hold only that event."""
    with open(path, "w") as f:
        json.dump({"format": "wattprof-model/1", "name": "one-event", "engine": "ridge",
                   "target": ["package"], "events": ["perf::TASK-CLOCK"],
                   "scaler": {"min": [0], "max": [1e9]},
                   "classes": {"models": [{"name": "all", "intercept": 10.0, "coef": [40.0]}]},
                   "idle_power_w": 20.0}, f)
    return path


def write_replay(path, procs, ticks=3, dt=20_000_000):
    """Writes to `path` a recording of task-clock alone over `ticks` ticks
    in which every process of `procs`, (pid, comm, cmdline) under uid 0,
    runs, the later ones longer. Replay it with one_event_model."""
    lines = [{"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"], "zones": [],
              "rate_hz": 50, "boot_id": "00000000-0000-0000-0000-00000000fa9f"}]
    for pid, comm, cmdline in procs:
        lines.append({"proc": {"pid": pid, "ppid": 1, "start": 7, "uid": 0, "comm": comm,
                               "cmdline": cmdline, "cgroup": "/t"}})
    for k in range(ticks):
        lines.append({"tick": {"t": 1_000_000_000 + (k + 1) * dt, "dt": dt, "energy_j": [],
                               "procs": [{"pid": p[0], "start": 7,
                                          "d": [dt * (i + 1) / len(procs)], "r": [1]}
                                         for i, p in enumerate(procs)]}})
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


SETTLED_VIEW = (
    "CREATE TEMP VIEW process_energy AS"
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"
    " FROM settled.process_energy_settled UNION ALL"
    " SELECT process_id, t, attributed_j, standalone_j, cpu_s, class, model_id"
    " FROM main.process_energy_recent")


def connect(db, ro=True, **kw):
    """A connection to the database DB as the sqlite3 shell would make it:
    with the module that reads its recent rows (process_energy_recent)
    loaded (.load wattprof_packed), its settled rows' file (DB-settled:
    process_energy_settled, process_energy_batch, process_energy_minute)
    attached as `settled` where there is one, and the view process_energy of
    both files, which no view of the main file can be; read-only unless ro
    is False."""
    con = (sqlite3.connect(f"file:{db}?mode=ro", uri=True, **kw) if ro
           else sqlite3.connect(db, **kw))
    if not hasattr(con, "enable_load_extension"):
        sys.exit(f"{sys.executable}: its sqlite3 module cannot load extensions; the tests run"
                 " with Debian's /usr/bin/python3")
    con.enable_load_extension(True)
    con.load_extension(os.path.join(BUILDDIR, "lib", "store", "wattprof_packed"))
    con.enable_load_extension(False)
    if os.path.exists(db + "-settled"):
        con.execute("ATTACH ? AS settled", (db + "-settled",))
        con.execute(SETTLED_VIEW)
    return con


def insert_processes(con, rows):
    """Stores processes behind the daemon's back (between two runs of it):
    rows of (id, pid, comm, first_seen, last_seen, exit_time, job), each of
    uid 0 with 1 J and 1 CPU second in total."""
    con.executemany(
        "INSERT INTO processes (id, boot_id, pid, start_time, comm, cmdline, uid, cgroup,"
        " first_seen, last_seen, exit_time, attributed_j, standalone_j, cpu_s, job)"
        " VALUES (?, 'b', ?, 1, ?3, ?3, 0, '/t', ?, ?, ?, 1, 1, 1, ?)", rows)


def insert_minute_rows(con, where):
    """Gives each stored process matching `where` (SQL over processes p)
    three minute rows up to its last second, 1 J and 0.1 CPU s each."""
    con.execute(
        "INSERT INTO process_energy_minute (process_id, t, attributed_j, standalone_j, cpu_s,"
        " class, seconds) SELECT p.id, (p.last_seen / 60 - k.k) * 60, 1, 1, 0.1, 0, 60"
        " FROM processes p, (SELECT 0 AS k UNION ALL SELECT 1 UNION ALL SELECT 2) k"
        " WHERE " + where)


def energy_by_job(url, command):
    """The exporter's energy of `command` by job_id, from GET url."""
    import re, urllib.request
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    pat = r'wattprof_process_energy_joules_total\{command="%s",.*job_id="([^"]*)"\} (\S+)' % command
    for line in text.splitlines():
        m = re.match(pat, line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def child_log(path):
    """A new, empty file at `path` for a child's stdout and stderr that this
    process reads while the child writes. The open file (and its offset) is
    shared with the child: without O_APPEND a read's seek(0) sent the
    child's next line to offset 0, over the lines before it (a daemon's
    "exporter: serving" line was lost so, and the test waited for it in
    vain). With O_APPEND every write of the child goes to the end."""
    f = open(path, "w+")
    fcntl.fcntl(f.fileno(), fcntl.F_SETFL, fcntl.fcntl(f.fileno(), fcntl.F_GETFL) | os.O_APPEND)
    return f


class Daemon:
    def __init__(self, *args, state=None, prefix=()):
        self.dir = state or tempfile.mkdtemp(prefix="wattprofd-test-")
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "sock")
        self.db = os.path.join(self.dir, "wattprof.db")
        self.log = child_log(os.path.join(self.dir, "daemon.log"))
        self.proc = subprocess.Popen(
            [*prefix, WATTPROFD, "--state-dir", self.dir, "--socket", self.sock, *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        start = time.monotonic()
        slow = None  # where it was after SLOW_START_S, if it was not up then
        while time.monotonic() < start + START_TIMEOUT_S:
            if self.proc.poll() is not None:
                break
            try:
                self.call("org.varlink.service.GetInfo")
                if slow:
                    print(f"note: wattprofd answered only after {time.monotonic() - start:.1f} s;"
                          f" at {SLOW_START_S} s:\n{slow}")
                return
            except OSError:
                time.sleep(0.02)
            if slow is None and time.monotonic() >= start + SLOW_START_S:
                slow = where_is(self.proc.pid)
        rc = self.proc.poll()
        why = (f"it exited with {rc}" if rc is not None
               else f"no answer on its socket after {START_TIMEOUT_S} s")
        if rc is None:  # not left running behind the failed test
            why += "; where it was:\n" + where_is(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"wattprofd did not start ({why}):\n" + self.read_log())

    def read_log(self):
        self.log.seek(0)
        return self.log.read()

    def wait_log(self, text, timeout=60):
        """Waits up to `timeout` s for `text` in the log (a replay's
        "finished after", say); whether it came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and text not in self.read_log():
            time.sleep(0.05)
        return text in self.read_log()

    def call(self, method, params=None):
        with varlink_peer.Connection(self.sock) as c:
            return c.call(method, params or {})

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def exporter_url(self, timeout=30):
        """The /metrics address the daemon logged (listen = 127.0.0.1:0)
        before it began to answer calls."""
        import re
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", self.read_log())
            if m:
                return m.group(1)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"no exporter address in the log after {timeout} s:\n"
                                   + self.read_log())
            time.sleep(0.05)

    def sql(self, query, *args):
        con = connect(self.db)
        try:
            return con.execute(query, args).fetchall()
        finally:
            con.close()
