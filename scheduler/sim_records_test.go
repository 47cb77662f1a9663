package scheduler

import (
	"time"

	"github.com/chronos-sched/chronos/model"
)

// checkRecordOnly checks got if it is a record the ledger keeps of runs
// that did not fire, under a key of its own (no run's): a catch-up's
// record of the runs it dropped, or of the local times a spring-forward
// gap skipped. It says whether got was one. Such a
// record never has a task and is never a run in flight, so it is not
// among s.runs: checkPassed judges the times it stands for as it judges
// any time without a run.
func (s *sim) checkRecordOnly(sc *simSched, got *model.Run, desc string) bool {
	st, at := sc.cur, got.RunAt.UTC()
	switch got.Reason {
	case model.ReasonCatchupDropped:
		s.stats["skipped (catchup_dropped record)"]++
		if got.IdempotencyKey != model.CatchupDroppedKey(sc.id, at) {
			s.fail("%s: a record of dropped runs not under its own key (model.CatchupDroppedKey)", desc)
		}
		// The record of the runs a catch-up dropped (the last of them):
		// that run was missed, and the policy drops.
		if st.rec.CatchupPolicy != model.CatchupNone && st.rec.CatchupPolicy != model.CatchupLatest {
			s.fail("%s: a record of dropped runs under catchup_policy %s, which drops none", desc, st.rec.CatchupPolicy)
		}
		if why := s.notMissed(sc, at); why != "" {
			s.fail("%s: recorded as dropped by catch-up, but it was not missed: %s", desc, why)
		}
	case model.ReasonDSTSkipped:
		// The record of the local times a spring-forward gap skipped
		// (dst_policy skip, the sim's only policy): at the gap's end,
		// under the gap's own key, for a gap whose skipped times the
		// definition in force matches, while it was in force.
		s.stats["skipped (dst_skipped record)"]++
		if got.IdempotencyKey != model.DSTSkippedKey(sc.id, at) {
			s.fail("%s: a dst_skipped record not under its gap's key (model.DSTSkippedKey)", desc)
		}
		c := cronOf(st.sched)
		if c == nil || c.DSTPolicy().Effective().SpringForward != model.SpringForwardSkip {
			s.fail("%s: a dst_skipped record of a schedule that is not cron under spring_forward skip", desc)
			break
		}
		if g, ok := c.GapBefore(at, 1); !ok || !g.End.Equal(at) || g.Total == 0 {
			s.fail("%s: no spring-forward gap of %s ends at it (%+v, %v)", desc, s.describe(st.rec), g, ok)
		}
		if !at.After(st.epochStart) || !got.FireAt.Equal(got.RunAt) {
			s.fail("%s: a gap before its timing took effect (%s), or fire_at is not the gap's end", desc, st.epochStart.Format(time.RFC3339Nano))
		}
		if (st.rec.StartAt != nil && at.Before(*st.rec.StartAt)) || (st.rec.EndAt != nil && at.After(*st.rec.EndAt)) {
			s.fail("%s: a gap outside the schedule's window", desc)
		}
	default:
		return false
	}
	if got.ScheduleID != sc.id || got.Status != model.RunSkipped {
		s.fail("%s: a record of runs that did not fire must be SKIPPED and the schedule's: %+v", desc, got)
	}
	if !got.CreatedAt.UTC().Equal(s.now()) {
		s.fail("%s: created at %s, not now: a record that appeared from nowhere", desc, got.CreatedAt)
	}
	if !st.exists || st.paused {
		s.fail("%s: created while the schedule is deleted or paused", desc)
	}
	if n, err := s.rdb.Exists(s.ctx, s.taskKey(sc.id, got.IdempotencyKey)).Result(); err != nil || n != 0 {
		s.fail("%s: a record of runs that did not fire has a task (%d, %v)", desc, n, err)
	}
	return true
}
