#!/usr/bin/env bash
# What a publish hook costs per message: server CPU and latency p99, with
# the example backend (examples/hookbackend) as a real local HTTP backend,
# against the same server without the hook (docs/benchmarks-log.md, "a publish
# hook").
#
#   scripts/bench-hooks.sh [pairs]     default 3 pairs of 20 s
#
# Each pair starts two fresh servers side by side on loopback, one with
# --hook-publish pointing at the example backend (which allows every
# message: the cheapest answer, so what is measured is the round trip, not
# the backend's work) and one without, and drives each with its own
# `scalechat loadtest` at the same time: both see the same neighbours at the
# same moment. It prints, per server, the CPU (utime + stime from
# /proc/PID/stat over the load test) per message sent, the latency p99 of
# the load test, and the backend's CPU per message. Ports: 127.0.0.1:2708x.
# Load (env): ROOMS (20) × SIZE (4) clients, one message each per FREQ
# (250ms), for DURATION (20s).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pairs=${1:-3}
rooms=${ROOMS:-20} size=${SIZE:-4} freq=${FREQ:-250ms} duration=${DURATION:-20s}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-hooks.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

go build -o "$work/scalechat" "$root/cmd/scalechat"
go build -o "$work/hookbackend" "$root/examples/hookbackend"
export SCALECHAT_HOOK_SECRET=bench-hooks-secret-0123456789

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
ticks=$(getconf CLK_TCK)

ready() {
  for _ in $(seq 100); do
    curl -fs "http://$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench-hooks: $1 did not become ready" >&2
  exit 1
}

echo "commit $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-8s %14s %10s %18s  %s\n' pair server "cpu µs/msg" "p99 ms" "backend µs/msg" "generator"
for pair in $(seq "$pairs"); do
  "$work/hookbackend" -addr 127.0.0.1:27089 -blocked "" -masked "" 2>"$work/backend.log" &
  backend=$!
  pids+=("$backend")
  "$work/scalechat" serve --addr 127.0.0.1:27080 --metrics-addr "" --hook-publish http://127.0.0.1:27089/publish 2>"$work/hook.log" &
  hooked=$!
  "$work/scalechat" serve --addr 127.0.0.1:27081 --metrics-addr "" 2>"$work/plain.log" &
  plain=$!
  pids+=("$hooked" "$plain")
  ready 127.0.0.1:27080
  ready 127.0.0.1:27081
  declare -A before
  for p in "$hooked" "$plain" "$backend"; do before[$p]=$(cpu "$p"); done
  run() { # server pid, port, name
    "$work/scalechat" loadtest --url "ws://127.0.0.1:$2/ws" --rooms "$rooms" --room-size "$size" --msg-frequency "$freq" \
      --duration "$duration" --no-csv --out "$work/$3.csv" >"$work/$3.out" 2>&1 || echo "bench-hooks: the $3 load test failed (exit $?): see $work/$3.out" >&2
  }
  run "$hooked" 27080 hook &
  l1=$!
  run "$plain" 27081 plain &
  l2=$!
  wait "$l1" "$l2"
  declare -A after
  for p in "$hooked" "$plain" "$backend"; do after[$p]=$(cpu "$p"); done
  for name in hook plain; do
    p=$hooked
    [ "$name" = plain ] && p=$plain
    read -r sent p99 received expected saturated < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
print(s["sent"], s["latency_ms"]["p99"], s["received"], s["expected"],
      "SATURATED:" + s.get("saturation_reason", "").replace(" ", "_") if s.get("saturated") else "ok")' "$work/$name.meta.json")
    if [ "$sent" -eq 0 ] || [ "$received" -ne "$expected" ]; then
      echo "bench-hooks: pair $pair, $name: sent $sent, received $received of $expected: not a valid measurement" >&2
      exit 1
    fi
    us=$(python3 -c 'import sys; a, b, t, n = map(float, sys.argv[1:]); print(f"{(b - a) / t / n * 1e6:.1f}")'  "${before[$p]}" "${after[$p]}" "$ticks" "$sent")
    back="-"
    if [ "$name" = hook ]; then
      back=$(python3 -c 'import sys; a, b, t, n = map(float, sys.argv[1:]); print(f"{(b - a) / t / n * 1e6:.1f}")'  "${before[$backend]}" "${after[$backend]}" "$ticks" "$sent")
    fi
    printf '%-5s %-8s %14s %10s %18s  %s\n' "$pair" "$name" "$us" "$p99" "$back" "$saturated"
  done
  kill "$hooked" "$plain" "$backend"
  wait "$hooked" "$plain" "$backend" 2>/dev/null || true
  pids=()
done
