#!/usr/bin/env bash
# A local scalechat cluster in one command: redis-server (or nats-server), N
# scalechat nodes and HAProxy (deploy/haproxy/haproxy.cfg) on free loopback ports.
#
#   scripts/cluster.sh up [N] [-- serve flags...]   start N nodes (default 3, at most 8)
#   scripts/cluster.sh status                        what runs, and each node's /readyz
#   scripts/cluster.sh down                          stop everything up started
#
# Example: scripts/cluster.sh up 3 -- --log-level debug --history 500
#
# Environment of up:
#   SCALECHAT_CLUSTER_ENGINE=nats     the cluster on NATS instead of Redis (the engine is
#                                     in progress, docs/nats.md): nats-server -js, nodes --nats
#   SCALECHAT_CLUSTER_NATS_SERVERS=3  with nats: a NATS cluster of 3 servers, nodes
#                                     --nats-replicas 3 (default 1 server)
#   SCALECHAT_CLUSTER_DRY_RUN=1       print the commands up would run; start nothing
#
# State (binary, pids, logs, cluster.env with the URLs) lives in
# $SCALECHAT_CLUSTER_DIR, default ${TMPDIR:-/tmp}/scalechat-cluster.
# Missing Debian packages (redis-server, haproxy) are installed with apt-get
# when run as root; nats-server is not a Debian package (go install
# github.com/nats-io/nats-server/v2@v2.15.2). On Redis the processes are
# started by `scalechat cluster` (the launcher the bench and the tests
# share); this script builds the binary and hands it the repository's
# haproxy.cfg. On NATS, which the launcher does not know yet, this script
# starts them itself, in the same layout, so that status and down work alike.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${SCALECHAT_CLUSTER_DIR:-${TMPDIR:-/tmp}/scalechat-cluster}
engine=${SCALECHAT_CLUSTER_ENGINE:-redis}
dry=${SCALECHAT_CLUSTER_DRY_RUN:-}
[ "$dry" = 0 ] && dry=
haproxy_cfg=$root/deploy/haproxy/haproxy.cfg

die() { echo "cluster: $*" >&2; exit 1; }

usage() {
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

ensure_packages() {
  local need=() p
  for p; do command -v "$p" >/dev/null || need+=("$p"); done
  [ ${#need[@]} -eq 0 ] && return
  [ "$(id -u)" -eq 0 ] || die "missing ${need[*]}: run sudo apt-get install -y ${need[*]}"
  echo "== installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

# show prints a command line of a dry run, "+ prog args", quoting only what
# needs it.
show() {
  local a out=+ plain='^[A-Za-z0-9_./:,=@%+-]+$'
  for a; do
    if [[ $a =~ $plain ]]; then out+=" $a"; else out+=" $(printf %q "$a")"; fi
  done
  printf '%s\n' "$out"
}

build() {
  if [ -n "$dry" ]; then show go build -o "$dir/scalechat" ./cmd/scalechat; return; fi
  mkdir -p "$dir"
  command -v go >/dev/null || die "go is not installed"
  echo "== building scalechat into $dir"
  # Built beside and renamed: a running cluster keeps its binary (and up
  # then says it runs).
  (cd "$root" && go build -o "$dir/scalechat.new" ./cmd/scalechat)
  mv -f "$dir/scalechat.new" "$dir/scalechat"
}

up() {
  local n=()
  if [ $# -gt 0 ] && [ "$1" != -- ]; then n=("$1"); shift; fi
  [ $# -gt 0 ] && { [ "$1" = -- ] || usage; shift; }
  case $engine in
  redis)
    [ -z "${SCALECHAT_CLUSTER_NATS_SERVERS:-}" ] || die "SCALECHAT_CLUSTER_NATS_SERVERS needs SCALECHAT_CLUSTER_ENGINE=nats"
    [ -n "$dry" ] || ensure_packages redis-server haproxy
    build
    local cmd=("$dir/scalechat" cluster up "${n[@]}" --dir "$dir" --haproxy-cfg "$haproxy_cfg" -- "$@")
    if [ -n "$dry" ]; then show "${cmd[@]}"; exit 0; fi
    exec "${cmd[@]}"
    ;;
  nats) up_nats "${n[0]:-3}" "$@" ;;
  *) die "SCALECHAT_CLUSTER_ENGINE must be redis or nats, not \"$engine\"" ;;
  esac
}

# --- The NATS engine: what `scalechat cluster up` does for Redis, in the
# same layout (DIR/NAME.pid and NAME.log of the nodes and HAProxy,
# cluster.env), the NATS servers in DIR/nats/ (pids, logs, JetStream
# stores), which the binary's status and down do not see: this script adds
# them, and stops them last.

# free_port sets port to a loopback port below 22768 that nobody listens on
# and that this run has not handed out yet. 10000-22767 lies below the
# kernel's ephemeral ports (32768 up): no outgoing connection takes it
# before its server binds it.
taken=" "
free_port() {
  local i
  for ((i = 0; i < 1000; i++)); do
    port=$((10000 + RANDOM % 12768))
    [[ $taken == *" $port "* ]] && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
    taken+="$port "
    return 0
  done
  die "no free loopback port below 22768"
}

# alive: pid exists and is not a zombie.
alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [ "${s%% *}" != Z ]
}

# http_ok HOST:PORT PATH: GET answers 200.
http_ok() {
  local line
  line=$(
    exec 2>/dev/null # a refused connection is an answer too
    exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
    IFS= read -r -t 2 line <&3 || true
    printf %s "$line"
  ) || return 1
  [[ $line == HTTP/1.?" 200"* ]]
}

# spawn FOLDER NAME PROG ARGS...: PROG in its own session (it outlives this
# script), its output in FOLDER/NAME.log, its pid in FOLDER/NAME.pid.
spawn() {
  local d=$1 name=$2
  shift 2
  if [ -n "$dry" ]; then show "$@"; return; fi
  setsid "$@" >"$d/$name.log" 2>&1 </dev/null &
  echo $! >"$d/$name.pid"
}

# wait_http FOLDER NAME HOST:PORT PATH SECONDS: until GET answers 200, while
# NAME runs.
wait_http() {
  local d=$1 name=$2 addr=$3 path=$4 deadline=$((SECONDS + $5)) pid
  [ -n "$dry" ] && return
  pid=$(<"$d/$name.pid")
  until http_ok "$addr" "$path"; do
    alive "$pid" || fail "$name exited at start; see $d/$name.log"
    ((SECONDS < deadline)) || fail "$name: no 200 from http://$addr$path within $5s; see $d/$name.log"
    sleep 0.05
  done
}

fail() { die "$* (scripts/cluster.sh down stops what did start)"; }

# refuse_running: no cluster may run from the folder; stale pid files go.
refuse_running() {
  local f pid
  for f in "$dir"/*.pid "$dir"/nats/*.pid; do
    [ -e "$f" ] || continue
    pid=$(<"$f")
    alive "$pid" && die "a cluster already runs from $dir: scripts/cluster.sh down first"
    [ -n "$dry" ] || rm -f "$f"
  done
}

up_nats() {
  local n=$1 servers=${SCALECHAT_CLUSTER_NATS_SERVERS:-1} i
  shift
  [[ $n =~ ^[1-8]$ ]] || die "the number of nodes must be 1 to 8 (haproxy.cfg names 8), got \"$n\""
  [[ $servers == [13] ]] || die "SCALECHAT_CLUSTER_NATS_SERVERS must be 1 or 3, not \"$servers\""
  if [ -z "$dry" ]; then
    command -v nats-server >/dev/null ||
      die "nats-server is not installed: go install github.com/nats-io/nats-server/v2@v2.15.2 (or a release from github.com/nats-io/nats-server)"
    ensure_packages haproxy
  fi
  build
  refuse_running
  local nd=$dir/nats
  [ -n "$dry" ] || mkdir -p "$nd"

  # The NATS servers: JetStream on, a fresh store each (as Redis keeps
  # nothing), a monitoring port for /healthz; three are one NATS cluster.
  local clients=() monitors=() routes=() urls
  for ((i = 0; i < servers; i++)); do
    free_port; clients+=("$port")
    free_port; monitors+=("$port")
    if ((servers > 1)); then free_port; routes+=("nats://127.0.0.1:$port"); fi
  done
  urls=$(for p in "${clients[@]}"; do echo "nats://127.0.0.1:$p"; done | paste -sd,)
  for ((i = 0; i < servers; i++)); do
    local args=(-a 127.0.0.1 -p "${clients[i]}" -js -sd "$nd/nats$((i + 1))" -m "${monitors[i]}")
    if ((servers > 1)); then
      args+=(--server_name "n$((i + 1))" --cluster_name scalechat --cluster "${routes[i]}"
        --routes "$(IFS=,; echo "${routes[*]}")")
    fi
    [ -n "$dry" ] || rm -rf "$nd/nats$((i + 1))"
    spawn "$nd" "nats$((i + 1))" nats-server "${args[@]}"
  done
  # /healthz answers 200 once JetStream is ready: on a cluster, once the
  # servers have elected a leader.
  for ((i = 0; i < servers; i++)); do
    wait_http "$nd" "nats$((i + 1))" "127.0.0.1:${monitors[i]}" /healthz 30
  done

  # The nodes, as the launcher starts them, --nats in place of --redis.
  local flags=(--nats "$urls") nodes=() metrics=()
  ((servers > 1)) && flags+=(--nats-replicas 3)
  for ((i = 0; i < n; i++)); do
    free_port; nodes+=("127.0.0.1:$port")
    free_port; metrics+=("127.0.0.1:$port")
    spawn "$dir" "node$((i + 1))" "$dir/scalechat" serve --addr "${nodes[i]}" --metrics-addr "${metrics[i]}" "${flags[@]}" "$@"
    wait_http "$dir" "node$((i + 1))" "${nodes[i]}" /readyz 15
  done

  # HAProxy in front, configured by its LB_* variables.
  local lb stats lbenv
  free_port; lb=127.0.0.1:$port
  free_port; stats=127.0.0.1:$port
  lbenv=("LB_ADDR=$lb" "LB_STATS_ADDR=$stats")
  for ((i = 0; i < n; i++)); do lbenv+=("LB_NODE$((i + 1))=${nodes[i]}"); done
  if [ -z "$dry" ]; then
    env "${lbenv[@]}" haproxy -c -q -f "$haproxy_cfg" || fail "haproxy rejects $haproxy_cfg"
  fi
  spawn "$dir" haproxy env "${lbenv[@]}" haproxy -db -f "$haproxy_cfg"
  wait_http "$dir" haproxy "$lb" /readyz 10

  if [ -n "$dry" ]; then
    echo "dry run: nothing started"
    return
  fi
  {
    echo "LB_URL=http://$lb/"
    echo "LB_WS=ws://$lb/ws"
    echo "LB_STATS=http://$stats/stats"
    for ((i = 0; i < n; i++)); do echo "NODE$((i + 1))=http://${nodes[i]}/"; done
    for ((i = 0; i < n; i++)); do echo "NODE$((i + 1))_METRICS=http://${metrics[i]}/metrics"; done
    echo "NATS_URL=$urls"
  } >"$dir/cluster.env"
  local what="one server"
  ((servers > 1)) && what="a cluster of $servers, --nats-replicas 3"
  echo
  echo "scalechat cluster of $n nodes is up, on NATS (in progress: docs/nats.md)"
  printf '  %-16s http://%s/      ws://%s/ws/{room}\n' "chat (haproxy)" "$lb" "$lb"
  printf '  %-16s http://%s/stats\n' "haproxy stats" "$stats"
  for ((i = 0; i < n; i++)); do
    printf '  %-16s http://%s/   dashboard http://%s/dashboard\n' "node$((i + 1))" "${nodes[i]}" "${metrics[i]}"
  done
  printf '  %-16s %s (JetStream, %s)\n' nats "$urls" "$what"
  printf '  %-16s %s (URLs in cluster.env)\n' "state and logs" "$dir"
  printf '  %-16s %s loadtest --url ws://%s/ws --rooms 10 --room-size 10 --duration 10s\n' try "$dir/scalechat" "$lb"
  printf '  %-16s SCALECHAT_CLUSTER_DIR=%s scripts/cluster.sh down\n' stop "$dir"
}

# stop FILE.pid: SIGTERM, SIGKILL after 15 s, as the binary's down does.
stop() {
  local f=$1 name pid deadline
  name=$(basename "$f" .pid)
  pid=$(<"$f")
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 15))
    while alive "$pid" && ((SECONDS < deadline)); do sleep 0.1; done
    if alive "$pid"; then
      echo "cluster: $name (pid $pid) ignored SIGTERM for 15s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

# The binary up built: down and status need nothing else. NATS servers
# (DIR/nats) are this script's: status lists them first, down stops them
# after the nodes.
cluster() {
  local nats=()
  [ -d "$dir/nats" ] && mapfile -t nats < <(find "$dir/nats" -maxdepth 1 -name '*.pid' | sort)
  if [ ${#nats[@]} -eq 0 ]; then
    [ -x "$dir/scalechat" ] || { echo "no cluster state in $dir"; [ "$1" = down ]; exit; }
    exec "$dir/scalechat" cluster "$1" --dir "$dir"
  fi
  local f pid name
  case $1 in
  status)
    for f in "${nats[@]}"; do
      pid=$(<"$f") name=$(basename "$f" .pid)
      if alive "$pid"; then
        printf '%-8s running (pid %d)\n' "$name" "$pid"
      else
        printf '%-8s not running (see %s)\n' "$name" "${f%.pid}.log"
      fi
    done
    [ ! -x "$dir/scalechat" ] || "$dir/scalechat" cluster status --dir "$dir" || true
    ;;
  down)
    [ ! -x "$dir/scalechat" ] || "$dir/scalechat" cluster down --dir "$dir"
    for f in "${nats[@]}"; do stop "$f"; done
    ;;
  esac
}

case ${1:-} in
up) shift; up "$@" ;;
down | status) cluster "$1" ;;
*) usage ;;
esac
