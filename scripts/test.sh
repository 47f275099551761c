#!/usr/bin/env bash
# Runs every test of scalechat: vet, the race-enabled test suite (integration
# tests start real servers on loopback, and drive headless Chromium where
# installed), and a short run of each fuzz target.
#
#   scripts/test.sh            all of it
#   FUZZTIME=30s scripts/test.sh   longer fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 20m ./...

echo "== fuzz (${fuzztime} each)"
# Each fuzz target: package and name.
while read -r pkg name; do
  [ -n "$pkg" ] || continue
  echo "-- $pkg $name"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
done < <(grep -rl --include='*_test.go' '^func Fuzz' internal | sort | while read -r f; do
  for n in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "./$(dirname "$f") $n"
  done
done)
