#!/usr/bin/env bash
# Requests/s and latency through kvgate (4 zero-cost simulated engines) and,
# side by side, through nginx proxying round-robin to trivial upstreams that
# answer a fixed completion. Needs wrk and nginx (apt-get install wrk
# nginx-light). Usage: perf/scripts/proxybench.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-15}
conns=${2:-64}
tokens=${3:-16}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=""
. perf/scripts/proxysetup.sh
echo "== kvgate (tokenize, route by KV, wire protocol to 4 zero-cost sims, $tokens tokens back)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/post.lua" http://127.0.0.1:18080/v1/completions
echo "== nginx (round-robin proxy to 4 trivial upstreams)"
wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/post.lua" http://127.0.0.1:18180/v1/completions
