package asynqwire

import "time"

// Keys is asynq's Redis key layout for one queue (internal/base/base.go).
// Every key but AllQueues shares the queue's hash tag, so a script may
// touch them together on Redis Cluster.
type Keys struct {
	// Queue is the asynq queue's name.
	Queue string
}

func (k Keys) prefix() string { return "asynq:{" + k.Queue + "}:" }

// TaskPrefix prefixes a task's hash: TaskPrefix() + id is Task(id).
func (k Keys) TaskPrefix() string { return k.prefix() + "t:" }

// Task is the hash of one task: its encoded message ("msg"), its
// "state" and, while pending, "pending_since" (unix ns).
func (k Keys) Task(id string) string { return k.TaskPrefix() + id }

// Pending is the list of task ids ready to run; asynq pops from its
// right end.
func (k Keys) Pending() string { return k.prefix() + "pending" }

// Active is the list of task ids a worker holds.
func (k Keys) Active() string { return k.prefix() + "active" }

// Lease is the set of active task ids scored by when their lease ends
// (unix s).
func (k Keys) Lease() string { return k.prefix() + "lease" }

// Scheduled is the set of task ids to run later, scored by when (unix s).
func (k Keys) Scheduled() string { return k.prefix() + "scheduled" }

// Retry is the set of task ids to try again, scored by when (unix s).
func (k Keys) Retry() string { return k.prefix() + "retry" }

// Archived is the set of task ids that failed for good, scored by when
// (unix s).
func (k Keys) Archived() string { return k.prefix() + "archived" }

// Completed is the set of task ids that succeeded, scored by when their
// retention ends (unix s).
func (k Keys) Completed() string { return k.prefix() + "completed" }

// Paused exists while the queue is paused.
func (k Keys) Paused() string { return k.prefix() + "paused" }

// Processed counts the tasks processed on day (UTC), for asynqmon.
func (k Keys) Processed(day time.Time) string {
	return k.prefix() + "processed:" + day.UTC().Format(time.DateOnly)
}

// Failed counts the tasks failed on day (UTC), for asynqmon.
func (k Keys) Failed(day time.Time) string {
	return k.prefix() + "failed:" + day.UTC().Format(time.DateOnly)
}

// ProcessedTotal counts every task processed.
func (k Keys) ProcessedTotal() string { return k.prefix() + "processed" }

// FailedTotal counts every task failed.
func (k Keys) FailedTotal() string { return k.prefix() + "failed" }

// AllQueues is the set of queue names where asynq's servers, Inspector
// and asynqmon find queues.
const AllQueues = "asynq:queues"
