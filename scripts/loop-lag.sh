#!/usr/bin/env bash
# Past the knee: what --max-loop-lag trades. Runs `scalechat bench` on two
# nodes and one Redis, 1,000 rooms of 4 split over the nodes, at the 2-vCPU
# VM's knee (16k msg/s, 64k deliveries/s) and twice it (32k msg/s), once per
# value of --max-loop-lag given, the values alternating, ROUNDS times, and
# prints each run's rows: deliveries/s, delivered, p50, p99, refused
# (unavailable). Exits non-zero when a run measured nothing.
#
#   scripts/loop-lag.sh [BIN] [-- LAG…]        default lags: 0 100ms
#   ROUNDS=3 STEPS="8k:500ms 16k:250ms 32k:125ms" scripts/loop-lag.sh -- 0 100ms 250ms
#
# BIN defaults to a build of this checkout. Needs redis-server; Linux only
# (the bench pins with taskset). On a bigger machine raise STEPS (name:interval,
# each client's interval between messages).
set -euo pipefail
source "$(dirname "$0")/binarg.sh" # root, tmp, bin; "$@" is what follows --
lags=("$@")
[[ ${#lags[@]} -eq 0 ]] && lags=(0 100ms)
steps=
for s in ${STEPS:-16k:250ms 32k:125ms}; do
  steps+="  - {name: ${s%%:*} msg/s, msg_frequency: ${s#*:}}"$'\n'
done
for lag in "${lags[@]}"; do
  cat >"$tmp/lag-$lag.yaml" <<EOF
name: loop-lag-$lag
slo: ["delivery>=100%", "errors==0", "p99<100ms"]
defaults: {rooms: 1000, room_size: 4, msg_size: 256, duration: 10s, ramp: 5000, drain: 3s}
steps:
$steps
bench:
  about: "2 nodes + Redis, rooms of 4 split, past the knee, --max-loop-lag $lag"
  servers: {nodes: 2, flags: [--max-loop-lag, '$lag', --rate-limit, '1000', --rate-burst, '1000']}
  row: "max-loop-lag $lag, {name}"
  figure: [unavailable]
EOF
done
for round in $(seq "${ROUNDS:-2}"); do
  for lag in "${lags[@]}"; do
    echo "== round $round, --max-loop-lag $lag, $(date -u +%T) UTC, load $(cut -d' ' -f1 /proc/loadavg)"
    # The bench exits 3 when a step misses its objectives: expected past the knee.
    rc=0
    "$bin" bench "$tmp/lag-$lag.yaml" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -ne 0 && $rc -ne 3 ]] || ! grep -q "^max-loop-lag" "$tmp/out"; then
      echo "loop-lag.sh: the bench measured nothing (exit $rc):" >&2
      tail -5 "$tmp/err" >&2
      exit 1
    fi
    grep -E "^(scenario|max-loop-lag)" "$tmp/out" | cut -c1-210
  done
done
