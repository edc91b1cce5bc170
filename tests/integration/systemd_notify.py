#!/usr/bin/python3
"""sd_notify: wattprofd tells the service manager how it is doing.
A datagram socket owned by this test stands in for systemd's NOTIFY_SOCKET:
READY=1 once sampling runs, STATUS= lines at least once a second, WATCHDOG=1
at half of WATCHDOG_USEC (never late), RELOADING=1 then READY=1 on SIGHUP,
STOPPING=1 on SIGTERM, every datagram from the daemon's own pid (the unit has
NotifyAccess=main). With WATCHDOG_PID naming another process, or without
WATCHDOG_USEC, no WATCHDOG=1 is sent."""
import os, shutil, signal, socket, statistics, struct, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import WATTPROFD, check, finish  # noqa: E402

work = tempfile.mkdtemp(prefix="wattprof-notify-")
empty_conf = os.path.join(work, "empty.conf")
open(empty_conf, "w").close()
WATCHDOG_USEC = 1_000_000
procs = []


class Notify:
    """The test's NOTIFY_SOCKET: every datagram with its time and sender."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.msgs = []  # (monotonic time, sender pid, one "KEY=VALUE" line)

    def pump(self, seconds, until=None):
        """Receives for `seconds`, or until a line equal to `until` arrives."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
            except socket.timeout:
                break
            pid = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", payload[:12])[0]
            now = time.monotonic()
            for line in data.decode().split("\n"):
                if line:
                    self.msgs.append((now, pid, line))
            if until and until in data.decode().split("\n"):
                return True
        return False

    def lines(self, prefix):
        return [m for m in self.msgs if m[2].startswith(prefix)]


def start(name, env_extra, watchdog_pid_is_self=True):
    state = os.path.join(work, name)
    os.makedirs(state)
    notify = Notify(os.path.join(work, name + ".notify"))
    env = dict(os.environ, NOTIFY_SOCKET=notify.path, **env_extra)
    # WATCHDOG_PID must name the daemon, whose pid exists only once it is
    # forked: the shell puts its own pid there and execs the daemon in place.
    pid_expr = "$$" if watchdog_pid_is_self else "1"
    cmd = ["sh", "-c", f'WATCHDOG_PID={pid_expr} exec "$@"', "sh", WATTPROFD, "--config",
           empty_conf, "--state-dir", state, "--socket", os.path.join(state, "sock")]
    if "WATCHDOG_USEC" not in env_extra:
        cmd = cmd[4:]
    log = open(os.path.join(state, "log"), "w+")
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    return p, notify, log


try:
    p, n, log = start("main", {"WATCHDOG_USEC": str(WATCHDOG_USEC)})
    ready = n.pump(15, until="READY=1")
    check("READY=1 once the daemon runs", ready, log.name)
    n.pump(4.2)
    status = n.lines("STATUS=")
    check("STATUS= at least once a second", len(status) >= 4,
          f"{len(status)} in 4.2 s, last {status[-1][2] if status else None!r}")
    if status:
        check("STATUS= says processes, rate and host power",
              "processes" in status[-1][2] and "Hz" in status[-1][2] and "W modeled" in status[-1][2],
              status[-1][2])
    dog = [m[0] for m in n.lines("WATCHDOG=1")]
    gaps = [b - a for a, b in zip(dog, dog[1:])]
    if len(gaps) >= 3:
        med = statistics.median(gaps)
        check("WATCHDOG=1 every WATCHDOG_USEC/2 (0.5 s), median gap within 20 %",
              abs(med - WATCHDOG_USEC / 2e6) <= 0.1 * WATCHDOG_USEC / 1e6,
              f"{len(dog)} pings, median gap {med:.3f} s")
        check("no watchdog gap reaches WATCHDOG_USEC", max(gaps) < WATCHDOG_USEC / 1e6,
              f"max gap {max(gaps):.3f} s")
    else:
        check("WATCHDOG=1 is sent repeatedly", False, f"{len(dog)} pings in 4.2 s")

    mark = len(n.msgs)
    p.send_signal(signal.SIGHUP)
    n.pump(10, until="READY=1")
    after = [m[2] for m in n.msgs[mark:]]
    check("SIGHUP: RELOADING=1, then READY=1",
          "RELOADING=1" in after and "READY=1" in after
          and after.index("RELOADING=1") < after.index("READY=1"), str(after[:6]))

    mark = len(n.msgs)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    n.pump(0.5)
    after = [m[2] for m in n.msgs[mark:]]
    check("SIGTERM: STOPPING=1", "STOPPING=1" in after, str(after))
    check("SIGTERM: exit status 0", rc == 0, str(rc))
    senders = {m[1] for m in n.msgs}
    check("every notification comes from the daemon's main pid", senders == {p.pid},
          f"senders {senders}, daemon {p.pid}")

    # The watchdog is the service manager's to ask for: a WATCHDOG_PID that
    # names another process, or no WATCHDOG_USEC, means no pings.
    for name, env, own in (("other-pid", {"WATCHDOG_USEC": str(WATCHDOG_USEC)}, False),
                           ("no-watchdog", {}, True)):
        q, m, _ = start(name, env, own)
        m.pump(15, until="READY=1")
        m.pump(2)
        q.send_signal(signal.SIGTERM)
        q.wait(timeout=30)
        m.pump(0.3)
        check(f"{name}: READY=1 and STOPPING=1 but no WATCHDOG=1",
              m.lines("READY=1") and m.lines("STOPPING=1") and not m.lines("WATCHDOG=1"),
              f"{len(m.lines('WATCHDOG=1'))} pings")
finally:
    for q in procs:
        if q.poll() is None:
            q.kill()
            q.wait()
    shutil.rmtree(work, ignore_errors=True)
finish()
