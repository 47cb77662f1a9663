package declarative

import (
	"context"
	"log/slog"
	"time"
)

// EventType names an event of the specification.
type EventType string

// The events of the specification, in the order a scheduler's life meets
// them.
const (
	SchedulerInitializationStarted   EventType = "SchedulerInitializationStarted"
	SchedulerInitializationCompleted EventType = "SchedulerInitializationCompleted"
	SchedulerInitializationFailed    EventType = "SchedulerInitializationFailed"
	SchedulerStopRequested           EventType = "SchedulerStopRequested"
	SchedulerStopped                 EventType = "SchedulerStopped"
	PollingStarted                   EventType = "PollingStarted"
	PollingStopRequested             EventType = "PollingStopRequested"
	PollingStopped                   EventType = "PollingStopped"
	TaskRunStarted                   EventType = "TaskRunStarted"
	TaskRunCompleted                 EventType = "TaskRunCompleted"
	TaskRunFailed                    EventType = "TaskRunFailed"
	TaskRetryStarted                 EventType = "TaskRetryStarted"
	TaskRetryPreempted               EventType = "TaskRetryPreempted"
)

// Event is one event, passed to Options.OnEvent and logged.
type Event struct {
	Type EventType
	// Time is the scheduler's clock when the event happened.
	Time time.Time
	// SchedulerID is the namespace's persisted scheduler identifier
	// (empty before it is loaded).
	SchedulerID string
	// Task is the task's name, for task events.
	Task string
	// Err is the callback's error for TaskRunFailed, the cause for
	// SchedulerInitializationFailed.
	Err error
	// RetryAt is when a failed task may retry, for TaskRunFailed.
	RetryAt time.Time
	// Orphan is set on TaskRunStarted when the run restarts one whose
	// process died mid-callback.
	Orphan bool
}

// emit logs ev and hands it to the hook. A panicking hook is logged and
// otherwise ignored: it must not take a task or the scheduler down.
func (s *Scheduler) emit(ctx context.Context, ev Event) {
	ev.Time = s.clock.Now()
	ev.SchedulerID = s.schedulerID()
	level, attrs := slog.LevelInfo, []any{"event", string(ev.Type), "scheduler_id", ev.SchedulerID}
	if ev.Task != "" {
		level = slog.LevelDebug
		attrs = append(attrs, "task", ev.Task)
	}
	if ev.Err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, "error", ev.Err.Error())
	}
	if !ev.RetryAt.IsZero() {
		attrs = append(attrs, "retry_at", ev.RetryAt)
	}
	if ev.Orphan {
		attrs = append(attrs, "orphan", true)
	}
	if s.log.Enabled(ctx, level) {
		s.log.Log(ctx, level, "declarative: "+string(ev.Type), attrs...)
	}
	if s.onEvent == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.ErrorContext(ctx, "declarative: event hook panicked", "event", string(ev.Type), "panic", r)
		}
	}()
	s.onEvent(ev)
}
