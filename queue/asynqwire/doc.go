// Package asynqwire speaks asynq's private Redis layout: chronos writes,
// takes, finishes, forwards and reads asynq tasks itself, in batches,
// where asynq's Client and server would do one task per round trip, and
// inside chronos's own scripts, so that a run's task is written in the
// same atomic step as its run record.
//
// Queue is one asynq queue: Keys is its key layout, Forward makes tasks
// scheduled ahead runnable, Take and Finish run tasks as asynq's server
// does, Recover and DeleteExpiredCompleted do its recoverer's and its
// janitor's work (recover.go), Archived reads what asynq archived,
// Collector reports the depth. WriteServer lists a process among
// asynqmon's servers as asynq's heartbeater does (servers.go). Launchers
// run no asynq server: every script that touches a run queue is this
// package's, every key in KEYS.
// EnqueueLua is the Lua library that writes a task; the schedule store's
// commit and manual run scripts put it before their own code.
//
// # Who forwards, by which clock
//
// A task enqueued ahead waits in the Scheduled set until its second; a
// failed attempt's retry waits in the Retry set. asynq's servers forward
// both every DelayedTaskCheckInterval, 100 at a time, by their host's
// clock, and have no switch to stop it; launchers run none. Each set is
// forwarded by the clock that scored it:
//
//   - Runs enqueued ahead are scored by their fire time on the shared
//     clock, and only the shared clock forwards them (Forward): schedulers
//     on each tick boundary, ForwardBatch a batch, and each launcher every
//     ForwardInterval, so no launcher is handed a run before its second
//     however fast its host's clock runs.
//   - Retries are scored by the host that finished the failed attempt
//     (its clock plus the backoff), and launchers forward them by their
//     host's clock (ForwardRetries). Skew there shifts a backoff, not a
//     fire time.
//
// Launchers still forward runs enqueued ahead, not only schedulers: a
// manual run booked ahead, and retries, must not wait for a scheduler to
// be up. Both forward the same way on the same clock, and a task moves
// once whoever calls.
//
// Measured once (scripts/bench -only steady -steady-n 10000
// -steady-minutes 2 -steady-launchers 2, under the heavy lock, 2026-11-26,
// load average 7 to 14 on 2 cores), before (launchers' asynq forwarder by
// host clock) and after: exactly once held in both (10,000 of 10,000
// schedules, run records = tasks); drift from planned time to runnable,
// p50 / p99, 0.194 / 0.348 s before and 0.211 / 0.350 s after, the same
// within noise, because schedulers forward on the boundary either way.
// The start delay at the executor was 1.59 / 2.98 s before and 2.62 /
// 4.79 s after, but the second run's launchers made 30,000 executor calls
// in the window against 20,000, so the two are not comparable; paired
// rounds (as the launch scenario does) should settle it. Not measured:
// whether schedulers alone could forward (one forwarder): it would leave
// manual runs booked ahead and retries waiting while no scheduler runs.
//
// # How a forward moves tasks
//
// A Set counts what is due in each queue (ZCOUNT, one pipeline), then
// forwards the queues that have some, a few at once. A queue forwards in
// batches of ForwardBatch: it WATCHes the set, reads the ids due
// (ZRANGEBYSCORE), and moves them with native commands in one
// MULTI/EXEC: an HSET of state and pending_since per task, one
// ZREMRANGEBYRANK (the ids read are the set's first by rank), one
// LPUSH. Redis runs the EXEC only if the set is as it was read, so each
// id read is still there and due, and none was moved by another
// forwarder since: the compare-and-set, made once for the batch. When
// the set changed (another forwarder, or a task written ahead or a retry
// meanwhile), the EXEC writes nothing and forward.lua moves the ids read,
// checking which are still due. Without Lua a task costs Redis about half
// the instructions (BenchmarkForwardRedisCost, docs/perf/warm-burst.md).
// On a server whose WATCH misses writes (miniredis, in chronos dev) the
// transaction is not a compare-and-set, and the queue calls forward.lua
// alone (Queue.ForwardByScript).
//
// # Version
//
// This mirrors asynq v0.26.0 (go.mod): the keys of internal/base/base.go,
// the TaskMessage of internal/proto/asynq.proto, and the effects of the
// scripts of internal/rdb/rdb.go — enqueueCmd and scheduleCmd
// (enqueue_task.lua), dequeueCmd (take_tasks.lua), doneCmd,
// markAsCompleteCmd, retryCmd, archiveCmd and requeueCmd
// (finish_task.lua; archiveCmd's trim in trim_archive.lua), forwardCmd
// (forward.lua, and the transaction Queue.forwardBatch tries first), the recoverer's listLeaseExpiredCmd with retryCmd and
// archiveCmd (recover_tasks.lua, which calls finish_task.lua's body;
// recoverer.go's 30 s slack, LeaseSlack, and its error, LeaseExpired),
// the janitor's deleteExpiredCompletedTasksCmd (delete_completed.lua),
// and the heartbeater's writeServerStateCmd and clearServerStateCmd
// (WriteServer and ClearServer, plain commands; ServerInfo and
// WorkerInfo of asynq.proto). asynq's scripts build a task's key inside
// Lua from the id they pop; these are given every key in KEYS
// (ScriptPrelude): the caller reads the ids first and the script checks
// they still hold, so each touches only keys a Redis Cluster routed it
// by. asynq's Inspector and asynqmon read what this package writes, and
// asynq's servers, were any still running on these queues, would take and
// recover its tasks alike. TestAsynqWireMatchesClient pins the bytes and
// fields against asynq's own Client; the take, finish and recovery tests
// read the result back through asynq's Inspector, the recovery one beside
// what asynq's own recoverer leaves.
//
// Before upgrading asynq, diff those files (and recoverer.go, janitor.go,
// heartbeat.go) between the two versions: a renamed key, a new task hash
// field or state, a changed lease length (LeaseDuration) or slack
// (LeaseSlack), archive limits (archiveMaxAge, archiveMaxSize), or
// TaskMessage, ServerInfo or WorkerInfo field numbers all need a change
// here. Then run this
// package's tests, which use the new asynq as the reference.
package asynqwire
