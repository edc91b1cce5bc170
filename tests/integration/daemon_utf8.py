#!/usr/bin/python3
"""A process that names itself with bytes that are not UTF-8 (any user may,
with prctl(PR_SET_NAME)) must not break the daemon's answers: Varlink is JSON,
and a strict client rejects a whole reply over one bad byte, so one such
process used to make ListProcesses, `wattprof ps` and `top` fail for every
user. Each bad byte now reaches clients as U+FFFD, in every method."""
import os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402

RAW = b"bad\xffname"
SHOWN = "bad\ufffdname"
CHILD = r'''
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b"bad\xffname"), 0, 0, 0)
print("renamed", flush=True)
end = time.time() + 60
while time.time() < end:
    sum(range(20000))
    time.sleep(0.01)
'''

state = tempfile.mkdtemp(prefix="wattprofd-utf8-")
child = subprocess.Popen([os.environ["PYTHON"], "-c", CHILD], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
with open(f"/proc/{child.pid}/comm", "rb") as f:
    comm = f.read().rstrip(b"\n")
check("the child's comm is the raw bytes", comm == RAW, repr(comm))
d = Daemon("--rate", "50", state=os.path.join(state, "d"))


def listed(timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        procs = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})["processes"]
        mine = [p for p in procs if p["pid"] == child.pid]
        if mine or time.monotonic() > deadline:
            return mine


try:
    mine = listed()
    check("ListProcesses answers, with the child", len(mine) == 1, str(mine))
    check("its comm reads bad\\ufffdname", mine and mine[0]["comm"] == SHOWN,
          mine and repr(mine[0]["comm"]))
    one = d.call("io.wattprof.Monitor.GetProcess", {"pid": child.pid})
    check("GetProcess answers with the same name", one["process"]["comm"] == SHOWN,
          repr(one["process"]["comm"]))
    filtered = d.call("io.wattprof.Monitor.ListProcesses",
                      {"window_s": 60, "comm": "^bad.name$"})["processes"]
    check("a comm filter still matches the stored name",
          [p["pid"] for p in filtered] == [child.pid], str([p["pid"] for p in filtered]))
except Exception as e:  # a reply that is not UTF-8 fails here
    check("every call answers", False, repr(e)[:300])

ps = subprocess.run([os.environ["WATTPROF"], "ps", "--window", "1m", "--socket", d.sock],
                    capture_output=True)
check("wattprof ps exits 0", ps.returncode == 0, ps.stderr.decode(errors="replace").strip())
check("wattprof ps shows the name", SHOWN.encode() in ps.stdout,
      ps.stdout.decode(errors="replace")[:300])
check("SIGTERM exits 0", d.stop() == 0)
child.kill()
child.wait()
finish()
