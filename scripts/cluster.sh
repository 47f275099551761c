#!/usr/bin/env bash
# A local scalechat cluster in one command: redis-server, N scalechat nodes
# and HAProxy (deploy/haproxy/haproxy.cfg) on free loopback ports.
#
#   scripts/cluster.sh up [N] [-- serve flags...]   start N nodes (default 3, at most 8)
#   scripts/cluster.sh status                        what runs, and each node's /readyz
#   scripts/cluster.sh down                          stop everything up started
#
# Example: scripts/cluster.sh up 3 -- --log-level debug --history 500
#
# State (binary, pids, logs, cluster.env with the URLs) lives in
# $SCALECHAT_CLUSTER_DIR, default ${TMPDIR:-/tmp}/scalechat-cluster.
# Missing Debian packages (redis-server, haproxy) are installed with apt-get
# when run as root. The processes are started by `scalechat cluster` (the
# launcher the bench and the tests share); this script builds the binary
# and hands it the repository's haproxy.cfg.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${SCALECHAT_CLUSTER_DIR:-${TMPDIR:-/tmp}/scalechat-cluster}

die() { echo "cluster: $*" >&2; exit 1; }

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

ensure_packages() {
  local need=()
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v haproxy >/dev/null || need+=(haproxy)
  [ ${#need[@]} -eq 0 ] && return
  [ "$(id -u)" -eq 0 ] || die "missing ${need[*]}: run sudo apt-get install -y ${need[*]}"
  echo "== installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

up() {
  mkdir -p "$dir"
  ensure_packages
  command -v go >/dev/null || die "go is not installed"
  echo "== building scalechat into $dir"
  # Built beside and renamed: a running cluster keeps its binary (and up
  # then says it runs).
  (cd "$root" && go build -o "$dir/scalechat.new" ./cmd/scalechat)
  mv -f "$dir/scalechat.new" "$dir/scalechat"
  local n=()
  if [ $# -gt 0 ] && [ "$1" != -- ]; then n=("$1"); shift; fi
  [ $# -gt 0 ] && { [ "$1" = -- ] || usage; shift; }
  exec "$dir/scalechat" cluster up "${n[@]}" --dir "$dir" --haproxy-cfg "$root/deploy/haproxy/haproxy.cfg" -- "$@"
}

# The binary up built: down and status need nothing else.
cluster() {
  [ -x "$dir/scalechat" ] || { echo "no cluster state in $dir"; [ "$1" = down ]; exit; }
  exec "$dir/scalechat" cluster "$1" --dir "$dir"
}

case ${1:-} in
up) shift; up "$@" ;;
down | status) cluster "$1" ;;
*) usage ;;
esac
