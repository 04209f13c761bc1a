#!/usr/bin/env bash
# kvgate against nginx in alternating rounds, for a shared or busy machine:
# the same setup as proxybench.sh (wrk, 4 zero-cost simulated engines in
# kvgate, nginx round-robin to 4 trivial upstreams), but kvgate and nginx
# take turns, round after round, and each round's ratio is printed, then
# the median and the spread. With PROFILE=file, a 5-second CPU profile of
# kvgate is taken (admin listener, /debug/pprof) in its first round. Each
# round also prints kvgate's CPU time per request (/proc/PID/stat over the
# run), which a busy machine disturbs far less than requests/s.
# Usage: perf/scripts/proxyratio.sh [rounds] [seconds] [connections] [tokens]
# Needs wrk and nginx (apt-get install wrk nginx-light). KVGATE_BIN uses a
# kvgate built elsewhere (an older commit, for before and after);
# KVGATE_BASE starts a second kvgate (the "before" build) that takes its
# turn in every round too, so before, after and nginx share each round's
# load: its ratio and CPU per request are printed beside kvgate's.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
secs=${2:-5}
conns=${3:-32}
tokens=${4:-1}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=${KVGATE_BIN:-}
. perf/scripts/proxysetup.sh

basepid=
if [ -n "${KVGATE_BASE:-}" ]; then
  "$KVGATE_BASE" --sim-engines 4 --sim-profile zero --listen 127.0.0.1:18090 --admin-listen 127.0.0.1:19095 \
    --log-level warn 2>"$work/base.log" &
  basepid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:18090/ready >/dev/null && break; sleep 0.1; done
fi

# cputicks [PID]: a kvgate's user plus system CPU time so far, in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/${1:-$kvpid}/stat"; }

# cpuper TICKS REQUESTS: microseconds of CPU per request.
cpuper() { awk -v t="$1" -v n="$2" -v hz="$tck" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}'; }
tck=$(getconf CLK_TCK)

# run PORT: prints "requests/s p99_ms requests" of one wrk run.
run() {
  wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/post.lua" "http://127.0.0.1:$1/v1/completions" >"$work/wrk.out"
  grep -q 'Non-2xx' "$work/wrk.out" && { echo "non-2xx answers on port $1" >&2; cat "$work/wrk.out" >&2; exit 1; }
  rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$work/wrk.out")
  reqs=$(awk '/requests in/ {print $1}' "$work/wrk.out")
  echo "$rps $p99 $reqs"
}

wrk -t2 -c"$conns" -d1s -s "$work/post.lua" http://127.0.0.1:18080/v1/completions >/dev/null # warm both
wrk -t2 -c"$conns" -d1s -s "$work/post.lua" http://127.0.0.1:18180/v1/completions >/dev/null
[ -z "$basepid" ] || wrk -t2 -c"$conns" -d1s -s "$work/post.lua" http://127.0.0.1:18090/v1/completions >/dev/null
echo "== $rounds rounds of ${secs}s, $conns connections, max_tokens $tokens: ${basepid:+base kvgate, }kvgate then nginx each round"
printf '%-6s %12s %10s %12s %10s %8s %10s %14s' round kvgate_rps k_p99_ms nginx_rps n_p99_ms ratio p99_diff k_cpu_us/req
[ -z "$basepid" ] && echo || printf ' %10s %10s %8s %14s\n' base_rps b_p99_ms b_ratio b_cpu_us/req
ratios=()
cpus=()
bratios=()
bcpus=()
for r in $(seq "$rounds"); do
  if [ -n "$basepid" ]; then
    t0=$(cputicks "$basepid")
    read -r brps bp99 breqs < <(run 18090)
    bcpu=$(cpuper "$(( $(cputicks "$basepid") - t0 ))" "$breqs")
    bcpus+=("$bcpu")
  fi
  prof= # started after the base kvgate's turn, so it covers kvgate's
  if [ "$r" = 1 ] && [ -n "${PROFILE:-}" ]; then
    curl -s "http://127.0.0.1:19090/debug/pprof/profile?seconds=$((secs > 6 ? 5 : secs - 1))" -o "$PROFILE" &
    prof=$!
  fi
  t0=$(cputicks)
  read -r krps kp99 kreqs < <(run 18080)
  cpu=$(cpuper "$(( $(cputicks) - t0 ))" "$kreqs")
  cpus+=("$cpu")
  [ -z "$prof" ] || wait "$prof"
  read -r nrps np99 _ < <(run 18180)
  ratio=$(awk -v a="$krps" -v b="$nrps" 'BEGIN {printf "%.3f", a/b}')
  ratios+=("$ratio")
  printf '%-6s %12s %10s %12s %10s %8s %10s %14s' "$r" "$krps" "$kp99" "$nrps" "$np99" "$ratio" \
    "$(awk -v a="$kp99" -v b="$np99" 'BEGIN {printf "%+.2f", a-b}')" "$cpu"
  if [ -n "$basepid" ]; then
    bratio=$(awk -v a="$brps" -v b="$nrps" 'BEGIN {printf "%.3f", a/b}')
    bratios+=("$bratio")
    printf ' %10s %10s %8s %14s\n' "$brps" "$bp99" "$bratio" "$bcpu"
  else
    echo
  fi
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END {printf "ratio kvgate/nginx: median %.3f, min %.3f, max %.3f over %d rounds\n", v[int((NR+1)/2)], v[1], v[NR], NR}'
printf '%s\n' "${cpus[@]}" | sort -n | awk '{v[NR]=$1} END {printf "kvgate CPU per request (all its threads, engines included): median %.1f us, min %.1f, max %.1f\n", v[int((NR+1)/2)], v[1], v[NR]}'
if [ -n "$basepid" ]; then
  printf '%s\n' "${bratios[@]}" | sort -n | awk '{v[NR]=$1} END {printf "base ratio kvgate/nginx: median %.3f, min %.3f, max %.3f over %d rounds\n", v[int((NR+1)/2)], v[1], v[NR], NR}'
  printf '%s\n' "${bcpus[@]}" | sort -n | awk '{v[NR]=$1} END {printf "base CPU per request: median %.1f us, min %.1f, max %.1f\n", v[int((NR+1)/2)], v[1], v[NR]}'
fi
