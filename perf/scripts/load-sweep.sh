#!/usr/bin/env bash
# Routing policies against offered load, in virtual time: the Mooncake trace
# on 8 simulated engines (16,384 GPU blocks each: a ninth of the working
# set fits) behind one router, with arrivals 1x to 4x as dense as the
# trace's, over several seeds of the routers' random choices. Prints, per
# load and policy, the mean (and range over seeds) of TTFT p99, hit rate,
# round-robin's TTFT p99 over the policy's, and hit rate over the oracle's.
# Needs python3. Usage: perf/scripts/load-sweep.sh [seeds] [out-dir] [loads]
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds=${1:-4}
out=${2:-$(mktemp -d)}
loads=${3:-1 2 3 4}
mkdir -p "$out"
make -s build
for load in $loads; do
  for seed in $(seq "$seeds"); do
    echo "load $load seed $seed" >&2
    bin/kvgate-bench simulate --engines 8 --routers 1 --load "$load" --seed "$seed" \
      --policies kv,dynamo,approx-prefix,least-load,round-robin,oracle \
      --workload mooncake:../shared/data/traces/mooncake_synthetic_trace.jsonl \
      --gpu-blocks 16384 --json "$out/l$load-s$seed.json" >/dev/null 2>&1
  done
done
python3 - "$out" "$seeds" $loads <<'PY'
import json, statistics as st, sys
out, seeds, loads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pols = ["kv", "dynamo", "approx-prefix", "least-load", "round-robin", "oracle"]
print("| load | policy | TTFT p50 ms | TTFT p99 ms | output tok/s | prefix hit rate | p99 round-robin / policy | hit / oracle |")
print("|---|---|---|---|---|---|---|---|")
def f(xs, fmt):
    return f"{fmt % st.mean(xs)} ({fmt % min(xs)}-{fmt % max(xs)})"
for load in loads:
    runs = [json.load(open(f"{out}/l{load}-s{s}.json"))["policies"] for s in range(1, seeds + 1)]
    for p in pols:
        v = lambda k, q=None: [r[p][k][q] if q else r[p][k] for r in runs]
        ratio = [r["round-robin"]["ttft_ms"]["p99"] / r[p]["ttft_ms"]["p99"] for r in runs]
        vs_oracle = [r[p]["prefix_hit_rate"] / r["oracle"]["prefix_hit_rate"] for r in runs]
        print(f"| {load} | {p} | {st.mean(v('ttft_ms', 'p50')):.0f} | {f(v('ttft_ms', 'p99'), '%.0f')} | "
              f"{st.mean(v('output_tokens_per_s')):.0f} | {f(v('prefix_hit_rate'), '%.3f')} | {f(ratio, '%.2f')}x | {f(vs_oracle, '%.2f')} |")
PY
