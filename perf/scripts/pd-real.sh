#!/usr/bin/env bash
# Issue 23's real-process goodput: one kvgate in front of N kvgate-sim
# processes, aggregated (all role both) against a P:D split (conditional,
# and conditional with the split rule's targets), the Mooncake trace's
# first REQUESTS requests through kvgate-bench run at each load in LOADS
# (arrivals that many times denser), goodput within TTFT and TPOT. A fresh
# fleet for each run. Prints one goodput line per run, and the split
# count from kvgate's /metrics; perf/RESULTS.md has a run.
#
#   N=8 P=2 LOADS="1 2" REQUESTS=200 perf/scripts/pd-real.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d /tmp/pd-real.XXXXXX)}
BIN=$OUT/bin
N=${N:-8}
P=${P:-2}
LOADS=${LOADS:-1 2}
REQUESTS=${REQUESTS:-200}
TTFT=${TTFT:-2s}
TPOT=${TPOT:-100ms}
TRACE=${TRACE:-/work/shared/data/traces/mooncake_synthetic_trace.jsonl}
MODEL=Qwen/Qwen3-8B
mkdir -p "$BIN"
go build -o "$BIN/" ./cmd/kvgate ./cmd/kvgate-sim ./cmd/kvgate-bench

addr_of() { # log file, JSON key: the address a process logged once it listens
  for _ in $(seq 300); do
    a=$(grep -o "\"$2\":\"[^\"]*\"" "$1" | head -1 | cut -d'"' -f4 || true)
    [ -n "$a" ] && { echo "$a"; return; }
    sleep 0.1
  done
  echo "no $2 in $1" >&2; exit 1
}

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop EXIT

# name|prefill engines|kvgate flags
fleets=("$N aggregated|0|" "$P:$((N - P)) conditional|$P|"
  "$P:$((N - P)) conditional + TPOT rule|$P|--split-ttft-target $TTFT --split-tpot-target $TPOT")
for load in $LOADS; do
  for f in "${fleets[@]}"; do
    IFS='|' read -r name prefill flags <<<"$f"
    dir=$OUT/x$load-$(echo "$name" | tr ' :+' '_-p'); mkdir -p "$dir"
    addrs=()
    for i in $(seq 0 $((N - 1))); do
      role=both; id=e$i
      if [ "$prefill" -gt 0 ]; then
        if [ "$i" -lt "$prefill" ]; then role=prefill; id=prefill-$i; else role=decode; id=decode-$i; fi
      fi
      "$BIN/kvgate-sim" --listen 127.0.0.1:0 --id "$id" --model $MODEL --role $role --gpu-blocks 16384 \
        --max-model-len 1048576 --speed 1 >"$dir/sim$i.log" 2>&1 &
      pids+=($!)
    done
    for i in $(seq 0 $((N - 1))); do addrs+=("$(addr_of "$dir/sim$i.log" addr)"); done
    engines=$(IFS=,; echo "${addrs[*]}")
    # shellcheck disable=SC2086 # flags is a list
    "$BIN/kvgate" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --engine "$engines" $flags >"$dir/kvgate.log" 2>&1 &
    pids+=($!)
    base=http://$(addr_of "$dir/kvgate.log" addr); admin=http://$(addr_of "$dir/kvgate.log" admin)
    for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/ready")" = 200 ] && break; sleep 0.1; done
    echo "== x$load $name ($(date -u +%T))" >&2
    "$BIN/kvgate-bench" run --target "$base" --model $MODEL --workload "mooncake:$TRACE" --max-requests "$REQUESTS" \
      --speed "$load" --ttft-slo "$TTFT" --tpot-slo "$TPOT" --json "$dir/run.json" >"$dir/run.txt" 2>"$dir/bench.log"
    curl -s "$admin/metrics" >"$dir/metrics.txt"
    split=$(awk '/^kvgate_disagg_decisions_total\{mode="split"\}/ {print $2}' "$dir/metrics.txt")
    echo "x$load | $name | $(grep goodput "$dir/run.txt" | sed 's/^run *//') | $(head -1 "$dir/run.txt" | sed 's/^run *//') | split ${split:-0}"
    stop
  done
done
echo "logs and results in $OUT"
