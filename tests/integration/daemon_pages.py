#!/usr/bin/python3
"""What one ListProcesses reply may cost is capped: at most 1000 processes
(limit past that is InvalidParameter), the rest by pages (offset,
next_offset).  A replay stores 1500 processes; the first page has 1000 and
says where the next starts, the second the other 500 and no next page,
together every process once; `wattprof ps` follows the pages.  Before,
{window_s: 1e6, include_exited: true, limit: 100000} answered everything in
one reply (tens of MB and seconds of the server thread on a busy node)."""
import json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import cleaned_up, Daemon, check, finish, one_event_model  # noqa: E402
from varlink_peer import Connection, VarlinkError  # noqa: E402

N, TICKS, DT = 1500, 5, 20_000_000
M = "io.wattprof.Monitor."
tmp = tempfile.mkdtemp(prefix="wattprof-pages-")
lines = [{"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"], "zones": [],
          "rate_hz": 50, "boot_id": "00000000-0000-0000-0000-00000000fa9e"}]
for i in range(N):
    lines.append({"proc": {"pid": 10000 + i, "ppid": 1, "start": 7, "uid": 0, "comm": f"p{i}",
                           "cmdline": f"p{i} --x", "cgroup": "/t"}})
for k in range(TICKS):
    lines.append({"tick": {"t": 1_000_000_000 + (k + 1) * DT, "dt": DT, "energy_j": [],
                           "procs": [{"pid": 10000 + i, "start": 7, "d": [DT * (i + 1) / N],
                                      "r": [1]} for i in range(N)]}})
with open(f"{tmp}/r.trace", "w") as f:
    f.write("\n".join(json.dumps(x) for x in lines) + "\n")
d = Daemon("--model", one_event_model(f"{tmp}/model.json"), "--replay", f"{tmp}/r.trace", "--speed", "max",
           state=f"{tmp}/d")
with cleaned_up(d, tmp):
    for _ in range(200):
        if "finished" in d.read_log():
            break
        time.sleep(0.05)
    big = {"window_s": 1e6, "include_exited": True}
    with Connection(d.sock) as c:
        c.send(M + "ListProcesses", dict(big, limit=100000))
        try:
            c.reply()
            got = "a reply"
        except VarlinkError as e:
            got = f"{e.name} {e.parameters}"
    check("limit 100000 is refused, naming the most", "InvalidParameter" in got and
          "limit is 100000, not from 0 to 1000" in got, got)
    t0 = time.monotonic()
    first = d.call(M + "ListProcesses", big)
    took = time.monotonic() - t0
    size = len(json.dumps(first))
    check(f"the first page: 1000 processes, next_offset 1000 ({size} bytes, {took:.2f} s)",
          len(first["processes"]) == 1000 and first["next_offset"] == 1000, str(first.get("next_offset")))
    second = d.call(M + "ListProcesses", dict(big, offset=1000))
    check("the second page: the other 500, no next page",
          len(second["processes"]) == 500 and second["next_offset"] is None,
          f'{len(second["processes"])} {second.get("next_offset")}')
    pids = [p["pid"] for p in first["processes"] + second["processes"]]
    check("together every process once, in order of energy",
          sorted(pids) == list(range(10000, 10000 + N)) and pids[0] == 10000 + N - 1, str(pids[:3]))
    p = subprocess.run([os.environ["WATTPROF"], "ps", "--window", "1000000s", "--json",
                        "--socket", d.sock], capture_output=True, text=True, timeout=60)
    n = len(json.loads(p.stdout)["processes"]) if p.returncode == 0 else p.stderr
    check(f"wattprof ps follows the pages: {n} processes", n == N, str(n))
    check("SIGTERM exits 0", d.stop() == 0)
finish()
