#!/usr/bin/env bash
# Where a cross-node message waits: two nodes and one Redis on this machine
# (nodes on SERVER_CPUS, default 0; generators on GEN_CPUS, default 1),
# ROOMS rooms of 4 split over the nodes (a loadtest shard each), each client
# sending every INTERVAL for 10 s; prints each shard's end-to-end row and,
# per node, the histogram of scalechat_broker_transit_seconds over the run:
# from the other node's round to this node's read (Redis's queue, the
# subscription's socket, the reading goroutine's backlog). What end-to-end
# adds beyond it waited on the nodes: in their sockets, their loops, or the
# sender's round (--redis-max-wait).
#
#   scripts/transit.sh [BIN] [-- INTERVAL…]        default: 250ms 125ms
#   ROOMS=1000 PORT=18080 scripts/transit.sh -- 500ms
#   SERVER_CPUS=0-7 GEN_CPUS=8-15 scripts/transit.sh -- 20.833ms 15.625ms    # 16 cores, past the knee
#   PROFILE=DIR scripts/transit.sh …   also node 1's CPU profile (5 s from the step's third
#                                       second) and its goroutines (at the fifth), per interval,
#                                       into DIR: where a node past the knee spends and waits
#
# BIN defaults to a build of this checkout. Needs redis-server, curl and
# taskset; uses ports PORT+1, PORT+2 (nodes), PORT+11, PORT+12 (metrics) and
# PORT+20 (Redis). Exits non-zero when a node or a shard measured nothing.
set -euo pipefail
source "$(dirname "$0")/binarg.sh" # root, tmp, bin; "$@" is what follows --
intervals=("$@")
[[ ${#intervals[@]} -eq 0 ]] && intervals=(250ms 125ms)
port=${PORT:-18080}
pids=()
stop() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap stop EXIT
redis-server --port $((port + 20)) --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
pids+=($!)
for n in 1 2; do
  taskset -c "${SERVER_CPUS:-0}" "$bin" serve --addr 127.0.0.1:$((port + n)) --redis redis://127.0.0.1:$((port + 20)) \
    --metrics-addr 127.0.0.1:$((port + 10 + n)) --rate-limit 1000 --rate-burst 1000 >"$tmp/node$n.log" 2>&1 &
  pids+=($!)
done
for n in 1 2; do
  for _ in $(seq 50); do curl -sf 127.0.0.1:$((port + n))/readyz >/dev/null && break; sleep 0.2; done
  curl -sf 127.0.0.1:$((port + n))/readyz >/dev/null || { echo "transit.sh: node $n is not ready:" >&2; tail -3 "$tmp/node$n.log" >&2; exit 1; }
done
buckets() { curl -sf 127.0.0.1:$((port + 10 + $1))/metrics | grep '^scalechat_broker_transit_seconds_\(bucket\|sum\|count\)' | sed 's/scalechat_broker_transit_seconds_//'; }
for iv in "${intervals[@]}"; do
  echo "== every $iv a client, $(date -u +%T) UTC"
  for n in 1 2; do buckets $n >"$tmp/before$n"; done
  shards=() prefix=transit$RANDOM # one prefix: both shards' clients in the same rooms
  for s in 0 1; do
    taskset -c "${GEN_CPUS:-1}" "$bin" loadtest --url ws://127.0.0.1:$((port + 1 + s))/ws --shard $s/2 --room-prefix "$prefix" \
      --rooms "${ROOMS:-1000}" --room-size 4 --msg-frequency "$iv" --duration 10s --out "$tmp/lt$s.csv" >"$tmp/lt$s.txt" 2>&1 &
    shards+=($!)
  done
  profs=()
  if [[ -n ${PROFILE:-} ]]; then
    mkdir -p "$PROFILE"
    pprof=127.0.0.1:$((port + 11))/debug/pprof
    (sleep 3 && curl -sf "$pprof/profile?seconds=5" -o "$PROFILE/node1-$iv.cpu.pprof") &
    profs+=($!)
    (sleep 5 && curl -sf "$pprof/goroutine?debug=1" -o "$PROFILE/node1-$iv.goroutines.txt") &
    profs+=($!)
  fi
  wait "${shards[@]}" || true # a shard that lost messages exits non-zero: its row says so
  for p in "${profs[@]}"; do
    wait "$p" || { echo "transit.sh: node 1's profile could not be read (PROFILE)" >&2; exit 1; }
  done
  for s in 0 1; do
    row=$(grep -E '^ +s1 ' "$tmp/lt$s.txt" || true)
    [[ -n $row ]] || { echo "transit.sh: shard $s measured nothing:" >&2; tail -3 "$tmp/lt$s.txt" >&2; exit 1; }
    echo "shard $s (node $((s + 1)))  $(grep -E '^ +step ' "$tmp/lt$s.txt" | head -1 | sed 's/^ *//')"
    echo "                    ${row# }"
  done
  for n in 1 2; do
    buckets $n >"$tmp/after$n"
    # The run's counts: after minus before, per bucket (cumulative, as Prometheus gives them).
    hist=$(paste -d' ' "$tmp/before$n" "$tmp/after$n" | awk '{ printf "%s %g  ", $1, $4 - $2 }')
    count=$(awk '$1=="count"{print $2}' "$tmp/after$n")
    [[ ${count:-0} != 0 ]] || { echo "transit.sh: node $n read no round from the other node" >&2; exit 1; }
    echo "node $n transit (cumulative): $hist"
  done
done
