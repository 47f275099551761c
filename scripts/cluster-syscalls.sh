#!/usr/bin/env bash
# Where a split room's extra CPU goes: counts, per message, the context
# switches and the system calls of the scalechat processes (perf stat) for
# the same traffic on one node and on two nodes sharing rooms through a
# redis-server, with the node CPU and Redis CPU per delivery beside them.
#
#   scripts/cluster-syscalls.sh BIN [--redis-linger D]
#
# Traffic: 500 rooms × 4 clients, 256 B once a second each (2,000 messages
# and 8,000 deliveries a second), 10 s measured after a 4 s ramp. Split:
# client i on node i mod 2, every room on both. Every server process (and
# redis-server) runs on CPU 0, the generators on CPU 1. The node flags
# after BIN go to the cluster's nodes only. Needs redis-server, perf and
# taskset; run it on an otherwise idle machine, alternating revisions.
#
# With DIRECT_BIN set (scripts/direct-floor.sh sets it), a third setup: two
# nodes of that binary sending each other the messages directly, no Redis
# (scripts/direct-floor.patch, an experiment measuring the floor).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [serve flags for the cluster nodes]" >&2; exit 2; }
bin=$1
shift
for c in redis-server redis-cli perf taskset; do
  command -v $c >/dev/null || { echo "$c is needed" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
events=context-switches,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

# serve NAME FLAGS...: starts a node on CPU 0, prints its pid and port.
serve() {
  local name=$1 p
  shift
  p=$(port)
  taskset -c 0 "${serve_bin:-$bin}" serve --addr 127.0.0.1:$p --metrics-addr '' --log-level warn "$@" >"$tmp/$name.log" 2>&1 &
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$p/readyz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  echo "$! $p"
}

# gen PORT SHARD: one generator of the traffic on CPU 1, in the background.
gen() {
  taskset -c 1 "$bin" loadtest --url "ws://127.0.0.1:$1/ws" --out "$tmp/gen-${2%/*}.csv" --msg-frequency 1s --msg-size 256 \
    --duration 16s --ramp 5000 --drain 2s --source-ips 127.0.0.1-127.0.0.4 --rooms 500 --room-size 4 \
    --shard "$2" --room-prefix "r$prefix" >"$tmp/gen-${2%/*}.log" 2>&1 &
  gens+=($!)
}

# measure SETUP REDIS_PID NODE_PID...: 10 s of perf stat over the nodes,
# then one line of figures per message and per delivery.
measure() {
  local setup=$1 redis=$2
  shift 2
  local n0=0 n1=0 r0=0 r1=0
  sleep 4
  for p in "$@"; do n0=$((n0 + $(ticks "$p"))); done
  [ "$redis" = - ] || r0=$(ticks "$redis")
  perf stat -x, -e "$events" -p "$(IFS=,; echo "$*")" -o "$tmp/perf.txt" -- sleep 10 >/dev/null 2>&1
  for p in "$@"; do n1=$((n1 + $(ticks "$p"))); done
  [ "$redis" = - ] || r1=$(ticks "$redis")
  for g in "${gens[@]}"; do
    wait "$g" || { echo "$setup: a generator failed (it lost messages, or could not run):" >&2; cat "$tmp"/gen-*.log >&2; exit 1; }
  done
  # 2,000 messages a second for the 10 s, each to 4 members.
  awk -F, -v setup="$setup" -v node=$((n1 - n0)) -v rds=$((r1 - r0)) -v hz="$(getconf CLK_TCK)" '
    $1 ~ /^[0-9]+$/ { n = $3; sub("syscalls:sys_enter_", "", n); v[n] = $1 / 20000 }
    END {
      if (!("context-switches" in v) || node == 0) {
        print setup ": perf or /proc counted nothing (perf_event_paranoid? the nodes idle?)" > "/dev/stderr"
        exit 1
      }
      printf "%-22s node %5.2f µs/deliv  Redis %5.2f µs/deliv  per message: ctx switches %.2f  read %.2f  write %.2f  writev %.2f  epoll_wait %.2f  epoll_pwait %.2f  futex %.2f\n",
        setup, node * 1e6 / hz / 80000, rds * 1e6 / hz / 80000, v["context-switches"], v["read"], v["write"], v["writev"], v["epoll_wait"], v["epoll_pwait"], v["futex"]
    }' "$tmp/perf.txt"
}

prefix=$RANDOM
gens=()
read -r s sp < <(serve single)
pids+=("$s")
gen "$sp" 0/1
measure "1 node" - "$s"
kill "$s"

rp=$(port)
redis-server --port "$rp" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
sleep 0.3
r=$(cat "$tmp/redis.pid")
taskset -cp 0 "$r" >/dev/null
gens=()
read -r a ap < <(serve a --redis "redis://127.0.0.1:$rp/0" "$@")
read -r b bp < <(serve b --redis "redis://127.0.0.1:$rp/0" "$@")
pids+=("$a" "$b")
prefix=$RANDOM
gen "$ap" 0/2
gen "$bp" 1/2
measure "2 nodes, rooms split" "$r" "$a" "$b"
kill "$a" "$b"
redis-cli -p "$rp" shutdown nosave >/dev/null 2>&1 || true

[ -n "${DIRECT_BIN:-}" ] || exit 0
pp=$(port)
gens=()
serve_bin=$DIRECT_BIN
export SCALECHAT_DIRECT_FLOOR="seq:127.0.0.1:$pp"
read -r a ap < <(serve a)
export SCALECHAT_DIRECT_FLOOR="dial:127.0.0.1:$pp"
read -r b bp < <(serve b)
unset SCALECHAT_DIRECT_FLOOR serve_bin
pids+=("$a" "$b")
prefix=$RANDOM
gen "$ap" 0/2
gen "$bp" 1/2
measure "2 nodes, direct (floor)" - "$a" "$b"
kill "$a" "$b"
