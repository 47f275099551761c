#!/usr/bin/env bash
# Counts the instructions a Go benchmark runs, for each of several git
# revisions (or the work tree, "."), under valgrind's callgrind: unlike
# ns/op, the count is the same run after run whatever else the machine is
# doing, so two revisions can be compared on a shared, noisy machine.
# GOGC=off keeps the collector's pacing (which depends on timing) out of
# the count; GOMAXPROCS=1 and no async preemption keep callgrind working.
#
#   scripts/bench-instructions.sh ./internal/room 'BenchmarkPublish/members-on-1-loops$' 200000 48a3d97 HEAD .
#
# Prints, per revision, the total instructions and that total divided by
# the iterations (which includes the test binary's start: compare
# revisions with the same N, not the per-op figure with ns/op).
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 PKG BENCH N REV..." >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
pkg=$1 bench=$2 n=$3
shift 3
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/wt" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for rev in "$@"; do
  dir=$root
  if [ "$rev" != . ]; then
    git -C "$root" worktree remove --force "$tmp/wt" 2>/dev/null || true
    git -C "$root" worktree add -q --detach "$tmp/wt" "$rev"
    dir=$tmp/wt
  fi
  (cd "$dir" && go test -c -o "$tmp/bench.test" "$pkg")
  out=$(cd "$dir/$pkg" && GOGC=off GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 \
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$tmp/bench.test" \
    -test.run '^$' -test.bench "$bench" -test.benchtime "${n}x" 2>&1)
  total=$(echo "$out" | sed -n 's/.*I *refs: *//p' | tr -d ,)
  [ -n "$total" ] || { echo "$out" >&2; echo "$rev: callgrind counted nothing" >&2; exit 1; }
  echo "$rev $total instructions, $((total / n)) per iteration"
done
