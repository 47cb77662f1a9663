package model

import (
	"fmt"
	"time"
)

// RunStatus is where a run is in its life.
type RunStatus string

const (
	// RunEnqueued: a task is in the queue, no launcher has reported yet.
	RunEnqueued RunStatus = "ENQUEUED"
	// RunStarted: the executor accepted the run.
	RunStarted RunStatus = "STARTED"
	// RunSuccess: the run finished well.
	RunSuccess RunStatus = "SUCCESS"
	// RunFailed: the run failed, could not be launched, or timed out.
	RunFailed RunStatus = "FAILED"
	// RunSkipped: the run was planned but deliberately not started
	// (overlap policy, schedule paused, changed or deleted).
	RunSkipped RunStatus = "SKIPPED"
)

// Terminal reports whether no further status can follow.
func (s RunStatus) Terminal() bool {
	return s == RunSuccess || s == RunFailed || s == RunSkipped
}

// ParseReportedStatus validates a status an executor may report.
func ParseReportedStatus(s string) (RunStatus, error) {
	switch st := RunStatus(s); st {
	case RunStarted, RunSuccess, RunFailed:
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q (want STARTED, SUCCESS or FAILED)", s)
}

// RunSource says who asked for a run.
type RunSource string

const (
	// SourceSchedule: planned by the scheduler.
	SourceSchedule RunSource = "schedule"
	// SourceManual: POST /run-launcher/start.
	SourceManual RunSource = "manual"
)

// Run is the record of one planned run, keyed by its idempotency key.
type Run struct {
	IdempotencyKey string     `json:"idempotency_key"`
	ScheduleID     string     `json:"schedule_id"`
	RunAt          time.Time  `json:"run_at"`
	FireAt         time.Time  `json:"fire_at"`
	Status         RunStatus  `json:"status"`
	RunID          string     `json:"run_id"`
	EnqueuedAt     *time.Time `json:"enqueued_at"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Error          string     `json:"error"`
	Source         RunSource  `json:"source"`
	// Attempts counts the executor calls that failed before the run
	// started; LastError says why the last one failed and NextAttemptAt
	// when it is tried again (nil once the run has left ENQUEUED).
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}
