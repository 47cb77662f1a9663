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
	// latest: the last of a stretch of missed runs.
	latest bool
	// released: it waited for the run in flight ("queue"), so it fires
	// now whatever the catch-up policy (never spread).
	released bool
}

// schedPlan is the planning of one due schedule at now.
type schedPlan struct {
	cfg    Config
	d      queue.DueSchedule
	rec    *model.ScheduleRecord
	sched  model.Schedule
	now    time.Time
	jitter time.Duration
	// began is when the schedule began (created, changed its timing or
	// resumed): no run fires before it.
	began time.Time
	// lead is how long before its fire time an "allow" run is planned.
	lead time.Duration
}

// fireAt is the run at t's jittered fire time (no key to hash when there
// is no jitter).
func (sp *schedPlan) fireAt(t time.Time) time.Time {
	if sp.jitter == 0 {
		return t
	}
	return jittered(sp.rec, model.IdempotencyKey(sp.d.ID, t), t, sp.jitter, sp.began)
}

// act is when the run at t is planned: an "allow" run up to its lead
// (lookahead, jitter) ahead; a "skip" or "queue" run once its fire time
// has come, since whether the run before it is still in flight is decided
// then.
func (sp *schedPlan) act(t time.Time) time.Time {
	if sp.rec.OverlapPolicy == model.OverlapAllow {
		return t.Add(-sp.lead)
	}
	return sp.fireAt(t)
}

// plan returns the plan for d and how many catch-up events dropped missed
// runs (which the plan's runs don't show), for metrics.
func (pl *planner) plan(d queue.DueSchedule, rec *model.ScheduleRecord, sched model.Schedule, now time.Time) (p queue.Plan, missed int) {
	p = d.Plan()
	if d.Next.IsZero() {
		return p, 0 // nothing planned: retire
	}
	sp := &schedPlan{cfg: pl.cfg, d: d, rec: rec, sched: sched, now: now,
		jitter: time.Duration(rec.JitterMs) * time.Millisecond, began: maxTime(rec.Anchor, d.ResumedAt), lead: pl.lead(rec)}
	times, next, drop := sp.dueTimes()
	if !drop.first.IsZero() {
		p.Runs = append(p.Runs, sp.dropRecord(drop))
		missed = 1
	}
	handled := maxTime(drop.last, sp.emit(&p, times, next))
	// The records of DST gaps come first: commit.lua may cut a plan short
	// after a run (choose_inflight), never before it.
	if gaps := sp.dstRecords(handled); len(gaps) > 0 {
		p.Runs = append(gaps, p.Runs...)
	}
	return p, missed
}

// dropWindow is a stretch of missed runs a catch-up policy dropped, from
// first to last (zero: none).
type dropWindow struct{ first, last time.Time }

// dropRecord is the ledger's record of a drop window: one SKIPPED record
// at the last run dropped, reason catchup_dropped, whose error names the
// window. One record per catch-up, however many runs it dropped (an
// outage can miss millions): the run history stays bounded
// (docs/ledger.md). It has a key of its own (model.CatchupDroppedKey),
// no run's: the dropped runs' keys stay free for a backfill, and the
// record never meets a run planned before.
func (sp *schedPlan) dropRecord(w dropWindow) queue.PlannedRun {
	what := "the run at " + w.last.UTC().Format(time.RFC3339) + " was"
	if !w.first.Equal(w.last) {
		what = fmt.Sprintf("the runs from %s to %s were", w.first.UTC().Format(time.RFC3339), w.last.UTC().Format(time.RFC3339))
	}
	return queue.PlannedRun{
		Key: model.CatchupDroppedKey(sp.d.ID, w.last), RunAt: w.last, FireAt: sp.fireAt(w.last),
		Status: model.RunSkipped, Reason: model.ReasonCatchupDropped,
		Error: fmt.Sprintf("missed: %s missed and not started (catchup_policy %s); this record stands for them all", what, sp.rec.CatchupPolicy),
	}
}

// dueTimes returns the times to plan now, in order, the schedule's next
// time after them, and the missed runs a catch-up dropped.
func (sp *schedPlan) dueTimes() (times []dueTime, next time.Time, drop dropWindow) {
	now, limit := sp.now, sp.cfg.MaxCatchupPerTick
	t := sp.d.Next
	heldBacklog := false
	if sp.d.Released && !sp.act(t).After(now) {
		// It waited for the run in flight ("queue"): it starts now,
		// however late. Under "queue" still, the times after it already
		// due are a backlog that came due while it waited: missed, however
		// little late, so the catch-up policy drains it
		// (model.MissedBefore). (One not due yet, within its jitter, is
		// planned at its act time, as any run; the commit clears rel.)
		times = append(times, dueTime{at: t, missed: sp.fireAt(t).Before(sp.missedBefore(false)), released: true})
		t = sp.sched.Next(t)
		heldBacklog = sp.rec.OverlapPolicy == model.OverlapQueue
	}
	if !t.IsZero() {
		var kept []dueTime
		kept, t, drop = sp.missedRuns(t, sp.missedBefore(heldBacklog), limit-len(times))
		times = append(times, kept...)
	}
	for !t.IsZero() && !sp.act(t).After(now) && len(times) < limit {
		times = append(times, dueTime{at: t})
		t = sp.sched.Next(t)
	}
	return times, t, drop
}

func (sp *schedPlan) missedBefore(heldBacklog bool) time.Time {
	return model.MissedBefore(sp.now, sp.cfg.MisfireGrace, heldBacklog)
}

// missedRuns returns the missed runs from t on that the catch-up policy
// keeps (at most limit), the first time after them, and the runs it
// dropped (a window: the first and the last). A run is missed when its jittered fire time is before cutoff. The
// missed runs are those from t on up to the first that is not (with a
// jitter longer than the period, a later run can be missed and an earlier
// one not: it waits its turn). Past the runs surely missed (jitter moves
// a fire time by at most jitter, and never past end_at), none and latest
// look at them one by one: that stretch ends after about
// sqrt(π·jitter/period) runs (a few hundred for a per-second schedule
// with a day's jitter).
func (sp *schedPlan) missedRuns(t, cutoff time.Time, limit int) (kept []dueTime, next time.Time, dropped dropWindow) {
	isMissed := func(t time.Time) bool { return sp.fireAt(t).Before(cutoff) }
	if !isMissed(t) {
		return nil, t, dropWindow{}
	}
	surely := cutoff.Add(-sp.jitter)
	if end := sp.rec.EndAt; end != nil && end.Before(cutoff) && end.After(surely) {
		surely = end.Add(time.Nanosecond)
	}
	first := t
	switch sp.rec.CatchupPolicy.Keeps() {
	case model.KeepNoMissed:
		last := t
		if t.Before(surely) {
			last = lastBefore(sp.sched, t, surely)
			t = sp.sched.Next(last) // the first at or after surely
		}
		for !t.IsZero() && isMissed(t) {
			last = t
			t = sp.sched.Next(t)
		}
		return nil, t, dropWindow{first: first, last: last}
	case model.KeepLatestMissed:
		last := t
		if t.Before(surely) {
			last = lastBefore(sp.sched, t, surely)
		}
		for n := sp.sched.Next(last); !n.IsZero() && isMissed(n); n = sp.sched.Next(n) {
			last = n
		}
		if !last.Equal(first) {
			// The runs before last are dropped.
			dropped = dropWindow{first: first, last: lastBefore(sp.sched, first, last)}
		}
		return []dueTime{{at: last, missed: true, latest: true}}, sp.sched.Next(last), dropped
	}
	for !t.IsZero() && isMissed(t) && len(kept) < limit {
		kept = append(kept, dueTime{at: t, missed: true})
		t = sp.sched.Next(t)
	}
	return kept, t, dropWindow{}
}

// emit writes into p the runs of times, each as the policies decide
// (model.AtPlan), and the schedule's next time and score. It returns the
// last time it handled (zero if none): a hold leaves the times from the
// held one on to a later plan.
func (sp *schedPlan) emit(p *queue.Plan, times []dueTime, next time.Time) (handled time.Time) {
	rec, now := sp.rec, sp.now
	inflight := sp.d.Inflight
	p.NewNext = next
	for _, dt := range times {
		key := model.IdempotencyKey(sp.d.ID, dt.at)
		// The run in flight may be this very run, planned again: enqueued
		// ahead of its time (jitter), then its timing changed to one that
		// plans that time too. It is in flight, not behind itself.
		outcome := model.AtPlan(rec.OverlapPolicy, rec.CatchupPolicy, model.PlanSituation{
			Missed: dt.missed, Latest: dt.latest, Released: dt.released, InFlight: inflight != "" && inflight != key})
		if outcome == model.OutcomeHold {
			p.Hold = true
			p.NewNext = dt.at
			break
		}
		handled = dt.at
		fire := jittered(rec, key, dt.at, sp.jitter, sp.began)
		if dt.missed {
			fire = now
		}
		if outcome == model.OutcomeSpread {
			fire = now.Add(model.JitterOffset(key, sp.cfg.SpreadWindow/2) + sp.cfg.SpreadWindow/2)
		}
		run := queue.PlannedRun{Key: key, RunAt: dt.at, FireAt: fire, Status: model.RunEnqueued, CaughtUp: dt.missed}
		switch outcome {
		case model.OutcomeSkip:
			run.Status, run.Reason = model.RunSkipped, model.ReasonOverlap
			run.Error = fmt.Sprintf("skipped: run %s is still in flight (overlap_policy skip)", inflight)
		case model.OutcomeFire, model.OutcomeSpread:
			if rec.OverlapPolicy != model.OverlapAllow && inflight != key {
				inflight = key
				p.Inflight = key
				p.InflightDeadline = maxTime(fire, now).Add(sp.cfg.RunTimeout)
			}
			run.Task = queue.TaskPayload{
				IdempotencyKey: key, ScheduleID: sp.d.ID, RunAt: dt.at, FireAt: fire,
				WorkflowID: rec.WorkflowID, Version: string(rec.Version), UserID: rec.UserID,
				Source: model.SourceSchedule,
			}
			if rec.Target == model.TargetWake && rec.Alarm != nil {
				// An alarm's wake is tried max_failures times in all.
				run.Task.Target, run.Task.MaxAttempts = model.TargetWake, rec.Alarm.MaxFailures
			}
		case model.OutcomeDrop:
			continue
		}
		p.Runs = append(p.Runs, run)
	}
	if !p.NewNext.IsZero() && !p.Hold {
		// A schedule still due after this plan (catch-up bound reached) is
		// scored just past now, so this tick's later pages don't re-read it
		// and the next tick continues it.
		p.NewScore = float64(max(sp.act(p.NewNext).UnixMilli(), now.UnixMilli()+1))
	}
	return handled
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
