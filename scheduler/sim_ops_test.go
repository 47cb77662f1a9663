package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// randDef draws a definition for sc.
func (s *sim) randDef(sc *simSched) model.ScheduleRecord {
	rec := model.ScheduleRecord{ID: sc.id, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1", UserID: "u"}
	s.randTiming(&rec)
	s.randJitter(&rec)
	rec.OverlapPolicy, rec.CatchupPolicy = model.OverlapAllow, model.CatchupFireImmediately
	if !sc.stable {
		s.randPolicies(&rec)
	}
	return rec
}

func (s *sim) randTiming(rec *model.ScheduleRecord) {
	rec.CronExpr = simCrons[s.r.IntN(len(simCrons))]
	rec.Timezone = simZones[s.r.IntN(len(simZones))]
	rec.StartAt, rec.EndAt = nil, nil
	if s.r.Float64() < 0.3 {
		st := s.now().Add(time.Duration(s.r.IntN(60*60*1000)-20*60*1000) * time.Millisecond)
		en := st.Add(time.Duration(2*60+s.r.IntN(90*60)) * time.Second)
		if s.r.IntN(2) == 0 {
			rec.StartAt = &st
		}
		if s.r.IntN(2) == 0 {
			rec.EndAt = &en
		}
	}
	if rec.CronExpr == "* * * * * *" && rec.EndAt == nil {
		// a per-second schedule makes many runs: keep it to a window
		en := s.now().Add(time.Duration(1+s.r.IntN(20)) * time.Minute)
		if rec.StartAt != nil && rec.StartAt.After(s.now()) {
			en = rec.StartAt.Add(time.Duration(1+s.r.IntN(20)) * time.Minute)
		}
		rec.EndAt = &en
	}
	s.clampJitter(rec)
}

func (s *sim) randJitter(rec *model.ScheduleRecord) {
	rec.JitterMs = []int64{0, 0, 0, 800, 3000, 15000, 90000, 600000}[s.r.IntN(8)]
	s.clampJitter(rec)
}

// clampJitter keeps a frequent schedule's runs per tick (lookahead + jitter)
// under MAX_CATCHUP_PER_TICK.
func (s *sim) clampJitter(rec *model.ScheduleRecord) {
	switch rec.CronExpr {
	case "* * * * * *":
		rec.JitterMs = min(rec.JitterMs, 3000)
	case "*/7 * * * * *", "0,20,40 * * * * *":
		rec.JitterMs = min(rec.JitterMs, 90000)
	}
}

func (s *sim) randPolicies(rec *model.ScheduleRecord) {
	rec.OverlapPolicy = []model.OverlapPolicy{model.OverlapAllow, model.OverlapSkip, model.OverlapQueue}[s.r.IntN(3)]
	rec.CatchupPolicy = []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest,
		model.CatchupFireImmediately, model.CatchupSpread}[s.r.IntN(4)]
}

func (s *sim) describe(rec *model.ScheduleRecord) string {
	w := ""
	if rec.StartAt != nil {
		w += " start " + rec.StartAt.Format("15:04:05.000")
	}
	if rec.EndAt != nil {
		w += " end " + rec.EndAt.Format("15:04:05.000")
	}
	return fmt.Sprintf("%q %s jitter %dms %s/%s%s v%s", rec.CronExpr, rec.Timezone, rec.JitterMs,
		rec.OverlapPolicy, rec.CatchupPolicy, w, rec.Version)
}

func (s *sim) create(sc *simSched) {
	rec := s.randDef(sc)
	s.upsert(sc, rec)
}

func (s *sim) upsert(sc *simSched, rec model.ScheduleRecord) {
	require.NoError(s.t, rec.Validate())
	_, err := s.store.UpsertSchedule(s.ctx, &rec)
	s.noErr(err, "upsert")
	st := sc.cur
	if !st.exists {
		s.recreated(sc)
		st = simState{exists: true, gen: st.gen + 1, epoch: st.epoch + 1, epochStart: s.now()}
		sc.known = map[string]bool{} // the new schedule starts its own history
		s.logf("create %s: %s", sc.id, s.describe(&rec))
	} else {
		if st.rec.TimingKey() != rec.TimingKey() {
			st.epoch++
			st.epochStart = s.now()
		}
		s.logf("upsert %s: %s", sc.id, s.describe(&rec))
	}
	s.setState(sc, st)
}

// recreated checks what creating sc again under its id did to the runs
// the deleted schedule left not started (no launcher holds any here):
// ENQUEUED, or SKIPPED by a launcher or by a plan. One for a time after
// now is gone, record and task (a manual run's task under its key stays),
// for the new schedule to plan afresh; one due and ENQUEUED is SKIPPED.
func (s *sim) recreated(sc *simSched) {
	now := s.now()
	for k, r := range s.runs {
		if r.sid != sc.id || r.status != model.RunEnqueued && r.status != model.RunSkipped {
			continue
		}
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, k)
		if r.runAt.After(now) {
			task := s.rdb.Exists(s.ctx, s.taskKey(sc.id, k)).Val()
			if s.manual[k] {
				task = 0
			}
			if !errors.Is(err, queue.ErrNotFound) || task != 0 {
				s.fail("%s run %s of the deleted %s, ahead of its re-creation, was not removed (record: %v, task: %d)", r.status, k, sc.id, err, task)
			}
			delete(s.runs, k)
			if r.task {
				s.enqueued--
			}
			s.stats["removed on re-create"]++
			continue
		}
		if r.status == model.RunSkipped {
			continue
		}
		s.noErr(err, "read run")
		if r.lost && r.overlap == model.OverlapAllow && (got.Status == model.RunFailed && strings.Contains(got.Error, "RUN_TIMEOUT") ||
			got.Status == model.RunSkipped && strings.Contains(got.Error, "(overlap_policy skip)")) {
			// Lost under "allow" (not refreshed: nothing ends it), then
			// planned again by a timing change under skip/queue, it ended
			// before: SKIPPED behind a run in flight, or failed at the
			// deadline of the run in flight it became.
			r.status = got.Status
			continue
		}
		if got.Status != model.RunSkipped || got.Error != "schedule deleted before the run started" {
			s.fail("run %s of the deleted %s, due at its re-creation, is %s (%q), not SKIPPED", k, sc.id, got.Status, got.Error)
		}
		r.status = got.Status
		s.stats["skipped on re-create"]++
	}
}

// waiting returns the runs of sc's current history that no launcher has
// touched: ENQUEUED with no failed executor attempt (the simulated
// launcher never holds a task). Pausing or deleting sc settles them
// (settle.lua). Their status is read from the store: a run lost under
// "allow" is not refreshed, and may have ended since as a run planned
// again under skip or queue.
func (s *sim) waiting(sc *simSched) []*simRun {
	var out []*simRun
	for k := range sc.known {
		r := s.runs[k]
		if r == nil || r.sid != sc.id {
			continue
		}
		v, err := s.rdb.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:run:%s", queue.ShardOf(sc.id, simShards), k), "st", "att").Result()
		s.noErr(err, "read run")
		if st, _ := v[0].(string); st != string(model.RunEnqueued) {
			continue
		}
		if att, _ := v[1].(string); att != "" && att != "0" {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *simRun) int { return a.runAt.Compare(b.runAt) })
	return out
}

// settled checks what pausing or deleting sc did to the runs waiting
// beforehand, and updates the model: one for a time after now is gone,
// record, task and history entry, so a resumed or re-created schedule
// can plan that time afresh; one due is SKIPPED with why, its task left
// to find it ended. Then no run of sc ahead of now is ENQUEUED unless a
// launcher tried it.
func (s *sim) settled(sc *simSched, wait []*simRun, why string) {
	now := s.now()
	for _, r := range wait {
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, r.key)
		if r.runAt.After(now) {
			task := s.rdb.Exists(s.ctx, s.taskKey(r.sid, r.key)).Val()
			inHist := s.rdb.ZScore(s.ctx, historyKey(sc.id), r.key).Err() == nil
			if !errors.Is(err, queue.ErrNotFound) || task != 0 || inHist {
				s.fail("run %s of %s, ahead of its schedule's %q, was not removed (record: %v, task: %d, in history: %v)",
					r.runAt.Format(time.RFC3339), sc.id, why, err, task, inHist)
			}
			delete(s.runs, r.key)
			delete(sc.known, r.key)
			if r.task {
				s.enqueued--
			}
			s.logf("removed run %s of %s", r.runAt.Format("15:04:05"), sc.id)
			s.stats["removed on pause or delete"]++
			continue
		}
		s.noErr(err, "read run")
		if got.Status != model.RunSkipped || got.Error != why {
			s.fail("run %s of %s, due at its schedule's %q, is %s (%q), not SKIPPED", r.runAt.Format(time.RFC3339), sc.id, why, got.Status, got.Error)
		}
		r.status = got.Status
		s.stats["skipped on pause or delete"]++
	}
	for k := range sc.known {
		r := s.runs[k]
		if r == nil || r.sid != sc.id || !r.runAt.After(now) {
			continue
		}
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, k)
		if err == nil && got.Status == model.RunEnqueued && got.Attempts == 0 {
			s.fail("run %s of %s is still ENQUEUED after %q", r.runAt.Format(time.RFC3339), sc.id, why)
		}
	}
}

// setState records sc's new state, reading what the store keeps (anchor,
// rs) from its hash.
func (s *sim) setState(sc *simSched, st simState) {
	s.seq++
	if st.exists {
		h, err := s.rdb.HGetAll(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id)).Result()
		s.noErr(err, "read schedule hash")
		st.rec, err = s.store.GetSchedule(s.ctx, sc.id)
		s.noErr(err, "load schedule")
		st.sched, err = st.rec.Compile()
		s.noErr(err, "compile")
		st.began = st.rec.Anchor
		if rs, ok := parseMillis(h["rs"]); ok && rs.After(st.began) {
			st.began = rs
		}
		st.paused = h["paused"] != ""
	}
	if st.epoch != sc.cur.epoch {
		sc.verified = st.epochStart
	}
	sc.cur = st
	sc.hist = append(sc.hist, struct {
		seq int
		st  simState
	}{s.seq, st})
}

func parseMillis(v string) (time.Time, bool) {
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || v == "" {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

// operate applies a random operation to sc. The runs created so far are
// checked first, against the state they were created in.
func (s *sim) operate(sc *simSched) {
	s.check()
	s.ticked[queue.ShardOf(sc.id, simShards)] = false
	sc.expect = time.Time{}
	if !sc.cur.exists {
		s.create(sc)
		return
	}
	switch x := s.r.Float64(); {
	case x < 0.05:
		// A manual run started with the key one of its next runs will
		// have: that run is recorded SKIPPED, never enqueued.
		at := sc.cur.sched.Next(s.now().Add(time.Duration(s.r.IntN(60)) * time.Second))
		if at.IsZero() {
			return
		}
		key := model.IdempotencyKey(sc.id, at)
		_, started, err := s.store.StartManualRun(s.ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: at, IdempotencyKey: key})
		s.noErr(err, "manual run")
		s.logf("manual run with the key of %s at %s: started %v", sc.id, at.Format("15:04:05"), started)
		if started {
			s.manual[key] = true
			s.enqueued++
			s.stats["manual"]++
		}
	case x < 0.45:
		rec := *sc.cur.rec
		rec.NextRunAt, rec.Paused = nil, false
		var what []string
		for len(what) == 0 {
			if s.r.Float64() < 0.4 {
				s.randTiming(&rec)
				what = append(what, "timing")
			}
			if s.r.Float64() < 0.3 {
				s.randJitter(&rec)
				what = append(what, "jitter")
			}
			if !sc.stable && s.r.Float64() < 0.4 {
				s.randPolicies(&rec)
				what = append(what, "policy")
			}
			if s.r.Float64() < 0.15 {
				rec.Version = model.Version(fmt.Sprint(1 + s.r.IntN(3)))
				what = append(what, "version")
			}
		}
		s.logf("change %s %v", sc.id, what)
		s.upsert(sc, rec)
	case x < 0.5:
		rec := *sc.cur.rec
		rec.NextRunAt, rec.Paused = nil, false
		s.upsert(sc, rec) // the same body: changes nothing
	case x < 0.7:
		wait := s.waiting(sc)
		_, err := s.store.SetPaused(s.ctx, sc.id, true)
		s.noErr(err, "pause")
		s.logf("pause %s", sc.id)
		if !sc.cur.paused {
			s.settled(sc, wait, "schedule paused before the run started")
		}
		s.setState(sc, sc.cur)
	case x < 0.9:
		_, err := s.store.SetPaused(s.ctx, sc.id, false)
		s.noErr(err, "resume")
		st := sc.cur
		if st.paused {
			st.epoch++
			st.epochStart = s.now()
		}
		s.logf("resume %s", sc.id)
		s.setState(sc, st)
	default:
		wait := s.waiting(sc)
		s.noErr(s.store.DeleteSchedule(s.ctx, sc.id), "delete")
		s.logf("delete %s", sc.id)
		s.settled(sc, wait, "schedule deleted before the run started")
		st := sc.cur
		st.exists, st.paused = false, false
		s.setState(sc, st)
	}
}

// launch is a launcher: it reports random statuses for runs whose fire
// time has come. A run of a schedule paused, deleted or no longer planning
// it is SKIPPED as unplanned, as the real launcher does; some runs are
// never reported again (lost), which RUN_TIMEOUT has to clean up.
func (s *sim) launch() {
	keys := make([]string, 0, len(s.runs))
	for k, r := range s.runs {
		if !r.lost && (r.status == model.RunEnqueued || r.status == model.RunStarted) && !r.fireAt.After(s.now()) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := s.runs[k]
		var u queue.StatusUpdate
		x := s.r.Float64()
		if r.status == model.RunStarted {
			switch {
			case x < 0.3:
				u.Status = model.RunSuccess
			case x < 0.4:
				u.Status = model.RunFailed
			case x < 0.43:
				r.lost = true
			}
		} else {
			sc := s.sched(r.sid)
			switch {
			case x < 0.3:
			case !sc.cur.exists || sc.cur.paused || !sc.cur.sched.Next(r.runAt.Add(-time.Second)).Equal(r.runAt):
				u = queue.StatusUpdate{Status: model.RunSkipped, Release: queue.ReleaseUnplanned, Error: "no longer planned"}
			case x < 0.6:
				u.Status = model.RunStarted
			case x < 0.75:
				u.Status = model.RunSuccess
			case x < 0.83:
				u.Status = model.RunFailed
			case x < 0.88:
				u.Status, u.Error = model.RunSkipped, "missed at launch"
			case x < 0.95:
				r.lost = true
			case x < 0.98:
				s.noErr(s.store.RecordFailedAttempt(s.ctx, &queue.TaskPayload{IdempotencyKey: k, ScheduleID: r.sid}, s.now().Add(time.Second), "sim"), "failed attempt")
				r.attempts++
				s.logf("launcher: failed attempt of run %s of %s", r.runAt.Format("15:04:05"), r.sid)
			}
		}
		if u.Status == "" {
			continue
		}
		u.From = r.status
		if sc := s.sched(r.sid); sc.heldBehind == k && sc.cur.exists && !sc.cur.paused && u.Status.Terminal() &&
			(u.Status != model.RunSkipped || u.Release == queue.ReleaseUnplanned) {
			// It ran (or was no longer planned): the run held behind it
			// starts at the next tick, whatever the catch-up policy.
			s.release(sc)
		}
		got, err := s.store.UpdateRunStatus(s.ctx, k, u)
		if errors.Is(err, queue.ErrConflict) {
			s.refresh(r)
			continue
		}
		s.noErr(err, "report status")
		s.logf("launcher: %s run %s of %s -> %s", r.status, r.runAt.Format("15:04:05"), r.sid, got.Status)
		r.status = got.Status
	}
}

// release notes that sc's held run waited for the run in flight, which
// ran: it starts at the next tick whatever the catch-up policy, if it was
// due (its act time, next less the jitter, come) when released. A next
// time set while held (a timing change, a resume) and not due yet is
// planned as any run: an outage after the release makes it late
// (unhold.lua).
func (s *sim) release(sc *simSched) {
	// The act time is the held time less its own jitter (the hash's jit
	// field, which unhold.lua reads), not less the most jitter allowed.
	jitter := time.Duration(sc.cur.rec.JitterMs) * time.Millisecond
	act := jittered(sc.cur.rec, model.IdempotencyKey(sc.id, sc.heldNext), sc.heldNext, jitter, sc.cur.began)
	if !sc.heldNext.IsZero() && !act.After(s.now()) {
		sc.expect, sc.expectHist = sc.heldNext, len(sc.hist)
	}
}

func (s *sim) sched(id string) *simSched {
	for _, sc := range s.scheds {
		if sc.id == id {
			return sc
		}
	}
	s.fail("no schedule %s", id)
	return nil
}

// refresh rereads a run's status: a final status never changes.
func (s *sim) refresh(r *simRun) {
	got, err := s.store.GetScheduleRun(s.ctx, r.sid, r.key)
	s.noErr(err, "read run")
	if r.status.Terminal() && got.Status != r.status {
		s.fail("run %s of %s went from final %s to %s", r.runAt.Format(time.RFC3339), r.sid, r.status, got.Status)
	}
	if !got.RunAt.Equal(r.runAt) || !got.FireAt.Equal(r.fireAt) || !got.CreatedAt.Equal(r.created) {
		s.fail("run %s of %s was rewritten: %+v", r.runAt.Format(time.RFC3339), r.sid, got)
	}
	if r.status != got.Status {
		s.logf("run %s of %s: %s -> %s (%s)", r.runAt.Format("15:04:05"), r.sid, r.status, got.Status, got.Error)
	}
	r.status = got.Status
}

// refreshOpen rereads, in one round trip, the status of every run in
// flight that may still change.
func (s *sim) refreshOpen() {
	var open []*simRun
	for _, r := range s.runs {
		if isOpen(r.status) && (!r.lost || r.overlap != model.OverlapAllow) {
			open = append(open, r)
		}
	}
	cmds := make([]*redis.SliceCmd, len(open))
	_, err := s.rdb.Pipelined(s.ctx, func(p redis.Pipeliner) error {
		for i, r := range open {
			cmds[i] = p.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:run:%s", queue.ShardOf(r.sid, simShards), r.key), "st", "err")
		}
		return nil
	})
	s.noErr(err, "read runs in flight")
	for i, r := range open {
		st, _ := cmds[i].Val()[0].(string)
		if st == "" {
			s.fail("run %s of %s in flight lost its record", r.runAt.Format(time.RFC3339), r.sid)
		}
		if model.RunStatus(st) != r.status {
			e, _ := cmds[i].Val()[1].(string)
			if sc := s.sched(r.sid); (r.status == model.RunStarted || r.attempts > 0) && strings.Contains(e, "RUN_TIMEOUT") &&
				sc.heldBehind == r.key && sc.cur.exists && !sc.cur.paused {
				// it ran: the run held behind it starts in the same tick
				s.release(sc)
			}
			s.logf("run %s of %s: %s -> %s (%s)", r.runAt.Format("15:04:05"), r.sid, r.status, st, e)
			if strings.Contains(e, "RUN_TIMEOUT") {
				s.stats["RUN_TIMEOUT"]++
			}
			r.status = model.RunStatus(st)
		}
	}
}

func isOpen(st model.RunStatus) bool { return st == model.RunEnqueued || st == model.RunStarted }
