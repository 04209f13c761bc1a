# Sourced by floorratio.sh and cpusplit.sh after proxysetup.sh: builds
# kvgate-bench into $work and defines startfloor, which starts the floor
# proxy (perf/floor) answering nginx's upstreams' fixed body.
go build -o "$work/" ./cmd/kvgate-bench
printf '%s' "$answer" > "$work/answer.json"

# startfloor MODE PORT VAR: starts `kvgate-bench floor --mode MODE` on
# 127.0.0.1:PORT, waits until it answers, and sets VAR to its pid.
startfloor() {
  "$work/kvgate-bench" floor --mode "$1" --listen "127.0.0.1:$2" --body "$work/answer.json" >/dev/null &
  printf -v "$3" '%s' $!
  for _ in $(seq 100); do curl -sf -o /dev/null -X POST -d '{}' "127.0.0.1:$2/" && break; sleep 0.1; done
}
