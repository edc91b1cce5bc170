#!/usr/bin/python3
"""Processes the bpf backend adopts (they exited before the daemon read
their /proc details) get their cgroup path from the cgroup id the kernel side
recorded, so that [track] cgroup and the job in the cgroup path work for
them as for the processes the daemon read:

- a parent in a test cgroup .../job_7117 (cgroup v2) forks children that
  exit at once: each is stored with the cgroup's path and job 7117;
- a child of this test (outside that cgroup) that moves itself into it and
  exits is stored with the path it ended in, not the one it forked in;
- a child that stays outside is not stored: [track] cgroup leaves it out.

Needs root, a cgroup2 mount and the bpf backend: skips otherwise."""
import os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, finish  # noqa: E402

JOB, CHILDREN = "7117", 5


def quick_child(move_to=None):
    """A child that (moves itself into cgroup folder move_to and) exits."""
    pid = os.fork()
    if pid == 0:
        if move_to:
            with open(os.path.join(move_to, "cgroup.procs"), "w") as f:
                f.write("0")
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


if sys.argv[1:2] == ["--parent"]:  # runs inside the test cgroup
    time.sleep(0.3)
    print(" ".join(str(quick_child()) for _ in range(CHILDREN)), flush=True)
    time.sleep(1.0)  # still there when its children are adopted
    sys.exit(0)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return left.split()[4].replace("\\040", " "), left.split()[3]
    return None, None


if os.geteuid() != 0:
    print("skip: needs root (BPF, cgroups)")
    sys.exit(77)
mount, root = cgroup2_mount()
if not mount:
    print("skip: no cgroup2 mount here")
    sys.exit(77)
rel = f"/wp-test-cgroup-{os.getpid()}"
top = mount + rel
cg = os.path.join(top, f"job_{JOB}")
path = (root.rstrip("/") if root != "/" else "") + rel + f"/job_{JOB}"
os.makedirs(cg)
state = tempfile.mkdtemp(prefix="wattprofd-bpf-cgroup-")
conf = os.path.join(state, "wattprofd.conf")
with open(conf, "w") as f:
    f.write(f"[track]\ncgroup = {path[:-len(JOB) - 5]}\n")
try:
    try:
        d = Daemon("--backend", "bpf", "--config", conf, state=os.path.join(state, "d"))
    except RuntimeError as e:  # it exits at once when the backend cannot load
        print("skip: the bpf backend cannot load here: " + " ".join(str(e).split())[-300:])
        sys.exit(77)
    time.sleep(1.0)
    p = subprocess.run(["sh", "-c", f'echo $$ > "{cg}/cgroup.procs" && exec "$0" "$1" --parent',
                        sys.executable, os.path.abspath(__file__)],
                       capture_output=True, text=True, check=True)
    inside = [int(x) for x in p.stdout.split()]
    moved = quick_child(move_to=cg)
    outside = quick_child()
    time.sleep(2.5)  # adopted, and past the store's commit
    rc = d.stop()
    check("wattprofd exits 0", rc == 0, d.read_log()[-1500:])
    for pid in inside:
        rows = d.sql("SELECT cgroup, job FROM processes WHERE pid = ?", pid)
        check(f"child {pid} of the parent in {path} is stored with its path and job",
              rows == [(path, JOB)], str(rows))
    rows = d.sql("SELECT cgroup, job FROM processes WHERE pid = ?", moved)
    check(f"child {moved} that moved itself into {path} is stored with it",
          rows == [(path, JOB)], str(rows))
    rows = d.sql("SELECT count(*) FROM processes WHERE pid = ?", outside)
    check(f"child {outside} outside {path} is left out", rows == [(0,)], str(rows))
finally:
    for c in (cg, top):
        try:
            os.rmdir(c)
        except OSError as e:
            print(f"cannot remove {c}: {e}")
    shutil.rmtree(state, ignore_errors=True)
finish()
