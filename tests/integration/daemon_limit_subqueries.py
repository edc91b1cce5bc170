#!/usr/bin/python3
"""Under [daemon] query_time_limit, a call whose later query is stopped
answers QueryTimeLimit, never a short answer or another error.

The database (written behind the daemon's back, between two runs of it)
holds 200,000 seconds of the host's attribution, a process (pid 99999)
seen over all of them, and 50,000 exited processes of batch job J4711 with
three minute rows each.  With query_time_limit = 1ms:

  - GetProcess{pid: 99999}: finding the process is quick, listing the
    calibrations its seconds were attributed under reads every host second
    and is stopped.  Before, the reply came with an empty list of
    calibrations.
  - GetHistory{job: J4711} as an unprivileged user: the check that the job
    is theirs reads every row of the job and is stopped.  Before, that was
    PermissionDenied.

A query can also be stopped before it gets there (a loaded machine): each
call is tried up to ten times, and passes once the reason names the later
query; any other answer fails at once.  Under the default limit both calls
are answered in full (the calibrations of the process are listed)."""
import atexit, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import (cleaned_up, connect, Daemon, check, finish, insert_minute_rows,  # noqa: E402
                            insert_processes)
from varlink_peer import VarlinkError  # noqa: E402

M = "io.wattprof.Monitor."
HOST_S, JOB_PROCS = 200_000, 50_000
tmp = tempfile.mkdtemp(prefix="wattprof-limit-sub-")
atexit.register(shutil.rmtree, tmp, True)  # also when a check raises
os.chmod(tmp, 0o755)
state = f"{tmp}/d"


def fill(db):
    now = int(time.time())
    con = connect(db, ro=False)
    with con:
        con.executemany(
            "INSERT INTO host_attribution (t, duration_s, host_j, idle_j, attributed_j,"
            " unattributed_j, modeled_j, measured, model_id, idle_source, calib_t)"
            " VALUES (?, 1, 10, 5, 4, 1, 10, 0, NULL, ?, 0)",
            [(now - HOST_S + k, "model" if k < HOST_S // 2 else "percentile")
             for k in range(HOST_S)])
        insert_processes(con, [(9_000_000, 99999, "long", now - HOST_S, now - 1, None, None)])
        insert_processes(con, [(10_000_000 + i, 100_000 + i, "j", now - 3 * 86400,
                                now - 2 * 86400, now - 2 * 86400, "J4711")
                               for i in range(JOB_PROCS)])
        insert_minute_rows(con, "p.job = 'J4711'")
    con.close()


def as_nobody(sock, method, params):
    """One call as uid 65534: its reply, or the error's name and parameters."""
    code = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from varlink_peer import Connection, VarlinkError
with Connection(sys.argv[2], timeout=60) as c:
    try:
        print(json.dumps(c.call(sys.argv[3], json.loads(sys.argv[4]))))
    except VarlinkError as e:
        print(json.dumps({"error": e.name, "parameters": e.parameters}))
'''
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "/usr/bin/python3", "-c", code, tmp, sock, M + method, json.dumps(params)],
                       capture_output=True, text=True, timeout=120)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr}


def as_root(d, method, params):
    try:
        return d.call(M + method, params)
    except VarlinkError as e:
        return {"error": e.name, "parameters": e.parameters}


def stopped_at(call, what):
    """Tries a call until QueryTimeLimit names `what`; returns (ok, last answer)."""
    for _ in range(10):
        got = call()
        if got.get("error") != M + "QueryTimeLimit":
            return False, got
        if what in got["parameters"].get("reason", ""):
            return True, got
    return False, got


d = Daemon("--rate", "10", state=state)
d.stop()
fill(d.db)
os.chmod(state, 0o755)
shutil.copy(os.path.join(os.environ["SRCDIR"], "tests", "varlink_peer.py"), tmp)
conf = f"{tmp}/limit.conf"
with open(conf, "w") as f:
    f.write("[daemon]\nquery_time_limit = 1ms\n")
unprivileged = os.geteuid() == 0 and shutil.which("setpriv")

d = Daemon("--rate", "10", state=state)
with cleaned_up(d):
    os.chmod(d.sock, 0o666)
    got = as_root(d, "GetProcess", {"pid": 99999})
    cal = got.get("calibrations")
    check("without a tight limit GetProcess lists the process's two calibrations",
          isinstance(cal, list) and [c["idle_source"] for c in cal] == ["model", "percentile"],
          str(got)[:300])
    if unprivileged:
        got = as_nobody(d.sock, "GetHistory", {"job": "J4711", "since": 0})
        check("... and GetHistory of root's job is PermissionDenied for another user",
              got.get("error") == "org.varlink.service.PermissionDenied", str(got)[:300])
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

d = Daemon("--rate", "10", "--config", conf, state=state)
with cleaned_up(d, tmp):
    os.chmod(d.sock, 0o666)
    ok, got = stopped_at(lambda: as_root(d, "GetProcess", {"pid": 99999}),
                         "reading which calibrations were used")
    check("past the limit while listing the calibrations: QueryTimeLimit, not a short list",
          ok, str(got)[:300])
    if unprivileged:
        ok, got = stopped_at(lambda: as_nobody(d.sock, "GetHistory", {"job": "J4711", "since": 0}),
                             "listing jobs")
        check("past the limit while checking whose job it is: QueryTimeLimit, not "
              "PermissionDenied", ok, str(got)[:300])
    else:
        print("skip - the job check as another user: needs root and setpriv")
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
finish()
