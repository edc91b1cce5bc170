#!/usr/bin/python3
"""Job ids from the environment, live and in a replay.

A live wattprofd with `job_env = WPX_NOT_SET,WPX_JOB_ID` (the first one set
wins) records while two burners run: one started with WPX_JOB_ID=4242, one
without. The exporter shows job 4242's energy; the recording carries the job
in the process's record (the cgroup path here has no Slurm job); a replay of
it, with no environment to read, exports the same job with the same energy."""
import json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

tmp = tempfile.mkdtemp(prefix="wattprof-jobs-")
burner = os.path.join(tmp, "wpxjob")
os.symlink(os.environ["BURN"], burner)
with open(f"{tmp}/d.conf", "w") as f:
    f.write("[track]\ncomm = ^wpxjob$\n[exporter]\nlisten = 127.0.0.1:0\n"
            "job_env = WPX_NOT_SET, WPX_JOB_ID\n")


def jobs(url):
    return daemon_harness.energy_by_job(url, "wpxjob")


trace = f"{tmp}/run.trace"
live = Daemon("--config", f"{tmp}/d.conf", "--record", trace, state=f"{tmp}/live")
url = live.exporter_url()
env = dict(os.environ, WPX_JOB_ID="4242")
env.pop("WPX_NOT_SET", None)
plain = dict(os.environ)
plain.pop("WPX_JOB_ID", None)
# They wait first, so the daemon finds them before they burn.
ps = [subprocess.Popen([burner, "--wait", "1.2", "0.3"], env=env),
      subprocess.Popen([burner, "--wait", "1.2", "0.2"], env=plain)]
for p in ps:
    p.wait()
time.sleep(2.5)  # the exits reach a published snapshot
got_live = jobs(url)
check("live: job 4242 and the process in no job are exported apart",
      sorted(got_live) == ["", "4242"] and got_live["4242"] > 0, str(got_live))
check("live daemon stops cleanly", live.stop() == 0)
records = [json.loads(ln)["proc"] for ln in open(trace) if ln.startswith('{"proc"')]
# Only the two burners: under LeakSanitizer each one, at exit, clones a
# tracer task (CLONE_VM without CLONE_THREAD: a process of its own, with the
# burner's comm and environment), which the daemon rightly tracks too.
ours = {p.pid for p in ps}
# A process described again (its job found after the exec) has its latest
# record last.
latest = {r["pid"]: r.get("job", "") for r in records if r["pid"] in ours}
check("the recording carries job 4242 in its process record, and no job for the other",
      sorted(latest.values()) == ["", "4242"],
      str([(r["pid"], r.get("job")) for r in records]))

rep = Daemon("--config", f"{tmp}/d.conf", "--replay", trace, "--speed", "max",
             state=f"{tmp}/replay")
rurl = rep.exporter_url()
for _ in range(300):
    if "finished after" in rep.read_log():
        break
    time.sleep(0.1)
got_rep = jobs(rurl)
check(f"replay: job 4242 has the live energy ({got_rep.get('4242', 0):.6f} J)",
      sorted(got_rep) == ["", "4242"]
      and abs(got_rep["4242"] - got_live["4242"]) <= 1e-9 * got_live["4242"], str(got_rep))
check("replay stops cleanly", rep.stop() == 0)
if not daemon_harness.failures:
    subprocess.run(["rm", "-rf", tmp])
finish()
