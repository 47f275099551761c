#!/usr/bin/env bash
# tls-front.sh: start a chat server behind a client-side HAProxy so the load
# generator, which speaks only ws://, can measure wss:// (scenarios/tls.yaml,
# scenarios/tls-bun.yaml).
#
#   scripts/tls-front.sh SERVER PORT plain|tls [server flags...]
#
# SERVER is the scalechat binary (started as `serve`, metrics off), or Bun's
# binary (a path ending in /bun), which runs deploy/bun/server.js.
# HAProxy listens on 127.0.0.1:PORT (plain TCP) and forwards every connection
# to the server on a free port: as is (plain), or wrapped in TLS with no
# certificate check (tls), the server serving a self-signed P-256
# certificate made here with openssl. Both modes pass through the same proxy,
# so the server sees the same clients and only the TLS layer differs.
# HAProxy runs on CPU 1 with the generator (maxconn 9000: two descriptors a
# connection under the 20,000 limit); the script then execs the server, so
# the pid the bench watches (CPU 0, CPU time, RSS) is the server's alone.
# HAProxy is stopped when the server exits.
set -euo pipefail
bin=$1 port=$2 mode=$3
shift 3
back=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
ssl=""
tlsflags=()
if [ "$mode" = tls ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
  ssl="ssl verify none"
  tlsflags=(--tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem")
elif [ "$mode" != plain ]; then
  echo "tls-front.sh: mode must be plain or tls, not $mode" >&2
  exit 2
fi
cat > "$dir/haproxy.cfg" <<CFG
global
  maxconn 9000
defaults
  mode tcp
  timeout connect 5s
  timeout client 10m
  timeout server 10m
frontend f
  bind 127.0.0.1:$port
  default_backend b
backend b
  server s 127.0.0.1:$back $ssl
CFG
taskset -c 1 haproxy -q -f "$dir/haproxy.cfg" &
hp=$!
# $$ is the server's pid after the exec below: stop HAProxy when it ends.
( tail --pid=$$ -f /dev/null; kill "$hp" 2>/dev/null; rm -rf "$dir" ) &
if [ "$(basename "$bin")" = bun ]; then
  exec "$bin" deploy/bun/server.js --host 127.0.0.1 --port "$back" "${tlsflags[@]}" "$@"
fi
exec "$bin" serve --addr "127.0.0.1:$back" --metrics-addr "" "${tlsflags[@]}" "$@"
