// Package asynqwire speaks asynq's private Redis layout: chronos writes,
// takes, finishes, forwards and reads asynq tasks itself, in batches,
// where asynq's Client and server would do one task per round trip, and
// inside chronos's own scripts, so that a run's task is written in the
// same atomic step as its run record.
//
// Queue is one asynq queue: Keys is its key layout, Forward makes tasks
// scheduled ahead runnable, Take and Finish run tasks as asynq's server
// does, Archived reads what asynq archived, Collector reports the depth.
// EnqueueLua is the Lua library that writes a task; the schedule store's
// commit and manual run scripts put it before their own code.
//
// # Who forwards, by which clock
//
// A task enqueued ahead waits in the Scheduled set until its second; a
// failed attempt's retry waits in the Retry set. asynq's servers forward
// both every DelayedTaskCheckInterval, 100 at a time, by their host's
// clock, and have no switch to stop it. So each set is now forwarded by
// the clock that scored it:
//
//   - Runs enqueued ahead are scored by their fire time on the shared
//     clock, and only the shared clock forwards them (Forward): schedulers
//     on each tick boundary, 4,000 a call, and each launcher every
//     ForwardInterval. A launcher's asynq server gets an interval of a
//     century (launcher.neverForward), so no launcher is handed a run
//     before its second however fast its host's clock runs.
//   - Retries are scored by the host that finished the failed attempt
//     (its clock plus the backoff), and launchers forward them by their
//     host's clock (ForwardRetries). Skew there shifts a backoff, not a
//     fire time.
//
// Launchers still forward runs enqueued ahead, not only schedulers: a
// manual run booked ahead, and retries, must not wait for a scheduler to
// be up. Both call the same script on the same clock, and a task moves
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
// # Version
//
// This mirrors asynq v0.26.0 (go.mod): the keys of internal/base/base.go,
// the TaskMessage of internal/proto/asynq.proto, and the effects of the
// scripts of internal/rdb/rdb.go — enqueueCmd and scheduleCmd
// (enqueue_task.lua), dequeueCmd (take_tasks.lua), doneCmd,
// markAsCompleteCmd, retryCmd, archiveCmd and requeueCmd
// (finish_task.lua; archiveCmd's trim in trim_archive.lua), forwardCmd
// (forward.lua). asynq's scripts build a task's key inside Lua from the
// id they pop; these are given every key in KEYS (ScriptPrelude): the
// caller reads the ids first and the script checks they still hold,
// so each touches only keys a Redis Cluster routed it by. asynq's servers, Inspector
// and asynqmon read what this package writes, and recover the tasks it
// takes. TestAsynqWireMatchesClient pins the bytes and fields against
// asynq's own Client; the take and finish tests read the result back
// through asynq's Inspector.
//
// Before upgrading asynq, diff those files between the two versions: a
// renamed key, a new task hash field or state, a changed lease length
// (LeaseDuration), archive limits (archiveMaxAge, archiveMaxSize) or
// TaskMessage field numbers all need a change here. Then run this
// package's tests, which use the new asynq as the reference.
package asynqwire
