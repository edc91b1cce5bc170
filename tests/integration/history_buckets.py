#!/usr/bin/python3
"""wattprof history's buckets against a real wattprofd that stops and
starts again: buckets start on the clock (multiples of the step), a bucket
the daemon sampled only in part says so (covered_s in JSON and CSV, a note in
the table, left out of charts unless --partial), the newest bucket is marked
as still filling, and the seconds the daemon was not running are a "no data"
row in the table, not a bucket of low power."""
import json, math, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, cleaned_up, finish  # noqa: E402

WATTPROF = os.environ["WATTPROF"]
DOWN_S = 3


def wp(d, *args):
    r = subprocess.run([WATTPROF, *args, "--socket", d.sock], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"})
    if r.returncode != 0:
        check(f"wattprof {' '.join(args)} succeeds", False, r.stderr.strip())
    return r.stdout


def main():
    tmp = tempfile.mkdtemp(prefix="wattprof-hist-")
    state = f"{tmp}/state"
    burn = subprocess.Popen([os.environ["BURN"], "--duty", "0.2", "3"])
    d = Daemon(state=state)
    with cleaned_up(d):
        time.sleep(3.5)
    stopped = time.time()
    time.sleep(DOWN_S)
    d = Daemon(state=state)
    with cleaned_up(d, tmp):
        time.sleep(3.5)
        burn.wait()
        body(d, burn.pid, stopped)
    finish()


def body(d, burn_pid, stopped):
    now = time.time()
    # A --since 3 s past a multiple of 10: the buckets still start on one.
    since = math.floor(now / 10) * 10 - 30 + 3
    j = json.loads(wp(d, "history", "--host", "--since", f"@{since}", "--step", "10s", "--json"))
    ts = [s["t"] for s in j["samples"]]
    check("10s buckets start on multiples of 10 s", ts and all(t % 10 == 0 for t in ts), str(ts))
    check("every sample says how much of it the daemon sampled",
          all(isinstance(s.get("covered_s"), float) for s in j["samples"]), str(j["samples"][:2]))
    check("the buckets around the stop were sampled for less than 10 s",
          any(s["covered_s"] < 10 - DOWN_S + 1 and s["t"] + 10 < now for s in j["samples"]),
          str([(s["t"], round(s["covered_s"], 2)) for s in j["samples"]]))
    j60 = json.loads(wp(d, "history", "--host", "--since", "2m", "--step", "1m", "--json"))
    check("1m buckets start at :00", all(s["t"] % 60 == 0 for s in j60["samples"]),
          str([s["t"] for s in j60["samples"]]))

    # Asked just after a second ends, a flush may hold no tick of the new
    # second yet: the newest row is then the complete second before it, and
    # rightly not filling. Mid-second, and over a second after the last
    # query's flush (which a query may share), the new second has ticks.
    time.sleep(1)
    time.sleep((0.5 - time.time() % 1) % 1)
    table = wp(d, "history", "--host", "--since", "30s", "--step", "1s")
    lines = table.splitlines()
    gaps = [ln for ln in lines if "no data for" in ln]
    check("the seconds without the daemon are one 'no data' row", len(gaps) == 1, table)
    m = re.search(r"no data for (\d+)s", gaps[0] if gaps else "")
    check(f"of about {DOWN_S} s", m is not None and DOWN_S - 1 <= int(m.group(1)) <= DOWN_S + 4,
          gaps[0] if gaps else "")
    if gaps:
        gap_t = lines[lines.index(gaps[0])].split()[0]
        t_gap = time.mktime(time.strptime(gap_t, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        check("the gap starts where the daemon stopped", abs(t_gap - stopped) <= 2.5,
              f"{gap_t} vs stopped {stopped:.1f}")
    check("the newest bucket is marked as still filling",
          re.search(r"filling: [\d.]+ of 1 s( |$)", lines[-1]) is not None, lines[-1])
    check("the table's header has a NOTE column", "NOTE" in lines[0].split(), lines[0])

    # Queries within a second share one commit: a query just past a second
    # boundary can get the commit made for one 0.6 s before it, whose newest
    # second had not ended. That second is still filling, not partial.
    time.sleep(0.6 - time.time() % 1 + (1 if time.time() % 1 > 0.5 else 0))
    wp(d, "history", "--host", "--since", "5s", "--step", "1s", "--json")
    time.sleep(1.05 - time.time() % 1)
    last = wp(d, "history", "--host", "--since", "5s", "--step", "1s").splitlines()[-1]
    check("the newest bucket is still filling when the query shares an older commit",
          re.search(r"filling: [\d.]+ of 1 s( |$)", last) is not None, last)

    csv = wp(d, "history", "--host", "--since", "30s", "--step", "1s", "--csv").splitlines()
    check("CSV gives covered_s", csv[0].startswith("t,power_w,energy_j,cpu,covered_s"), csv[0])
    rows = [r.split(",") for r in csv[1:]]
    check("CSV has no rows for the seconds without data",
          all(r[1] != "" and r[4] != "" for r in rows), str(rows[:3]))
    covered = sum(float(r[4]) for r in rows)
    span = int(rows[-1][0]) - int(rows[0][0]) + 1 if rows else 0
    check(f"covered_s adds up to the time sampled ({covered:.1f} s of {span} s)",
          span - DOWN_S - 4.5 <= covered <= span - DOWN_S + 1, str(rows))

    # A process's buckets carry the host's coverage.
    pj = json.loads(wp(d, "history", "--pid", str(burn_pid), "--since", "30s", "--step", "1s",
                       "--json"))
    hj = {s["t"]: s["covered_s"] for s in json.loads(wp(
        d, "history", "--host", "--since", "30s", "--step", "1s", "--json"))["samples"]}
    check("a process history's covered_s is the host's, bucket by bucket",
          pj["samples"] and all(abs(s["covered_s"] - hj.get(s["t"], -9)) < 0.05
                                for s in pj["samples"] if s["t"] + 1 < time.time() - 1),
          str([(s["t"], s["covered_s"], hj.get(s["t"])) for s in pj["samples"]][:5]))

    chart = wp(d, "history", "--host", "--since", "30s", "--step", "1s", "--plot")
    check("the chart says partial buckets were left out",
          re.search(r"\d+ partial buckets? left out \(--partial draws them\)", chart) is not None,
          chart.splitlines()[0] if chart else "")
    chart = wp(d, "history", "--host", "--since", "30s", "--step", "1s", "--plot", "--partial")
    check("--partial draws them", "left out" not in chart, chart.splitlines()[0] if chart else "")


if __name__ == "__main__":
    main()
