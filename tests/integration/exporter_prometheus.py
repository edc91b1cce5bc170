#!/usr/bin/python3
"""Two wattprofd replays stand in for two cluster nodes; a real Prometheus
(Debian's package) scrapes both, each under its own instance label, with the
shipped recording rules loaded.

Job 77 runs on both nodes, job 88 on one, and one process runs outside any
job. One of job 77's processes exits half-way (its energy must stay in the
counters) and one is renamed by an exec (its energy before the exec stays
with its old command). When the replays are over:
  * sum by (job_id) of wattprof_process_energy_joules_total, asked of
    Prometheus's HTTP API, equals the two daemons' own per-process totals
    (read over Varlink, the job taken from each process's cgroup path here,
    independently of the daemon), within the energy of one scrape interval;
  * the recording rule's per-job series says the same;
  * no energy counter was ever seen going backwards (resets() is 0);
  * each daemon's exposition passes `promtool check metrics`.
"""
import json, os, re, shutil, subprocess, sys, tempfile, time
import urllib.parse, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish, free_port  # noqa: E402

SRCDIR = os.environ["SRCDIR"]
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
if not PROMETHEUS or not PROMTOOL:
    print("prometheus/promtool not installed (Debian package prometheus): skipping")
    sys.exit(77)

TICK_NS = 20_000_000
TICKS = 400  # 8 s at --speed 1
HOST_W = 100.0
SCRAPE_S = 1.0


def slurm(job, task):
    return f"/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_{task}"


# node: [(pid, start, comm, cgroup, share of a core, exit at tick or None)]
NODES = {
    "node1": [(5001, 100, "solver", slurm(77, 0), 0.5, None),
              (5002, 101, "solver", slurm(77, 1), 0.4, TICKS // 2),
              (5003, 102, "sshd", "/system.slice/ssh.service", 0.1, None)],
    "node2": [(6001, 200, "prep", slurm(77, 0), 0.6, None),
              (6002, 201, "post", slurm(88, 0), 0.2, None),
              # A name that needs escaping in the exposition.
              (6003, 202, 'q"b\\s\nd', slurm(88, 1), 0.05, None)],
}
AWKWARD = 'q"b\\s\nd'  # (a byte that is not UTF-8: exporter_config.sh)
RENAME = ("node2", 6001, 200, TICKS // 3, "solver")  # prep execs solver


def write_trace(path, node, uid):
    procs = NODES[node]
    with open(path, "w") as f:
        def put(o):
            f.write(json.dumps(o) + "\n")
        put({"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"],
             "zones": [{"id": "intel-rapl:0", "name": "package-0"}], "rate_hz": 50,
             "boot_id": "00000000-0000-0000-0000-0000000000" + ("01" if node == "node1" else "02")})
        for pid, start, comm, cg, _, _ in procs:
            put({"proc": {"pid": pid, "ppid": 1, "start": start, "uid": uid, "comm": comm,
                          "cmdline": comm, "cgroup": cg}})
        for k in range(TICKS):
            if RENAME[0] == node and k == RENAME[3]:
                p = next(p for p in procs if p[0] == RENAME[1])
                put({"proc": {"pid": p[0], "ppid": 1, "start": p[1], "uid": uid,
                              "comm": RENAME[4], "cmdline": RENAME[4], "cgroup": p[3]}})
            live = [p for p in procs if p[5] is None or k < p[5]]
            put({"tick": {"t": 10**12 + (k + 1) * TICK_NS, "dt": TICK_NS,
                          "energy_j": [HOST_W * TICK_NS / 1e9],
                          "procs": [{"pid": p[0], "start": p[1], "d": [p[4] * TICK_NS],
                                     "r": [1.0]} for p in live]}})
            for p in procs:
                if p[5] == k + 1:
                    put({"exit": {"pid": p[0], "start": p[1]}})


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, expr):
    url = f"http://{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    d = json.loads(get(url))
    if d.get("status") != "success":
        raise RuntimeError(f"{expr}: {d}")
    return d["data"]["result"]


def varlink_jobs(daemon):
    """Per-job energy from the daemon's own per-process totals."""
    r = daemon.call("io.wattprof.Monitor.ListProcesses",
                    {"window_s": 86400.0, "include_exited": True, "limit": 1000})
    jobs = {}
    for p in r["processes"]:
        m = re.search(r"/job_(\d+)(/|$)", p["cgroup"])
        job = m.group(1) if m else ""
        jobs[job] = jobs.get(job, 0.0) + p["total_j"]
    return jobs


def main():
    tmp = tempfile.mkdtemp(prefix="wattprof-prom-")
    uid = os.getuid()
    model = {"format": "wattprof-model/1", "name": "cluster-test", "engine": "ridge",
             "target": ["package"], "events": ["perf::TASK-CLOCK"],
             "scaler": {"min": [0], "max": [1e9]},
             "classes": {"models": [{"name": "all", "intercept": 10.0, "coef": [40.0]}]},
             "idle_power_w": 20.0,
             "training": {"rows": 100, "cv_mape": 0.02, "created": "2026-11-30T04:00:00Z"}}
    with open(f"{tmp}/model.json", "w") as f:
        json.dump(model, f)
    daemons, ports = {}, {}
    prom_proc = None
    try:
        for node in NODES:
            write_trace(f"{tmp}/{node}.trace", node, uid)
            with open(f"{tmp}/{node}.conf", "w") as f:
                f.write("[exporter]\nlisten = 127.0.0.1:0\ntop_pids = 2\n")
        prom_port = free_port()
        prom = f"127.0.0.1:{prom_port}"
        # Start both daemons first: their ports come from their logs.
        for node in NODES:
            daemons[node] = Daemon("--config", f"{tmp}/{node}.conf", "--model",
                                   f"{tmp}/model.json", "--replay", f"{tmp}/{node}.trace",
                                   "--speed", "1", state=f"{tmp}/{node}")
        for node, d in daemons.items():
            for _ in range(100):
                m = re.search(r"serving http://(127\.0\.0\.1:\d+)/metrics", d.read_log())
                if m:
                    break
                time.sleep(0.05)
            ports[node] = m.group(1)
        shutil.copy(os.path.join(SRCDIR, "examples", "prometheus", "wattprof.rules.yml"), tmp)
        with open(f"{tmp}/prometheus.yml", "w") as f:
            f.write(f"""global:
  scrape_interval: {SCRAPE_S:g}s
  evaluation_interval: {SCRAPE_S:g}s
rule_files: [wattprof.rules.yml]
scrape_configs:
  - job_name: wattprof
    static_configs:
      - targets: ['{ports["node1"]}']
        labels: {{instance: node1}}
      - targets: ['{ports["node2"]}']
        labels: {{instance: node2}}
""")
        rc = subprocess.run([PROMTOOL, "check", "config", f"{tmp}/prometheus.yml"],
                            capture_output=True, text=True)
        check("promtool check config (with the shipped rules)", rc.returncode == 0,
              rc.stdout + rc.stderr)
        prom_log = open(f"{tmp}/prometheus.log", "w")
        prom_proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp}/prometheus.yml",
             f"--storage.tsdb.path={tmp}/tsdb", f"--web.listen-address={prom}"],
            stdout=prom_log, stderr=subprocess.STDOUT, cwd=tmp)
        ready = False
        for _ in range(300):
            if prom_proc.poll() is not None:
                break
            try:
                ready = get(f"http://{prom}/-/ready", timeout=2).strip() != ""
                break
            except OSError:
                time.sleep(0.1)
        if not ready:
            print("prometheus did not start here: skipping\n" + open(f"{tmp}/prometheus.log").read())
            sys.exit(77)

        # The replays run 8 s; then two more scrapes see the final values.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                "replay of" in d.read_log() and "finished" in d.read_log()
                for d in daemons.values()):
            time.sleep(0.2)
        check("both replays finished", time.monotonic() < deadline)
        time.sleep(3 * SCRAPE_S + 0.5)

        for node, d in daemons.items():
            text = get(f"http://{ports[node]}/metrics")
            with open(f"{tmp}/{node}.prom", "w") as f:
                f.write(text)
            rc = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                                capture_output=True, text=True)
            check(f"{node}: promtool check metrics", rc.returncode == 0 and not rc.stdout.strip()
                  and not rc.stderr.strip(), rc.stdout + rc.stderr)

        up = query(prom, 'up{job="wattprof"}')
        check("Prometheus scrapes both nodes", sorted(
            (r["metric"]["instance"], r["value"][1]) for r in up) == [("node1", "1"), ("node2", "1")],
            str(up))

        want = {}
        for d in daemons.values():
            for job, j in varlink_jobs(d).items():
                want[job] = want.get(job, 0.0) + j
        got = {r["metric"].get("job_id", ""): float(r["value"][1]) for r in
               query(prom, "sum by (job_id) (wattprof_process_energy_joules_total)")}
        rule = {r["metric"].get("job_id", ""): float(r["value"][1]) for r in
                query(prom, "job_id:wattprof_process_energy_joules:sum")}
        # Active power is at most host power minus idle, per node.
        tolerance = 2 * (HOST_W - 20.0) * SCRAPE_S
        check("the Varlink totals cover jobs 77, 88 and no job", sorted(want) == ["", "77", "88"],
              str(want))
        for job in sorted(want):
            check(f"job '{job}': Prometheus {got.get(job, float('nan')):.3f} J = Varlink "
                  f"{want[job]:.3f} J", abs(got.get(job, float("inf")) - want[job]) <= tolerance)
            check(f"job '{job}': the recording rule says {rule.get(job, float('nan')):.3f} J",
                  abs(rule.get(job, float("inf")) - want[job]) <= tolerance)
        # Energy is conserved: host = idle + processes + unattributed, summed over nodes.
        host = sum(float(r["value"][1]) for r in query(
            prom, 'wattprof_host_energy_joules_total{source="measured"}'))
        rest = sum(float(r["value"][1]) for r in query(
            prom, "wattprof_idle_energy_joules_total or wattprof_unattributed_energy_joules_total"))
        check(f"host {host:.3f} J = idle + unattributed + processes {rest + sum(got.values()):.3f} J",
              abs(host - rest - sum(got.values())) < 1e-6 * host and
              abs(host - 2 * HOST_W * TICKS * TICK_NS / 1e9) < 1e-6 * host)
        check("job 77 ran on both nodes", sorted(r["metric"]["instance"] for r in query(
            prom, 'sum by (instance) (wattprof_process_energy_joules_total{job_id="77"})'))
            == ["node1", "node2"])
        resets = query(prom, "sum(resets(wattprof_process_energy_joules_total[5m]))")
        check("no energy counter went backwards", resets and float(resets[0]["value"][1]) == 0,
              str(resets))
        renamed = {r["metric"]["command"]: float(r["value"][1]) for r in query(
            prom, 'wattprof_process_energy_joules_total{instance="node2",job_id="77"}')}
        check("the exec'd process's energy is split between its two commands",
              sorted(renamed) == ["prep", "solver"] and all(v > 0 for v in renamed.values()),
              str(renamed))
        odd = [r["metric"]["command"] for r in query(
            prom, 'wattprof_process_energy_joules_total{instance="node2",job_id="88"}')]
        check("a command with a quote, a backslash and a newline arrives intact", AWKWARD in odd,
              str(odd))
        pids = query(prom, 'wattprof_pid_energy_joules_total{instance="node1"}')
        check("node1 exports per-pid series for its top 2 only, one of them ended",
              sorted(r["metric"]["pid"] for r in pids) == ["5001", "5002"],
              str([r["metric"]["pid"] for r in pids]))
    finally:
        if prom_proc:
            prom_proc.terminate()
            prom_proc.wait(timeout=30)
        for d in daemons.values():
            d.stop()
    if not daemon_harness.failures:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept {tmp}")
    finish()


main()
