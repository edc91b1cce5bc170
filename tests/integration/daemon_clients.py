#!/usr/bin/python3
"""No local user can lock the others out of wattprofd.

200 silent connections of one unprivileged uid (65534): 16 are held
(max_clients_per_user), the others are refused with TooManyClients saying
why; `wattprof status` still works for root and for another user, and the
CLI of the flooding user prints the refusal in one line.  Two more users
then fill the unprivileged share (48 of 64): a fourth user is refused, root
still gets one of the 16 slots kept for it.  Connections that complete no
call for client_timeout (silent, a message never finished, a finished call
followed by silence) are closed within the timeout plus a sweep; a Subscribe
stream is a call in progress and stays.  Needs root (setpriv to the other
uids); everything the other uids run lives in a mktemp -d folder opened 0755."""
import json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402
from varlink_peer import Closed, Connection  # noqa: E402

if os.geteuid() != 0:
    print("SKIP: needs root to open connections as other uids with setpriv")
    sys.exit(77)
if not shutil.which("setpriv"):
    print("SKIP: setpriv (util-linux) is not installed")
    sys.exit(77)

TIMEOUT = 8  # client_timeout, s: long enough for the checks made while connections are held
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")

# Run as another uid: opens N connections and sends nothing, reports which
# were refused (with the first reason), then when the server closed each
# held one, in seconds after the last was opened.
HOLDER = r'''
import json, selectors, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.setblocking(False)
    socks.append(s)
t0 = time.monotonic()
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_READ)
refused, reasons, closed = set(), [], {}
# Refusals come at once; a second is plenty to read them all.
while time.monotonic() < t0 + 1:
    for key, _ in sel.select(0.1):
        s = key.fileobj
        data = b""
        try:
            data = s.recv(4096)
        except OSError:
            pass
        if data.rstrip(b"\0"):
            msg = json.loads(data.split(b"\0")[0])
            refused.add(s)
            reasons.append(msg["error"] + ": " + msg["parameters"]["reason"])
        sel.unregister(s)
        if not data.rstrip(b"\0"):
            closed[s] = time.monotonic() - t0
print(json.dumps({"refused": len(refused), "held": n - len(refused) - len(closed),
                  "closed_early": len(closed), "reasons": sorted(set(reasons))}), flush=True)
held = [s for s in socks if s not in refused and s not in closed]
sel.close()
sel = selectors.DefaultSelector()
for s in held:
    sel.register(s, selectors.EVENT_READ)
end = time.monotonic() + float(sys.argv[3])
while len(closed) < len(held) and time.monotonic() < end:
    for key, _ in sel.select(0.1):
        if key.fileobj.recv(4096) == b"":
            closed[key.fileobj] = time.monotonic() - t0
            sel.unregister(key.fileobj)
print(json.dumps(sorted(closed[s] for s in held if s in closed) + [None] * sum(s not in closed for s in held)), flush=True)
'''

tmp = tempfile.mkdtemp(prefix="wattprof-clients-")
os.chmod(tmp, 0o755)
holders = []
d = None
try:
    conf = os.path.join(tmp, "d.conf")
    with open(conf, "w") as f:
        f.write(f"[daemon]\nclient_timeout = {TIMEOUT}s\n")
    client = os.path.join(tmp, "wattprof")
    shutil.copy(os.environ["WATTPROF"], client)
    os.chmod(client, 0o755)
    d = Daemon("--config", conf, state=os.path.join(tmp, "d"))
    os.chmod(d.dir, 0o755)

    def as_uid(uid, *argv):
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]

    def status(uid=None):
        argv = [client, "status", "--socket", d.sock]
        p = subprocess.run(as_uid(uid, *argv) if uid is not None else argv,
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr.strip()

    def hold(uid, n):
        p = subprocess.Popen(as_uid(uid, PYTHON, "-c", HOLDER, d.sock, str(n), str(TIMEOUT + 20)),
                             stdout=subprocess.PIPE, text=True)
        holders.append(p)
        return json.loads(p.stdout.readline())

    # A connection of root that finishes a call and then says nothing, one
    # that never finishes its message, and a stream (a call in progress).
    t_root = time.monotonic()
    after_call = Connection(d.sock, timeout=TIMEOUT + 20)
    after_call.call("org.varlink.service.GetInfo")
    partial = Connection(d.sock, timeout=TIMEOUT + 20)
    partial.send_raw(b'{"method":"io.wattprof.Monitor.GetSta')
    stream = Connection(d.sock, timeout=5)
    stream.send("io.wattprof.Monitor.Subscribe", {"interval_s": 1}, more=True)

    got = hold(65534, 200)
    check("200 silent connections of uid 65534: 16 held, 184 refused",
          got["held"] == 16 and got["refused"] == 184 and got["closed_early"] == 0, str(got))
    check("... each told why: TooManyClients naming the uid and max_clients_per_user",
          got["reasons"] == ["io.wattprof.Monitor.TooManyClients: uid 65534 has 16 connections "
                             "open, the most one user may have (max_clients_per_user)"],
          str(got["reasons"]))
    rc, err = status()
    check("wattprof status as root succeeds meanwhile", rc == 0, err)
    rc, err = status(65533)
    check("wattprof status as another user (65533) succeeds meanwhile", rc == 0, err)
    rc, err = status(65534)
    check("wattprof status of the flooding user: exit 1, one line saying why",
          rc == 1 and err.count("\n") == 0 and
          "the daemon refused the connection: uid 65534 has 16 connections open" in err,
          f"exit {rc}: {err}")

    # Two more users take the rest of the unprivileged share (48 of 64).
    more = [hold(2001, 16), hold(2002, 16)]
    check("users 2001 and 2002 hold 16 each", [m["held"] for m in more] == [16, 16], str(more))
    rc, err = status(65533)
    check("a fourth user is refused once the users' share is taken",
          rc == 1 and "48 clients of unprivileged users are connected" in err and
          "16 slots are kept for root" in err, f"exit {rc}: {err}")
    rc, err = status()
    check("root still gets one of the slots kept for it", rc == 0, err)

    closes = [json.loads(p.stdout.readline()) for p in holders]
    flat = [t for c in closes for t in c]
    # A sweep runs every timeout/4 (at most 1 s): a close comes between the
    # timeout and one sweep later, plus scheduling delay on a loaded machine.
    check(f"every held connection closed {TIMEOUT} s after it fell silent, within 3 s",
          None not in flat and all(TIMEOUT - 0.1 <= t <= TIMEOUT + 3 for t in flat),
          f"{len(flat)} closes, from {min(flat, key=lambda t: t or 0)} to "
          f"{max(flat, key=lambda t: t or 0)} s")

    def closed_after(conn):
        try:
            conn.recv()
            return None
        except Closed:
            return time.monotonic() - t_root

    t = closed_after(after_call)
    check("root's connection silent after a call is closed too", t is not None and t >= TIMEOUT - 0.1, str(t))
    t = closed_after(partial)
    check("a message never finished is closed after the timeout", t is not None and t >= TIMEOUT - 0.1, str(t))
    # The replies sent so far wait in the socket; two fresh ones after the
    # timeout show the stream was left open.
    replies, fresh = 0, []
    try:
        stream.sock.settimeout(0.3)
        while True:
            stream.recv()
            replies += 1
    except OSError:
        pass
    try:
        stream.sock.settimeout(5)
        for _ in range(2):
            stream.recv()
            fresh.append(round(time.monotonic() - t_root, 1))
    except (Closed, OSError) as e:
        fresh.append(repr(e))
    check("a Subscribe stream outlives the timeout",
          replies >= TIMEOUT and all(isinstance(t, float) and t > TIMEOUT for t in fresh),
          f"{replies} replies waiting, then fresh ones at {fresh} s")
    stream.close()
    rc, err = status(65534)
    check("once its connections are closed, uid 65534 is served again", rc == 0, err)
    log = d.read_log()
    check("the refusals are logged, at most one line a second",
          0 < log.count("refusing a connection") <= 2 + int(time.monotonic() - t_root),
          str(log.count("refusing a connection")))
    check("the idle closes are logged", f"idle for {TIMEOUT:.1f} s" in log, log[-400:])
    check("SIGTERM exits 0", d.stop() == 0)
    d = None
finally:
    for p in holders:
        if p.poll() is None:
            p.kill()
        p.wait()
    if d:
        d.stop()
    shutil.rmtree(tmp, ignore_errors=True)
finish()
