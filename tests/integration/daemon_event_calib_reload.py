#!/usr/bin/python3
"""The stored per-event calibration across model reloads (SIGHUP), and the
idle GetStatus describes (docs/calibration.md).

On the fake RAPL meter of daemon_event_calib_restart.py, with rows written
into the database before the daemon starts: a single-scale fit and a
per-event fit of model A, each with its own idle, standard error and time.
No load runs, so neither live fit can be used. Checked:
  - started with A, the daemon uses the stored per-event fit, and its idle;
    GetStatus's calibration.idle_se_w and fitted are then the per-event
    fit's, not the single-scale fit's (`wattprof status` says "per-event
    fit"), and the exporter's idle standard error too;
  - a SIGHUP to model B (another SHA-256) drops it, with one log line
    saying why;
  - a SIGHUP back to A reads the stored fit again (by the rules of a start:
    SHA-256, events and domains) and uses it, with its idle;
  - a SIGHUP to A again keeps the fit in use, and the log says why the
    stored one is not taken."""
import hashlib, json, os, signal, sqlite3, subprocess, sys, time, urllib.request

SRCDIR = os.environ["SRCDIR"]
IDLE_W, PER_CPU_W = 20.0, 30.0

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import Daemon, busy_rig, check, end_rig, page_fault_model  # noqa: E402

work, meter, wpburn, conf = busy_rig("evrld", "wpevl", IDLE_W, PER_CPU_W)
with open(conf, "a") as f:
    f.write("[exporter]\nlisten = 127.0.0.1:0\n")
model_path = os.path.join(work, "model.json")
page_fault_model(model_path, PER_CPU_W, 0.0004)
with open(model_path, "rb") as f:
    model_a = f.read()
model = json.loads(model_a)
model["classes"]["models"][0]["coef"][0] = 6.0
model_b = json.dumps(model).encode()
state = os.path.join(work, "node")
now = int(time.time())
# The per-event fit's idle, its standard error and time, unlike the
# single-scale fit's (20.0 +- 0.05 W, 50 s ago).
EV_IDLE, EV_SE, EV_T, EV_COEF = 21.5, 0.21, now - 100, [4.5, 5.0, 5.0, 20.0]
loads = []


def put_model(text):
    with open(model_path, "wb") as f:
        f.write(text)


def calibration(d, want):
    """GetStatus's calibration once want(it) holds (5 s at most), else the last."""
    for _ in range(50):
        loads.append(os.getloadavg()[0])
        c = d.call("io.wattprof.Monitor.GetStatus")["status"].get("calibration")
        if c and want(c):
            break
        time.sleep(0.1)
    return c


def line(c):
    e = c["events"]
    return (f"idle {c['idle_w']} {c['source']} +- {c['idle_se_w']}, fitted {c['fitted']};"
            f" per event: {'used (' + str(e['source']) + ')' if e['used'] else 'not used'},"
            f" idle {e['idle_w']} +- {e['idle_se_w']}, fitted {e['fitted']},"
            f" reason {e['reason']}")


def stored_used(c):
    e = c["events"]
    return (e["used"] and e["source"] == "stored" and e["fitted"] == EV_T and
            [x["scale"] for x in e["coefficients"]] == EV_COEF and c["idle_w"] == EV_IDLE)


d = None
try:
    # The database, with the schema of this build; then the two fits of A.
    d = Daemon("--config", conf, "--model", model_path, state=state)
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
    sha_a = hashlib.sha256(model_a).hexdigest()
    con = sqlite3.connect(d.db)
    with con:
        con.execute("INSERT OR REPLACE INTO node_calibration (target, t, idle_w, idle_se_w,"
                    " scale, r2, spread_w, rows, model_sha256)"
                    " VALUES ('package', ?, 20.0, 0.05, 4.5, 0.999, 3.0, 900, ?)",
                    (now - 50, sha_a))
        con.execute("INSERT OR REPLACE INTO node_event_calibration (target, t, model_sha256,"
                    " events, coef, coef_se, scale, alpha, idle_w, idle_se_w, rows)"
                    " VALUES ('package', ?, ?, ?, ?, ?, 4.6, 0.001, ?, ?, 600)",
                    (EV_T, sha_a, json.dumps(model["events"]), json.dumps(EV_COEF),
                     json.dumps([0.01, None, None, 0.1]), EV_IDLE, EV_SE))
    con.close()

    d = Daemon("--config", conf, "--model", model_path, state=state)
    c = calibration(d, stored_used)
    print(f"started with A: {line(c)}")
    check("started with A, the stored per-event fit and its idle are used", stored_used(c),
          line(c))
    check("calibration.idle_se_w and fitted describe that idle: the per-event fit's",
          c["source"] == "stored" and c["idle_se_w"] == EV_SE and c["fitted"] == EV_T, line(c))
    check("... while scale and R2 stay the single-scale fit's",
          c["scale"] == 4.5 and c["r2"] == 0.999, f"scale {c['scale']}, r2 {c['r2']}")
    out = subprocess.run([os.environ["WATTPROF"], "status", "--socket", d.sock],
                         capture_output=True, text=True)
    idle = [ln for ln in out.stdout.splitlines() if ln.startswith("Idle")]
    check("wattprof status says the idle is the per-event fit's, with its error",
          out.returncode == 0 and idle and "stored (+- 0.21 W, per-event fit, fitted" in idle[0],
          out.stdout[-600:])
    with urllib.request.urlopen(d.exporter_url(), timeout=10) as r:
        text = r.read().decode()
    se = [ln for ln in text.splitlines() if ln.startswith("wattprof_idle_power_stderr_watts ")]
    check("the exporter's idle standard error is the per-event fit's",
          se and float(se[0].split()[1]) == EV_SE, str(se))

    put_model(model_b)
    d.proc.send_signal(signal.SIGHUP)
    c = calibration(d, lambda c: not c["events"]["used"])
    print(f"after a SIGHUP to B: {line(c)}")
    check("a SIGHUP to model B drops the per-event fit of A",
          not c["events"]["used"] and c["idle_w"] != EV_IDLE, line(c))
    refused = [ln for ln in d.read_log().splitlines() if "per-event calibration" in ln]
    check("one log line says why it is not used for B", len(refused) == 2 and
          "not used: it is of another model (SHA-256)" in refused[1], "\n".join(refused))

    put_model(model_a)
    d.proc.send_signal(signal.SIGHUP)
    c = calibration(d, stored_used)
    print(f"after a SIGHUP back to A: {line(c)}")
    check("a SIGHUP back to A reads the stored per-event fit again and uses it, with its idle",
          stored_used(c) and c["idle_se_w"] == EV_SE and c["fitted"] == EV_T, line(c))
    taken = [ln for ln in d.read_log().splitlines()
             if "stored per-event calibration for package: idle" in ln]
    check("the log says so each time it is taken", len(taken) == 2, "\n".join(taken))

    d.proc.send_signal(signal.SIGHUP)  # the same model again
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "not taken" not in d.read_log():
        time.sleep(0.1)
    c = calibration(d, stored_used)
    kept = [ln for ln in d.read_log().splitlines() if "per-event calibration" in ln][3:]
    check("a SIGHUP to the model in use keeps the fit it has, and the log says so",
          stored_used(c) and len(kept) == 1 and "not taken: this run keeps one as new" in kept[0],
          "\n".join(kept) + "; " + line(c))
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
finally:
    end_rig(meter, d)
daemon_harness.finish_rig(work, loads, None)
