#!/usr/bin/python3
"""The exporter's encoding and labels, against a replaying wattprofd.

  * A scraper that sends Accept-Encoding: gzip (Prometheus does) gets the
    exposition gzip-compressed, with Content-Encoding: gzip, and it
    decompresses to the same series as the plain one; "gzip;q=0", "identity"
    or no header get plain text. Both carry Vary: Accept-Encoding.
  * The RAPL zone metric names a domain the way the host metric and the model
    do ("package", not the sysfs name "package-0"); the zone label keeps
    which zone it is.
"""
import gzip, json, os, re, sys, tempfile, urllib.request

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
from daemon_harness import Daemon, check, cleaned_up, finish  # noqa: E402

TICK_NS, TICKS = 20_000_000, 100
ZONES = [{"id": "intel-rapl:0", "name": "package-0"}, {"id": "intel-rapl:0:0", "name": "dram"},
         {"id": "intel-rapl:1", "name": "package-1"}]


def write_trace(path, uid):
    with open(path, "w") as f:
        def put(o):
            f.write(json.dumps(o) + "\n")
        put({"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"], "zones": ZONES,
             "rate_hz": 50, "boot_id": "00000000-0000-0000-0000-000000000042"})
        put({"proc": {"pid": 4001, "ppid": 1, "start": 100, "uid": uid, "comm": "solver",
                      "cmdline": "solver", "cgroup": "/user.slice"}})
        for k in range(TICKS):
            put({"tick": {"t": 10**12 + (k + 1) * TICK_NS, "dt": TICK_NS,
                          "energy_j": [1.0, 0.2, 0.9],
                          "procs": [{"pid": 4001, "start": 100, "d": [0.5 * TICK_NS],
                                     "r": [1.0]}]}})


def scrape(url, accept=None):
    req = urllib.request.Request(url)
    if accept is not None:
        req.add_header("Accept-Encoding", accept)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read(), r.headers


def series(text):
    """The series names with their labels, without the values."""
    return {ln.rpartition(" ")[0] for ln in text.splitlines() if ln and not ln.startswith("#")}


def main():
    tmp = tempfile.mkdtemp(prefix="wattprof-enc-")
    model = {"format": "wattprof-model/1", "name": "enc-test", "engine": "ridge",
             "target": ["package"], "events": ["perf::TASK-CLOCK"],
             "scaler": {"min": [0], "max": [1e9]},
             "classes": {"models": [{"name": "all", "intercept": 10.0, "coef": [40.0]}]},
             "idle_power_w": 20.0}
    with open(f"{tmp}/model.json", "w") as f:
        json.dump(model, f)
    with open(f"{tmp}/d.conf", "w") as f:
        f.write("[exporter]\nlisten = 127.0.0.1:0\n")
    write_trace(f"{tmp}/t.trace", os.getuid())
    d = Daemon("--config", f"{tmp}/d.conf", "--model", f"{tmp}/model.json", "--replay",
               f"{tmp}/t.trace", "--speed", "max", state=f"{tmp}/state")
    with cleaned_up(d, tmp):
        check("the replay finished", d.wait_log("finished", timeout=30), d.read_log()[-300:])
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics)", d.read_log())
        if not m:
            check("the exporter serves", False, d.read_log()[-300:])
            return
        url = m.group(1)

        plain, h = scrape(url)
        text = plain.decode()
        check("no Accept-Encoding: plain text", h.get("Content-Encoding") is None
              and text.startswith("# HELP"), repr(plain[:20]))
        check("Vary: Accept-Encoding", h.get("Vary") == "Accept-Encoding", str(h.get("Vary")))
        body, h = scrape(url, "gzip")
        check("Accept-Encoding: gzip: Content-Encoding: gzip and a gzip body",
              h.get("Content-Encoding") == "gzip" and body[:2] == b"\x1f\x8b",
              f"{h.get('Content-Encoding')} {body[:4]!r}")
        try:
            unzipped = gzip.decompress(body).decode()
        except (OSError, EOFError) as e:
            unzipped = ""
            check("the gzip body decompresses", False, str(e))
        check("it holds the same series as the plain text", series(unzipped) == series(text),
              str(series(unzipped) ^ series(text))[:300])
        check(f"and is smaller ({len(body)} < {len(plain)} bytes)", len(body) < len(plain))
        for accept, want in [("deflate, gzip;q=0.5", "gzip"), ("GZIP", "gzip"), ("*", "gzip"),
                             ("gzip;q=0", None), ("identity", None), ("deflate", None),
                             ("x-gzip2", None)]:
            _, h = scrape(url, accept)
            check(f"Accept-Encoding: {accept}: {want or 'plain'}",
                  h.get("Content-Encoding") == want, str(h.get("Content-Encoding")))

        zones = re.findall(r'^wattprof_zone_energy_joules_total\{zone="([^"]*)",domain="([^"]*)"\}',
                           text, re.M)
        check("the zone metric's domains are the domain names, the zone label says which",
              sorted(zones) == [("intel-rapl:0", "package"), ("intel-rapl:0:0", "dram"),
                                ("intel-rapl:1", "package")], str(zones))
        host = set(re.findall(r'^wattprof_host_energy_joules_total\{domain="([^"]*)"', text, re.M))
        check("the host metric uses the same name for the package domain", host == {"package"},
              str(host))
    finish()


if __name__ == "__main__":
    main()
