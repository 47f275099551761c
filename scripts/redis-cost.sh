#!/usr/bin/env bash
# Where Redis's CPU goes for rooms split over two nodes: runs one step of
# `scalechat bench` (ROOMS rooms of SIZE at 1 msg/s a client, split over
# two nodes, as scenarios/cluster.yaml's small-split2), reads the bench's
# redis-server every second (INFO cpu and INFO commandstats) and prints,
# over the seconds while the load was steady (the PUBLISH count rising, its
# first and last two seconds left out): PUBLISH calls a second, Redis's
# user and system CPU a second, the time its commands took, command by
# command (a script's inner commands are inside its own time, and listed
# again under their names), and the bench's own row. The system CPU is
# Redis's reads and writes of sockets: a round between nodes costs one
# PUBLISH, its reply and its delivery to the subscriber.
#
#   scripts/redis-cost.sh [BIN] [-- BENCH FLAGS…]     e.g. -- --redis-linger 2ms
#   ROOMS=500 SIZE=4 DURATION=10s scripts/redis-cost.sh
#
# BIN defaults to a build of this checkout. Needs redis-server, redis-cli,
# ss and python3; Linux only (the bench pins with taskset).
set -euo pipefail
source "$(dirname "$0")/binarg.sh" # root, tmp, bin; "$@" is what follows --
cat >"$tmp/split.yaml" <<EOF
name: redis-cost
defaults: {msg_frequency: 1s, msg_size: 256, duration: ${DURATION:-10s}, ramp: 5000, drain: 3s}
smoke: {duration: 1s}
steps:
  - {name: split2, rooms: ${ROOMS:-500}, room_size: ${SIZE:-4}, smoke: {rooms: 5},
     bench: {row: "{rooms}×{room_size}: 2 nodes, rooms split", servers: two, nodes: 2, node_rows: true}}
bench:
  about: "Redis's CPU for rooms split over two nodes"
  figure: [redis_per_delivery]
  setups:
    two: {nodes: 2}
EOF
"$bin" bench "$@" "$tmp/split.yaml" >"$tmp/bench.txt" 2>&1 &
bench=$!
# The bench's redis-server is its child (taskset execs it).
i=0
while kill -0 "$bench" 2>/dev/null; do
  pid=$(pgrep -n -P "$bench" redis-server || true)
  if [[ -n $pid ]]; then
    port=$(ss -ltnpH | grep "pid=$pid," | grep -o '127\.0\.0\.1:[0-9]*' | head -1 | cut -d: -f2 || true)
    if [[ -n $port ]]; then
      { date +%s.%N; redis-cli -p "$port" INFO cpu; redis-cli -p "$port" INFO commandstats; } >"$tmp/snap.$i" 2>/dev/null || true
      i=$((i + 1))
    fi
  fi
  sleep 1
done
wait "$bench" || { cat "$tmp/bench.txt"; echo "redis-cost: the bench failed" >&2; exit 1; }
python3 - "$tmp" <<'EOF'
import glob, os, re, sys
tmp = sys.argv[1]
snaps = []
for f in sorted(glob.glob(os.path.join(tmp, 'snap.*')), key=lambda f: int(f.rsplit('.', 1)[1])):
    lines = open(f).read().splitlines()
    if not lines:
        continue
    s = {'at': float(lines[0]), 'cmd': {}}
    for l in lines[1:]:
        m = re.match(r'cmdstat_(\S+):calls=(\d+),usec=(\d+)', l)
        if m:
            s['cmd'][m.group(1)] = (int(m.group(2)), int(m.group(3)))
        m = re.match(r'used_cpu_(sys|user):([\d.]+)', l)
        if m:
            s[m.group(1)] = float(m.group(2))
    if 'sys' in s and 'user' in s:
        snaps.append(s)
pub = lambda s: s['cmd'].get('publish', (0, 0))[0]
rising = [b for a, b in zip(snaps, snaps[1:]) if pub(b) > pub(a)]
if len(rising) < 5:
    sys.exit('redis-cost: fewer than 5 seconds of steady load read from Redis: nothing measured')
a, b = rising[1], rising[-3]
secs = b['at'] - a['at']
print(f'steady window: {secs:.1f} s')
print(f'PUBLISH calls/s: {(pub(b) - pub(a)) / secs:.0f}')
print(f"Redis CPU ms/s: user {(b['user'] - a['user']) / secs * 1e3:.1f}, system {(b['sys'] - a['sys']) / secs * 1e3:.1f}")
rows = []
for k, (calls, usec) in b['cmd'].items():
    c0, u0 = a['cmd'].get(k, (0, 0))
    if calls > c0:
        rows.append((usec - u0, k, calls - c0))
rows.sort(reverse=True)
print('command            calls/s   ms/s   µs a call')
for usec, k, calls in rows:
    print(f'{k:16s} {calls / secs:9.0f} {usec / secs / 1e3:6.2f} {usec / calls:9.2f}')
EOF
grep -E "rooms split|scenario|server CPU" "$tmp/bench.txt" | grep -v "^[0-9:]* bench:" || true
