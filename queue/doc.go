// Package queue owns everything chronos keeps in Redis: the key layout, the
// Lua scripts, the schedule store, run records, the transactional outbox that
// turns planned runs into asynq tasks, shard leases and the shared clock.
//
// # Layout
//
// Schedules are sharded by a hash of their id (ShardOf). All keys of one
// shard share the hash tag "{sNN}", so every script touches one Redis
// Cluster slot:
//
//	chronos:{s07}:due            ZSET  schedule id -> act time (ms); +inf when paused, held or retired
//	chronos:{s07}:sched:<id>     HASH  def (JSON), next (ms), paused, inflight (key), held
//	chronos:{s07}:runs:<id>      ZSET  idempotency key -> run_at (ms), the last N runs
//	chronos:{s07}:run:<key>      HASH  one run record (see runFields)
//	chronos:{s07}:outbox         HASH  idempotency key -> task payload, not yet handed to asynq
//	chronos:{s07}:inflight       ZSET  schedule id -> deadline (ms) of its in-flight run
//	chronos:{s07}:lease          STRING redsync lock of the shard
//	chronos:wf:{<id>}:<version>  STRING workflow DAG JSON
//	chronos:meta                 HASH  shards (fixed when the first process starts)
//	chronos:schedulers           ZSET  scheduler replica id -> last heartbeat (ms)
//
// A schedule's act time is its next fire time minus the lookahead for the
// "allow" overlap policy (so its task can be enqueued ahead with ProcessAt),
// and the next fire time itself for "skip" and "queue", whose overlap
// decision must be made when the run is due.
//
// # Exactly one enqueue per planned run
//
// A scheduler plans in Go (cron math) and commits in one script per page
// (commitScript): the commit compares each schedule's next time and in-flight
// run with what the plan was computed from, and only then creates the run
// records, writes each task payload to the shard's outbox and advances the
// schedule — atomically. A second replica that planned from the same state
// finds the comparison false and writes nothing. Tasks then go from the
// outbox to asynq with TaskID = idempotency key, and leave the outbox only
// after asynq has them; a crash in between leaves them in the outbox for
// the next holder of the shard, whose enqueue of an already-enqueued task is
// rejected by asynq as a TaskID conflict. asynq keeps finished tasks for the
// task retention, so that conflict holds long after the run.
package queue
