#!/usr/bin/env bash
# A local Redis Sentinel set for chronos: a primary, a replica and three
# sentinels (quorum 2) on free loopback ports, from the distribution's
# redis-server (sentinels run as redis-server --sentinel, so no
# redis-sentinel binary is needed).
#
#   scripts/redis-sentinel.sh up     start it; prints export REDIS_URL=redis-sentinel://...
#   scripts/redis-sentinel.sh url    print that line again
#   scripts/redis-sentinel.sh down   stop it and remove its directory
#
#   eval "$(scripts/redis-sentinel.sh up)" && chronos scheduler
#
# State (configs, logs, pid files) lives in $CHRONOS_REDIS_SENTINEL_DIR,
# default ${TMPDIR:-/tmp}/chronos-redis-sentinel. Persistence is off.
# down-after-milliseconds is 2 s (SENTINEL_DOWN_AFTER_MS), so a killed
# primary's replica takes over within a few seconds.
set -euo pipefail
. "$(dirname "$0")/redis-lib.sh"

STATE=${CHRONOS_REDIS_SENTINEL_DIR:-${TMPDIR:-/tmp}/chronos-redis-sentinel}
MASTER=chronos
DOWN_AFTER=${SENTINEL_DOWN_AFTER_MS:-2000}

url() { [ -f "$STATE/url" ] || die "not running (no $STATE/url)"; echo "export REDIS_URL=$(cat "$STATE/url")"; }

replica_online() { rcmd "$1" info replication | grep -q 'state=online'; }

sentinels_ready() {
  local s
  for s in $(cat "$STATE/sentinels"); do
    rcmd "$s" sentinel master "$MASTER" | tr '\n' ' ' | grep -q 'num-other-sentinels 2 ' || return 1
    rcmd "$s" sentinel master "$MASTER" | tr '\n' ' ' | grep -q 'num-slaves 1 ' || return 1
  done
}

up() {
  need_redis_server
  if running; then
    say "already running"
    url
    return
  fi
  [ -d "$STATE" ] && stop_all
  mkdir -p "$STATE"
  local primary replica s sentinels=() i
  primary=$(pick_port)
  replica=$(pick_port)
  start_node primary "$primary" --save "" --appendonly no
  start_node replica "$replica" --save "" --appendonly no --replicaof 127.0.0.1 "$primary"
  wait_for 30 "the replica in sync" replica_online "$primary"
  for i in 0 1 2; do
    s=$(pick_port)
    sentinels+=("$s")
    mkdir -p "$STATE/sentinel$i"
    cat >"$STATE/sentinel$i/sentinel.conf" <<EOF
sentinel monitor $MASTER 127.0.0.1 $primary 2
sentinel down-after-milliseconds $MASTER $DOWN_AFTER
sentinel failover-timeout $MASTER $((DOWN_AFTER * 5))
sentinel parallel-syncs $MASTER 1
EOF
    start_node "sentinel$i" "$s" "$STATE/sentinel$i/sentinel.conf" --sentinel
  done
  echo "${sentinels[*]}" >"$STATE/sentinels"
  wait_for 30 "every sentinel knowing the replica and the other sentinels" sentinels_ready

  local addrs
  addrs=$(printf '127.0.0.1:%s,' "${sentinels[@]}")
  echo "redis-sentinel://${addrs%,}/$MASTER" >"$STATE/url"
  say "up: primary $primary, replica $replica, sentinels ${sentinels[*]} (master name $MASTER); state in $STATE"
  url
}

case "${1:-}" in
  up) up ;;
  down) stop_all ;;
  url) url ;;
  *) die "usage: $0 up|down|url" ;;
esac
