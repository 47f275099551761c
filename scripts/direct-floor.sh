#!/usr/bin/env bash
# The floor of a cluster path without Redis: builds HEAD with
# scripts/direct-floor.patch applied (an experiment: two nodes send each
# other a room's messages over one TCP connection, one node ordering every
# room; no history across nodes, no failure handling), then runs
# scripts/cluster-syscalls.sh RUNS times (default 3), each run measuring
# in turn one node, two nodes through Redis (HEAD as it is) and two nodes
# direct, and prints each run's ratios against its own one node and the
# medians. What it answers: how much of a split room's extra node CPU is
# the path through Redis, and how much is moving each message between two
# processes at all, which any design keeping one order per room pays.
#
#   scripts/direct-floor.sh [RUNS]
set -euo pipefail
runs=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add -q --detach "$tmp/src" HEAD
if ! git -C "$tmp/src" apply "$root/scripts/direct-floor.patch"; then
  echo "scripts/direct-floor.patch no longer applies to HEAD: bring it up to date with the broker's interfaces" >&2
  exit 1
fi
(cd "$root" && go build -o "$tmp/head" ./cmd/scalechat)
(cd "$tmp/src" && go build -o "$tmp/floor" ./cmd/scalechat)
for i in $(seq "$runs"); do
  echo "== run $i of $runs ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
  DIRECT_BIN=$tmp/floor "$root/scripts/cluster-syscalls.sh" "$tmp/head" | tee -a "$tmp/rows.txt"
done
awk '
  /µs\/deliv/ {
    match($0, /node +[0-9.]+ µs\/deliv/); f = substr($0, RSTART, RLENGTH); gsub(/[^0-9.]/, "", f); v = f + 0
    if ($0 ~ /^1 node/) { one = v; n++ }
    else if ($0 ~ /through|split/) { redis[n] = v / one }
    else if ($0 ~ /direct/) { direct[n] = v / one }
  }
  function median(x, k,   s, i, j, t) {
    for (i = 1; i <= k; i++) s[i] = x[i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
    return k % 2 ? s[(k + 1) / 2] : (s[k / 2] + s[k / 2 + 1]) / 2
  }
  END {
    if (n == 0) { print "no run measured anything" > "/dev/stderr"; exit 1 }
    for (i = 1; i <= n; i++) printf "run %d: node CPU a delivery against one node: through Redis ×%.2f, direct ×%.2f\n", i, redis[i], direct[i]
    printf "medians of %d runs: through Redis ×%.2f, direct ×%.2f\n", n, median(redis, n), median(direct, n)
  }' "$tmp/rows.txt"
