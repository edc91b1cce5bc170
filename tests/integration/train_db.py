#!/usr/bin/python3
"""`wattprof train --db` on calibration rows whose truth is known exactly:
wattprofd replays synthetic recordings (--replay --speed max) whose RAPL
package power is an exact linear function of the per-class sums of process
event rates. Per-second means keep that function exact, so OLS must give
back its coefficients per class, its idle power, and the model's events and
class split. Then every refusal of the database path: no rows, rows of two
models with different events (and the --since the message suggests works),
a missing domain, a bad --since, CSV options with --db, --install-if-better
misused; and the install paths no daemon-in-the-loop test reaches: a daemon
that is not running (installed, reported, exit 0), a current.json that does
not load (replaced), and a daemon that refuses the model (exit 1, the old
current.json put back)."""
import json, os, random, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402

WATTPROF = os.environ["WATTPROF"]
RATE, DT_NS = 50, 20_000_000
work = tempfile.mkdtemp(prefix="wattprof-train-db-")
rng = random.Random(11)
IDLE = 20.0


def make(name, events, classes, weights, offset_s, seconds):
    """A model, and a recording of a miner (crossing 2e7 cumulative
    cache-misses after a few seconds), a low-miss process and a sleeper,
    with package power IDLE + sum_k sum_j weights[k][j] * S_kj (S: class
    sums of rates). Returns the model's path and the recording's."""
    n = len(events)
    maxes = [rng.uniform(1e8, 5e9) for _ in events]
    model = {"format": "wattprof-model/1", "name": name, "engine": "ridge",
             "target": ["package"], "events": events,
             "scaler": {"min": [0] * n, "max": maxes},
             "classes": {"models": [{"name": "all", "intercept": 50, "coef": [1] * n}]},
             "idle_power_w": 30}
    miss = events.index("cache-misses") if "cache-misses" in events else None
    if classes == 2:
        model["classes"] = {"event": "cache-misses", "threshold": 2e7, "mode": "cumulative",
                            "models": [{"name": "high-miss", "intercept": 50, "coef": [1] * n},
                                       {"name": "low-miss", "intercept": 40, "coef": [1] * n}]}
    rec = events + ["perf::TASK-CLOCK"]
    procs = [(2001, 7000, "miner"), (2002, 7001, "lowmiss"), (2003, 7002, "sleeper")]
    lines = [{"format": "wattprof-trace/1", "events": rec,
              "zones": [{"id": "intel-rapl:0", "name": "package-0"},
                        {"id": "intel-rapl:0:0", "name": "dram"}],
              "rate_hz": RATE, "boot_id": "00000000-0000-0000-0000-000000000002",
              "realtime_offset_ns": offset_s * 10**9}]
    for pid, start, comm in procs:
        lines.append({"proc": {"pid": pid, "ppid": 1, "start": start, "uid": 0, "comm": comm,
                               "cmdline": comm, "cgroup": "/test"}})
    cum = {p[0]: 0.0 for p in procs}
    for k in range(seconds * RATE):
        dt = DT_NS / 1e9
        deltas, power = [], IDLE
        for pid, start, comm in procs:
            d = [0.0] * len(rec)
            if comm != "sleeper":
                # slow swings so that whole seconds differ, plus noise
                level = 0.3 + 0.6 * ((k // (RATE // 2) * (7 if comm == "miner" else 3)) % 11) / 10
                d = [level * rng.uniform(0.8, 1.2) * maxes[j] * dt for j in range(n)] + [0.5 * DT_NS]
                if miss is not None:
                    d[miss] = (1.2e5 if comm == "miner" else 1e3) * rng.uniform(0.5, 1.5)
            if miss is not None:
                cum[pid] += d[miss]
            cls = 0 if classes == 2 and cum[pid] >= 2e7 else (1 if classes == 2 else 0)
            power += sum(weights[cls][j] * d[j] / dt for j in range(n))
            deltas.append({"pid": pid, "start": start, "d": d, "r": [1.0] * len(rec)})
        lines.append({"tick": {"t": 10**12 + (k + 1) * DT_NS, "dt": DT_NS,
                               "energy_j": [power * dt, 1.0 * dt], "procs": deltas}})
    mpath, tpath = os.path.join(work, name + ".json"), os.path.join(work, name + ".trace")
    with open(mpath, "w") as f:
        json.dump(model, f)
    with open(tpath, "w") as f:
        for obj in lines:
            f.write(json.dumps(obj) + "\n")
    return mpath, tpath, maxes


def replay(state, mpath, tpath, keep=False):
    d = Daemon("--replay", tpath, "--speed", "max", "--model", mpath, state=state)
    done = d.wait_log("finished after")
    check(f"{os.path.basename(tpath)}: replay finished", done, "" if done else d.read_log()[-300:])
    if not keep:
        d.stop()
    return d


def run(*args, env=None):
    p = subprocess.run([WATTPROF, "train", *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def expect_fail(desc, pattern, *args, want_rc=1):
    """want_rc: 1 for bad data, 2 for a bad command line."""
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    check(f"{desc}: one line, exit {want_rc}", rc == want_rc and len(lines) == 1 and pattern in err,
          f"rc {rc}: {err.strip()}")


# Two-class model A: three events; watts per event/s differ by class.
EV_A = ["cycles", "instructions", "cache-misses"]
W_A = [[3e-9, 1e-9, 2e-7], [1.5e-9, 2e-9, 5e-7]]
T0 = 1_800_000_000  # 2027-01-15T08:00:00Z
ma, ta, _ = make("model-a", EV_A, 2, W_A, T0, 40)
state = os.path.join(work, "state")
replay(state, ma, ta)
db = os.path.join(state, "wattprof.db")

out_path = os.path.join(work, "fit.json")
rc, out, err = run("--db", db, "--since", "2027-01-15T07:00:00Z", "--engine", "ols",
                   "--cv", "5", "--out", out_path, "--json")
check("train --db --engine ols exits 0", rc == 0, err.strip())
rep = json.loads(out) if rc == 0 else {}
fit = json.load(open(out_path)) if os.path.exists(out_path) else {}
check("the model counts the daemon model's events", fit.get("events") == EV_A, str(fit.get("events")))
cl = fit.get("classes", {})
check("and splits classes as it did", cl.get("event") == "cache-misses"
      and cl.get("threshold") == 2e7 and [m["name"] for m in cl.get("models", [])]
      == ["high-miss", "low-miss"], json.dumps(cl)[:200])
worst = 0.0
for k in range(2):
    for j in range(3):
        got = cl["models"][k]["coef"][j] / fit["scaler"]["max"][j] if cl else 0
        worst = max(worst, abs(got - W_A[k][j]) / W_A[k][j])
check("OLS gives back every class's watts per event/s (1e-6 relative)", worst < 1e-6, f"{worst:.3g}")
check(f"and the idle power {IDLE} W", abs(fit.get("idle_power_w", 0) - IDLE) < 1e-6,
      str(fit.get("idle_power_w")))
check("and intercepts equal to it in both classes",
      all(abs(m["intercept"] - IDLE) < 1e-6 for m in cl.get("models", [])))
tr = fit.get("training", {})
check("training block: rows, cpu model, kernel, dataset hash",
      tr.get("rows", 0) >= 35 and tr.get("cpu_model") and tr.get("kernel") == os.uname().release
      and len(tr.get("dataset_sha256", "")) == 64, json.dumps(tr))
check("cross-validated MAPE ~0 on exact data",
      rep.get("results", [{}])[0].get("classes", {}).get("all", {}).get("mape", 1) < 1e-6)
check("the report names the columns per class",
      rep.get("dataset", {}).get("daemon_model") == "model-a")
rc, out, err = run("--db", db, "--since", "2027-01-15T07:00:00Z", "--engine", "ols", "--cv", "5")
check("text report says where the rows come from",
      rc == 0 and "the daemon running 'model-a'" in out, out[:300])

# Model B, later, in the same database: one class, other events.
EV_B = ["cycles", "branches"]
mb, tb, _ = make("model-b", EV_B, 1, [[2e-9, 4e-9]], T0 + 3600, 20)
replay(state, mb, tb)
expect_fail("rows of models with different events", "train on one of them, e.g. --since 2027-01-15T09:16:40Z",
            "--db", db, "--since", "2027-01-15T07:00:00Z")
rc, out, err = run("--db", db, "--since", "2027-01-15T07:00:00Z")
hint = err.split("--since ")[-1].strip()
rc, out, err = run("--db", db, "--since", hint, "--engine", "ols", "--cv", "3", "--out", out_path)
fb = json.load(open(out_path)) if rc == 0 else {}
check(f"the --since the message suggests ({hint}) trains on model B alone",
      rc == 0 and fb.get("events") == EV_B and len(fb["classes"]["models"]) == 1, err.strip())

expect_fail("a relative --since (7d) reads both models' rows", "different events or classes",
            "--db", db, "--since", "7d")
expect_fail("no calibration rows", "no calibration rows since 2030-01-01T00:00:00Z",
            "--db", db, "--since", "2030-01-01T00:00:00Z")
expect_fail("a domain the rows lack", "has no 'gpu' power (it has ",
            "--db", db, "--since", hint, "--domains", "package,gpu")
expect_fail("a bad --since", "--since 'yesterday': expected a span",
            "--db", db, "--since", "yesterday", want_rc=2)
expect_fail("--target with --db", "--target does not apply to --db", "--db", db, "--target", "y", want_rc=2)
expect_fail("a file with --db", "drop the file", "--db", db, "x.csv", want_rc=2)
expect_fail("--install-if-better without --db", "--install-if-better needs --db",
            "x.csv", "--install-if-better", work, want_rc=2)
expect_fail("--install-if-better with --cv", "use --holdout-last P, not --cv",
            "--db", db, "--install-if-better", work, "--cv", "3", want_rc=2)
expect_fail("forest to install", "the daemon evaluates linear models only",
            "--db", db, "--since", hint, "--engine", "forest", "--install-if-better", work)
expect_fail("a database that does not exist", os.path.join(work, "none.db"),
            "--db", os.path.join(work, "none.db"))

# Installing with no daemon: installed, reported, exit 0.
inst = os.path.join(work, "models")
rc, out, err = run("--db", db, "--since", hint, "--engine", "ols", "--install-if-better", inst,
                   "--socket", os.path.join(work, "nobody.sock"), "--json")
r = json.loads(out).get("install", {}) if rc == 0 else {}
check("no daemon: still installed, exit 0", rc == 0 and r.get("decision") == "installed"
      and os.path.exists(os.path.join(inst, "current.json")), err.strip())
check("... and the unreachable daemon is reported", r.get("reload", {}).get("loaded") is False
      and "daemon not reached" in r.get("reload", {}).get("message", ""), json.dumps(r.get("reload")))
check("the database's model-b was the current one, kept as previous.json",
      json.load(open(os.path.join(inst, "previous.json"))).get("name") == "model-b")
# The same data again: the installed model is not beaten by itself.
rc, out, err = run("--db", db, "--since", hint, "--engine", "ols", "--install-if-better", inst,
                   "--socket", os.path.join(work, "nobody.sock"))
check("an equal model does not replace the current one", rc == 0 and "kept the current one" in out, out + err)

# A current.json that does not load is replaced.
with open(os.path.join(inst, "current.json"), "w") as f:
    f.write("{not json")
rc, out, err = run("--db", db, "--since", hint, "--engine", "ols", "--install-if-better", inst,
                   "--json", env={"WATTPROF_SOCKET": os.path.join(work, "env.sock")})
r = json.loads(out).get("install", {}) if rc == 0 else {}
check("a current.json that does not load is replaced", r.get("decision") == "installed"
      and "does not load" in r.get("reason", ""), r.get("reason", err))
check("without --socket, $WATTPROF_SOCKET is the daemon's socket",
      r.get("reload", {}).get("socket") == os.path.join(work, "env.sock"), json.dumps(r.get("reload")))

# A daemon that refuses: it replays model A's recording, so it cannot count
# model B's "branches". Its refusal fails the install and restores current.json.
if os.geteuid() == 0:
    d = replay(os.path.join(work, "state-a"), ma, ta, keep=True)
    cur = os.path.join(inst, "current.json")
    with open(cur, "w") as f:  # something the new model beats
        json.dump(dict(json.load(open(mb)), name="bad-b", idle_power_w=1000,
                       training={"rows": 1, "cv_mape": 1, "created": "2026-01-01T00:00:00Z"}), f)
    before = open(cur, "rb").read()
    rc, out, err = run("--db", db, "--since", hint, "--engine", "ols", "--install-if-better", inst,
                       "--socket", d.sock)
    check("a daemon that refuses the model fails the install",
          rc == 1 and "the daemon refused the model" in err and "branches" in err, err.strip())
    check("... and current.json is put back", open(cur, "rb").read() == before)
    d.stop()
else:
    print("# skipped the refusing daemon: ReloadModels needs root or the daemon's group")
finish()
