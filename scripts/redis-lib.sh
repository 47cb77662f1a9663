# Shared by scripts/redis-cluster.sh and scripts/redis-sentinel.sh: free
# loopback ports, commands to a local redis-server with or without
# redis-cli, waiting, and stopping the processes a state directory lists.
# Sourced, not run.

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
say() { echo "$(basename "$0"): $*" >&2; }

need_redis_server() {
  command -v redis-server >/dev/null 2>&1 ||
    die "redis-server not found on PATH (install it, e.g. apt-get install -y redis-server)"
}

# port_free P: nothing listens on 127.0.0.1:P.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick_port [BUS]: a free port in 15000-24999 (below Linux's ephemeral
# range), not one already in PICKED; with BUS, P+10000 is free too (a
# cluster node's bus port).
PICKED=" "
pick_port() {
  local p i
  for i in $(seq 1 500); do
    p=$((15000 + RANDOM % 10000))
    case "$PICKED" in *" $p "*|*" $((p + 10000)) "*) continue ;; esac
    port_free "$p" || continue
    if [ -n "${1:-}" ]; then port_free $((p + 10000)) || continue; fi
    PICKED="$PICKED$p $((p + 10000)) "
    echo "$p"
    return 0
  done
  die "no free port in 15000-24999"
}

# rcmd PORT ARGS...: one command to 127.0.0.1:PORT, its reply on stdout
# (an array's elements one a line). With redis-cli when there is one,
# else an inline command over bash's /dev/tcp.
rcmd() {
  local port=$1
  shift
  if command -v redis-cli >/dev/null 2>&1; then
    redis-cli -h 127.0.0.1 -p "$port" "$@"
    return
  fi
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s\r\n' "$*" >&3
  local rc=0
  read_reply || rc=$?
  exec 3<&-
  return "$rc"
}

# read_reply: one RESP reply from fd 3 to stdout; fails on an error reply.
read_reply() {
  local line n i data LC_ALL=C
  IFS= read -r line <&3 || return 1
  line=${line%$'\r'}
  case "$line" in
    -*) echo "${line#-}"; return 1 ;;
    \$-1 | \*-1) ;;
    \$*) n=${line#\$}; IFS= read -r -d '' -N "$((n + 2))" data <&3; printf '%s\n' "${data%$'\r\n'}" ;;
    \**) n=${line#\*}; for i in $(seq 1 "$n"); do read_reply || return 1; done ;;
    *) echo "${line#[+:]}" ;;
  esac
}

# wait_for SECONDS WHAT CMD...: run CMD every 0.1 s until it succeeds.
wait_for() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq 1 $((secs * 10))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  die "$what: not within ${secs}s (logs in $STATE)"
}

pings() { [ "$(rcmd "$1" ping)" = PONG ]; }

# stop_all: SIGTERM the processes of STATE's pid files, then SIGKILL what
# is left after 5 s, and remove STATE.
stop_all() {
  [ -d "$STATE" ] || { say "nothing to stop ($STATE does not exist)"; return 0; }
  local f pid pids="" i
  for f in "$STATE"/*/redis.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null && pids="$pids $pid"; fi
  done
  for i in $(seq 1 50); do
    local alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for pid in $pids; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$STATE"
  say "stopped; removed $STATE"
}

# running: every pid file of STATE names a live process.
running() {
  local f n=0
  for f in "$STATE"/*/redis.pid; do
    [ -f "$f" ] || return 1
    kill -0 "$(cat "$f")" 2>/dev/null || return 1
    n=$((n + 1))
  done
  [ "$n" -gt 0 ]
}

# start_node NAME PORT ARGS...: redis-server in STATE/NAME, daemonized,
# its pid in STATE/NAME/redis.pid, its log in STATE/NAME/redis.log.
start_node() {
  local name=$1 port=$2
  shift 2
  local dir="$STATE/$name"
  mkdir -p "$dir"
  redis-server "$@" --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" ||
    die "$name: redis-server did not start (see $dir/redis.log)"
  wait_for 10 "$name on port $port answering PING" pings "$port"
}
