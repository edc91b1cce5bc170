#!/usr/bin/env bash
# The service's privileges, without systemd as PID 1: wattprofd runs
# as an unprivileged user (nobody here, wattprof on a node) holding only the
# ambient capabilities of wattprofd.service, with no_new_privs, and with /sys
# and /proc/sys read-only as ProtectKernelTunables=yes makes them; a fake RAPL
# tree (root-only energy_uj, as since Linux 5.10) is driven at a known 30 W.
# It must count a root process's CPU time and read the package power. Without
# CAP_DAC_READ_SEARCH it says energy_uj is unreadable; without CAP_PERFMON it
# watches only its own user's processes (in user mode only under
# perf_event_paranoid >= 2); with CAP_BPF it counts with the bpf backend. This is what docs/install.md's reasons
# for each capability rest on.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"

fake=$SRCDIR/tests/helpers/fake-powercap
wattprofd=$BUILDDIR/daemon/wattprofd
nobody=65534

if [ "${1:-}" != --inside ]; then
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to switch to an unprivileged user with capabilities"; exit 77; }
  command -v setpriv >/dev/null || { echo "SKIP: setpriv not found (Debian package util-linux)"; exit 77; }
  setpriv --reuid=$nobody --regid=$nobody --clear-groups --inh-caps=-all,+perfmon \
    --ambient-caps=+perfmon true 2>/dev/null ||
    { echo "SKIP: setpriv cannot grant ambient CAP_PERFMON here (kernel before 5.8?)"; exit 77; }
  exec "$fake" -- "$0" --inside
fi

# ---- Inside a private mount namespace with the fake RAPL tree --------------
work=$(mktemp -d /tmp/wattprof-caps.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
: >"$work/empty.conf"

"$BUILDDIR/tests/energy-writer" --hz 100 --truth "$work/truth" --log "$work/log" intel-rapl:0=30 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/truth" ] && break; sleep 0.05; done
check "the fake package zone is root-only" \
  test "$(stat -c %a /sys/class/powercap/intel-rapl:0/energy_uj)" = 400

# A root process with known CPU time, found by the daemon's /proc rescans.
"$BURN" 60 &
burner=$!
pids+=("$burner")

# hardened NAME CAPS: wattprofd as nobody with CAPS (comma-separated, may be
# empty) in a mount namespace of its own where /sys and /proc/sys are
# read-only, with the unit's LimitMEMLOCK= (or $MEMLOCK bytes); leaves its
# GetStatus and ListProcesses in $work/NAME.json, and for NAME full the
# measured power of one second as "power": {"start_ns", "end_ns", "measured_w"}
# (CLOCK_MONOTONIC; the second between two consecutive Subscribe replies'
# publication times, which the daemon stamps just after that second's last
# tick).
# (Without CAP_SYS_RESOURCE, as in some containers, capped at our hard limit.)
unit_memlock=$(sed -n 's/^LimitMEMLOCK=\([0-9]*\)M$/\1/p' "$SRCDIR/systemd/wattprofd.service.in")
unit_memlock=$((unit_memlock << 20))
hard_memlock=$(ulimit -H -l)
if [ "$hard_memlock" != unlimited ] && [ $((hard_memlock << 10)) -lt $unit_memlock ]; then
  unit_memlock=$((hard_memlock << 10))
fi
hardened() {
  local name=$1 caps=$2 state=$work/$1 pid
  mkdir -p "$state" && chown $nobody "$state"
  local capargs=(--inh-caps=-all --bounding-set=-all)
  if [ -n "$caps" ]; then
    capargs=(--inh-caps="-all,$caps" --ambient-caps="$caps" --bounding-set="-all,$caps")
  fi
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare -m bash -c '
    set -e
    mount --bind /proc/sys /proc/sys
    for m in $(awk '\''$5 ~ "^(/sys|/proc/sys)" || index($5, ENVIRON["ROSYS"]) == 1 { print $5 }'\'' /proc/self/mountinfo | sort -u); do
      mount -o remount,bind,ro "$m"
    done
    if echo 1 2>/dev/null >/sys/class/powercap/intel-rapl/enabled ||
       [ -w /proc/sys/kernel/perf_event_paranoid ] || [ -w "$ROSYS/kernel/mm/transparent_hugepage/enabled" ]; then
      echo "/sys or /proc/sys is still writable"; exit 3
    fi
    exec "$@"' - prlimit --memlock="${MEMLOCK:-$unit_memlock}" setpriv --reuid=$nobody --regid=$nobody --clear-groups --no-new-privs \
    "${capargs[@]}" "$wattprofd" --config "$work/empty.conf" --state-dir "$state" \
    --socket "$state/sock" >"$state/log" 2>&1 &
  pid=$!
  pids+=("$pid")
  "$PYTHON" - "$state/sock" "$pid" "$work/$name.json" "$name" <<'PY'
import json, os, sys, time
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import varlink_peer
sock, pid, out, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        varlink_peer.wait_for_socket(sock, timeout=0.2)
        break
    except OSError:
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            sys.exit("wattprofd exited")
time.sleep(3.5)  # rescans find the burner; a few whole seconds of power
with varlink_peer.Connection(sock) as c:
    st = c.call("io.wattprof.Monitor.GetStatus")["status"]
    ps = c.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})["processes"]
# The power of a second: replies come every 0.1 s with the latest second; two
# in a row that differ are consecutive seconds unless more than 1.5 s apart.  Publication times are CLOCK_REALTIME, turned into CLOCK_MONOTONIC.
power = None
if name == "full":
    with varlink_peer.Connection(sock) as c:
        seen = []
        for reply, more in c.stream("io.wattprof.Monitor.Subscribe", {"interval_s": 0.1, "limit": 1}):
            off = time.time_ns() - time.monotonic_ns()
            t = round(reply["t"] * 1e9) - off
            if not seen or reply["t"] != seen[-1][2]:
                seen.append((t, reply["host"]["measured_w"], reply["t"]))
            # a second the model filled in (a reader stalled) has no
            # measured power: the daemon says so, and it is not compared
            pairs = [(a, b) for a, b in zip(seen, seen[1:])
                     if b[0] - a[0] < 1.5e9 and b[1] is not None]
            if pairs or len(seen) > 8 or not more:
                break
    if pairs:
        a, b = pairs[-1]
        power = {"start_ns": a[0], "end_ns": b[0], "measured_w": b[1]}
    else:
        print(f"    no second with measured power in {seen}")
# The daemon's own credentials: unshare, bash and setpriv all exec in place.
proc = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
            if ":\t" in line)
proc = {k: proc[k].split()[0] if k != "Uid" else proc[k].split()
        for k in ("Name", "Uid", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
json.dump({"status": st, "processes": ps, "proc": proc, "power": power}, open(out, "w"))
PY
  local rc=$?
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  [ $rc = 0 ] || { echo "    $name: no answer:"; sed 's/^/    /' "$state/log"; }
  return $rc
}
export ROSYS=$(dirname "$(readlink -f /sys/class/net)")  # the real /sys, bound under /tmp
ROSYS=${ROSYS%/class}

not() { ! "$@"; }

# q NAME EXPR: a Python expression over s (status) and p (processes) of NAME
q() { "$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1])); s, p, me, pw = d["status"], d["processes"], d["proc"], d["power"]
burner = int(sys.argv[3]); mine = [x for x in p if x["pid"] == burner]
print(eval(sys.argv[2]))' "$work/$1.json" "$2" "$burner"; }

# ---- The service's set: everything works ------------------------------------
if check "as nobody with CAP_PERFMON, CAP_DAC_READ_SEARCH, CAP_NET_ADMIN and read-only /sys" \
  hardened full +perfmon,+dac_read_search,+net_admin; then
  # CAP_DAC_READ_SEARCH = 2, CAP_NET_ADMIN = 12, CAP_PERFMON = 38
  want=$(printf '%016x' $(((1 << 2) | (1 << 12) | (1 << 38))))
  check "the daemon is wattprofd, uid $nobody, effective = bounding = $want, no_new_privs" \
    test "$(q full 'me["Name"], me["Uid"], me["CapEff"], me["CapBnd"], me["NoNewPrivs"]')" = \
    "('wattprofd', ['$nobody', '$nobody', '$nobody', '$nobody'], '$want', '$want', '1')"
  # The truth is what the writer had put in energy_uj over the same second:
  # on a loaded machine it is starved and catches up late, so a second's
  # power can be well off its nominal 30 W (32.9 W seen at load 10-20).
  # Measured against that truth the two agreed within 0.02 % at load 15-17,
  # hence 2 %, not the 5 % that the nominal power needed.
  check "a second of measured power from Subscribe: $(q full 'pw')" test "$(q full 'pw is not None')" = True
  if [ "$(q full 'pw is not None')" = True ]; then
    read -r w s e < <(q full '" ".join(str(pw[k]) for k in ("measured_w", "start_ns", "end_ns"))')
    truth_j=$("$SRCDIR/tests/helpers/energy-truth" "$work/log" "$s" "$e")
    truth_w=$(awk -v j="$truth_j" -v s="$s" -v e="$e" 'BEGIN { printf "%.4f", j / ((e - s) / 1e9) }')
    check "it reads the root-only energy_uj: package power $w W, $truth_w W written in that second (2 %)" \
      within "$w" "$truth_w" 0.02
  fi
  check "no zone reports an error" test "$(q full 'all(z["error"] is None for z in s["zones"])')" = True
  check "it counts a root process: the burner (uid 0) is listed with CPU time" \
    test "$(q full 'bool(mine) and mine[0]["uid"] == 0 and mine[0]["total_j"] > 0')" = True
  echo "    burner: $(q full '{k: mine[0][k] for k in ("pid", "uid", "comm", "total_j")} if mine else None')"
  check "without CAP_BPF auto takes perf, and says why: $(q full 's.get("backend_reason")')" \
    test "$(q full 's.get("backend") == "perf" and s.get("backend_reason", "").startswith("auto: ")')" = True
  # With CAP_NET_ADMIN the listen request is accepted on any kernel, unless
  # this whole machine is outside the initial pid namespace (then nobody can).
  if grep -q "initial user and pid namespaces" "$work/full/log"; then
    skip_note "the proc connector: this machine is not in the initial pid namespace"
  else
    check "it listens to the proc connector" \
      test "$(q full 'any("proc connector" in w for w in s["warnings"])')" = False
  fi
  check "it sees processes of several users" test "$(q full 'len({x["uid"] for x in p}) >= 2')" = True
  check "with RLIMIT_MEMLOCK $((unit_memlock >> 20)) MiB every process has its context-switch buffer" \
    test "$(q full 's["reads_unskippable"]')" = 0
  check "idle processes' reads are skipped: $(q full 's["reads_skipped"]')" \
    test "$(q full '(s["reads_skipped"] or 0) > 0')" = True
fi

# ---- Without locked memory: processes are read every tick, and it says so ----
# nobody's perf_event_mlock_kb budget holds a few hundred threads' buffers.
MEMLOCK=0 hardened no-memlock +perfmon,+dac_read_search,+net_admin
rc=$?
check "with RLIMIT_MEMLOCK 0 it still starts" test $rc = 0
if [ $rc = 0 ]; then
  n=$(q no-memlock 's["reads_unskippable"]')
  if [ "$n" = 0 ]; then
    skip_note "locked memory: perf_event_mlock_kb covered every thread of this host"
  else
    check "GetStatus warns of the $n processes read every tick" \
      test "$(q no-memlock 'any("read every tick" in w for w in s["warnings"])')" = True
    check "the log says it once, with the reason" \
      test "$(grep -c "read every tick: no context-switch buffer (Operation not permitted: locked memory" \
        "$work/no-memlock/log")" = 1
  fi
fi

# ---- With CAP_BPF too (the unit's full set): the bpf counter backend ----------
# The runs above leave it out so that they test the perf backend's needs
# (auto falls back to it); with it, auto, as the unit sets no backend, takes
# bpf, which loads as nobody and counts the root process.
if hardened bpf +perfmon,+bpf,+dac_read_search,+net_admin; then
  if grep -q "wattprofd was built without" "$work/bpf/log"; then
    skip_note "the bpf backend: this build has none (meson -Dbpf)"
  else
    check "as nobody with the unit's set, CAP_BPF included, auto takes bpf: $(q bpf 's.get("backend")')" \
      test "$(q bpf 's.get("backend")')" = bpf
    check "it counts the root process with it" \
      test "$(q bpf 'bool(mine) and mine[0]["uid"] == 0 and mine[0]["total_j"] > 0')" = True
  fi
else
  check "as nobody with the unit's set, CAP_BPF included, the daemon starts" false
  tail -5 "$work/bpf/log"
fi

# ---- Without CAP_DAC_READ_SEARCH: no RAPL, said why --------------------------
if check "without CAP_DAC_READ_SEARCH it still starts" hardened no-dac +perfmon,+net_admin; then
  err=$(q no-dac 's["zones"][0]["error"]')
  check "it says energy_uj is unreadable: $err" grep -q "energy_uj: Permission denied" <<<"$err"
  check "no measured power" test "$(q no-dac 's["host"]["measured_w"]')" = None
  check "it still counts the root process" test "$(q no-dac 'bool(mine)')" = True
fi

# ---- Without CAP_PERFMON ------------------------------------------------------
# It still starts and watches only its own user's processes. perf_event_paranoid
# >= 2 (Debian's default is 3) refuses kernel-mode counts to anyone without
# CAP_PERFMON: then it counts user mode only and says so.
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
if check "without CAP_PERFMON it still starts" hardened no-perfmon +dac_read_search,+net_admin; then
  check "it says it watches only its own user's processes" \
    grep -q "no CAP_PERFMON: watching only this user's processes" "$work/no-perfmon/log"
  check "no other user's process is listed" \
    test "$(q no-perfmon '[x["uid"] for x in p if x["uid"] != 65534]')" = "[]"
  if [ "$paranoid" -ge 2 ]; then
    check "it says it counts user mode only (perf_event_paranoid $paranoid)" \
      test "$(q no-perfmon 'any("user mode only" in w for w in s["warnings"])')" = True
  fi
fi
finish
