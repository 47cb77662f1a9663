package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
)

// ShardsDefault is the default number of shards.
const ShardsDefault = 16

// ShardsMax bounds SHARDS: each shard is a lock and a ticking loop.
const ShardsMax = 1024

const keyPrefix = "chronos:"

// ShardOf maps an id (schedule id, or idempotency key for manual runs) to
// its shard.
func ShardOf(id string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}

// shardPrefix is the prefix of every key of shard s, hash tag included.
// Every key of a tick is built from it, so the prefixes of the shards
// SHARDS allows, and the keys each shard has one of, are made once:
// formatting one per key was 7% of a scheduler's CPU in a cold burst, and
// joining the due and version keys two allocations an upsert
// (docs/perf/cold-burst.md).
func shardPrefix(s int) string { return shardKeysOf(s).prefix }

// shardKeys are the keys shard s has one of.
type shardKeys struct{ prefix, due, inflight, versions, lease, made string }

var shardKeyTable = func() []shardKeys {
	t := make([]shardKeys, ShardsMax)
	for s := range t {
		t[s] = makeShardKeys(s)
	}
	return t
}()

func shardKeysOf(s int) *shardKeys {
	if s >= 0 && s < len(shardKeyTable) {
		return &shardKeyTable[s]
	}
	k := makeShardKeys(s)
	return &k
}

func makeShardKeys(s int) shardKeys {
	p := formatShardPrefix(s)
	return shardKeys{prefix: p, due: p + "due", inflight: p + "inflight", versions: p + "vers", lease: p + "lease", made: p + segRunsMade}
}

func formatShardPrefix(s int) string { return fmt.Sprintf("%s{s%02d}:", keyPrefix, s) }

func dueKey(s int) string                 { return shardKeysOf(s).due }
func inflightKey(s int) string            { return shardKeysOf(s).inflight }
func versionsKey(s int) string            { return shardKeysOf(s).versions }
func leaseKey(s int) string               { return shardKeysOf(s).lease }
func scheduleKey(s int, id string) string { return shardPrefix(s) + segSched + id }
func historyKey(s int, id string) string  { return shardPrefix(s) + segRuns + id }
func deletedKey(s int, id string) string  { return shardPrefix(s) + segDeleted + id }
func runKey(s int, key string) string     { return shardPrefix(s) + segRun + key }

// segRunsMade is the key after a shard's prefix (chronos:{sNN}:runsmade)
// of runsMadeKey.
const segRunsMade = "runsmade"

// runsMadeKey is shard s's counter of the run records, run tasks and
// manual marks made there outside a schedule's commit: every writer that
// can make one (manual_run.lua, backfill.lua, markEveryShard) increments
// it in the same atomic step. A commit writes a schedule's runs only with
// that schedule's hash (its next time moves), so the fast path's WATCH of
// the chunk's hashes and this one key sees any run key made after its
// EXISTS found none (commitFast). Its value means nothing.
func runsMadeKey(s int) string { return shardKeysOf(s).made }

// backfillQueueKey is the zset of the runs a queue backfill chained
// behind schedule id's run in flight (idempotency key -> the earliest
// time it may start, ms), which release.lua starts one at a time. Only
// Go builds it: the scripts get it in KEYS.
func backfillQueueKey(s int, id string) string { return shardPrefix(s) + "bfq:" + id }

// The owner's alarm index lives in the owner's shard (ShardOf the DID),
// where its alarms are too.
func alarmsKey(s int, owner string) string       { return shardPrefix(s) + segAlarms + owner }
func alarmKeysKey(s int, owner string) string    { return shardPrefix(s) + segAlarmKeys + owner }
func alarmsActiveKey(s int, owner string) string { return shardPrefix(s) + segAlarmsActive + owner }

// releasedChannel is the Pub/Sub channel of shard s's schedules made due
// at once by their run in flight ending (status.lua, WatchReleased).
func releasedChannel(s int) string { return shardPrefix(s) + chanReleased }

// manualKeyPrefix prefixes the marks of the idempotency keys manual runs
// took in shard s (the key's shard, beside its record and task), where
// the commit script looks: a schedule's run with such a key is not
// enqueued again.
func manualKeyPrefix(s int) string { return shardPrefix(s) + segManual }

// ShardQueue is the name of shard s's asynq queue for the run queue base
// (Config.QueueName): "sNN}<base>". asynq's keys for it are
// "asynq:{sNN}<base>}:...", whose hash tag (up to the first "}") is sNN,
// the tag of the shard's own keys, so the shard's schedules, run records
// and tasks share one hash slot on Redis Cluster, and base still tells
// one chronos's queues from another program's.
func ShardQueue(base string, s int) string { return fmt.Sprintf("s%02d}%s", s, base) }

// requestKey is the hash of the first answer to a request sent with an
// Idempotency-Key header, per scope (route and caller).
func requestKey(scope, key string) string { return keyPrefix + "req:" + requestDigest(scope, key) }

// requestDigest hashes a request's scope and key: a key is the caller's
// string, and a digest keeps the Redis key short and free of its bytes.
func requestDigest(scope, key string) string {
	h := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(h[:])
}

func workflowKey(id, version string) string {
	return keyPrefix + "wf:{" + id + "}:" + version
}

// The replicas' heartbeat keys come in pairs that the heartbeat script
// writes together: each pair shares a hash tag (one Redis Cluster slot).
const (
	// workflowsKey is the set of the stored workflow versions' keys: the
	// count Config.WorkflowMaxVersions bounds.
	workflowsKey      = keyPrefix + "workflows"
	metaKey           = keyPrefix + "meta"
	schedulersKey     = keyPrefix + "{schedulers}"
	schedulersHeldKey = keyPrefix + "{schedulers}:held"
	launchersKey      = keyPrefix + "{launchers}"
	launchersSkewKey  = keyPrefix + "{launchers}:skew"
)
