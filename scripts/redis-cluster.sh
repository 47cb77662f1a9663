#!/usr/bin/env bash
# A local Redis Cluster for chronos: 3 masters and 3 replicas on free
# loopback ports, from the distribution's redis-server.
#
#   scripts/redis-cluster.sh up     start it; prints export REDIS_URL=redis-cluster://...
#   scripts/redis-cluster.sh url    print that line again
#   scripts/redis-cluster.sh down   stop it and remove its directory
#
#   eval "$(scripts/redis-cluster.sh up)" && chronos scheduler
#
# State (configs, nodes.conf, logs, pid files) lives in
# $CHRONOS_REDIS_CLUSTER_DIR, default ${TMPDIR:-/tmp}/chronos-redis-cluster.
# Persistence is off: down (or a crash of a master and its replica) loses
# the data. cluster-node-timeout is 2 s (CLUSTER_NODE_TIMEOUT_MS), so a
# killed master's replica takes over within a few seconds.
set -euo pipefail
. "$(dirname "$0")/redis-lib.sh"

STATE=${CHRONOS_REDIS_CLUSTER_DIR:-${TMPDIR:-/tmp}/chronos-redis-cluster}
MASTERS=3
NODE_TIMEOUT=${CLUSTER_NODE_TIMEOUT_MS:-2000}

url() { [ -f "$STATE/url" ] || die "not running (no $STATE/url)"; echo "export REDIS_URL=$(cat "$STATE/url")"; }

cluster_ok() {
  local p
  for p in $(cat "$STATE/ports"); do
    rcmd "$p" cluster info | grep -q '^cluster_state:ok' || return 1
    rcmd "$p" cluster info | grep -q '^cluster_slots_ok:16384' || return 1
  done
  # Every replica in sync with its master.
  for p in $(cat "$STATE/ports"); do
    if rcmd "$p" info replication | grep -q '^role:slave'; then
      rcmd "$p" info replication | grep -q '^master_link_status:up' || return 1
    fi
  done
}

knows_all() {
  local p
  for p in $(cat "$STATE/ports"); do
    [ "$(rcmd "$p" cluster nodes | grep -c .)" -eq $((MASTERS * 2)) ] || return 1
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
  local ports=() i p
  for i in $(seq 0 $((MASTERS * 2 - 1))); do
    p=$(pick_port bus)
    ports+=("$p")
    start_node "node$i" "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout "$NODE_TIMEOUT" --save "" --appendonly no
  done
  echo "${ports[*]}" >"$STATE/ports"

  # Slots split evenly over the masters (ADDSLOTS: Redis 6 has no
  # ADDSLOTSRANGE), every node meets the first, each replica follows its
  # master.
  for i in $(seq 0 $((MASTERS - 1))); do
    rcmd "${ports[$i]}" cluster addslots $(seq $((i * 16384 / MASTERS)) $(((i + 1) * 16384 / MASTERS - 1))) >/dev/null
  done
  for p in "${ports[@]:1}"; do
    rcmd "$p" cluster meet 127.0.0.1 "${ports[0]}" >/dev/null
  done
  wait_for 30 "every node knowing every node" knows_all
  for i in $(seq 0 $((MASTERS - 1))); do
    local id
    id=$(rcmd "${ports[$i]}" cluster myid)
    rcmd "${ports[$((MASTERS + i))]}" cluster replicate "$id" >/dev/null
  done
  wait_for 60 "cluster_state:ok on every node" cluster_ok

  local addrs
  addrs=$(printf '127.0.0.1:%s,' "${ports[@]}")
  echo "redis-cluster://${addrs%,}" >"$STATE/url"
  say "up: masters ${ports[*]:0:$MASTERS}, replicas ${ports[*]:$MASTERS}; state in $STATE"
  url
}

case "${1:-}" in
  up) up ;;
  down) stop_all ;;
  url) url ;;
  *) die "usage: $0 up|down|url" ;;
esac
