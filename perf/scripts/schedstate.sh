#!/usr/bin/env bash
# How kvgate's goroutines spend their time under proxybench's load, per
# configuration: for each CONFIG, kvgate starts (4 zero-cost simulated
# engines), wrk drives it, and a Go execution trace of its admin listener
# (/debug/pprof/trace) is summarized by `kvgate-bench schedstate`: mean
# goroutines running, in system calls, waiting in an event poller's
# epoll_wait (gnet's loops, netpoll's pollers: each holds a P), and
# runnable; and the share of the time work waited while fewer goroutines
# than CPUs ran; then the Ps each poller held and what waited on them.
# Requests/s are of the traced run (tracing slows it).
# Usage: perf/scripts/schedstate.sh [seconds] [connections] [tokens] [CONFIG...]
# A CONFIG is NAME or NAME:WORDS, WORDS being VAR=value environment
# settings, then kvgate flags, split on spaces; the default is
# "default extra:--extra-procs g3:GOMAXPROCS=3 loops1:--event-loops=1".
# Needs wrk. KVGATE_BIN uses a kvgate built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-1}
conns=${2:-32}
tokens=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(default extra:--extra-procs g3:GOMAXPROCS=3 loops1:--event-loops=1)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=${KVGATE_BIN:-}
if [ -z "$bin" ]; then
  go build -o "$work/" ./cmd/kvgate
  bin="$work/kvgate"
fi
go build -o "$work/" ./cmd/kvgate-bench
. perf/scripts/nginxsetup.sh # $work/post.lua (its nginx idles)
cpus=$(nproc)

for config in "${configs[@]}"; do
  name=${config%%:*}
  words=()
  [ "$name" = "$config" ] || read -ra words <<<"${config#*:}"
  envs=() flags=()
  for w in ${words[@]+"${words[@]}"}; do
    if [ ${#flags[@]} -eq 0 ] && [[ $w == [A-Za-z_]*=* ]]; then envs+=("$w"); else flags+=("$w"); fi
  done
  env ${envs[@]+"${envs[@]}"} "$bin" ${flags[@]+"${flags[@]}"} --sim-engines 4 --sim-profile zero \
    --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:19090 --log-level warn 2>"$work/kvgate.log" &
  kvpid=$!
  for _ in $(seq 100); do curl -sf 127.0.0.1:18080/ready >/dev/null && break; sleep 0.1; done
  url=http://127.0.0.1:18080/v1/completions
  wrk -t2 -c"$conns" -d1s -s "$work/post.lua" "$url" >/dev/null # warm
  wrk -t2 -c"$conns" -d"$((secs + 2))s" -s "$work/post.lua" "$url" >"$work/wrk.out" &
  wrkpid=$!
  sleep 1
  curl -sf "127.0.0.1:19090/debug/pprof/trace?seconds=$secs" -o "$work/$name.trace"
  wait "$wrkpid"
  kill "$kvpid"; wait "$kvpid" 2>/dev/null || true
  grep -q 'Non-2xx' "$work/wrk.out" && { echo "$name: non-2xx answers" >&2; cat "$work/wrk.out" >&2; exit 1; }
  echo "== $name (${words[*]:-no flags}): $(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out") requests/s while traced"
  "$work/kvgate-bench" schedstate --cpus "$cpus" --detail 4 "$work/$name.trace" | sed "s|^$work/$name.trace: ||"
done
