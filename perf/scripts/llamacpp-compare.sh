#!/usr/bin/env bash
# kv against round-robin and least-load on real engines: four llama.cpp
# llama-server processes serving a random-weight model that perf/gguf
# writes with kvgate's tokenizer (about 40 M parameters), each behind a
# kvgate-bridge --engine-kind llamacpp, and a kvgate per policy in front
# (kvgate-bench llamacpp, which runs compare against them). Before each
# policy every slot of every server is erased and the router's index is
# waited for until empty; the servers run with --cache-ram 0 so that the
# erase empties all they cache. The prefix hit rate is read from the
# servers' own /metrics counters (and from the responses' usage).
#
#   perf/scripts/llamacpp-compare.sh [out-dir] [extra kvgate-bench flags...]
#
# The defaults fit a 2-core machine in about 4 minutes: one thread per
# server, 4 slots of 2,048 tokens each, and a multi-turn workload whose
# every turn resends the conversation so far (a 1,024-token system prompt
# of its own, 128-token user turns, 16-token answers, 4 turns about 5 s
# apart, 20 conversations starting 0.3 a second: 80 requests of 1,152 to
# 1,584 tokens in about 70 s; round-robin had the servers compute
# 1,270-1,350 prompt tokens a second, kv 470-520, where one llama-server
# thread prefilled a 1,500-token prompt at about 2,500 tokens a second).
# Lighter than it could be on purpose: servers that fall behind get a
# conversation's next turn while its last one still decodes, and then
# compute it whole whatever the routing. WORKLOAD= overrides it. Needs the
# llama-server that `make llama-server` builds; progress goes to stderr,
# the table to stdout and to OUT/README.md, every number to OUT/compare.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-$(mktemp -d)}
shift || true
workload=${WORKLOAD:-multi-turn:sessions=20,turns=4,system=1024,user=128,output=16,think=4,rate=0.3}
mkdir -p "$out"
make -s build
echo "llamacpp-compare: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), $(date -u +%FT%TZ), results in $out" >&2
bin/kvgate-bench llamacpp --servers 4 --threads 1 --parallel 4 --slot-ctx 2048 --cache-ram 0 \
  --policies kv,round-robin,least-load --workload "$workload" \
  --json "$out/compare.json" --report "$out" "$@"
