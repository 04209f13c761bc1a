#!/usr/bin/env bash
# Issue 22's real-process LoRA measurement: one kvgate in front of 8
# kvgate-sim processes (8 adapter slots each, 50 ms loads, 64 adapters),
# the multi-lora workload through kvgate-bench run, a fresh fleet for each
# kvgate configuration (kv, kv --lora-blind, round-robin). Prints one line
# per configuration: kvgate-bench's summary, then the adapter loads and
# evictions from kvgate's /metrics. perf/RESULTS.md has a run.
#
#   SPEED=1 WL="multi-lora:adapters=64,zipf=1,prefix=2048,suffix=256,n=20000,rate=100,output=64" perf/scripts/lora-real.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d /tmp/lora-real.XXXXXX)}
BIN=$OUT/bin
SPEED=${SPEED:-2}
WL=${WL:-multi-lora:adapters=64,zipf=1,prefix=2048,suffix=256,n=12000,rate=100,output=64}
MODEL=Qwen/Qwen3-8B
mkdir -p "$BIN"
go build -o "$BIN/" ./cmd/kvgate ./cmd/kvgate-sim ./cmd/kvgate-bench
LORAS=$(seq 1 64 | awk -v m=$MODEL '{printf "%s%d=%s-lora%d", (NR>1?",":""), $1, m, $1}')

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

for cfg in "kv|" "kv-lora-blind|--lora-blind" "round-robin|--policy round-robin"; do
  name=${cfg%%|*}; flags=${cfg#*|}
  dir=$OUT/$name; mkdir -p "$dir"
  addrs=()
  for i in $(seq 0 7); do
    "$BIN/kvgate-sim" --listen 127.0.0.1:0 --id "e$i" --model $MODEL --lora "$LORAS" --max-loras 8 \
      --lora-load-time 50ms --gpu-blocks 16384 --speed "$SPEED" >"$dir/sim$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 7); do addrs+=("$(addr_of "$dir/sim$i.log" addr)"); done
  engines=$(IFS=,; echo "${addrs[*]}")
  # shellcheck disable=SC2086 # flags is a list
  "$BIN/kvgate" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --engine "$engines" $flags >"$dir/kvgate.log" 2>&1 &
  pids+=($!)
  base=http://$(addr_of "$dir/kvgate.log" addr); admin=http://$(addr_of "$dir/kvgate.log" admin)
  for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/ready")" = 200 ] && break; sleep 0.1; done
  "$BIN/kvgate-bench" run --target "$base" --model $MODEL --workload "$WL" --speed "$SPEED" \
    --json "$dir/run.json" >"$dir/run.txt" 2>"$dir/bench.log"
  curl -s "$admin/metrics" >"$dir/metrics.txt"
  loads=$(awk '/^kvgate_lora_loads_total/ {s+=$2} END {print s+0}' "$dir/metrics.txt")
  evict=$(awk '/^kvgate_lora_evictions_total/ {s+=$2} END {print s+0}' "$dir/metrics.txt")
  echo "$name $(head -1 "$dir/run.txt") loads $loads evictions $evict"
  stop
done
echo "logs and results in $OUT"
