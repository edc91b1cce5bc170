#!/usr/bin/python3
"""Every number of io.wattprof.Monitor at its edges, through the independent
Varlink client: a value outside its range is InvalidParameter naming that
parameter, with a reason that says the range (before: since -1e308 was
signed overflow that blamed step_s, series_s 1e300 named parameter "",
limit -1 was accepted); the edges themselves are served.  An unprivileged
caller's uid of another user is PermissionDenied from every method that
takes a uid.  And the CLI's own checks: an empty --socket, a uid past
2^32-2 and a --since before 1970 are one line and a non-zero exit."""
import json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import cleaned_up, Daemon, check, finish  # noqa: E402
from varlink_peer import Connection, VarlinkError  # noqa: E402

M = "io.wattprof.Monitor."
WATTPROF = os.environ["WATTPROF"]
tmp = tempfile.mkdtemp(prefix="wattprof-params-")
os.chmod(tmp, 0o755)
d = Daemon("--rate", "50", state=os.path.join(tmp, "d"))
os.chmod(d.dir, 0o755)


def answer(method, params, more=False):
    """('ok', None) or (error name, its parameters)."""
    with Connection(d.sock) as c:
        c.send(M + method, params, more=more)
        try:
            c.reply()
            return "ok", None
        except VarlinkError as e:
            return e.name, e.parameters


def refused(method, params, name, reason, more=False):
    err, p = answer(method, params, more)
    check(f"{method} {json.dumps(params)}: InvalidParameter '{name}'",
          err == "org.varlink.service.InvalidParameter" and p.get("parameter") == name and
          reason in p.get("reason", ""), f"{err} {p}")


def served(method, params, more=False):
    err, p = answer(method, params, more)
    check(f"{method} {json.dumps(params)} is served", err == "ok", f"{err} {p}")


with cleaned_up(d, tmp):
    # GetHistory: times from the epoch to 1e10, steps up to 1e9 s.
    refused("GetHistory", {"host": True, "since": -1e308}, "since",
            "since is -1e+308, not from 0 to 10000000000")
    refused("GetHistory", {"host": True, "since": 1e300}, "since", "not from 0 to 10000000000")
    refused("GetHistory", {"host": True, "since": -1}, "since", "since is -1,")
    refused("GetHistory", {"host": True, "since": 0, "until": 1e11}, "until", "until is 1e+11")
    refused("GetHistory", {"host": True, "since": 0, "step_s": 1e300}, "step_s",
            "step_s is 1e+300, not from 0 to 1000000000")
    refused("GetHistory", {"host": True, "since": 0, "step_s": 0}, "step_s", "step_s is 0, not above 0")
    refused("GetHistory", {"pid": 0, "since": 0}, "pid", "pid is 0, not from 1 to 4194304")
    refused("GetHistory", {"uid": -1, "since": 0}, "uid", "uid is -1, not from 0 to 4294967294")
    refused("GetHistory", {"since": 0}, "pid", "exactly one of pid, comm, uid, job or host")
    served("GetHistory", {"host": True, "since": 0})
    served("GetHistory", {"host": True, "since": 1e10 - 2, "until": 1e10, "step_s": 1})
    # GetProcess
    refused("GetProcess", {"pid": 1, "series_s": 1e300}, "series_s",
            "series_s is 1e+300, not from 1 to 1000000000")
    refused("GetProcess", {"pid": 1, "series_s": 0.5}, "series_s", "series_s is 0.5")
    for pid in (0, -1, 4194305, 2 ** 62):
        refused("GetProcess", {"pid": pid}, "pid", f"pid is {pid}, not from 1 to 4194304")
    err, _ = answer("GetProcess", {"pid": 4194304})
    check("GetProcess pid 4194304 (the largest) is looked for", err == M + "NoSuchProcess", err)
    # ListProcesses
    refused("ListProcesses", {"limit": -1}, "limit", "limit is -1, not from 0 to 1000")
    refused("ListProcesses", {"limit": 100000}, "limit", "limit is 100000, not from 0 to 1000")
    refused("ListProcesses", {"offset": -1}, "offset", "offset is -1")
    refused("ListProcesses", {"window_s": 0.5}, "window_s", "window_s is 0.5, not from 1 to 1000000000")
    refused("ListProcesses", {"window_s": 1e300}, "window_s", "window_s is 1e+300")
    refused("ListProcesses", {"uid": 4294967295}, "uid", "uid is 4294967295")
    served("ListProcesses", {"limit": 0, "window_s": 1})
    served("ListProcesses", {"limit": 1000, "window_s": 1e9, "uid": 4294967294, "offset": 5})
    # ListJobs
    refused("ListJobs", {"since": -1}, "since", "since is -1,")
    refused("ListJobs", {"until": 1e11}, "until", "until is 1e+11")
    refused("ListJobs", {"uid": 4294967295}, "uid", "uid is 4294967295")
    refused("ListJobs", {"job": 5}, "job", "")
    served("ListJobs", {})
    served("ListJobs", {"job": "5151", "since": 0, "until": 1e10})
    refused("ListJobs", {"before": 5}, "before", "")
    refused("ListJobs", {"before": {"start": 1}}, "before",
            'before is {"start":1}, not {"start": float, "job": string}')
    refused("ListJobs", {"before": {"start": 1, "job": 7}}, "before", "not {")
    refused("ListJobs", {"before": {"start": 1, "job": "7", "x": 1}}, "before", "not {")
    refused("ListJobs", {"before": {"start": -1, "job": "7"}}, "before",
            "before.start is -1, not in [0, 1e+10]")
    refused("ListJobs", {"offset": 5}, "offset", "")  # pages by before, not by offset
    served("ListJobs", {"before": {"start": 1e9, "job": "5151"}})
    err, _ = answer("ListJobs", {"since": 10, "until": 5})
    check("ListJobs until before since: InvalidTimeRange", err == M + "InvalidTimeRange", err)
    # Subscribe
    refused("Subscribe", {"interval_s": -1}, "interval_s", "interval_s is -1, not from 0 to 86400", True)
    refused("Subscribe", {"interval_s": 1e6}, "interval_s", "interval_s is 1e+06", True)
    refused("Subscribe", {"interval_s": 0}, "interval_s", "interval_s is 0, not above 0", True)
    refused("Subscribe", {"limit": -5}, "limit", "limit is -5", True)

    # Another uid, asked by an unprivileged caller: PermissionDenied everywhere.
    if os.geteuid() == 0 and shutil.which("setpriv"):
        shutil.copy(os.path.join(os.environ["SRCDIR"], "tests", "varlink_peer.py"), tmp)
        code = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from varlink_peer import Connection, VarlinkError
out = {}
for method, params, more in json.loads(sys.argv[3]):
    with Connection(sys.argv[2]) as c:
        c.send("io.wattprof.Monitor." + method, params, more=more)
        try:
            c.reply()
            out[method + json.dumps(params)] = "ok"
        except VarlinkError as e:
            out[method + json.dumps(params)] = e.name
print(json.dumps(out))
'''
        calls = [("ListProcesses", {"uid": 0}, False), ("Subscribe", {"uid": 0}, True),
                 ("GetHistory", {"uid": 0, "since": 0}, False), ("ListJobs", {"uid": 0}, False),
                 ("ListProcesses", {"uid": 65534}, False),
                 ("GetHistory", {"uid": 65534, "since": 0}, False),
                 ("ListJobs", {"uid": 65534}, False)]
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            os.environ.get("PYTHON", "/usr/bin/python3"), "-c", code, tmp, d.sock,
                            json.dumps(calls)], capture_output=True, text=True, timeout=60)
        got = json.loads(p.stdout) if p.returncode == 0 else p.stderr
        denied = "org.varlink.service.PermissionDenied"
        check("uid 65534 asking for uid 0: PermissionDenied from ListProcesses, Subscribe, "
              "GetHistory and ListJobs alike",
              isinstance(got, dict) and [got[k] for k in list(got)[:4]] == [denied] * 4, str(got))
        check("... and its own uid is served", isinstance(got, dict) and
              [got[k] for k in list(got)[4:]] == ["ok", "ok", "ok"], str(got))
    else:
        print("skip - not root: the unprivileged caller needs setpriv")
    check("the daemon still answers", d.call(M + "GetStatus")["status"]["tracked"] >= 0)

    # 5,000 malformed requests write a few log lines, with a count of the rest.
    import re, socket, time
    t0 = time.monotonic()
    for _ in range(5000):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(d.sock)
            s.sendall(b"{not json\0")
            while s.recv(4096):
                pass
    elapsed = time.monotonic() - t0
    time.sleep(1.1)
    with Connection(d.sock) as c:  # one more, a second later: the count of the last window
        c.send_raw(b"[]\0")
        try:
            c.recv()
        except Exception:  # noqa: BLE001 -- the answer does not matter here
            pass
    time.sleep(0.3)
    log = d.read_log()
    logged = log.count("bad request from")
    left_out = sum(int(n) for n in re.findall(r"(\d+) more lines about uid 0 were not logged", log))
    check(f"5,000 malformed requests in {elapsed:.1f} s: {logged} lines logged, "
          f"{left_out} counted as left out",
          logged <= 2 * (elapsed + 2) and logged + left_out == 5001, log[-300:])

    # The CLI refuses what the daemon would, before asking it.
    def cli(*argv):
        p = subprocess.run([WATTPROF, *argv], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr.strip()

    for argv, want in [
            (["status", "--socket", ""], "--socket '': expected the path of the daemon's socket"),
            (["ps", "--user", "99999999999", "--socket", d.sock], "--user '99999999999': no such user"),
            (["ps", "--user", "4294967295", "--socket", d.sock], "--user '4294967295': no such user"),
            (["history", "--host", "--since", "99999999999d", "--socket", d.sock],
             "--since '99999999999d': before 1970 or after the year 2286"),
            (["history", "--host", "--since", "@1e11", "--socket", d.sock],
             "--since '@1e11': before 1970 or after the year 2286"),
            (["ps", "--window", "99999999999d", "--socket", d.sock],
             "--window '99999999999d': longer than")]:
        rc, err = cli(*argv)
        check(f"wattprof {' '.join(argv[:3])}: one line naming it, non-zero exit",
              rc != 0 and err.count("\n") == 0 and want in err, f"exit {rc}: {err}")
    rc, err = cli("ps", "--user", "4294967294", "--socket", d.sock)
    check("wattprof ps --user 4294967294 (the largest uid) is asked", rc == 0, err)
    check("SIGTERM exits 0", d.stop() == 0)
finish()
