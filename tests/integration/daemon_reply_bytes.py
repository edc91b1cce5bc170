#!/usr/bin/python3
"""No reply of the daemon passes 4 MiB of JSON: a page of ListProcesses,
GetHistory or ListJobs ends early at it and says where the next starts; the
client follows the pages and lists everything once.

  - A replay stores 1500 processes with command lines of 4000 characters,
    most of them slashes and control characters (JSON writes "\\/", "\\t"
    and "\\u0001": about 7 KB a process).  A page of 1000 of them would be
    7 MB: every reply read off the socket stays within 4 MiB, a page ends
    before 1000 with a next_offset, the pages together hold every process
    once, and `wattprof ps` lists each once.  Every process in a reply has
    the fields of the interface's Process type (job among them).
  - The database then gets 36,000 seconds of host history and 1,200 batch
    jobs whose ids are padded to 5000 characters (written behind the
    daemon's back, between two runs): GetHistory{host, step_s: 1} (about
    5 MB) and ListJobs (about 6 MB) end their pages within 4 MiB with
    next_since / next_before; followed, every second and every job comes
    once; `wattprof history --step 1s` and `wattprof jobs` show them all.
    Five jobs that start after the first page and one that started before
    every other are added between two pages: the pages that follow list
    every job once, the older one with them, none of the five.
    The database also gets 50 models named with 100,000 characters each
    (about 5 MB): ListModels, which has no pages, is ReplyTooLarge with no
    parameter, and `wattprof models` says so and exits 1; with 30 of them
    left (about 3 MB) it answers them all. A job whose id alone is 4 MiB is
    ReplyTooLarge.
  - A replay of 50,000 one-second ticks of three processes: a series of
    every second (GetProcess{series_s: 1e6}, about 6 MB) has no pages and
    is ReplyTooLarge naming series_s; `wattprof show --series` says so and
    exits 1; the last 100 seconds are answered.
  - A slowed replay of 14,000 processes: Subscribe{limit: 0}
    (all of them, about 4.6 MB a reply) ends with ReplyTooLarge naming
    limit; Subscribe{limit: 100} streams.
Before, each of these was one reply of 5 to 7 MB.  The second daemon runs
with query_time_limit = 1m: on a loaded machine listing the jobs can take
seconds."""
import atexit, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import (cleaned_up, connect, Daemon, check, finish, insert_minute_rows,  # noqa: E402
                            insert_processes, one_event_model, write_replay)
from varlink_peer import Connection, VarlinkError  # noqa: E402
import varlink_idl  # noqa: E402

CAP = 4 * 1024 * 1024
N = 1500
HOST_S, JOBS = 36_000, 1_200
M = "io.wattprof.Monitor."
tmp = tempfile.mkdtemp(prefix="wattprof-bytes-")
atexit.register(shutil.rmtree, tmp, True)  # also when a check raises
WATTPROF = os.environ["WATTPROF"]


def raw_call(sock, method, params):
    """(parameters, bytes of the reply as it came off the socket)."""
    with Connection(sock, timeout=120) as c:
        c.send(M + method, params)
        while b"\0" not in c.buf:
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            c.buf += chunk
        raw = c.buf.split(b"\0", 1)[0]
    msg = json.loads(raw)
    if "error" in msg:
        raise VarlinkError(msg["error"], msg.get("parameters", {}))
    return msg["parameters"], len(raw)


def pages(sock, method, params, key, nxt):
    """Follows a method's pages: (every item, [(items, bytes, seconds) per page])."""
    items, sizes, params = [], [], dict(params)
    while True:
        t = time.monotonic()
        r, size = raw_call(sock, method, params)
        items += r[key]
        sizes.append((len(r[key]), size, round(time.monotonic() - t, 2)))
        if r.get(nxt) is None or len(sizes) > 50:
            return items, sizes
        if nxt == "next_offset":
            params["offset"] = r[nxt]
        elif nxt == "next_before":
            params["before"] = r[nxt]
        else:
            params["since"], params["step_s"] = r[nxt], r["step_s"]


def cli(*args):
    t = time.monotonic()
    p = subprocess.run([WATTPROF, *args, "--json", "--socket", d.sock], capture_output=True,
                       text=True, timeout=120)
    print(f"# wattprof {args[0]}: {time.monotonic() - t:.2f} s")
    return json.loads(p.stdout) if p.returncode == 0 else f"exit {p.returncode}: {p.stderr}"


with open(os.path.join(os.environ["SRCDIR"], "lib", "rpc", "io.wattprof.Monitor.varlink")) as f:
    process_type = varlink_idl.parse(f.read())["types"]["Process"]
fields = sorted(x.split(":")[0].strip() for x in process_type.strip("()").split(","))

procs = []
for i in range(N):
    head = f"/opt/p{i} " + "/" * 1800 + "\x01\t" * 100 + "é" * 100
    procs.append((10000 + i, f"p{i}", head + "x" * (4000 - len(head))))
write_replay(f"{tmp}/r.trace", procs)
d = Daemon("--model", one_event_model(f"{tmp}/model.json"), "--replay", f"{tmp}/r.trace",
           "--speed", "max", state=f"{tmp}/d")
with cleaned_up(d):
    for _ in range(400):
        if "finished" in d.read_log():
            break
        time.sleep(0.05)
    big = {"window_s": 1e6, "include_exited": True}
    procs, sizes = pages(d.sock, "ListProcesses", big, "processes", "next_offset")
    print(f"# ListProcesses pages (processes, bytes): {sizes}")
    check("every ListProcesses reply is within 4 MiB", all(b <= CAP for _, b, _ in sizes), str(sizes))
    check("a page ends before 1000 processes at the bytes", sizes[0][0] < 1000 and len(sizes) > 1,
          str(sizes))
    pids = [p["pid"] for p in procs]
    check("the pages hold every process once",
          sorted(pids) == list(range(10000, 10000 + N)), f"{len(pids)} of {N}")
    check("... with their whole command lines",
          all(len(p["cmdline"]) == 4000 for p in procs), str({len(p["cmdline"]) for p in procs}))
    bad = [sorted(p) for p in procs if sorted(p) != fields][:1]
    check("every process has the fields of the interface's Process type", not bad,
          f"{bad} vs {fields}")
    got = cli("ps", "--window", "1000000s")
    pids = [p["pid"] for p in got["processes"]] if isinstance(got, dict) else got
    check("wattprof ps lists every process once",
          isinstance(pids, list) and sorted(pids) == list(range(10000, 10000 + N)),
          str(pids)[:300] if not isinstance(pids, list) else f"{len(pids)} of {N}")
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

now = int(time.time())
con = connect(d.db, ro=False)
con.execute("BEGIN")
con.executemany(
    "INSERT OR REPLACE INTO host_attribution (t, duration_s, host_j, idle_j, attributed_j,"
    " unattributed_j,"
    " modeled_j, measured, model_id, idle_source, calib_t) VALUES (?, 1, 10, 5, 4, 1, 10, 1,"
    " NULL, 'percentile', 0)", [(now - HOST_S + k,) for k in range(HOST_S)])
insert_processes(con, [(20_000_000 + i, 200_000 + i, "j", now - 2 * HOST_S, now - 2 * HOST_S + 60,
                        now - 2 * HOST_S + 60, f"job-{i:06d}-" + "x" * 4989)
                       for i in range(JOBS)])
insert_minute_rows(con, "p.job LIKE 'job-%'")
MODELS, NAME = 50, 100_000
with open(one_event_model(f"{tmp}/model.json")) as f:
    model = json.load(f)
# Ids far from the daemon's own (it numbers the models it loads itself).
con.executemany("INSERT INTO models (id, sha256, name, engine, json, first_loaded, last_loaded)"
                " VALUES (?, ?, 'big', 'ridge', ?, ?, ?)",
                [(1_000_000 + k, f"{k:064x}",
                  json.dumps(dict(model, name=f"m{k:02d}" + "x" * NAME)), now, now + k)
                 for k in range(MODELS)])
con.commit()
con.close()

with open(f"{tmp}/d.conf", "w") as f:
    # Tracking nothing: a daemon tracking a busy machine's every process can
    # hold so many counter fds that SQLite's temporary files fail (EMFILE).
    f.write("[daemon]\nquery_time_limit = 1m\n[track]\ncomm = ^none-such$\n")
d = Daemon("--rate", "10", "--config", f"{tmp}/d.conf", state=f"{tmp}/d")
with cleaned_up(d):
    since = now - HOST_S
    samples, sizes = pages(d.sock, "GetHistory", {"host": True, "since": since, "step_s": 1},
                           "samples", "next_since")
    print(f"# GetHistory pages (samples, bytes): {sizes}")
    check("every GetHistory reply is within 4 MiB, and there are pages",
          all(b <= CAP for _, b, _ in sizes) and len(sizes) > 1, str(sizes))
    ts = [s["t"] for s in samples]
    check("the pages hold every second once",
          len(ts) == len(set(ts)) and set(range(since, now)) <= set(ts),
          f"{len(ts)} samples, {len(set(ts))} distinct, {HOST_S} wanted")
    got = cli("history", "--host", "--since", f"@{since}", "--step", "1s")
    ts = [s["t"] for s in got["samples"]] if isinstance(got, dict) else got
    check("wattprof history shows every second once",
          isinstance(ts, list) and len(ts) == len(set(ts)) and set(range(since, now)) <= set(ts),
          str(ts)[:300] if not isinstance(ts, list) else f"{len(ts)} samples")

    jobs, sizes = pages(d.sock, "ListJobs", {}, "jobs", "next_before")
    print(f"# ListJobs pages (jobs, bytes): {sizes}")
    check("every ListJobs reply is within 4 MiB, and there are pages",
          all(b <= CAP for _, b, _ in sizes) and len(sizes) > 1, str(sizes))
    want = sorted(f"job-{i:06d}-" + "x" * 4989 for i in range(JOBS))
    check("the pages hold every job once", sorted(j["job"] for j in jobs) == want,
          f"{len(jobs)} of {JOBS}")
    got = cli("jobs")
    names = [j["job"] for j in got["jobs"]] if isinstance(got, dict) else got
    check("wattprof jobs lists every job once", isinstance(names, list) and sorted(names) == want,
          str(names)[:300] if not isinstance(names, list) else f"{len(names)} of {JOBS}")

    # Jobs that start between two pages: five newer than every listed one,
    # and one older. The second page resumes after the first page's last
    # job, so no job of the first page comes again (with offsets, the five
    # pushed five of them onto the second page) and the older one is there.
    first, _ = raw_call(d.sock, "ListJobs", {})
    con = connect(d.db, ro=False, timeout=30)
    with con:
        insert_processes(con, [(30_000_000 + i, 300_000 + i, "j", now - 10, now - 5, now - 5,
                                f"new-{i}") for i in range(5)] +
                         [(30_000_005, 300_005, "j", now - 3 * HOST_S, now - 3 * HOST_S + 60,
                           now - 3 * HOST_S + 60, "old-0")])
        insert_minute_rows(con, "p.id >= 30000000")
    con.close()
    rest, sizes = pages(d.sock, "ListJobs", {"before": first["next_before"]}, "jobs",
                        "next_before")
    names = [j["job"] for j in first["jobs"] + rest]
    check("jobs started between two pages: every job once, the older new one, none newer",
          sorted(names) == sorted(want + ["old-0"]),
          f"{len(first['jobs'])} + {[n for n, _, _ in sizes]}: {len(names)} jobs, "
          f"{len(set(names))} distinct, new: {[n for n in names if n[:3] in ('new', 'old')]}")

    try:
        got = str(raw_call(d.sock, "ListModels", {}))[:200]
    except VarlinkError as e:
        got = (e.name, e.parameters)
    check(f"ListModels of {MODELS} models of 100 KB: ReplyTooLarge, no parameter to reduce",
          got[0] == M + "ReplyTooLarge" and got[1].get("parameter") is None and
          got[1].get("limit_bytes") == CAP and
          "models on record take more than" in got[1]["reason"],
          str(got))
    p = subprocess.run([WATTPROF, "models", "--socket", d.sock], capture_output=True, text=True,
                       timeout=60)
    check("wattprof models exits 1 saying the answer would pass 4194304 bytes",
          p.returncode == 1 and "ListModels would pass its 4194304 bytes per reply" in p.stderr,
          f"{p.returncode}: {p.stderr}")
    con = connect(d.db, ro=False, timeout=30)
    with con:
        con.execute("DELETE FROM models WHERE name = 'big' AND sha256 >= ?", (f"{30:064x}",))
    con.close()
    r, size = raw_call(d.sock, "ListModels", {})
    names = sorted(m["name"][:3] for m in r["models"] if len(m["name"]) > NAME)
    check(f"... with 30 of them left ({size} bytes), ListModels answers them all",
          names == [f"m{k:02d}" for k in range(30)] and size <= CAP, f"{names} {size}")

    # A job whose id alone is past a reply (only a database written behind
    # the daemon's back has one: it keeps 63 bytes of an id).
    giant = "g" * CAP
    con = connect(d.db, ro=False, timeout=30)
    with con:
        insert_processes(con, [(30_000_010, 300_010, "j", now - 4 * HOST_S, now - 4 * HOST_S + 60,
                                now - 4 * HOST_S + 60, giant)])
    con.close()
    try:  # the page after old-0, the oldest but for it (a request stays within 64 KiB)
        got = str(raw_call(d.sock, "ListJobs", {"before": {"start": now - 3 * HOST_S,
                                                           "job": "old-0"}}))[:200]
    except VarlinkError as e:
        got = (e.name, e.parameters)
    check("ListJobs of a job whose id is 4 MiB: ReplyTooLarge, not an empty page to follow",
          got[0] == M + "ReplyTooLarge" and "a job's JSON alone" in got[1].get("reason", ""),
          str(got)[:300])
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

T = 50_000
write_replay(f"{tmp}/long.trace", [(4242 + i, "long", "long") for i in range(3)], ticks=T,
             dt=1_000_000_000)  # pid 4242 runs a third of the time: 17 digits a number
d = Daemon("--model", one_event_model(f"{tmp}/model.json"), "--replay", f"{tmp}/long.trace",
           "--speed", "max", state=f"{tmp}/long")
with cleaned_up(d):
    for _ in range(1200):
        if "finished" in d.read_log():
            break
        time.sleep(0.05)
    try:
        got = str(d.call(M + "GetProcess", {"pid": 4242, "series_s": 1e6}))[:200]
    except VarlinkError as e:
        got = (e.name, e.parameters)
    check("GetProcess of 50,000 seconds of series: ReplyTooLarge naming series_s",
          got[0] == M + "ReplyTooLarge" and got[1].get("parameter") == "series_s" and
          got[1].get("limit_bytes") == CAP, str(got))
    p = subprocess.run([WATTPROF, "show", "4242", "--series", "1000000s", "--socket", d.sock],
                       capture_output=True, text=True, timeout=60)
    check("wattprof show --series 1000000s exits 1 naming series_s",
          p.returncode == 1 and "4194304 bytes per reply" in p.stderr and "series_s" in p.stderr,
          f"{p.returncode}: {p.stderr}")
    got = d.call(M + "GetProcess", {"pid": 4242, "series_s": 100})
    check("... and the last 100 seconds are answered", len(got["series"]) == 100,
          str(len(got["series"])))
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])

write_replay(f"{tmp}/many.trace", [(10000 + i, f"proc{i}", "x") for i in range(14_000)],
             ticks=25)
# A twentieth of the recording's pace: 10 s of live processes to subscribe to.
d = Daemon("--model", one_event_model(f"{tmp}/model.json"), "--replay", f"{tmp}/many.trace",
           "--speed", "0.05", state=f"{tmp}/many")
with cleaned_up(d, tmp):
    for _ in range(200):
        if d.call(M + "GetStatus")["status"]["tracked"] >= 14_000:
            break
        time.sleep(0.05)
    with Connection(d.sock, timeout=60) as c:
        try:
            got = [(len(r["processes"]), more) for r, more in
                   c.stream(M + "Subscribe", {"limit": 0})][:3]
        except VarlinkError as e:
            got = (e.name, e.parameters)
    check("Subscribe of all 14,000 processes: ReplyTooLarge naming limit",
          got[0] == M + "ReplyTooLarge" and got[1].get("parameter") == "limit", str(got))
    with Connection(d.sock, timeout=60) as c:
        r, more = next(c.stream(M + "Subscribe", {"limit": 100}))
    check("... and the top 100 stream", len(r["processes"]) == 100 and more,
          f'{len(r["processes"])} {more}')
    check("SIGTERM exits 0", d.stop() == 0, d.read_log()[-300:])
finish()
