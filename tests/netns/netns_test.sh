#!/usr/bin/env bash
# Multi-host tests on one machine: H network namespaces ("hosts") joined by
# veth pairs to a bridge that lives in its own namespace, addresses from
# 10.77.0.0/24 (or fd77::/64 with --ipv6) only inside those namespaces. Ranks of
# one host share memory (shm); ranks of different hosts can only reach each
# other over TCP. Nothing is configured in the namespace this script runs in.
#
#   netns_test.sh MODE HOSTS RANKS_PER_HOST EXE [--ipv6] [--algos a,b] [--shape RATE[:DELAY]]
#                 [--cyclic] [--expect TEXT] [--device-pairs] [-- ARGS]
#
#   --cyclic  rank r runs on host r % HOSTS (round robin, as srun --distribution=cyclic
#             places them) instead of host r / RANKS_PER_HOST
#   --expect TEXT  check: every rank's log must say "rank R: TEXT" (R its rank); the
#             job makes communicators of its own beside the first, so their links
#             are logged too and the links are counted as at least, not exactly
#   --device-pairs  check: every rank routed its point-to-point on device memory
#             over cuda_p2p with each rank of its host and staged with every other
#             (the job must meet every pair, as all-to-all-v does)
#   --shape 2gbit[:200us]  every host's eth0 sends at most RATE (tc tbf), and with
#             DELAY every packet between hosts arrives DELAY after it left, so that
#             the network, not the CPU, is the slow link. The delay is a process,
#             weft-delay-line (tests/netns/delay_line.cpp; $WEFT_DELAY_LINE, else
#             the build directory's), in place of the bridge: each host's eth0 is
#             one of its tun devices (this kernel has no tc netem). An empty RATE
#             (--shape :1ms) delays without shaping
#
#   check     every rank runs EXE ARGS (weft-check-allreduce) and must report
#             0 wrong elements; the logs must show shm within and tcp between hosts
#   kill      every rank runs EXE ARGS (weft-netns-fault-rank: all-reduces
#             until one fails); SIGKILL the ranks of the last host: every
#             survivor must fail with an error naming a lost rank within the
#             deadline
#   linkdown  the same, but `ip link set eth0 down` inside the last host
#   run       run EXE ARGS on every rank and print rank 0's output
#             (benchmarks: weft-perf -- allreduce -b 64M -e 256M -f 2)
#   iperf     iperf3 from host 1 to host 0 (EXE is iperf3; ARGS go to the client,
#             e.g. -- -t 5 -P 1): the raw TCP throughput of the same path
#
# Exit: 0 pass, 1 fail, 77 skip (not root, or no `ip netns`). Namespaces,
# processes and /dev/shm segments are removed on every exit path.
set -u
mode=${1:?mode} hosts=${2:?hosts} per=${3:?ranks per host} exe=${4:?check exe}
shift 4
ipv6=0 algos="" shape="" cyclic=0 expect="" device_pairs=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --ipv6) ipv6=1 ;;
    --algos) algos=${2//,/ }; shift ;;
    --shape) shape=$2; shift ;;
    --cyclic) cyclic=1 ;;
    --expect) expect=$2; shift ;;
    --device-pairs) device_pairs=1 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done

if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: 'ip netns' is not available"; exit 77
fi

nranks=$((hosts * per))
timeout_ms=${WEFT_TIMEOUT_MS:-15000}
rate=${shape%%:*} delay=""
[ "${shape#*:}" = "$shape" ] || delay=${shape#*:}
delay_us=""
if [ -n "$delay" ]; then
  case $delay in
    *us) delay_us=${delay%us} ;;
    *ms) delay_us=$((${delay%ms} * 1000)) ;;
  esac
  [[ "$delay_us" =~ ^[0-9]+$ ]] || { echo "FAIL: --shape $shape: the delay must be whole us or ms (200us, 2ms)"; exit 2; }
  b=${BUILD_DIR:-build}
  [[ $b = /* ]] || b="$(cd "$(dirname "$0")/../.." && pwd)/$b"
  delay_line=${WEFT_DELAY_LINE:-$b/tests/netns/weft-delay-line}
  [ -x "$delay_line" ] || { echo "FAIL: no delay line at $delay_line (build it, or set WEFT_DELAY_LINE)"; exit 1; }
fi
tag="wn$$"              # namespace names: wn<pid>-br, wn<pid>-h0, ...
br="$tag-br"
work=$(mktemp -d)
secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
pids=()
made=()
line_pid=""

cleanup() {
  local p ns
  for p in "${pids[@]}" $line_pid; do kill -9 "$p" 2>/dev/null; done
  for ns in "${made[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  for ns in "${made[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -f /dev/shm/weft-"${secret:0:16}"-* 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

addr() {  # address of host $1
  if [ $ipv6 = 1 ]; then echo "fd77::$(($1 + 1))"; else echo "10.77.0.$(($1 + 1))"; fi
}

# --- the network -----------------------------------------------------------
ip netns add "$br" || { echo "FAIL: cannot create namespace $br"; exit 1; }
made+=("$br")
ip -n "$br" link set lo up
if [ -n "$delay" ]; then
  # Its tun devices are made in the bridge's namespace and moved to the hosts.
  ip netns exec "$br" "$delay_line" --delay-us "$delay_us" --count "$hosts" >"$work/delay-line.log" 2>&1 &
  line_pid=$!
  for _ in $(seq 50); do grep -q ready "$work/delay-line.log" && break; sleep 0.1; done
  grep -q ready "$work/delay-line.log" || { echo "FAIL: the delay line did not start:"; cat "$work/delay-line.log"; exit 1; }
else
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
fi
for ((h = 0; h < hosts; h++)); do
  ns="$tag-h$h"
  ip netns add "$ns" || { echo "FAIL: cannot create namespace $ns"; exit 1; }
  made+=("$ns")
  ip -n "$ns" link set lo up
  if [ -n "$delay" ]; then
    # No link layer, so the largest IP packets: fewer for the delay line to carry.
    ip -n "$br" link set "wd$h" netns "$ns" name eth0 || exit 1
    ip -n "$ns" link set eth0 mtu 65000 txqueuelen 10000
  else
    # Both ends are created inside our namespaces; the caller's sees neither.
    ip -n "$br" link add "v$h" type veth peer name eth0 netns "$ns" || exit 1
    ip -n "$br" link set "v$h" master br0 up
  fi
  if [ $ipv6 = 1 ]; then
    ip -n "$ns" addr add "$(addr $h)/64" dev eth0 nodad
  else
    ip -n "$ns" addr add "$(addr $h)/24" dev eth0
  fi
  ip -n "$ns" link set eth0 up
  if [ -n "$rate" ]; then
    # A token bucket; its queue holds a whole window.
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 128kb latency 100ms ||
      { echo "FAIL: tc on host $h ($shape)"; exit 1; }
  fi
done
# Every host must reach host 0: a refused connection to an unused port proves
# the path (no ping needed).
for ((h = 1; h < hosts; h++)); do
  ok=0
  for _ in $(seq 50); do
    if ip netns exec "$tag-h$h" timeout 1 bash -c "exec 3<>/dev/tcp/$(addr 0)/9" 2>&1 |
        grep -q refused; then ok=1; break; fi
    sleep 0.1
  done
  [ $ok = 1 ] || { echo "FAIL: host $h cannot reach host 0 at $(addr 0)"; exit 1; }
done

# --- ranks -----------------------------------------------------------------
root=$(addr 0)
[ $ipv6 = 1 ] && root="[$root]"
host_of() { if [ $cyclic = 1 ]; then echo $(($1 % hosts)); else echo $(($1 / per)); fi; }
start_ranks() {  # start_ranks ALGO ARGS...: rank r runs in host_of r
  local algo=$1 r h
  shift
  pids=()
  for ((r = 0; r < nranks; r++)); do
    h=$(host_of $r)
    ip netns exec "$tag-h$h" env WEFT_RANK=$r WEFT_NRANKS=$nranks \
      WEFT_LOCAL_RANK=$([ $cyclic = 1 ] && echo $((r / hosts)) || echo $((r % per))) \
      WEFT_COMM_ID="$root:29500" WEFT_JOB_SECRET="$secret" WEFT_SOCKET_IFNAME=eth0 \
      WEFT_TIMEOUT_MS="$timeout_ms" WEFT_TCP_DEAD_MS="${WEFT_TCP_DEAD_MS:-5000}" \
      WEFT_DEBUG="${WEFT_DEBUG:-INFO}" WEFT_DEBUG_SUBSYS="${WEFT_DEBUG_SUBSYS:-TRANSPORT}" \
      ${algo:+WEFT_ALGO=$algo} "$@" >"$work/rank$r.log" 2>&1 &
    pids+=($!)
  done
}

fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# Waits for pids[$1..$2) to exit, up to $3 seconds; rcs[r] gets each status.
declare -A rcs
wait_ranks() {
  local from=$1 to=$2 limit=$3 r t0=$SECONDS
  for ((r = from; r < to; r++)); do
    while kill -0 "${pids[$r]}" 2>/dev/null && ((SECONDS - t0 < limit)); do sleep 0.1; done
    if kill -0 "${pids[$r]}" 2>/dev/null; then rcs[$r]=timeout; else { wait "${pids[$r]}"; } 2>/dev/null; rcs[$r]=$?; fi
  done
}

if [ "$mode" = iperf ]; then
  ip netns exec "$tag-h0" "$exe" -s -1 -B "$(addr 0)" >"$work/iperf-server.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  ip netns exec "$tag-h1" "$exe" -c "$(addr 0)" "${extra[@]}" 2>&1 | grep -E "sender|receiver" ||
    say_fail "iperf3 client failed"
elif [ "$mode" = run ]; then
  start_ranks "" "$exe" "${extra[@]}"
  wait_ranks 0 $nranks 600
  grep -v " WEFT " "$work/rank0.log"
  if [ -n "$shape" ]; then  # what the shaping did: drops and delays explain slow runs
    for ((h = 0; h < hosts; h++)); do
      echo "# host $h eth0 qdisc: $(ip netns exec "$tag-h$h" tc -s qdisc show dev eth0 | grep -m1 -o 'Sent.*')"
    done
  fi
  for ((r = 0; r < nranks; r++)); do
    [ "${rcs[$r]}" = 0 ] || { say_fail "rank $r exit status ${rcs[$r]}"; tail -n 5 "$work/rank$r.log"; }
  done
elif [ "$mode" = check ]; then
  args=("${extra[@]}")
  for algo in ${algos:-default}; do
    [ "$algo" = default ] && algo=""
    start_ranks "$algo" "$exe" "${args[@]}"
    wait_ranks 0 $nranks 600
    for ((r = 0; r < nranks; r++)); do
      log="$work/rank$r.log"
      [ "${rcs[$r]}" = 0 ] || say_fail "rank $r (algo ${algo:-default}) exit status ${rcs[$r]}"
      grep -q " 0 wrong elements, 0 failed calls" "$log" || say_fail "rank $r did not report a clean check"
      # Same-host peers over shared memory, other hosts over TCP.
      nshm=$(grep -c "rank $r -> rank [0-9]* via shm" "$log")
      ntcp=$(grep -c "rank $r -> rank [0-9]* via tcp to" "$log")
      if [ -z "$expect" ]; then
        [ "$nshm" = $((per - 1)) ] || say_fail "rank $r has $nshm shm links, expected $((per - 1))"
        [ "$ntcp" = $((nranks - per)) ] || say_fail "rank $r has $ntcp tcp links, expected $((nranks - per))"
      else
        [ "$nshm" -ge $((per - 1)) ] || say_fail "rank $r has $nshm shm links, expected at least $((per - 1))"
        [ "$ntcp" -ge $((nranks - per)) ] || say_fail "rank $r has $ntcp tcp links, expected at least $((nranks - per))"
        grep -qF "rank $r: $expect" "$log" || say_fail "rank $r did not log 'rank $r: $expect'"
      fi
      if [ "$device_pairs" = 1 ]; then
        # Unique lines: the job's split communicators route pairs again.
        routes=$(grep "rank $r: point-to-point on device memory with rank" "$log" | sed 's/.*WEFT INFO //' | sort -u)
        nmapped=$(grep -c "over cuda_p2p$" <<<"$routes")
        nstaged=$(grep -c "staged through pinned host memory: it is on another host$" <<<"$routes")
        [ "$nmapped" = $((per - 1)) ] || say_fail "rank $r routed $nmapped pairs over cuda_p2p, expected $((per - 1))"
        [ "$nstaged" = $((nranks - per)) ] || say_fail "rank $r staged $nstaged pairs across hosts, expected $((nranks - per))"
      fi
      # ibverbs is asked first between hosts and, with no RDMA device here, declines.
      if [ "$ntcp" != 0 ] && ! grep -q "ibverbs: no ibverbs device.*; TCP carries" "$log"; then
        say_fail "rank $r does not log why ibverbs declined"
      fi
      if [ -n "${WEFT_NSOCKS:-}" ] && [ "$ntcp" != 0 ] &&
          ! grep -q "via tcp to .*(${WEFT_NSOCKS} sockets" "$log"; then
        say_fail "rank $r's tcp links do not use WEFT_NSOCKS=$WEFT_NSOCKS sockets"
      fi
      [ $fail = 0 ] || { echo "--- rank $r log:"; tail -n 20 "$log"; }
    done
    summary=$(grep -h "wrong elements" "$work"/rank*.log | head -1)
    grep -h -m1 "via tcp to" "$work/rank0.log" | sed 's/.*TRANSPORT /  e.g. /'
    grep -h -m1 "via shm" "$work/rank0.log" | sed 's/.*TRANSPORT /  e.g. /'
    echo "algo ${algo:-default}: $hosts hosts x $per ranks: $summary"
  done
else
  victim=$((hosts - 1))
  lost=() survivors=$(((hosts - 1) * per))
  for ((r = survivors; r < nranks; r++)); do lost+=($r); done
  start_ranks "" "$exe" "${extra[@]}"
  for ((r = 0; r < nranks; r++)); do  # past init and into the all-reduces
    for _ in $(seq 300); do grep -q "running" "$work/rank$r.log" && break; sleep 0.1; done
  done
  sleep 0.5
  for ((r = 0; r < nranks; r++)); do
    kill -0 "${pids[$r]}" 2>/dev/null || { say_fail "rank $r died before the fault"; tail -n 20 "$work/rank$r.log"; }
  done
  t0=$SECONDS
  if [ "$mode" = kill ]; then
    for r in "${lost[@]}"; do kill -9 "${pids[$r]}"; done
    what="killed the ranks of host $victim (${lost[*]})"
  else
    ip -n "$tag-h$victim" link set eth0 down
    what="took eth0 of host $victim (ranks ${lost[*]}) down"
  fi
  # Judge the time to each survivor's first error, not to its exit.
  limit=$((timeout_ms / 1000 + 20))
  declare -A err_at
  while ((SECONDS - t0 < limit)); do
    pending=0
    for ((r = 0; r < survivors; r++)); do
      [ -n "${err_at[$r]:-}" ] && continue
      if grep -q "failed: " "$work/rank$r.log"; then err_at[$r]=$((SECONDS - t0)); else pending=1; fi
    done
    [ $pending = 0 ] && break
    sleep 0.1
  done
  took=$((SECONDS - t0))
  wait_ranks 0 $survivors 30
  pattern="rank ($(IFS='|'; echo "${lost[*]}"))([^0-9]|\$)"
  for ((r = 0; r < survivors; r++)); do
    log="$work/rank$r.log"
    err=$(grep -m1 "failed: " "$log" | sed 's/.*failed: //')
    if [ -z "$err" ]; then say_fail "rank $r reported no error within ${limit}s"; tail -n 5 "$log"
    elif ! echo "$err" | grep -Eq "$pattern"; then say_fail "rank $r's error names no lost rank: $err"
    else echo "rank $r after ${err_at[$r]}s: $err"; fi
    if [ "${rcs[$r]}" = timeout ]; then say_fail "rank $r still running 30s after its error"
    elif [ "${rcs[$r]}" = 0 ]; then say_fail "rank $r exited 0"; fi
  done
  [ $took -le $((timeout_ms / 1000 + 5)) ] || say_fail "survivors took ${took}s (deadline $((timeout_ms / 1000))s)"
  echo "$what: $survivors survivors failed within ${took}s"
fi

if [ -n "$line_pid" ]; then  # how closely the delay line kept its delay
  kill -TERM "$line_pid" 2>/dev/null
  wait "$line_pid" 2>/dev/null
  grep "delay line:" "$work/delay-line.log" | sed 's/^/# /'
  line_pid=""
fi

# --- leftovers ---------------------------------------------------------------
for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
left=$(ls /dev/shm 2>/dev/null | grep -c "^weft-${secret:0:16}-" || true)
[ "$left" = 0 ] || say_fail "$left /dev/shm segments left behind"
[ $fail = 0 ] && echo "PASS: $mode, $hosts hosts x $per ranks"
exit $fail
