#!/usr/bin/python3
"""Stalled scrapers do not block sampling.

A live wattprofd tracks 300 sleeping processes with 300 different names, so
one exposition is large (over 100 KB). Twenty scrapers connect with a tiny
receive buffer, send a request and never read: each is stuck mid-response.
Over the same length of time with and without them (alternated, baseline
first), the test compares the sampler's ticks and its lateness histogram
(from the exporter itself): the stalled window must tick as often and be no
later than the quiet one, allowing for this shared machine's noise. Normal
scrapes keep being answered meanwhile, and after the connection timeout
the daemon has dropped the stalled connections (each got less than one
response, then end of file). With 300 processes' counters open, the
scrapers' sockets are above FD_SETSIZE, which select() cannot wait on."""
import atexit, fcntl, os, re, socket, struct, subprocess, sys, tempfile, termios, time, urllib.request

sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import daemon_harness  # noqa: E402
from daemon_harness import Daemon, check, finish  # noqa: E402

N_PROCS, N_STALLED, WINDOW_S, RATE = 300, 20, 5.0, 50
LATE_S = 0.02  # a tick later than a whole period
tmp = tempfile.mkdtemp(prefix="wattprof-stall-")
sleepers = []
atexit.register(lambda: [p.kill() for p in sleepers])
for i in range(N_PROCS):
    link = os.path.join(tmp, f"wpxs{i:03d}")
    os.symlink("/bin/sleep", link)
    sleepers.append(subprocess.Popen([link, "120"]))
with open(f"{tmp}/d.conf", "w") as f:
    f.write("[track]\ncomm = ^wpxs[0-9]+$\n[exporter]\nlisten = 127.0.0.1:0\n")
d = Daemon("--config", f"{tmp}/d.conf", "--rate", str(RATE), state=f"{tmp}/state")
host = port = None
for _ in range(100):
    m = re.search(r"serving http://(127\.0\.0\.1):(\d+)/metrics", d.read_log())
    if m:
        host, port = m.group(1), int(m.group(2))
        break
    time.sleep(0.05)
url = f"http://{host}:{port}/metrics"


def scrape():
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def sample(text, name):
    for line in text.splitlines():
        head, _, v = line.rpartition(" ")
        if head == name:
            return float(v)
    raise KeyError(name)


def state(text):
    """Ticks, and ticks later than LATE_S, so far."""
    ticks = sample(text, "wattprof_sampling_lateness_seconds_count")
    on_time = sample(text, f'wattprof_sampling_lateness_seconds_bucket{{le="{LATE_S:g}"}}')
    return ticks, ticks - on_time


def window(stalled):
    """Ticks and late ticks over WINDOW_S, with or without stalled scrapers;
    also how many normal scrapes succeeded meanwhile."""
    socks, ok = [], 0
    for _ in range(stalled):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: wattprof\r\n\r\n")
        socks.append(s)
    a = state(scrape())
    t_end = time.monotonic() + WINDOW_S
    while time.monotonic() < t_end:
        scrape()
        ok += 1
        time.sleep(0.25)
    b = state(scrape())
    return (b[0] - a[0], b[1] - a[1], ok), socks


for _ in range(200):  # wait for every sleeper to be tracked
    try:
        text = scrape()
        if sample(text, "wattprof_tracked_processes") >= N_PROCS:
            break
    except (OSError, KeyError):
        pass
    time.sleep(0.1)
size = len(scrape().encode())
check(f"all {N_PROCS} sleepers are tracked; one scrape is {size / 1e3:.0f} KB",
      sample(text, "wattprof_tracked_processes") >= N_PROCS and size > 100_000)

load = os.getloadavg()[0]
quiet, _ = window(0)
busy, socks = window(N_STALLED)
quiet2, _ = window(0)
print(f"# load {load:.1f}; ticks, late ticks, scrapes: quiet {quiet}, stalled {busy}, "
      f"quiet again {quiet2}")
waiting = []
for s in socks:
    waiting.append(struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0])
check(f"the {N_STALLED} stalled scrapers are mid-response (at most {max(waiting)} bytes "
      f"of {size} arrived)", max(waiting) < size)
expected = WINDOW_S * RATE
check("the sampler ticked on while scrapers stalled",
      busy[0] >= 0.9 * min(quiet[0], quiet2[0]) and busy[0] >= 0.8 * expected, f"{busy[0]} ticks")
worst_quiet = max(quiet[1] / quiet[0], quiet2[1] / quiet2[0])
check(f"no later while stalled: {busy[1]:.0f} of {busy[0]:.0f} ticks later than "
      f"{LATE_S * 1e3:.0f} ms (quiet: {worst_quiet:.1%})",
      busy[1] / busy[0] <= worst_quiet + 0.02)
check("normal scrapes were answered while the others stalled", busy[2] >= 0.8 * quiet[2],
      f"{busy[2]} vs {quiet[2]}")

# The daemon drops a stalled connection after its timeout (10 s of no
# progress): reading now yields what was sent, then end of file.
time.sleep(11)
closed = 0
for s in socks:
    s.settimeout(10)
    got = 0
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                closed += 1
                break
            got += len(chunk)
    except OSError:
        closed += 1  # reset: also dropped
    s.close()
check(f"the daemon dropped all {N_STALLED} stalled connections", closed == N_STALLED,
      f"{closed} closed")
check("SIGTERM exits 0", d.stop() == 0)
for p in sleepers:
    p.kill()
    p.wait()
sleepers.clear()
if not daemon_harness.failures:
    subprocess.run(["rm", "-rf", tmp])
finish()
