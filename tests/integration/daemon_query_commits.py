#!/usr/bin/python3
"""Queries share the store's flushes: a client asking as fast as it can
(ListProcesses and GetHistory, which need the store up to date) against
wattprofd at 50 Hz makes the writer commit about twice a second (once per
second sampled, at most once more for the queries: QUERY_FRESHNESS_MS in
daemon/methods.c), not once per call as when each query flushed; yet a
query after a quiet second still sees the second in progress."""
import math, os, sys, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402
import varlink_peer  # noqa: E402

SPAN = 4.0
d = Daemon("--rate", "50")
try:
    d.call("io.wattprof.Monitor.ListProcesses")  # opens the daemon's reader (a flush of its own)
    db0 = d.call("io.wattprof.Monitor.GetStatus")["status"]["database"]
    calls = 0
    start = time.monotonic()
    with varlink_peer.Connection(d.sock) as c:
        while time.monotonic() - start < SPAN:
            c.call("io.wattprof.Monitor.ListProcesses", {"window_s": 10})
            c.call("io.wattprof.Monitor.GetHistory", {"host": True, "since": time.time() - 10})
            calls += 2
    took = time.monotonic() - start
    db1 = d.call("io.wattprof.Monitor.GetStatus")["status"]["database"]
    commits = db1["commits"] - db0["commits"]
    flushes = db1["flushes"] - db0["flushes"]
    shared = db1["flushes_shared"] - db0["flushes_shared"]
    detail = (f"{calls} calls in {took:.1f} s: {commits} commits, {flushes} flushes, "
              f"{shared} shared")
    print(detail)
    check("enough calls to tell one commit per call from a shared one", calls >= 20, detail)
    check("every store query asked for a flush", flushes == calls, detail)
    check("at most about two commits a second, not one per call",
          commits <= 2 * math.ceil(took) + 3, detail)
    check("the other flushes were shared", shared >= calls - commits, detail)

    # After a quiet second, a query flushes again: the second in progress
    # (which the writer commits only when the next begins) is there.
    time.sleep(1.2)
    while time.time() % 1 < 0.3 or time.time() % 1 > 0.8:
        time.sleep(0.05)  # well inside a second: ticks of it were pushed
    now = math.floor(time.time())
    got = d.call("io.wattprof.Monitor.GetHistory", {"host": True, "since": now, "step_s": 1})
    ts = [s["t"] for s in got["samples"]]
    check("a query after a quiet second sees the second in progress", now in ts,
          f"second {now}, got {ts}")
finally:
    rc = d.stop()
check("SIGTERM exits 0", rc == 0, str(rc))
finish()
