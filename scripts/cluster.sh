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
# when run as root.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${SCALECHAT_CLUSTER_DIR:-${TMPDIR:-/tmp}/scalechat-cluster}

die() { echo "cluster: $*" >&2; exit 1; }

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# running PID: the process exists and is not a zombie waiting for init to
# reap it (the processes up starts are not children of down).
running() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# alive PIDFILE: the process recorded in PIDFILE runs.
alive() { [ -f "$1" ] && running "$(cat "$1")"; }

# port_free PORT: nothing accepts on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

taken=" "
# free_port: a port nothing listens on, not handed out before in this run.
free_port() {
  local p i
  for i in $(seq 1 200); do
    p=$((20000 + RANDOM % 12000))
    if [[ $taken != *" $p "* ]] && port_free "$p"; then
      taken+="$p "
      echo "$p"
      return
    fi
  done
  die "no free port found on 127.0.0.1"
}

# http_status PORT PATH: the HTTP status of GET PATH on 127.0.0.1:PORT, or
# nothing when it does not answer within 2 s.
http_status() {
  local line
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
    printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$2" >&3
    IFS=' ' read -r -t 2 _ line _ <&3 || true
    echo "$line"
  ) 2>/dev/null
}

# wait_until SECONDS WHAT COMMAND...: run COMMAND every 0.1 s until it
# succeeds; fail after SECONDS.
wait_until() {
  local secs=$1 what=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@"; do
    [ $SECONDS -lt $end ] || die "$what did not come up within ${secs}s (logs in $dir)"
    sleep 0.1
  done
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

# spawn NAME COMMAND...: start COMMAND in the background, in its own
# session, output to NAME.log, pid to NAME.pid.
spawn() {
  local name=$1
  shift
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

node_ready() { [ "$(http_status "$1" /readyz)" = 200 ]; }
redis_up() { [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; }
haproxy_up() { [ "$(http_status "$1" /readyz)" = 200 ]; }

up() {
  local n=3
  if [ $# -gt 0 ] && [ "$1" != -- ]; then n=$1; shift; fi
  [ $# -gt 0 ] && { [ "$1" = -- ] || usage; shift; }
  [[ $n =~ ^[1-8]$ ]] || die "N must be 1 to 8 (haproxy.cfg names 8 nodes), got $n"
  mkdir -p "$dir"
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    alive "$f" && die "a cluster already runs from $dir: scripts/cluster.sh down first"
    rm -f "$f"
  done
  ensure_packages
  command -v go >/dev/null || die "go is not installed"

  echo "== building scalechat into $dir"
  (cd "$root" && go build -o "$dir/scalechat" ./cmd/scalechat)

  local rport hport sport
  rport=$(free_port)
  spawn redis redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir"
  wait_until 10 "redis-server" redis_up "$rport"

  local ports=() mports=() i p m
  for i in $(seq 1 "$n"); do
    p=$(free_port)
    m=$(free_port)
    ports+=("$p")
    mports+=("$m")
    spawn "node$i" "$dir/scalechat" serve --addr "127.0.0.1:$p" --metrics-addr "127.0.0.1:$m" \
      --redis "redis://127.0.0.1:$rport/0" "$@"
  done
  for i in $(seq 1 "$n"); do
    wait_until 15 "node$i" node_ready "${ports[$((i - 1))]}"
  done

  hport=$(free_port)
  sport=$(free_port)
  local env=(LB_ADDR="127.0.0.1:$hport" LB_STATS_ADDR="127.0.0.1:$sport")
  for i in $(seq 1 "$n"); do env+=(LB_NODE$i="127.0.0.1:${ports[$((i - 1))]}"); done
  env "${env[@]}" haproxy -c -q -f "$root/deploy/haproxy/haproxy.cfg" || die "haproxy rejects deploy/haproxy/haproxy.cfg"
  spawn haproxy env "${env[@]}" haproxy -db -f "$root/deploy/haproxy/haproxy.cfg"
  wait_until 10 "haproxy" haproxy_up "$hport"

  {
    echo "LB_URL=http://127.0.0.1:$hport/"
    echo "LB_WS=ws://127.0.0.1:$hport/ws"
    echo "LB_STATS=http://127.0.0.1:$sport/stats"
    echo "REDIS_URL=redis://127.0.0.1:$rport/0"
    for i in $(seq 1 "$n"); do echo "NODE$i=http://127.0.0.1:${ports[$((i - 1))]}/"; done
    for i in $(seq 1 "$n"); do echo "NODE${i}_METRICS=http://127.0.0.1:${mports[$((i - 1))]}/metrics"; done
  } >"$dir/cluster.env"

  echo
  echo "scalechat cluster of $n nodes is up"
  echo "  chat (haproxy)   http://127.0.0.1:$hport/      ws://127.0.0.1:$hport/ws/{room}"
  echo "  haproxy stats    http://127.0.0.1:$sport/stats"
  for i in $(seq 1 "$n"); do
    echo "  node$i            http://127.0.0.1:${ports[$((i - 1))]}/   dashboard http://127.0.0.1:${mports[$((i - 1))]}/dashboard"
  done
  echo "  redis            redis://127.0.0.1:$rport/0"
  echo "  state and logs   $dir (URLs in cluster.env)"
  echo "  try              $dir/scalechat loadtest --url ws://127.0.0.1:$hport/ws --rooms 10 --room-size 10 --duration 10s"
  echo "  stop             scripts/cluster.sh down"
}

# stop NAME: SIGTERM (a node drains: clients get 1001), SIGKILL after 15 s.
stop() {
  local f="$dir/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 150); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      echo "cluster: $1 (pid $pid) ignored SIGTERM for 15s: killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stopped $1 (pid $pid)"
  fi
  rm -f "$f"
}

down() {
  [ -d "$dir" ] || { echo "no cluster state in $dir"; return; }
  # The balancer first, so no client is sent to a stopping node; Redis last.
  stop haproxy
  local f
  for f in "$dir"/node*.pid; do
    [ -e "$f" ] || continue
    stop "$(basename "$f" .pid)"
  done
  stop redis
  rm -f "$dir/cluster.env"
  echo "cluster down (logs kept in $dir)"
}

status() {
  [ -d "$dir" ] || { echo "no cluster state in $dir"; exit 1; }
  local f name any=0
  for f in "$dir"/*.pid; do
    [ -e "$f" ] || continue
    any=1
    name=$(basename "$f" .pid)
    if alive "$f"; then
      printf '%-8s running (pid %s)' "$name" "$(cat "$f")"
      if [[ $name == node* ]] && [ -f "$dir/cluster.env" ]; then
        local url port
        url=$(grep "^$(echo "$name" | tr a-z A-Z)=" "$dir/cluster.env" | cut -d= -f2-)
        port=${url##*:}
        port=${port%/}
        printf '  /readyz %s' "$(http_status "$port" /readyz || true)"
      fi
      echo
    else
      printf '%-8s not running (see %s)\n' "$name" "$dir/$name.log"
    fi
  done
  [ $any -eq 1 ] || { echo "nothing started from $dir"; exit 1; }
  [ -f "$dir/cluster.env" ] && cat "$dir/cluster.env"
  return 0
}

case ${1:-} in
up) shift; up "$@" ;;
down) down ;;
status) status ;;
*) usage ;;
esac
