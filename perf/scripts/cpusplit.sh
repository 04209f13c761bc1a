#!/usr/bin/env bash
# Where a request's CPU goes, kernel or user, for kvgate, the floor proxy
# (kvgate-bench floor --mode worker: gnet, a handler goroutine, one frame
# over netpoll and back) and nginx, in the setup of proxybench.sh. For
# each, one wrk run: requests/s, user and system CPU microseconds a
# request (/proc/PID/stat; nginx's counts its workers, so its trivial
# upstreams), and, where perf(1) can read the kernel's tracepoints (root),
# system calls, context switches and wake-ups a request, and the calls
# that make most of them. A router can lose to nginx in the kernel
# (more or dearer system calls, more sleeps and wake-ups) or in its own
# code and runtime; this tells which.
# Usage: perf/scripts/cpusplit.sh [seconds] [connections] [tokens]
# Needs wrk and nginx; perf is optional. KVGATE_BIN uses a kvgate built
# elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-5}
conns=${2:-32}
tokens=${3:-1}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -p "$work" -c nginx.conf -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

bin=${KVGATE_BIN:-}
. perf/scripts/proxysetup.sh
. perf/scripts/floorsetup.sh
startfloor worker 18281 floorpid
nginxpids=$(pgrep -d, -P "$(cat "$work/nginx.pid")")

calls=(read write readv writev recvfrom sendmsg epoll_wait epoll_pwait futex nanosleep)
tracing=
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -a -o /dev/null true 2>/dev/null; then
  tracing=raw_syscalls:sys_enter,sched:sched_switch,sched:sched_wakeup
  for c in "${calls[@]}"; do tracing+=",syscalls:sys_enter_$c"; done
fi

# cpu PIDS: user and system clock ticks so far of the comma-separated PIDS.
cpu() { for p in ${1//,/ }; do awk '{print $14, $15}' "/proc/$p/stat"; done | awk '{u += $1; s += $2} END {print u, s}'; }

# turn NAME PORT PIDS: one wrk run at PORT, and its line.
turn() {
  local name=$1 port=$2 pids=$3 perfpid=
  wrk -t2 -c"$conns" -d1s -s "$work/post.lua" "http://127.0.0.1:$port/v1/completions" >/dev/null # warm
  read -r u0 s0 < <(cpu "$pids")
  if [ -n "$tracing" ]; then
    perf stat -x, -e "$tracing" -p "$pids" -o "$work/perf.out" sleep "$secs" &
    perfpid=$!
  fi
  wrk -t2 -c"$conns" -d"${secs}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/completions" >"$work/wrk.out"
  read -r u1 s1 < <(cpu "$pids")
  [ -z "$perfpid" ] || wait "$perfpid"
  grep -q 'Non-2xx' "$work/wrk.out" && { echo "non-2xx answers on port $port" >&2; exit 1; }
  local n rps
  n=$(awk '/requests in/ {print $1}' "$work/wrk.out")
  rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.out")
  awk -v name="$name" -v rps="$rps" -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%-8s %9.0f %9.1f %9.1f", name, rps, u / hz * 1e6 / n, s / hz * 1e6 / n}'
  if [ -n "$perfpid" ]; then
    # perf -x, lines: count,unit,event,...; the sampled window is the run's.
    awk -F, -v n="$n" '$1 ~ /^[0-9]+$/ {v[$3] = $1 / n}
      END {printf " %9.2f %9.2f %9.2f  ", v["raw_syscalls:sys_enter"], v["sched:sched_switch"], v["sched:sched_wakeup"]
        for (e in v) if (e ~ /^syscalls:/ && v[e] >= 0.05) {c = e; sub(/syscalls:sys_enter_/, "", c); printf "%s %.2f ", c, v[e]}}' "$work/perf.out"
  fi
  echo
}

echo "== ${secs}s each, $conns connections, kvgate max_tokens $tokens; a request's CPU microseconds${tracing:+, and kernel events}"
printf '%-8s %9s %9s %9s' "" rps user_us sys_us
[ -z "$tracing" ] && echo || printf ' %9s %9s %9s  %s\n' syscalls switches wakeups "calls a request"
turn kvgate 18080 "$kvpid"
turn floor 18281 "$floorpid"
turn nginx 18180 "$nginxpids"
