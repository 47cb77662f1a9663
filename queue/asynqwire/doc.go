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
// # Version
//
// This mirrors asynq v0.26.0 (go.mod): the keys of internal/base/base.go,
// the TaskMessage of internal/proto/asynq.proto, and the effects of the
// scripts of internal/rdb/rdb.go — enqueueCmd and scheduleCmd
// (enqueue_task.lua), dequeueCmd (take_tasks.lua), doneCmd,
// markAsCompleteCmd, retryCmd, archiveCmd and requeueCmd
// (finish_task.lua), forwardCmd (forward.lua). asynq's servers, Inspector
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
