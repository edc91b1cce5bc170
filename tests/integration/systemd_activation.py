#!/usr/bin/python3
"""Socket activation, under systemd-socket-activate: the first
client connects while only the socket exists, before wattprofd runs, and is
answered by the daemon that systemd-socket-activate then starts on that very
socket (same pid, no socket of its own); later clients are answered too. A
model installed in STATE_DIR/models/current.json is the one loaded. Two
sockets, or a datagram socket, are refused with one clear line."""
import json, os, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import varlink_peer  # noqa: E402
from daemon_harness import WATTPROFD, check, finish  # noqa: E402

ACTIVATE = shutil.which("systemd-socket-activate")
if not ACTIVATE:
    print("SKIP: systemd-socket-activate not found (Debian package systemd)")
    sys.exit(77)

work = tempfile.mkdtemp(prefix="wattprof-activation-")
empty_conf = os.path.join(work, "empty.conf")
open(empty_conf, "w").close()
procs = []


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def activate(state, *listen, extra=()):
    """systemd-socket-activate listening on `listen`, to run wattprofd with
    its own socket in `state` (which it must not create when activated)."""
    os.makedirs(state, exist_ok=True)
    log = open(os.path.join(state, "log"), "w+")
    args = [ACTIVATE, *[a for p in listen for a in ("-l", p)], *extra, WATTPROFD,
            "--config", empty_conf, "--state-dir", state, "--socket", os.path.join(state, "own.sock")]
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.PIPE, text=True)
    procs.append(p)
    deadline = time.monotonic() + 10
    while not all(os.path.exists(x) for x in listen) and time.monotonic() < deadline:
        time.sleep(0.02)
    return p, log


try:
    # A model "installed by the trainer": the built-in one under another name.
    state = os.path.join(work, "state")
    os.makedirs(os.path.join(state, "models"))
    with open(os.path.join(os.environ["SRCDIR"], "models", "cputime.json")) as f:
        m = json.load(f)
    m["name"] = "node-installed-by-trainer"
    with open(os.path.join(state, "models", "current.json"), "w") as f:
        json.dump(m, f)

    sock = os.path.join(work, "io.wattprof.sock")
    p, log = activate(state, sock)
    time.sleep(0.5)
    check("only the socket exists before the first client",
          os.path.exists(sock) and (comm(p.pid) or "").startswith("systemd-socket")
          and not os.path.exists(os.path.join(state, "wattprof.db")),
          f"comm {comm(p.pid)}, state {sorted(os.listdir(state))}")

    t0 = time.monotonic()
    try:
        with varlink_peer.Connection(sock, timeout=20) as c:
            info = c.call("org.varlink.service.GetInfo")
        first = f"{info.get('product')} {info.get('version')} after {time.monotonic() - t0:.2f} s"
        answered = info.get("product") == "wattprofd"
    except (OSError, varlink_peer.Closed, varlink_peer.VarlinkError) as e:
        first, answered = repr(e), False
    check("the first client, connected before the daemon ran, is answered", answered, first)
    check("wattprofd now runs in the activator's place (same pid)", comm(p.pid) == "wattprofd",
          str(comm(p.pid)))
    check("it serves the passed socket instead of making its own",
          not os.path.exists(os.path.join(state, "own.sock")), str(sorted(os.listdir(state))))

    answers = 0
    for _ in range(3):
        with varlink_peer.Connection(sock) as c:
            st = c.call("io.wattprof.Monitor.GetStatus")["status"]
            answers += 1
    check("later clients are answered on the same socket", answers == 3, str(answers))
    check("the model in STATE_DIR/models/current.json is loaded",
          st["model"]["name"] == "node-installed-by-trainer", st["model"]["name"])

    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    check("SIGTERM stops the activated daemon with status 0", rc == 0, str(rc))

    # Bad activation: each is refused with a line that says what was wrong.
    def refused(desc, want, *listen, extra=(), poke):
        st = os.path.join(work, desc.replace(" ", "-"))
        q, _ = activate(st, *listen, extra=extra)
        poke(listen[0])
        try:
            rc = q.wait(timeout=20)
        except subprocess.TimeoutExpired:
            q.kill()
            rc = "still running"
        err = q.stderr.read()
        lines = [x for x in err.splitlines() if "socket activation" in x]
        check(f"{desc}: exit 1 with one line saying why", rc == 1 and len(lines) == 1 and want in lines[0]
              and "activation: socket activation" not in lines[0],
              f"exit {rc}: {lines or err[-300:]}")

    def connect(path):
        try:
            with varlink_peer.Connection(path, timeout=20) as c:
                c.send("org.varlink.service.GetInfo")
                c.recv()
        except (OSError, varlink_peer.Closed):
            pass

    def datagram(path):
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"{}\0", path)
        s.close()

    refused("two sockets", "expected one socket, systemd passed 2",
            os.path.join(work, "a.sock"), os.path.join(work, "b.sock"), poke=connect)
    refused("a datagram socket", "not a listening Unix stream socket",
            os.path.join(work, "d.sock"), extra=("--datagram",), poke=datagram)
finally:
    for q in procs:
        if q.poll() is None:
            q.kill()
            q.wait()
    shutil.rmtree(work, ignore_errors=True)
finish()
