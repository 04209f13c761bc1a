#!/usr/bin/env bash
# Requests/s and latency through kvgate (4 zero-cost simulated engines) and,
# side by side, through nginx proxying round-robin to trivial upstreams that
# answer a fixed completion. Needs wrk and nginx (apt-get install wrk
# nginx-light). Ends with kvgate's requests/s as a share of nginx's and the
# p99 difference, against issue 28's goal (at least 0.80, at most +1 ms),
# and each one's CPU time per request (kvgate's threads, its simulated
# engines included; nginx's master and workers, its upstreams included),
# which a busy machine disturbs far less than requests/s.
# Usage: perf/scripts/proxybench.sh [seconds] [connections] [max_tokens]
# KVGATE_BIN uses a kvgate built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-15}
conns=${2:-32}
tokens=${3:-16}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=${KVGATE_BIN:-}
. perf/scripts/proxysetup.sh

# p99ms FILE: wrk's 99th percentile latency in milliseconds.
p99ms() { awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$1"; }
rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }
# ticks PID...: their user plus system CPU time so far, in clock ticks.
ticks() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{t += $1} END {print t}'; }
nginxpids=$(cat "$work/nginx.pid"; pgrep -P "$(cat "$work/nginx.pid")")

echo "== kvgate (tokenize, route by KV, wire protocol to 4 zero-cost sims, $tokens tokens back)"
t0=$(ticks "$kvpid")
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/post.lua" http://127.0.0.1:18080/v1/completions | tee "$work/kvgate.out"
kticks=$(( $(ticks "$kvpid") - t0 ))
echo "== nginx (round-robin proxy to 4 trivial upstreams)"
# shellcheck disable=SC2086 # one pid a word
t0=$(ticks $nginxpids)
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/post.lua" http://127.0.0.1:18180/v1/completions | tee "$work/nginx.out"
# shellcheck disable=SC2086
nticks=$(( $(ticks $nginxpids) - t0 ))
for f in kvgate nginx; do
  grep -q 'Non-2xx' "$work/$f.out" && echo "warning: $f gave non-2xx answers" >&2
done
awk -v k="$(rps "$work/kvgate.out")" -v n="$(rps "$work/nginx.out")" -v kp="$(p99ms "$work/kvgate.out")" -v np="$(p99ms "$work/nginx.out")" \
  -v kc="$kticks" -v kn="$(reqs "$work/kvgate.out")" -v nc="$nticks" -v nn="$(reqs "$work/nginx.out")" -v hz="$(getconf CLK_TCK)" \
  -v load="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
  r = k / n; d = kp - np
  printf "== kvgate/nginx requests/s %.3f (goal >= 0.80: %s), p99 %+.2f ms (goal <= +1 ms: %s), load average %s\n",
    r, (r >= 0.8 ? "met" : "not met"), d, (d <= 1 ? "met" : "not met"), load
  printf "== CPU per request: kvgate %.1f us, nginx %.1f us\n", kc / hz * 1e6 / kn, nc / hz * 1e6 / nn }'
