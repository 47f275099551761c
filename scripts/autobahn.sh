#!/usr/bin/env bash
# Runs the Autobahn testsuite's fuzzing client, the reference conformance
# suite for RFC 6455 (and RFC 7692), against `scalechat serve --echo-endpoint`
# on a free loopback port, and fails on any FAILED or NON-STRICT case.
# INFORMATIONAL and UNIMPLEMENTED cases are listed, not failed.
#
#   scripts/autobahn.sh                 cases 1-7, 9 and 10 (9.*: up to 16 MiB, about 15 s)
#   scripts/autobahn.sh --compression   the same plus 12.* and 13.*, server started with --compression
#
# With --client it is the other way round: the suite's fuzzing server
# drives the lab's WebSocket client (internal/loadtest's event loop, through
# TestAutobahnFuzzingServer, which echoes every message) through the same
# cases, and the same verdicts apply:
#
#   scripts/autobahn.sh --client                 cases 1-7, 9 and 10 (about 20 s)
#   scripts/autobahn.sh --client --compression   the same plus 12.* and 13.*, offering permessage-deflate (6-12 min)
#
# The suite needs Python 2.7: it is installed once, from PyPI with pinned
# versions (shared/autobahn/requirements-py27.txt, copied to
# scripts/autobahn-requirements-py27.txt), into $AUTOBAHN_HOME
# (default ~/.cache/scalechat/autobahn), with pyenv's 2.7.18.
# The report is written to $AUTOBAHN_OUT (default results/autobahn).
set -euo pipefail
cd "$(dirname "$0")/.."

compression=0
client=0
for arg in "$@"; do
  case $arg in
    --compression) compression=1 ;;
    --client) client=1 ;;
    *) echo "usage: scripts/autobahn.sh [--client] [--compression]" >&2; exit 2 ;;
  esac
done

home=${AUTOBAHN_HOME:-$HOME/.cache/scalechat/autobahn}
out=${AUTOBAHN_OUT:-results/autobahn}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x "$home/venv27/bin/wstest" ]; then
  echo "== installing the Autobahn testsuite (Python 2.7) into $home"
  py2=""
  if command -v pyenv >/dev/null; then
    py2="$(pyenv root)/versions/2.7.18/bin/python2"
  fi
  [ -x "$py2" ] || py2=$(command -v python2.7 || command -v python2 || true)
  if [ -z "$py2" ] || [ ! -x "$py2" ]; then
    echo "autobahn: Python 2.7 is needed (pyenv install 2.7.18)" >&2
    exit 1
  fi
  mkdir -p "$home"
  "$py2" -m pip install -q --disable-pip-version-check --target "$home/py27tools" 'virtualenv<20.22' 2>&1 | grep -v DEPRECATION || true
  PYTHONPATH="$home/py27tools" "$py2" -m virtualenv -q "$home/venv27"
  "$home/venv27/bin/pip" install -q --disable-pip-version-check -r scripts/autobahn-requirements-py27.txt 2>&1 | grep -v DEPRECATION || true
  [ -x "$home/venv27/bin/wstest" ] || { echo "autobahn: install failed" >&2; exit 1; }
fi

cases='"1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"'
exclude=''
if [ $compression = 1 ]; then
  cases="$cases, \"12.*\", \"13.*\""
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
spec=$(mktemp)
start=$(date +%s)

if [ $client = 1 ]; then
  agent=scalechat-loadtest
  [ $compression = 1 ] && agent=scalechat-loadtest-compression
  rm -rf "${out:?}/$agent"
  cat >"$spec" <<EOF
{"url": "ws://127.0.0.1:$port", "outdir": "$out/$agent", "cases": [$cases], "exclude-cases": [$exclude], "exclude-agent-cases": {}}
EOF
  echo "== autobahn fuzzingserver against the lab's client, $agent (cases: $cases; excluded: ${exclude:-none})"
  # --webport 0: no report web server (it would take port 8080).
  (cd "$(dirname "$spec")" && exec "$home/venv27/bin/wstest" -m fuzzingserver -s "$spec" --webport 0) >"$out/$agent.log" 2>&1 &
  fuzzer=$!
  trap 'kill $fuzzer 2>/dev/null; wait $fuzzer 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  SCALECHAT_AUTOBAHN_URL="ws://127.0.0.1:$port" SCALECHAT_AUTOBAHN_AGENT=$agent SCALECHAT_AUTOBAHN_COMPRESSION=$compression \
    go test -count=1 -timeout 30m -run '^TestAutobahnFuzzingServer$' ./internal/loadtest >"$out/$agent.client.log" 2>&1 || {
    tail -20 "$out/$agent.client.log" >&2
    echo "autobahn: the client's run failed" >&2
    exit 1
  }
else
  bin=$(mktemp -d)/scalechat
  go build -o "$bin" ./cmd/scalechat
  flags=(--addr "127.0.0.1:$port" --metrics-addr "" --echo-endpoint --log-level warn)
  [ $compression = 1 ] && flags+=(--compression)
  "$bin" serve "${flags[@]}" &
  server=$!
  trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  agent=scalechat
  [ $compression = 1 ] && agent=scalechat-compression
  rm -rf "${out:?}/$agent"
  cat >"$spec" <<EOF
{"outdir": "$out/$agent", "servers": [{"agent": "$agent", "url": "ws://127.0.0.1:$port/echo"}],
 "cases": [$cases], "exclude-cases": [$exclude], "exclude-agent-cases": {}}
EOF
  echo "== autobahn fuzzingclient against $agent (cases: $cases; excluded: ${exclude:-none})"
  (cd "$(dirname "$spec")" && "$home/venv27/bin/wstest" -m fuzzingclient -s "$spec") >"$out/$agent.log" 2>&1 || {
    tail -20 "$out/$agent.log" >&2
    echo "autobahn: wstest failed" >&2
    exit 1
  }
fi
echo "   took $(($(date +%s) - start)) s"

# Judge the report: behavior (the case) and behaviorClose (the closing
# handshake) of every case.
python3 - "$out/$agent/index.json" "$agent" <<'EOF'
import json, sys, collections
index = json.load(open(sys.argv[1]))[sys.argv[2]]
counts, close_counts = collections.Counter(), collections.Counter()
bad = []
for case in sorted(index, key=lambda c: [int(x) for x in c.split(".")]):
    r = index[case]
    counts[r["behavior"]] += 1
    close_counts[r["behaviorClose"]] += 1
    if r["behavior"] in ("FAILED", "NON-STRICT") or r["behaviorClose"] in ("FAILED", "WRONG CODE", "UNCLEAN"):
        bad.append("%s: %s (close: %s)" % (case, r["behavior"], r["behaviorClose"]))
    elif r["behavior"] in ("INFORMATIONAL", "UNIMPLEMENTED"):
        print("   %s %s" % (case, r["behavior"]))
print("   %d cases: %s" % (len(index), ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
print("   closing handshake: %s" % ", ".join("%s %d" % kv for kv in sorted(close_counts.items())))
if bad:
    print("autobahn: %d case(s) failed:" % len(bad))
    for b in bad:
        print("   " + b)
    sys.exit(1)
print("autobahn: no FAILED or NON-STRICT case")
EOF
