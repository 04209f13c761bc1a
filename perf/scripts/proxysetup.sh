# Sourced by proxybench.sh and proxyratio.sh: the setup both measure.
# Needs $work (a scratch directory), $tokens and, optionally, $bin (a
# kvgate binary; built from this tree into $work when empty). Starts
# kvgate with 4 zero-cost simulated engines on 127.0.0.1:18080 (its pid in
# $kvpid) and nginx round-robin to 4 trivial upstreams on 127.0.0.1:18180,
# and writes $work/post.lua, the completion request wrk sends both. The
# caller's EXIT trap stops them.
if [ -z "${bin:-}" ]; then
  go build -o "$work/" ./cmd/kvgate
  bin="$work/kvgate"
fi
"$bin" --sim-engines 4 --sim-profile zero --listen 127.0.0.1:18080 --admin-listen 127.0.0.1:19090 \
  --log-level warn 2>"$work/kvgate.log" &
kvpid=$!
for _ in $(seq 100); do curl -sf 127.0.0.1:18080/ready >/dev/null && break; sleep 0.1; done

. perf/scripts/nginxsetup.sh
