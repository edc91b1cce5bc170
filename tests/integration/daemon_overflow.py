#!/usr/bin/python3
"""Ticks the model cannot attribute are stored, not thrown away.

A replay of 300 ticks (6 s at 50 Hz) of one process with a package meter,
three of them out of any range: a counter delta of 1e308 (the model's power
overflows), a dt of 2^62 ns, a package energy of 1e308 J.  Every tick's
second is stored; the energy the meter really measured is all there (the
1e308 J is not: it is no measurement), split to the joule; GetStatus warns with the count; nothing stored is
infinite.  And a model that overflows by itself ([1e308, 1e308, ...]) is
refused by `wattprof reload` with the reason, the current one kept."""
import json, math, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import cleaned_up, Daemon, check, finish, one_event_model  # noqa: E402

TICKS, DT = 300, 20_000_000
BAD = {100: "d", 150: "dt", 200: "energy"}
tmp = tempfile.mkdtemp(prefix="wattprof-overflow-")
with open(one_event_model(f"{tmp}/model.json")) as f:
    model = json.load(f)
lines = [{"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"],
          "zones": [{"id": "intel-rapl:0", "name": "package-0"}], "rate_hz": 50,
          "boot_id": "00000000-0000-0000-0000-00000000ff01",
          "realtime_offset_ns": 1_700_000_000_000_000_000},
         {"proc": {"pid": 7, "ppid": 1, "start": 9, "uid": 0, "comm": "burner", "cmdline": "b",
                   "cgroup": "/t"}}]
measured = 0.0
for k in range(TICKS):
    d, dt, e = 0.5 * DT, DT, 1.0  # half a core: 10 + 20 W modeled, 50 W measured
    if BAD.get(k) == "d":
        d = 1e308
    elif BAD.get(k) == "dt":
        dt = 2 ** 62
    elif BAD.get(k) == "energy":
        e = 1e308
    if BAD.get(k) != "energy":
        measured += e
    lines.append({"tick": {"t": 1_000_000_000 + (k + 1) * DT, "dt": dt, "energy_j": [e],
                           "procs": [{"pid": 7, "start": 9, "d": [d], "r": [1]}]}})
with open(f"{tmp}/r.trace", "w") as f:
    f.write("\n".join(json.dumps(x) for x in lines) + "\n")

d = Daemon("--model", f"{tmp}/model.json", "--replay", f"{tmp}/r.trace", "--speed", "max",
           state=f"{tmp}/d")
with cleaned_up(d, tmp):
    for _ in range(200):
        if "replay of" in d.read_log() and "finished" in d.read_log():
            break
        time.sleep(0.05)
    st = d.call("io.wattprof.Monitor.GetStatus")["status"]
    warn = [w for w in st["warnings"] if "could not be attributed" in w]
    check("GetStatus warns of the 3 ticks it could not attribute",
          warn and warn[0].startswith("3 ticks could not be attributed"), str(st["warnings"]))
    d.call("io.wattprof.Monitor.ListModels")  # a query flushes the store
    rows = d.sql("SELECT t, duration_s, host_j, idle_j, attributed_j, unattributed_j "
                 "FROM host_attribution ORDER BY t")
    seconds = {(1_700_000_000_000_000_000 + 1_000_000_000 + (k + 1) * DT) // 10 ** 9
               for k in range(TICKS)}
    check(f"every second of the replay is stored ({len(rows)} of {len(seconds)})",
          [r[0] for r in rows] == sorted(seconds), str(rows))
    finite = all(math.isfinite(v) for r in rows for v in r[1:])
    check("nothing stored is infinite or NaN", finite, str(rows))
    host = sum(r[2] for r in rows)
    check(f"the measured energy is all stored: {host:.6f} J of {measured:.6f} J",
          abs(host - measured) < 1e-6 * measured, str(rows))
    split = all(abs(r[3] + r[4] + r[5] - r[2]) < 1e-9 * max(1, r[2]) for r in rows)
    check("each second: idle + attributed + unattributed = host", split, str(rows))
    proc = d.sql("SELECT SUM(attributed_j), MAX(attributed_j) FROM process_energy")[0]
    check("the process's share stays finite and below the host's",
          proc[0] is not None and math.isfinite(proc[0]) and proc[0] < host, str(proc))
    check("the log says why, once", d.read_log().count("could not be attributed") == 1,
          d.read_log()[-500:])

    # A model that overflows by itself is refused on reload; the current one stays.
    bad = dict(model, classes={"models": [{"name": "all", "intercept": 1e308, "coef": [1e308]}]})
    with open(f"{tmp}/bad.json", "w") as f:
        json.dump(bad, f)
    p = subprocess.run([os.environ["WATTPROF"], "reload", f"{tmp}/bad.json", "--socket", d.sock],
                       capture_output=True, text=True, timeout=60)
    check("wattprof reload of a model that overflows: exit 1, the reason",
          p.returncode == 1 and "class 'all' gives up to inf W over the scaler's range, more than 1e+06 W" in p.stderr,
          f"exit {p.returncode}: {p.stderr.strip()}")
    check("the model in use is still one-event",
          d.call("io.wattprof.Monitor.GetStatus")["status"]["model"]["name"] == "one-event")
    check("SIGTERM exits 0", d.stop() == 0)
finish()
