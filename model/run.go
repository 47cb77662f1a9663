package model

import (
	"fmt"
	"strings"
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
	// SourceBackfill: POST /schedules/:id/backfill, or a resume's replay
	// of the time a schedule was paused.
	SourceBackfill RunSource = "backfill"
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
	// Reason says why a SKIPPED or FAILED run did not start or failed;
	// empty otherwise (and on records written before reasons existed).
	Reason RunReason `json:"reason,omitempty"`
	Source RunSource `json:"source"`
	// Attempts counts the executor calls that failed before the run
	// started; LastError says why the last one failed and NextAttemptAt
	// when it is tried again (nil once the run has left ENQUEUED).
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// RunReason says, machine-readably, why a run was SKIPPED or FAILED. A
// run that started or is still waiting has none. docs/ledger.md lists
// what produces each.
type RunReason string

// Why a planned run did not start (status SKIPPED).
const (
	// ReasonOverlap: the schedule's overlap policy skipped it while
	// another run of the schedule was in flight.
	ReasonOverlap RunReason = "overlap"
	// ReasonPaused: the schedule was paused before the run started.
	ReasonPaused RunReason = "paused"
	// ReasonDeleted: the schedule was deleted before the run started.
	ReasonDeleted RunReason = "deleted"
	// ReasonOutsideWindow: the run's time fell outside the schedule's
	// start_at/end_at window.
	ReasonOutsideWindow RunReason = "outside_window"
	// ReasonCatchupDropped: the run was missed (an outage, a late tick)
	// and the catch-up policy dropped it.
	ReasonCatchupDropped RunReason = "catchup_dropped"
	// ReasonLateAtLaunch: a launcher took the run too late to start it,
	// and the catch-up policy dropped it.
	ReasonLateAtLaunch RunReason = "late_at_launch"
	// ReasonManualKeyTaken: a manual run had been started with the run's
	// idempotency key, so that run is the one the key names.
	ReasonManualKeyTaken RunReason = "manual_key_taken"
	// ReasonDSTSkipped: the run's local time does not exist (a DST
	// spring-forward gap) and the schedule's dst_policy skips it.
	ReasonDSTSkipped RunReason = "dst_skipped"
	// ReasonScheduleChanged: the schedule's timing or target changed
	// after the run was planned, and it no longer plans this run.
	ReasonScheduleChanged RunReason = "schedule_changed"
)

// Why a run FAILED.
const (
	// ReasonExecutorRejected: the executor answered that the run cannot
	// start (a 4xx answer, a permanent error).
	ReasonExecutorRejected RunReason = "executor_rejected"
	// ReasonRetriesExhausted: every attempt to start the run failed.
	ReasonRetriesExhausted RunReason = "retries_exhausted"
	// ReasonRunTimeout: the run reported no final status before
	// RUN_TIMEOUT.
	ReasonRunTimeout RunReason = "run_timeout"
	// ReasonLaunchAbandoned: the run's task was given up (archived by the
	// queue) before it started.
	ReasonLaunchAbandoned RunReason = "launch_abandoned"
	// ReasonWorkflowMissing: the run's workflow (or version) does not
	// exist.
	ReasonWorkflowMissing RunReason = "workflow_missing"
)

// SkipReasons are the reasons of a SKIPPED run, FailReasons those of a
// FAILED one, each in the order the documentation lists them.
var (
	SkipReasons = []RunReason{ReasonOverlap, ReasonPaused, ReasonDeleted, ReasonOutsideWindow, ReasonCatchupDropped,
		ReasonLateAtLaunch, ReasonManualKeyTaken, ReasonDSTSkipped, ReasonScheduleChanged}
	FailReasons = []RunReason{ReasonExecutorRejected, ReasonRetriesExhausted, ReasonRunTimeout, ReasonLaunchAbandoned,
		ReasonWorkflowMissing}
)

// RunReasons is every reason, skip reasons first.
func RunReasons() []RunReason {
	return append(append([]RunReason(nil), SkipReasons...), FailReasons...)
}

// Status is the status a run with this reason has: RunSkipped or
// RunFailed; "" for an unknown reason.
func (r RunReason) Status() RunStatus {
	for _, s := range SkipReasons {
		if r == s {
			return RunSkipped
		}
	}
	for _, f := range FailReasons {
		if r == f {
			return RunFailed
		}
	}
	return ""
}

// ParseRunReason validates a reason, as a filter of run history takes
// it; an unknown one's error lists the valid ones.
func ParseRunReason(s string) (RunReason, error) {
	r := RunReason(s)
	if r.Status() != "" {
		return r, nil
	}
	names := make([]string, 0, len(SkipReasons)+len(FailReasons))
	for _, v := range RunReasons() {
		names = append(names, string(v))
	}
	return "", fmt.Errorf("unknown reason %q (want one of %s)", s, strings.Join(names, ", "))
}
