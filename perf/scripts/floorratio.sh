#!/usr/bin/env bash
# What kvgate's stack itself allows, beside nginx: the floor proxy
# (kvgate-bench floor, perf/floor: gnet in front, one frame over netpoll to
# an in-process upstream and back, a fixed answer, none of kvgate's work)
# in its two modes, kvgate, and nginx (the setup of proxybench.sh) take
# turns round after round. Each prints requests/s, its share of nginx's in
# the round, and CPU per request (nginx's counts its workers and so its
# trivial upstreams; the others' their whole process).
# Usage: perf/scripts/floorratio.sh [rounds] [seconds] [connections] [tokens]
# Needs wrk and nginx. KVGATE_BIN uses a kvgate built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
secs=${2:-5}
conns=${3:-32}
tokens=${4:-1}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=${KVGATE_BIN:-}
. perf/scripts/proxysetup.sh
. perf/scripts/floorsetup.sh
startfloor loop 18280 looppid
startfloor worker 18281 workerpid
nginxpids="$(cat "$work/nginx.pid") $(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')"

# ticks PID...: their user plus system CPU time so far, in clock ticks.
ticks() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{t += $1} END {print t}'; }
# turn PORT PID...: "requests/s CPU_us_per_request" of one wrk run.
turn() {
  local port=$1; shift
  local t0; t0=$(ticks "$@")
  wrk -t2 -c"$conns" -d"${secs}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/completions" >"$work/wrk.out"
  local t=$(( $(ticks "$@") - t0 ))
  grep -q 'Non-2xx' "$work/wrk.out" && { echo "non-2xx answers on port $port" >&2; exit 1; }
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" '/requests in/ {n = $1} /^Requests\/sec/ {r = $2}
    END {printf "%s %.1f\n", r, t / hz * 1e6 / n}' "$work/wrk.out"
}

for port in 18280 18281 18080 18180; do # warm each
  wrk -t2 -c"$conns" -d1s -s "$work/post.lua" "http://127.0.0.1:$port/v1/completions" >/dev/null
done
echo "== $rounds rounds of ${secs}s, $conns connections, kvgate max_tokens $tokens"
printf '%-6s %22s %22s %22s %16s\n' round floor_loop floor_worker kvgate nginx
printf '%-6s %22s %22s %22s %16s\n' "" "rps ratio us/req" "rps ratio us/req" "rps ratio us/req" "rps us/req"
for r in $(seq "$rounds"); do
  read -r lr lc < <(turn 18280 "$looppid")
  read -r wr wc < <(turn 18281 "$workerpid")
  read -r kr kc < <(turn 18080 "$kvpid")
  # shellcheck disable=SC2086 # one pid a word
  read -r nr nc < <(turn 18180 $nginxpids)
  awk -v r="$r" -v lr="$lr" -v lc="$lc" -v wr="$wr" -v wc="$wc" -v kr="$kr" -v kc="$kc" -v nr="$nr" -v nc="$nc" 'BEGIN {
    printf "%-6s %9.0f %5.3f %6.1f %9.0f %5.3f %6.1f %9.0f %5.3f %6.1f %9.0f %6.1f\n",
      r, lr, lr / nr, lc, wr, wr / nr, wc, kr, kr / nr, kc, nr, nc }'
done
