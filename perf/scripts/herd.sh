#!/usr/bin/env bash
# The herding experiment of the replica ring (syncring): 4 kvgate replicas in
# front of 8 simulated engines; one request warms a 2,048-token prefix on one
# engine, then N requests sharing it (each with its own 1,024-token suffix)
# arrive at once or over SPREAD seconds, spread over the replicas in turn.
# Per sync mode and interval, over several seeds: how unevenly the burst's
# requests land (most requests on one engine over the mean), uncached-token
# imbalance, and TTFT p99. One replica is the reference. Needs python3.
# Usage: perf/scripts/herd.sh [seeds] [out-dir] [N] [SPREAD]
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=${1:-5}
out=${2:-$(mktemp -d)}
n=${3:-16}
spread=${4:-0}
mkdir -p "$out"
make -s build

run() { # name replicas sync interval
  for seed in $(seq "$seeds"); do
    bin/kvgate-bench compare --engines 8 --policies kv --replicas "$2" --sync "$3" --sync-interval "$4" \
      --workload "burst:bursts=1,prefix=2048,suffix=1024,n=$n,spread=$spread,warm=1,seed=$seed" \
      --json "$out/$1-$seed.json" >/dev/null 2>&1
  done
}
run one 1 none 5ms
run none 4 none 5ms
for iv in 1ms 5ms 20ms; do
  run "rounds-$iv" 4 rounds "$iv"
  run "broadcast-$iv" 4 broadcast "$iv"
done

python3 - "$out" "$seeds" <<'PY'
import json, sys, statistics as st
out, seeds = sys.argv[1], int(sys.argv[2])
names = ["one", "none"] + [f"{m}-{iv}" for iv in ["1ms", "5ms", "20ms"] for m in ["rounds", "broadcast"]]
print("| setup | request imbalance mean (max) | uncached-token imbalance mean | TTFT p99 ms mean |")
print("|---|---|---|---|")
for n in names:
    rs = [json.load(open(f"{out}/{n}-{s}.json"))["policies"]["kv"] for s in range(1, seeds + 1)]
    ri = [r["request_imbalance"] for r in rs]
    print(f"| {n} | {st.mean(ri):.2f} ({max(ri):.2f}) | {st.mean(r['imbalance'] for r in rs):.2f} | "
          f"{st.mean(r['ttft_ms']['p99'] for r in rs):.0f} |")
PY
