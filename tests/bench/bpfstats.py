"""The in-kernel cost of wattprofd's bpf counter backend, for the benchmarks
that run it beside the perf backend (daemon, churn).

Its programs run in the context of whatever task switches, forks or exits,
so the daemon's own CPU time does not hold their cost. With
kernel.bpf_stats_enabled = 1 (on for the run, put back after) the kernel
sums each program's run time and run count; `bpftool prog show` reads them.
Stats cost two clock reads per run themselves, so the figures are a little
high."""
import json, os, subprocess

SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
BPFTOOL = "/usr/sbin/bpftool"


class enabled:
    """with bpfstats.enabled(): kernel.bpf_stats_enabled on, then as it was."""

    def __enter__(self):
        with open(SYSCTL) as f:
            self.old = f.read().strip()
        with open(SYSCTL, "w") as f:
            f.write("1")
        return self

    def __exit__(self, *exc):
        with open(SYSCTL, "w") as f:
            f.write(self.old)


def prog_ids(pid):
    """The ids of the BPF programs process `pid` holds (its fds' fdinfo)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass  # closed while listed
    return ids


def snapshot(pid):
    """{program name: (run_time_ns, run_cnt)} of the BPF programs process
    `pid` holds."""
    progs = {}
    for i in sorted(prog_ids(pid)):
        out = subprocess.run([BPFTOOL, "-j", "prog", "show", "id", str(i)], capture_output=True,
                             text=True, check=True).stdout
        p = json.loads(out)
        progs[p.get("name", str(i))] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return progs


def cost(before, after, seconds):
    """From two snapshots over `seconds`: % of a core for all programs, and
    ns per run of the context-switch program."""
    ns = sum(after[k][0] - before.get(k, (0, 0))[0] for k in after)
    sw = [after[k][0] - before.get(k, (0, 0))[0] for k in after if k.endswith("switch")]
    n = [after[k][1] - before.get(k, (0, 0))[1] for k in after if k.endswith("switch")]
    return {"kernel_pct": ns / seconds / 1e9 * 100,
            "switch_ns": sw[0] / n[0] if sw and n and n[0] else float("nan"),
            "switches_per_s": n[0] / seconds if n else 0}
