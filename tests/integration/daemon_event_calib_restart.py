#!/usr/bin/python3
"""The per-event calibration kept across restarts (docs/calibration.md).

The rig of daemon_event_calib.py: a fake RAPL meter at 20 W + 30 W per busy
CPU + 0.4 mJ per page fault of the test's cgroup, a model of task-clock and
page faults off from it by 4.5 x and 20 x, and a tracked background that
keeps both varying. Checked:
  - once the daemon uses one coefficient per event, SIGTERM leaves the fit
    in node_event_calibration, with the model's SHA-256, its events, each
    coefficient and its standard error;
  - restarted with the same model, the daemon uses it from its first
    status (source "stored"), long before its own fit could have the
    60 seconds it needs; GetStatus, `wattprof status` and the exporter say
    so, and a burner of 2 CPU s with 30,000 page faults per CPU-second run
    right after the restart gets its truth within 10 %;
  - restarted with a changed model (another task-clock coefficient, same
    events), the stored fit is refused, with one line in the log saying
    why, and attribution is back to the single scale.
Where the meter stalled in over a fifth of the seconds before the fit was
used, the test is skipped with the reason."""
import hashlib, json, os, re, shutil, subprocess, sys, time, urllib.request

SRCDIR = os.environ["SRCDIR"]
IDLE_W, PER_CPU_W, PER_FAULT_J = 20.0, 30.0, 0.0004

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
import daemon_harness  # noqa: E402
daemon_harness.in_fake_powercap(__file__, subzones="")

from daemon_harness import (Daemon, FaultCycle, busy_rig, check, end_rig,  # noqa: E402
                            meter_stalled, page_fault_model, reap)

work, meter, wpburn, conf = busy_rig("evrst", "wpevr", IDLE_W, PER_CPU_W, event_j=PER_FAULT_J)
with open(conf, "a") as f:
    f.write("[exporter]\nlisten = 127.0.0.1:0\n")
model_path = os.path.join(work, "model.json")
page_fault_model(model_path, PER_CPU_W, PER_FAULT_J)
state = os.path.join(work, "node")
loads = []


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def spawn(*args):
    """A tracked burner in the meter's groups, waiting first to be tracked."""
    p = subprocess.Popen([wpburn, "--wait", "1", *args])
    meter.add(p.pid)
    return p


def events(d):
    """GetStatus's calibration.events, from the first second that has one."""
    loads.append(os.getloadavg()[0])
    for _ in range(100):
        c = d.call("io.wattprof.Monitor.GetStatus")["status"].get("calibration")
        if c:
            return c["events"]
        time.sleep(0.05)
    raise AssertionError("GetStatus gave no calibration within 5 s")


def line(e):
    coefs = ", ".join(f"{x['event']} {x['scale']:.3f}" + (f" +- {x['se']:.3f}" if x.get("se")
                                                           else "")
                      for x in e["coefficients"] if x["scale"] is not None)
    return (f"{'used (' + str(e['source']) + ')' if e['used'] else 'not used: ' + str(e['reason'])},"
            f" live: {e['live_reason']}, alpha {e['alpha']}, idle {e['idle_w']},"
            f" coefficients {coefs or '-'}")


def metrics(d):
    with urllib.request.urlopen(d.exporter_url(), timeout=10) as r:
        return r.read().decode()


background, cycler, d, skipped = None, None, None, None
try:
    # 1. A daemon fits one coefficient per event and keeps it at exit.
    d = Daemon("--config", conf, "--model", model_path, state=state)
    background = spawn("--vary", "3", "400", "0.2,0.9,0.5,0.3,0.8,0.6")
    cycler = FaultCycle(spawn)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 150:
        e = events(d)
        if e["used"] and e["source"] == "fitted":
            break
        time.sleep(2)
    print(f"after {time.monotonic() - t0:.0f} s: {line(e)}")
    stalled = meter_stalled(d)
    if stalled and not e["used"]:
        raise RuntimeError(stalled)
    check("the daemon fits one coefficient per event within 150 s",
          e["used"] and e["source"] == "fitted", line(e))
    fitted = e
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
    rows = d.sql("SELECT target, t, model_sha256, events, coef, coef_se, alpha, idle_w, rows"
                 " FROM node_event_calibration")
    check("the fit is stored: one row, of the model's SHA-256 and events", len(rows) == 1 and
          rows[0][2] == sha256(model_path) and
          json.loads(rows[0][3]) == [x["event"] for x in fitted["coefficients"]], str(rows))
    stored = rows[0]
    coef, coef_se = json.loads(stored[4]), json.loads(stored[5])
    check("its coefficients and standard errors are the fit's",
          all(abs(c - x["scale"]) <= 1e-9 * x["scale"]
              for c, x in zip(coef, fitted["coefficients"])) and
          any(s is not None and 0 < s < c for c, s in zip(coef, coef_se)),
          f"{coef} +- {coef_se}")

    # 2. Restarted with the same model: used at once.
    d = Daemon("--config", conf, "--model", model_path, state=state)
    started = time.monotonic()
    e = events(d)
    print(f"right after the restart: {line(e)}")
    check("restarted, the daemon uses the stored per-event fit from its first status",
          e["used"] and e["source"] == "stored" and e["fitted"] == stored[1] and
          len(e["coefficients"]) == len(coef) and
          all(abs(x["scale"] - c) <= 1e-9 * c for x, c in zip(e["coefficients"], coef)), line(e))
    check("... while its own fit has too few seconds", e["live_reason"] ==
          "too few measured seconds", line(e))
    log = d.read_log()
    check("the log says which stored per-event fit it took",
          "stored per-event calibration for package: idle" in log, log[-400:])
    out = subprocess.run([os.environ["WATTPROF"], "status", "--socket", d.sock],
                         capture_output=True, text=True)
    pe = [ln for ln in out.stdout.splitlines() if ln.startswith("Per event")]
    check("wattprof status says the per-event fit in use is the stored one",
          out.returncode == 0 and pe and "(stored, fitted" in pe[0], out.stdout[-600:])
    text = metrics(d)
    got = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^wattprof_calibration_event_scale_ratio\{event="([^"]+)",target="package"\} (\S+)$',
        text, re.M)}
    check("the exporter gives each event's coefficient in use, labelled by event and target",
          'wattprof_calibration_events_used{source="stored"} 1' in text and
          set(got) == {x["event"] for x in e["coefficients"]} and
          all(abs(got[x["event"]] - x["scale"]) <= 1e-9 * x["scale"] for x in e["coefficients"]),
          "\n".join(ln for ln in text.splitlines() if "calibration_event" in ln))

    if shutil.which("promtool"):
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                              text=True)
        check("promtool check metrics passes with the per-event series",
              lint.returncode == 0, lint.stdout + lint.stderr)

    b = spawn("--faults", "30000", "2.0")
    cpu, flt = reap(b)
    time.sleep(2.5)  # past a second boundary and the store's commit
    e = events(d)
    want = PER_CPU_W * cpu + PER_FAULT_J * flt
    got_j = d.call("io.wattprof.Monitor.GetProcess", {"pid": b.pid})["process"]["total_j"]
    since = time.monotonic() - started
    stalled = meter_stalled(d)
    if stalled:
        print(f"accuracy not asserted: {stalled}")
    else:
        check(f"a burner of {cpu:.2f} CPU s and {flt} page faults, {since:.0f} s after the"
              f" restart, gets its truth within 10 % on the stored fit ({e['source']})",
              e["used"] and abs(got_j - want) <= 0.10 * want,
              f"{got_j:.2f} J against {want:.2f} J ({got_j / want - 1:+.2%});"
              f" load {os.getloadavg()[0]:.1f}")
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

    # 3. Restarted with a changed model: the stored fit is refused.
    with open(model_path) as f:
        model = json.load(f)
    model["classes"]["models"][0]["coef"][0] = 6.0
    other = os.path.join(work, "model-changed.json")
    with open(other, "w") as f:
        json.dump(model, f)
    d = Daemon("--config", conf, "--model", other, state=state)
    e = events(d)
    print(f"with a changed model: {line(e)}")
    check("with a changed model the stored per-event fit is not used",
          not e["used"] and e["source"] is None and e["reason"] == "too few measured seconds",
          line(e))
    refused = [ln for ln in d.read_log().splitlines() if "per-event calibration" in ln]
    check("one log line says why", len(refused) == 1 and
          "not used: it is of another model (SHA-256)" in refused[0], "\n".join(refused))
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
    check("the stored fit stays until the next good one replaces it",
          d.sql("SELECT t, model_sha256 FROM node_event_calibration") ==
          [(stored[1], stored[2])], "")
except RuntimeError as err:
    skipped = str(err)
finally:
    end_rig(meter, d, cycler, background)
daemon_harness.finish_rig(work, loads, skipped)
