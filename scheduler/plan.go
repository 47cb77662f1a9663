package scheduler

import (
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// planner turns a due schedule into a plan. It is pure: the clock reading
// and everything else comes in as arguments, so a retried tick plans the
// same runs.
type planner struct {
	cfg Config
	// lead is how long before a fire time a schedule is acted on (the
	// store's ActLead: lookahead for "allow", plus jitter).
	lead func(*model.ScheduleRecord) time.Duration
}

type dueTime struct {
	at time.Time
	// missed: planned late (caught up, or released late from a hold),
	// so it fires now.
	missed bool
	// released: it waited for the run in flight ("queue"), so it fires
	// now whatever the catch-up policy (never spread).
	released bool
}

// plan returns the plan for d and how many catch-up events dropped missed
// runs (which the plan's runs don't show), for metrics.
func (pl *planner) plan(d queue.DueSchedule, rec *model.ScheduleRecord, sched model.Schedule, now time.Time) (p queue.Plan, missed int) {
	p = d.Plan()
	if d.Next.IsZero() {
		return p, 0 // nothing planned: retire
	}
	jitter := time.Duration(rec.JitterMs) * time.Millisecond
	began := maxTime(rec.Anchor, d.ResumedAt)
	// act is when the run at t is planned: an "allow" run up to its lead
	// (lookahead, jitter) ahead; a "skip" or "queue" run once its fire
	// time has come, since whether the run before it is still in flight
	// is decided then.
	// fireAt is the run at t's jittered fire time (no key to hash when
	// there is no jitter).
	fireAt := func(t time.Time) time.Time {
		if jitter == 0 {
			return t
		}
		return jittered(rec, model.IdempotencyKey(d.ID, t), t, jitter, began)
	}
	lead := pl.lead(rec)
	act := func(t time.Time) time.Time {
		if rec.OverlapPolicy == model.OverlapAllow {
			return t.Add(-lead)
		}
		return fireAt(t)
	}
	limit := pl.cfg.MaxCatchupPerTick
	// A run is missed when its jittered fire time is more than the grace
	// ago, so every run before surely is: jitter moves a fire time by at
	// most jitter, and never past end_at.
	cutoff := now.Add(-pl.cfg.MisfireGrace)
	surely := cutoff.Add(-jitter)
	if rec.EndAt != nil && rec.EndAt.Before(cutoff) && rec.EndAt.After(surely) {
		surely = rec.EndAt.Add(time.Nanosecond)
	}
	isMissed := func(t time.Time) bool { return fireAt(t).Before(cutoff) }

	var times []dueTime
	t := d.Next
	if d.Released && !act(t).After(now) {
		// It waited for the run in flight ("queue"): it starts now,
		// however late, and only the times after it can be missed. (One
		// not due yet, within its jitter, is planned at its act time, as
		// any run; the commit clears rel.)
		times = append(times, dueTime{at: t, missed: isMissed(t), released: true})
		t = sched.Next(t)
	}
	// The missed runs are those from t on up to the first that is not
	// (with a jitter longer than the period, a later run can be missed
	// and an earlier one not: it waits its turn). Past the runs surely
	// missed, none and latest look at them one by one: that stretch ends
	// after about sqrt(π·jitter/period) runs (a few hundred for a
	// per-second schedule with a day's jitter).
	if !t.IsZero() && isMissed(t) {
		first := t
		switch rec.CatchupPolicy {
		case model.CatchupNone:
			missed++
			if t.Before(surely) {
				t = sched.Next(surely.Add(-time.Nanosecond))
			}
			for !t.IsZero() && isMissed(t) {
				t = sched.Next(t)
			}
		case model.CatchupLatest:
			last := t
			if t.Before(surely) {
				last = lastBefore(sched, t, surely)
			}
			for n := sched.Next(last); !n.IsZero() && isMissed(n); n = sched.Next(n) {
				last = n
			}
			if !last.Equal(first) {
				missed++ // runs before last are dropped
			}
			times = append(times, dueTime{at: last, missed: true})
			t = sched.Next(last)
		default: // fire_immediately, spread
			for !t.IsZero() && isMissed(t) && len(times) < limit {
				times = append(times, dueTime{at: t, missed: true})
				t = sched.Next(t)
			}
		}
	}
	for !t.IsZero() && !act(t).After(now) && len(times) < limit {
		times = append(times, dueTime{at: t})
		t = sched.Next(t)
	}

	inflight := d.Inflight
	p.NewNext = t
	for _, dt := range times {
		key := model.IdempotencyKey(d.ID, dt.at)
		fire := jittered(rec, key, dt.at, jitter, began)
		if dt.missed {
			fire = now
			if rec.CatchupPolicy == model.CatchupSpread && !dt.released {
				fire = now.Add(model.JitterOffset(key, pl.cfg.SpreadWindow/2) + pl.cfg.SpreadWindow/2)
			}
		}
		run := queue.PlannedRun{Key: key, RunAt: dt.at, FireAt: fire, Status: model.RunEnqueued, CaughtUp: dt.missed}
		// The run in flight may be this very run, planned again: enqueued
		// ahead of its time (jitter), then its timing changed to one that
		// plans that time too. It is in flight, not behind itself.
		if inflight != "" && inflight != key && rec.OverlapPolicy != model.OverlapAllow {
			if rec.OverlapPolicy == model.OverlapQueue {
				p.Hold = true
				p.NewNext = dt.at
				break
			}
			run.Status = model.RunSkipped
			run.Error = fmt.Sprintf("skipped: run %s is still in flight (overlap_policy skip)", inflight)
		} else {
			if rec.OverlapPolicy != model.OverlapAllow && inflight != key {
				inflight = key
				p.Inflight = key
				p.InflightDeadline = maxTime(fire, now).Add(pl.cfg.RunTimeout)
			}
			run.Task = queue.TaskPayload{
				IdempotencyKey: key, ScheduleID: d.ID, RunAt: dt.at, FireAt: fire,
				WorkflowID: rec.WorkflowID, Version: string(rec.Version), UserID: rec.UserID,
				Source: model.SourceSchedule,
			}
		}
		p.Runs = append(p.Runs, run)
	}
	if !p.NewNext.IsZero() && !p.Hold {
		// A schedule still due after this plan (catch-up bound reached) is
		// scored just past now, so this tick's later pages don't re-read it
		// and the next tick continues it.
		p.NewScore = float64(max(act(p.NewNext).UnixMilli(), now.UnixMilli()+1))
	}
	return p, missed
}

// lastBefore returns the last fire time t of s with from <= t < cutoff,
// given that from is a fire time before cutoff. Next(x) < cutoff exactly
// when x is before the answer, so it bisects on that, from windows that
// grow backwards from cutoff (a run just before cutoff is found at once),
// down to a second, then steps forward: a long outage costs a few dozen
// Next calls rather than one per missed run, whatever end_at cuts off.
func lastBefore(s model.Schedule, from, cutoff time.Time) time.Time {
	before := func(x time.Time) bool { n := s.Next(x); return !n.IsZero() && n.Before(cutoff) }
	lo, hi := from.Add(-time.Nanosecond), cutoff // before(lo), !before(hi)
	for d := time.Second; d < cutoff.Sub(from); d *= 4 {
		x := cutoff.Add(-d - time.Nanosecond)
		if before(x) {
			lo = x
			break
		}
		hi = x
	}
	for hi.Sub(lo) > time.Second {
		if mid := lo.Add(hi.Sub(lo) / 2); before(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	c := s.Next(lo)
	for {
		n := s.Next(c)
		if n.IsZero() || !n.Before(cutoff) {
			return c
		}
		c = n
	}
}

// jittered is a run's fire time: at moved by its jitter offset, but never
// outside the schedule's start_at/end_at, nor before the schedule began
// (was created, changed its timing or resumed: a time it could not have
// fired at), nor, for a once alarm, before its time.
func jittered(rec *model.ScheduleRecord, key string, at time.Time, jitter time.Duration, began time.Time) time.Time {
	fire := maxTime(at.Add(model.JitterOffset(key, jitter)), began)
	if rec.Kind == model.KindOnce && fire.Before(at) {
		fire = at
	}
	if rec.StartAt != nil && fire.Before(*rec.StartAt) {
		fire = *rec.StartAt
	}
	if rec.EndAt != nil && fire.After(*rec.EndAt) {
		fire = *rec.EndAt
	}
	return fire
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
