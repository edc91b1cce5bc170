#!/usr/bin/python3
"""Drift, end to end: on a fake RAPL meter at a constant 30 W, a calibrated
model that predicts 5 W is flagged as drifting, the daemon writes the
"drift" file beside its socket (what wattprof-train.path watches), and once
a model that predicts the meter is loaded the flag and the file go away."""
import json, os, subprocess, sys, tempfile, time

SRC = os.environ["SRCDIR"]
sys.path.insert(0, os.path.join(SRC, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__)

from daemon_harness import Daemon, check, finish  # noqa: E402

work = tempfile.mkdtemp(prefix="wattprofd-drift-")
base = json.load(open(os.path.join(SRC, "models", "cputime.json")))
base["training"] = {"rows": 1, "created": "2026-11-30T00:00:00Z"}
for name, idle in (("wrong", 5.0), ("right", 30.0)):
    m = dict(base, name=name, idle_power_w=idle)
    m["classes"] = {"models": [{"name": "all", "intercept": idle, "coef": [0, 0, 0, 0]}]}
    json.dump(m, open(os.path.join(work, name + ".json"), "w"))

writer = subprocess.Popen([os.path.join(os.environ["BUILDDIR"], "tests", "energy-writer"),
                           "--hz", "100", "intel-rapl:0=30"])
flag = os.path.join(work, "state", "drift")
try:
    d = Daemon("--model", os.path.join(work, "wrong.json"), state=os.path.join(work, "state"))

    def wait_for(cond, seconds=8):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not cond():
            time.sleep(0.2)
        return cond()

    st = lambda: d.call("io.wattprof.Monitor.GetStatus")["status"]  # noqa: E731
    check("a 5 W model on a 30 W meter is flagged", wait_for(lambda: st()["drift_flagged"]),
          f'drift {st()["drift"]}')
    check("the drift file appears beside the socket", wait_for(lambda: os.path.exists(flag)))
    if os.path.exists(flag):
        v = float(open(flag).read())
        check("it holds the error", 0.5 < v < 1.0, str(v))
    d.call("io.wattprof.Monitor.ReloadModels", {"path": os.path.join(work, "right.json")})
    check("a model that predicts the meter clears the flag",
          wait_for(lambda: not st()["drift_flagged"]), f'drift {st()["drift"]}')
    check("and removes the file", wait_for(lambda: not os.path.exists(flag)))
    check("stops cleanly", d.stop() == 0)
finally:
    writer.terminate()
    writer.wait()
finish()
