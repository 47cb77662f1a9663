package model

import "time"

// This file holds every judgment the overlap and catch-up policies make
// about a run. A run is judged at three moments:
//
//   - at plan, when a scheduler finds it due ([AtPlan]);
//   - at launch, when a launcher would start it ([AtLaunch]);
//   - at release, when the run a "queue" schedule waits for leaves flight
//     ([AtRelease]; queue's Lua scripts mirror it, see release.lua).
//
// The callers find the situation (is the run late, is another in flight)
// and carry out the outcome; the decision is made here, and
// TestPolicyDecisions tables every one.

// Outcome is what a policy decides for one run.
type Outcome string

const (
	// OutcomeFire starts the run at its fire time, or now if that has
	// passed.
	OutcomeFire Outcome = "fire"
	// OutcomeSpread starts the run at a deterministic moment within the
	// spread window from now.
	OutcomeSpread Outcome = "spread"
	// OutcomeSkip records the run SKIPPED and does not start it.
	OutcomeSkip Outcome = "skip"
	// OutcomeHold makes the run wait until the run in flight ends; it is
	// then judged at release.
	OutcomeHold Outcome = "hold"
	// OutcomeDrop plans no run at all: no record, no task.
	OutcomeDrop Outcome = "drop"
)

// PlanSituation is how a run stands when a scheduler plans it.
type PlanSituation struct {
	// Missed: its fire time is before [MissedBefore]: found more than
	// the misfire grace late, or due behind a run a "queue" schedule
	// releases.
	Missed bool
	// Latest: of a stretch of missed runs, this is the last one.
	Latest bool
	// Released: the run waited behind a run that ran ([AtRelease]) and
	// is planned now, however late.
	Released bool
	// InFlight: another run of the schedule is in flight.
	InFlight bool
}

// AtPlan decides a run a scheduler finds due. The catch-up policy judges
// a missed run first (a released run is never missed: it waited, it was
// not forgotten); the overlap policy then judges a run that comes while
// another is in flight.
func AtPlan(o OverlapPolicy, c CatchupPolicy, s PlanSituation) Outcome {
	missed := s.Missed && !s.Released
	if missed && !c.keeps(s.Latest) {
		return OutcomeDrop
	}
	if s.InFlight {
		switch o {
		case OverlapSkip:
			return OutcomeSkip
		case OverlapQueue:
			return OutcomeHold
		}
	}
	if missed && c == CatchupSpread {
		return OutcomeSpread
	}
	return OutcomeFire
}

// MissedRuns says which runs of a stretch of missed ones a catch-up
// policy keeps.
type MissedRuns int

const (
	// KeepNoMissed drops every missed run.
	KeepNoMissed MissedRuns = iota
	// KeepLatestMissed keeps only the last missed run.
	KeepLatestMissed
	// KeepAllMissed keeps every missed run.
	KeepAllMissed
)

// Keeps says which missed runs the policy keeps. The planner walks a
// stretch of missed runs by it, rather than judging each one with
// [AtPlan]: an outage can miss millions.
func (c CatchupPolicy) Keeps() MissedRuns {
	switch c {
	case CatchupNone:
		return KeepNoMissed
	case CatchupLatest:
		return KeepLatestMissed
	}
	return KeepAllMissed
}

func (c CatchupPolicy) keeps(latest bool) bool {
	switch c.Keeps() {
	case KeepNoMissed:
		return false
	case KeepLatestMissed:
		return latest
	}
	return true
}

// MissedBefore returns the cutoff of missed runs: a run whose fire time
// (after jitter) is before it is missed. That is a run found more than
// grace late; and, behind a run a "queue" schedule releases
// (heldBacklog), every run already due, however little late: a backlog
// a stall left, each run maybe just under the grace. Its catch-up policy
// decides that backlog as any missed runs: none drops it, latest keeps
// the last run, fire_immediately and spread keep every run, each waiting
// its turn. A held run is planned as soon as the run before it ends
// (scheduler wakes), so a kept backlog drains as fast as its runs end.
func MissedBefore(now time.Time, grace time.Duration, heldBacklog bool) time.Time {
	if heldBacklog {
		return now.Add(time.Nanosecond)
	}
	return now.Add(-grace)
}

// LaunchSituation is how a run stands when a launcher would start it.
type LaunchSituation struct {
	// Late: it would start more than the launch grace after it was due
	// (every launcher was down, its task waited in the queue).
	Late bool
	// LaterDue: a later fire time of its schedule has come too.
	LaterDue bool
}

// AtLaunch decides a run a launcher would start now: [OutcomeFire] or
// [OutcomeSkip]. Schedulers judge the runs they find late; a run enqueued
// on time can still wait in the queue while every launcher is down, and
// then its catch-up policy applies here. Under "latest" with "skip", the
// scheduler recorded the later runs SKIPPED while this one was in flight,
// so this one is the latest and starts.
func AtLaunch(o OverlapPolicy, c CatchupPolicy, s LaunchSituation) Outcome {
	if !s.Late {
		return OutcomeFire
	}
	switch c.Keeps() {
	case KeepNoMissed:
		return OutcomeSkip
	case KeepLatestMissed:
		if s.LaterDue && o != OverlapSkip {
			return OutcomeSkip
		}
	}
	return OutcomeFire
}

// EndedRun is how a run in flight left flight, as the release of the run
// held behind it sees it.
type EndedRun struct {
	// Status is the run's status as it leaves flight: its final status,
	// or the one it had when RUN_TIMEOUT failed it or asynq archived its
	// task (ENQUEUED, STARTED). Empty when its record is gone (trimmed,
	// expired).
	Status RunStatus
	// Unplanned: SKIPPED because its schedule no longer plans it (paused,
	// deleted, timing changed), not because it was late.
	Unplanned bool
	// FailedAttempts counts executor calls that failed: a launcher was
	// retrying it.
	FailedAttempts int
	// Launching: still ENQUEUED, a launcher holds its task, the first
	// executor call in progress.
	Launching bool
}

// Ran says whether the run ran, or was being started: then the run held
// behind it waited for it.
func (e EndedRun) Ran() bool {
	switch e.Status {
	case "":
		return false
	case RunSkipped:
		return e.Unplanned
	case RunEnqueued:
		return e.FailedAttempts > 0 || e.Launching
	}
	return true
}

// AtRelease decides the run a "queue" schedule held behind e, when e
// leaves flight: released (true) when e ran, so the held run waited for
// it and starts now, whatever its catch-up policy ([PlanSituation]
// Released). Otherwise the held run was missed with it as much as it was
// late, and is planned as any run: late past the misfire grace, its
// catch-up policy applies.
func AtRelease(e EndedRun) (released bool) { return e.Ran() }
