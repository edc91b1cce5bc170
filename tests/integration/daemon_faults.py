#!/usr/bin/python3
"""wattprofd under bad input and faults,
through the independent Varlink client, real signals and a real file system:

  - bad messages (malformed JSON, > 64 KiB, unknown method, wrong parameter
    type) get the standard Varlink errors;
  - a client that never reads while its replies pile up, and 200 clients at
    once, leave others answered;
  - a garbage model file, by ReloadModels and by SIGHUP, leaves the old model
    in use and returns ModelLoadFailed;
  - the database directory removed, and (as root, in a private mount
    namespace) a full disk: sampling goes on, GetStatus shows the error, and
    writes resume once the directory or the space is back;
  - SIGKILL mid-run: the restarted daemon opens an intact database that lost
    at most the last second;
and after each of them sampling is undisturbed (GetStatus: achieved rate,
timer lateness)."""
import json, os, shutil, signal, socket, sqlite3, subprocess, sys, tempfile, threading, time

SRCDIR = os.environ["SRCDIR"]
# As root, everything runs in a private mount namespace so that a tiny tmpfs
# can play a full disk without touching the host.
if os.getuid() == 0 and "_WATTPROF_FAULTS_NS" not in os.environ:
    if subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                      capture_output=True).returncode == 0:
        os.environ["_WATTPROF_FAULTS_NS"] = "1"
        sys.stdout.flush()
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", "--",
                              sys.executable, os.path.abspath(__file__)])
    os.environ["_WATTPROF_FAULTS_NS"] = "0"

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
from varlink_peer import Closed, Connection, VarlinkError  # noqa: E402
from daemon_harness import Daemon, check, connect, finish  # noqa: E402

work = tempfile.mkdtemp(prefix="wattprofd-faults-")
model_path = os.path.join(work, "model.json")
shutil.copy(os.path.join(SRCDIR, "models", "cputime.json"), model_path)
conf = os.path.join(work, "wattprofd.conf")
with open(conf, "w") as f:  # the test's processes only: the host is shared
    f.write("[track]\ncomm = ^(sh|sleep|burn|python3)$\n")
OVERLOADED = os.getloadavg()[0] > os.cpu_count()
# A fault that held up the sampling thread (a reload, a disk that fails)
# would cost it whole ticks (20 ms periods); below a period, lateness is the
# scheduler's on a shared machine (5.3 ms seen at load <= 2), which the daemon
# benchmark measures, not this test.
MIN_HZ, MAX_P99_MS = (45, 30) if OVERLOADED else (49, 20)
if OVERLOADED:
    print(f"note - host load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: "
          f"sampling must hold {MIN_HZ} Hz and lateness p99 <= {MAX_P99_MS} ms")


def healthy(d, when):
    """Sampling undisturbed: the last second's rate and the minute's p99."""
    st = d.call("io.wattprof.Monitor.GetStatus")["status"]
    load = os.getloadavg()[0]
    if load > 4 * os.cpu_count():  # nothing could hold a rate on such a host
        print(f"skip - sampling undisturbed {when}: host load {load:.1f} on {os.cpu_count()}"
              f' CPUs; {st["achieved_hz"]:.2f} Hz, lateness p99 {st["lateness_p99_ms"]:.2f} ms')
        return st
    check(f"sampling undisturbed {when}", st["achieved_hz"] >= MIN_HZ and
          st["lateness_p99_ms"] <= MAX_P99_MS,
          f'{st["achieved_hz"]:.2f} Hz, lateness p99 {st["lateness_p99_ms"]:.2f} ms')
    return st


def error_of(conn, raw=None, method=None, params=None):
    try:
        if raw is not None:
            conn.send_raw(raw)
            msg = conn.recv()
            return msg.get("error"), msg.get("parameters", {})
        conn.call(method, params)
        return None, {}
    except VarlinkError as e:
        return e.name, e.parameters
    except (Closed, BrokenPipeError, ConnectionResetError) as e:
        return "closed: " + str(e), {}


# ---- READY=1 only after the first tick (systemd notify) --------------------------
# At 1 Hz the first tick comes a second after the socket answers: READY must
# wait for it.
notify_path = os.path.join(work, "notify")
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(notify_path)
notify.settimeout(5)
os.environ["NOTIFY_SOCKET"] = notify_path
d = Daemon("--config", conf, "--rate", "1", state=os.path.join(work, "state-notify"))
answered = time.monotonic()
del os.environ["NOTIFY_SOCKET"]
messages = []
try:
    while not any(m.startswith("READY=1") for m in messages):
        messages += notify.recv(4096).decode().split("\n")
except socket.timeout:
    pass
ready_after = time.monotonic() - answered
check("READY=1 is sent", any(m.startswith("READY=1") for m in messages), str(messages))
check("... only after the first tick (1 s at 1 Hz)", ready_after >= 0.8,
      f"{ready_after:.2f} s after the socket answered")
st = d.call("io.wattprof.Monitor.GetStatus")["status"]
check("... when a status is already published", st["achieved_hz"] > 0, str(st["achieved_hz"]))
check("SIGTERM exits 0", d.stop() == 0)
try:
    while True:
        messages += notify.recv(4096).decode().split("\n")
except socket.timeout:
    pass
check("STOPPING=1 is sent at SIGTERM", "STOPPING=1" in messages, str(messages))
notify.close()

db_dir = os.path.join(work, "db")
d = Daemon("--config", conf, "--model", model_path, "--db", os.path.join(db_dir, "wattprof.db"),
           state=os.path.join(work, "state"))
time.sleep(2.5)
before = healthy(d, "at start")

# ---- Bad messages -------------------------------------------------------------
IP = "org.varlink.service.InvalidParameter"
cases = [
    ("malformed JSON", b'{"method": "io.wattprof.Monitor.GetStatus", \0', IP),
    ("not an object", b"[1, 2]\0", IP),
    ("oversized (> 64 KiB)", json.dumps({"method": "io.wattprof.Monitor.GetProcess",
                                         "parameters": {"pid": 1, "x": "z" * 70000}}).encode()
     + b"\0", IP),
]
for desc, raw, want in cases:
    with Connection(d.sock) as c:
        name, p = error_of(c, raw=raw)
        check(f"{desc} gets {want}", name == want, f"{name} {json.dumps(p)[:120]}")
with Connection(d.sock) as c:
    for desc, method, params, want, field in [
            ("unknown method", "io.wattprof.Monitor.Nope", {}, "org.varlink.service.MethodNotFound",
             None),
            ("unknown interface", "org.example.Nope.Call", {},
             "org.varlink.service.InterfaceNotFound", None),
            ("GetProcess pid as a string", "io.wattprof.Monitor.GetProcess", {"pid": "1"}, IP,
             "pid"),
            ("ListProcesses window_s as a string", "io.wattprof.Monitor.ListProcesses",
             {"window_s": "ten"}, IP, "window_s"),
            ("GetHistory since as an object", "io.wattprof.Monitor.GetHistory",
             {"host": True, "since": {}}, IP, "since"),
            ("ListProcesses sort not in the enum", "io.wattprof.Monitor.ListProcesses",
             {"sort": "joules"}, IP, "sort"),
            ("an unknown parameter", "io.wattprof.Monitor.GetStatus", {"verbose": True}, IP,
             "verbose")]:
        name, p = error_of(c, method=method, params=params)
        ok = name == want and (field is None or p.get("parameter") == field)
        check(f"{desc} gets {want}" + (f" naming {field}" if field else ""), ok,
              f"{name} {json.dumps(p)[:160]}")
    check("the connection still answers after errors",
          c.call("io.wattprof.Monitor.GetStatus")["status"]["rate_hz"] == 50)
# A burst of them: sampling does not notice.
for _ in range(300):
    with Connection(d.sock) as c:
        try:
            c.send_raw(b"\xff\xfe not json\0")
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed already
time.sleep(1.2)
healthy(d, "after 300 bad messages")

# ---- Stuck clients --------------------------------------------------------------
# A subscriber that never reads stays connected (its stream is bounded by
# the output limit) while everything below runs; a client that pipelines
# calls and never reads their replies passes the bound and is dropped.
sub_stuck = Connection(d.sock)
sub_stuck.send("io.wattprof.Monitor.Subscribe", {"interval_s": 0.05, "limit": 0}, more=True)
stuck = Connection(d.sock)
stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
stuck.sock.settimeout(5)
sent = 0
try:
    for _ in range(4000):  # a few KiB each: far past the 1 MiB output bound
        stuck.send("io.wattprof.Monitor.GetStatus")
        sent += 1
except (BrokenPipeError, ConnectionResetError, socket.timeout):
    pass
t0 = time.monotonic()
for _ in range(20):
    d.call("org.varlink.service.GetInfo")
check("others are answered while two clients never read", time.monotonic() - t0 < 2,
      f"20 calls in {time.monotonic() - t0:.2f} s")
got = 0
try:
    stuck.sock.settimeout(10)
    while True:
        stuck.recv()
        got += 1
except (Closed, OSError):
    pass
stuck.close()
check("the client that never read was dropped before it had all its replies", got < sent,
      f"{got} replies of {sent} calls")
check("the drop is logged", "dropping client" in d.read_log(), d.read_log()[-300:])
healthy(d, "after a stuck client")

results = {"answered": 0, "refused": 0, "other": []}
lock = threading.Lock()
start = threading.Barrier(200)


def client():
    try:
        c = Connection(d.sock, timeout=20)
    except OSError as e:
        with lock:
            results["other"].append(str(e))
        return
    start.wait()
    try:
        c.call("io.wattprof.Monitor.GetStatus")
        key = "answered"
    except (Closed, BrokenPipeError, ConnectionResetError):
        key = "refused"  # past max_clients: closed at once, before the call was read
    except VarlinkError as e:
        key = "refused" if e.name == "io.wattprof.Monitor.TooManyClients" else None
        if not key:
            with lock:
                results["other"].append(repr(e))
    except Exception as e:  # noqa: BLE001 -- reported below
        key = None
        with lock:
            results["other"].append(repr(e))
    if key:
        with lock:
            results[key] += 1
    c.close()


threads = [threading.Thread(target=client) for _ in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
check("200 clients at once: each answered or refused, none hung",
      results["answered"] + results["refused"] == 200 and not results["other"],
      f'{results["answered"]} answered, {results["refused"]} refused, other {results["other"][:3]}')
# max_clients is 64 and the stuck subscriber holds one of them
check("as many as max_clients allow were answered", results["answered"] >= 63, str(results))
check("a client after the crowd is answered", d.call("org.varlink.service.GetInfo")["vendor"])
time.sleep(1.2)
healthy(d, "after 200 clients")

# ---- A bad model ---------------------------------------------------------------
sha = before["model"]["sha256"]
with open(model_path, "w") as f:
    f.write('{"format": "wattprof-model/1", "name": garbage\n')
name, p = error_of(Connection(d.sock), method="io.wattprof.Monitor.ReloadModels")
check("ReloadModels of a garbage file is ModelLoadFailed",
      name == "io.wattprof.Monitor.ModelLoadFailed" and p.get("path") == model_path
      and p.get("reason"), f"{name} {p}")
check("the old model stays after ReloadModels",
      d.call("io.wattprof.Monitor.GetStatus")["status"]["model"]["sha256"] == sha)
d.proc.send_signal(signal.SIGHUP)
time.sleep(1)
check("SIGHUP with a garbage file: alive, old model in use", d.proc.poll() is None and
      d.call("io.wattprof.Monitor.GetStatus")["status"]["model"]["sha256"] == sha)
check("the refused reload is logged", "reload refused" in d.read_log())
good = json.load(open(os.path.join(SRCDIR, "models", "cputime.json")))
good["name"] = "cputime-renamed"
with open(model_path, "w") as f:
    json.dump(good, f)
d.proc.send_signal(signal.SIGHUP)
time.sleep(1)
st = d.call("io.wattprof.Monitor.GetStatus")["status"]
check("SIGHUP with a good file loads it", st["model"]["name"] == "cputime-renamed"
      and st["model"]["sha256"] != sha, st["model"]["name"])
healthy(d, "after the reloads")

# ---- Storage trouble -----------------------------------------------------------


def db_error(d):
    return d.call("io.wattprof.Monitor.GetStatus")["status"]["database"]["error"]


def wait_for(pred, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return pred()


def newest_row(path):
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT max(t) FROM host_attribution").fetchone()[0] or 0
        finally:
            con.close()
    except sqlite3.Error:
        return 0


shutil.rmtree(db_dir)
err = wait_for(lambda: db_error(d))
check("the database directory removed: GetStatus shows the error", bool(err), str(err))
warn = d.call("io.wattprof.Monitor.GetStatus")["status"]["warnings"]
check("... and among the warnings", err in warn, str(warn))
healthy(d, "without a database directory")
os.makedirs(db_dir)
check("the directory back: the error clears", wait_for(lambda: db_error(d) is None),
      str(db_error(d)))
now = int(time.time())
check("... and writes resume in a new file",
      wait_for(lambda: newest_row(os.path.join(db_dir, "wattprof.db")) >= now - 1),
      str(newest_row(os.path.join(db_dir, "wattprof.db"))))
sub_stuck.close()
check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

if os.environ.get("_WATTPROF_FAULTS_NS") != "1":
    print("skip - disk full: needs root for a tiny tmpfs in a private mount namespace")
else:
    small = os.path.join(work, "small")
    os.makedirs(small)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "wattprof-full", small], check=True)
    db = os.path.join(small, "wattprof.db")
    d = Daemon("--config", conf, "--db", db, state=os.path.join(work, "state-full"))
    time.sleep(2.5)
    filler = os.path.join(small, "filler")
    with open(filler, "wb", buffering=0) as f:  # unbuffered: closing has nothing to flush
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    filled_at = time.time()
    # The WAL may still have room for a while: keep going until a commit fails.
    # Meanwhile the writer keeps the rows in memory: none may be lost.
    err = wait_for(lambda: db_error(d), timeout=30)
    check("disk full: GetStatus shows the error", bool(err), str(err))
    healthy(d, "with a full disk")
    os.unlink(filler)
    check("space back: the error clears", wait_for(lambda: db_error(d) is None, timeout=15),
          str(db_error(d)))
    now = int(time.time())
    check("... and the seconds held meanwhile are written",
          wait_for(lambda: newest_row(db) >= now - 1), str(newest_row(db)))
    full_s = time.time() - filled_at
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    secs = [r[0] for r in con.execute("SELECT t FROM host_attribution ORDER BY t")]
    con.close()
    gaps = [(a, b) for a, b in zip(secs, secs[1:]) if b != a + 1]
    check("no second lost to the full disk: every second from start to stop is stored",
          len(secs) >= full_s and not gaps,
          f"{len(secs)} seconds over a run with {full_s:.1f} s since the disk filled; gaps {gaps}")
    subprocess.run(["umount", small])

# ---- SIGKILL mid-run ------------------------------------------------------------
state = os.path.join(work, "state-kill")
d = Daemon("--config", conf, state=state)
for frac in (0.05, 0.5):  # just after a second's commit starts, and mid-second
    time.sleep(2.5)
    while abs(time.time() % 1 - frac) > 0.01:
        time.sleep(0.005)
    kept = d.sql("SELECT * FROM host_attribution ORDER BY t")
    killed_at = time.time()
    d.proc.kill()
    d.proc.wait()
    d = Daemon("--config", conf, state=state)
    con = connect(d.db)  # the settled file too
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    after = con.execute("SELECT * FROM host_attribution WHERE t <= ? ORDER BY t",
                        (kept[-1][0] if kept else 0,)).fetchall()
    newest = con.execute("SELECT max(t) FROM host_attribution WHERE t < ?",
                         (int(killed_at),)).fetchone()[0] or 0
    con.close()
    check(f"SIGKILL at +{frac} s: the restarted daemon's database is intact", ok == "ok", ok)
    check(f"SIGKILL at +{frac} s: every row read before the kill is there, unchanged",
          kept and after[:len(kept)] == kept, f"{len(kept)} rows before, {len(after)} after")
    # The second in progress is lost; the one before is committed 100 ms
    # into the next (the store's drain interval).
    last_ok = int(killed_at) - (1 if frac >= 0.2 else 2)
    check(f"SIGKILL at +{frac} s: at most the last second lost", newest >= last_ok,
          f"newest stored second {newest}, killed in {int(killed_at)}")
time.sleep(1.5)  # a whole second after the restart
healthy(d, "after two restarts")
check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
import daemon_harness  # noqa: E402
if not daemon_harness.failures:  # kept for a look when something failed
    shutil.rmtree(work, ignore_errors=True)
finish()
