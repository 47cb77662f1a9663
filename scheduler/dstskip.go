package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// dstGapsPerPlan bounds the spring-forward gaps one plan records, the
// latest: a zone has at most one or two a year, so only an outage of
// decades reaches it, and the run history (RUN_HISTORY) keeps no more
// records than that anyway. The oldest record a plan cut short writes
// says so (dstRecords).
const dstGapsPerPlan = 32

// dstChangesPerPlan bounds the offset changes one plan steps back over,
// gaps or not, so a schedule whose plan spans centuries (a clock set far
// ahead) costs a bounded walk too.
const dstChangesPerPlan = 8 * dstGapsPerPlan

// dstLocalsShown bounds the skipped local times a record's error names;
// the rest are counted.
const dstLocalsShown = 3

// dstRecords returns the ledger's records of the spring-forward gaps that
// skipped local times of a dst_policy "skip" cron schedule, for the gaps
// whose first fire time after them is one of the times this plan handles
// (plans or drops), from the plan's first time (the schedule's next) to
// last: one SKIPPED record per gap, reason dst_skipped, under
// model.DSTSkippedKey(id, gap end), at the gap's end, with no task. The
// first time after a gap is handled by exactly one applied plan (a plan
// planned again writes the same key: commit.lua keeps the record), so a
// gap has one record per schedule. A gap before the schedule began
// (created, changed its timing, resumed) or outside its start_at/end_at
// skipped nothing of it.
//
// It runs for every plan, so it steps back over the zone's offset
// changes from last and stops at the first whose next fire time is
// before the plan's first: almost always the latest change, for one
// ZoneBounds and one Next. Only a gap that is the plan's asks
// model.CronSchedule.GapBefore, which walks the gap's local times.
//
// Every gap of the plan is recorded, up to dstGapsPerPlan of them (and
// dstChangesPerPlan offset changes stepped over): a plan that stops there
// with changes of its own left says, in its oldest record's error, that
// gaps before it back to the plan's first time are not recorded one by
// one.
func (sp *schedPlan) dstRecords(last time.Time) []queue.PlannedRun {
	if last.IsZero() {
		return nil
	}
	c := cronOf(sp.sched)
	if c == nil || c.DSTPolicy().Effective().SpringForward != model.SpringForwardSkip {
		return nil
	}
	loc, first := c.Location(), sp.d.Next
	var out []queue.PlannedRun
	x, cut := last, true
	for range dstChangesPerPlan {
		change, _ := x.In(loc).ZoneBounds()
		if change.IsZero() || change.After(x) { // no offset change before x (or golang/go#81583)
			cut = false
			break
		}
		after := sp.sched.Next(change.Add(-time.Second))
		if after.IsZero() || after.Before(first) || sp.beganAfter(change) {
			// An earlier plan handled that time, and any gap before it; or
			// the schedule had not begun then, nor before.
			cut = false
			break
		}
		_, before := change.Add(-time.Second).In(loc).Zone()
		_, since := change.In(loc).Zone()
		if since > before && !after.After(last) && sp.skippedInForce(change) {
			if g, ok := c.GapBefore(change, dstLocalsShown); ok && g.End.Equal(change) && g.Total > 0 {
				if len(out) == dstGapsPerPlan {
					break
				}
				out = append(out, sp.dstRecord(c, g))
			}
		}
		x = change.Add(-time.Second)
	}
	if cut && len(out) > 0 {
		oldest := &out[len(out)-1]
		oldest.Error += fmt.Sprintf("; any gaps before it since %s are not recorded one by one: a plan records at most %d, the latest",
			first.UTC().Format(time.RFC3339), dstGapsPerPlan)
	}
	// Oldest first, as the runs they precede.
	slices.Reverse(out)
	return out
}

// beganAfter says whether the schedule began (created, timing changed,
// resumed, start_at) at or after gapEnd: no gap up to it skipped any of
// its times.
func (sp *schedPlan) beganAfter(gapEnd time.Time) bool {
	s := sp.rec.StartAt
	return !gapEnd.After(sp.began) || (s != nil && gapEnd.Before(*s))
}

// skippedInForce says whether the schedule was in force at gapEnd: begun
// before it and within its start_at/end_at.
func (sp *schedPlan) skippedInForce(gapEnd time.Time) bool {
	if !gapEnd.After(sp.began) {
		return false
	}
	if s := sp.rec.StartAt; s != nil && gapEnd.Before(*s) {
		return false
	}
	if e := sp.rec.EndAt; e != nil && gapEnd.After(*e) {
		return false
	}
	return true
}

// dstRecord is the record of gap g: its error names the skipped local
// times (the first few, and how many in all) and the zone.
func (sp *schedPlan) dstRecord(c *model.CronSchedule, g model.DSTGap) queue.PlannedRun {
	locals := strings.Join(g.Locals, ", ")
	if g.Total > len(g.Locals) {
		locals += fmt.Sprintf(" and %d more", g.Total-len(g.Locals))
	}
	what := "local time " + locals + " does"
	if g.Total > 1 {
		what = "local times " + locals + " do"
	}
	return queue.PlannedRun{
		Key: model.DSTSkippedKey(sp.d.ID, g.End), RunAt: g.End, FireAt: g.End,
		Status: model.RunSkipped, Reason: model.ReasonDSTSkipped,
		Error: fmt.Sprintf("skipped: %s not exist in %s: clocks sprang forward at %s (dst_policy spring_forward skip); this record stands for them all",
			what, c.Location(), g.End.UTC().Format(time.RFC3339)),
	}
}

// cronOf returns the cron expression s fires by (inside its window), or
// nil for other kinds.
func cronOf(s model.Schedule) *model.CronSchedule {
	switch v := s.(type) {
	case *model.CronSchedule:
		return v
	case model.Window:
		return cronOf(v.Schedule)
	}
	return nil
}
