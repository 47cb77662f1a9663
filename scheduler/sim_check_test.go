package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// check finds the runs created since the last check and checks them, then
// the runs in flight and the fire times the schedules have passed.
func (s *sim) check() {
	s.t.Helper()
	s.refreshOpen()
	for _, sc := range s.scheds {
		s.collect(sc)
	}
	for _, sc := range s.scheds {
		s.checkOpen(sc)
		s.checkPassed(sc)
	}
}

func historyKey(id string) string {
	return fmt.Sprintf("chronos:{s%02d}:runs:%s", queue.ShardOf(id, simShards), id)
}

// collectShard collects the runs of shard's schedules, just after a tick
// of it: notMissed orders runs and ticks by seq.
func (s *sim) collectShard(shard int) {
	for _, sc := range s.scheds {
		if queue.ShardOf(sc.id, simShards) == shard {
			s.collect(sc)
		}
	}
}

// collect reads sc's run history for keys not seen before.
func (s *sim) collect(sc *simSched) {
	hk := historyKey(sc.id)
	n, err := s.rdb.ZCard(s.ctx, hk).Result()
	s.noErr(err, "zcard")
	if int(n) == len(sc.known) {
		return
	}
	keys, err := s.rdb.ZRange(s.ctx, hk, 0, -1).Result()
	s.noErr(err, "zrange")
	var fresh []*model.Run
	for _, k := range keys {
		if sc.known[k] {
			continue
		}
		sc.known[k] = true
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, k)
		s.noErr(err, "read new run")
		if old := s.runs[k]; old != nil {
			// Creating a schedule again removed or ended the deleted one's
			// runs that had not started: none becomes the new one's. One
			// that ran (jitter fired it before its time, and before the
			// re-creation) is the run of its key: planned again, it keeps
			// its record (not of the new definition's making: unchecked).
			if old.status == model.RunEnqueued || old.status == model.RunSkipped {
				s.fail("run %s of the deleted %s (%s) is in the new schedule's history", k, sc.id, old.status)
			}
			s.logf("%s planned again run %s of the deleted one (%s)", sc.id, got.RunAt.Format("15:04:05"), got.Status)
			s.stats["ran before re-creation, planned again"]++
			continue
		}
		fresh = append(fresh, got)
	}
	slices.SortFunc(fresh, func(a, b *model.Run) int { return a.RunAt.Compare(b.RunAt) })
	for _, got := range fresh {
		s.checkNewRun(sc, got)
	}
}

// checkNewRun checks a run just created by a commit.
func (s *sim) checkNewRun(sc *simSched, got *model.Run) {
	s.t.Helper()
	st := sc.cur
	now := s.now()
	at := got.RunAt.UTC()
	desc := fmt.Sprintf("run %s (fire %s, %s %q) of %s", at.Format(time.RFC3339), got.FireAt.UTC().Format(time.RFC3339Nano), got.Status, got.Error, sc.id)
	if s.checkRecordOnly(sc, got, desc) {
		return // a record of runs that did not fire, no run of its own
	}
	r := &simRun{key: got.IdempotencyKey, sid: sc.id, gen: st.gen, epoch: st.epoch, runAt: at, fireAt: got.FireAt.UTC(), created: got.CreatedAt.UTC(),
		seq: s.seq, status: got.Status, inflightSince: now}
	s.runs[r.key] = r
	s.created[s.step][sc.id]++
	s.logf("new %s", desc)
	if got.ScheduleID != sc.id || got.IdempotencyKey != model.IdempotencyKey(sc.id, at) {
		s.fail("%s: key or schedule id does not match: %+v", desc, got)
	}
	if !r.created.Equal(now) {
		s.fail("%s: created at %s, not now: a record that appeared from nowhere", desc, r.created)
	}
	// Never while paused, never after delete.
	if !st.exists || st.paused {
		s.fail("%s: created while the schedule is deleted or paused", desc)
	}
	r.overlap = st.rec.OverlapPolicy
	// run_at is a fire time of the definition in force (inside its
	// window), after the moment its timing took effect.
	if !st.sched.Next(at.Add(-time.Second)).Equal(at) || at.Truncate(time.Second) != at {
		s.fail("%s: not a fire time of %s", desc, s.describe(st.rec))
	}
	if !at.After(st.epochStart) {
		s.fail("%s: at or before %s, when its timing took effect (created, changed or resumed)", desc, st.epochStart.Format(time.RFC3339Nano))
	}
	// Jitter: the deterministic fire time, or, for a run found missed
	// (jittered fire time more than MISFIRE_GRACE ago), now (spread: within
	// the spread window after now).
	jitter := time.Duration(st.rec.JitterMs) * time.Millisecond
	exp := jittered(st.rec, r.key, at, jitter, st.began)
	if jitter > 0 && exp != at.Add(model.JitterOffset(r.key, jitter)) {
		// clamped: only to when the schedule began, or to its window
		ok := exp.Equal(st.began) || (st.rec.StartAt != nil && exp.Equal(*st.rec.StartAt)) || (st.rec.EndAt != nil && exp.Equal(*st.rec.EndAt))
		if !ok {
			s.fail("%s: jittered fire time %s is neither run_at+offset nor a clamp", desc, exp)
		}
	}
	// (end_at wins over the start of the schedule: a run of a schedule
	// lagging past its end_at fires at end_at, or now if missed.)
	if (exp.Before(st.began) && (st.rec.EndAt == nil || !exp.Equal(*st.rec.EndAt))) ||
		(st.rec.StartAt != nil && exp.Before(*st.rec.StartAt)) || (st.rec.EndAt != nil && exp.After(*st.rec.EndAt)) {
		s.fail("%s: jittered fire time %s outside began %s / window", desc, exp, st.began)
	}
	if r.fireAt.Equal(exp) {
		s.stats["on time"]++
	} else {
		s.stats["caught up"]++
		// (Without jitter the planner judges a run missed by its run_at
		// alone, even one before the schedule began (plan.go's fireAt),
		// while jittered clamps its fire time to then.)
		judged := exp
		if jitter == 0 {
			judged = at
		}
		missed := judged.Before(now.Add(-s.cfg.MisfireGrace))
		spread := st.rec.CatchupPolicy == model.CatchupSpread && !r.fireAt.Before(now) && !r.fireAt.After(now.Add(s.cfg.SpreadWindow))
		if !missed || !(r.fireAt.Equal(now) || spread) {
			s.fail("%s: fire_at is not the jittered fire time %s, and the run is not a missed one fired now (missed %v)",
				desc, exp.Format(time.RFC3339Nano), missed)
		}
	}
	switch got.Status {
	case model.RunEnqueued:
		s.enqueued++
		r.task = true
		state, err := s.rdb.HGet(s.ctx, s.taskKey(r.sid, r.key), "state").Result()
		if err != nil || state == "archived" || state == "completed" {
			s.fail("%s: no live asynq task (%q, %v)", desc, state, err)
		}
		if r.overlap == model.OverlapQueue {
			if sc.queueEpoch == st.epoch && !at.After(sc.queueLast) {
				s.fail("%s: a queue schedule enqueued it after its run at %s", desc, sc.queueLast.Format(time.RFC3339))
			}
			sc.queueEpoch, sc.queueLast = st.epoch, at
		}
	case model.RunSkipped:
		s.stats["skipped (overlap)"]++
		// Only the overlap policy skips a run at planning (no manual
		// runs here): the run it names must be in flight.
		if strings.Contains(got.Error, "taken by a manual run") {
			if !s.manual[r.key] {
				s.fail("%s: SKIPPED for a manual run that was never started", desc)
			}
			s.stats["skipped (taken)"]++
			break
		}
		var k string
		if _, err := fmt.Sscanf(got.Error, "skipped: run %s is still in flight", &k); err != nil || st.rec.OverlapPolicy != model.OverlapSkip {
			s.fail("%s: SKIPPED at planning without an in-flight run", desc)
		}
		if o := s.runs[k]; o == nil || !isOpen(o.status) || o.sid != sc.id {
			s.fail("%s: skipped for run %s which is not in flight: %+v", desc, k, o)
		}
	default:
		s.fail("%s: created with status %s", desc, got.Status)
	}
}

// checkOpen: a skip or queue schedule never has two runs in flight, and no
// run of it stays in flight past RUN_TIMEOUT after a tick; a held schedule
// waits for a run still in flight (nothing wedged).
func (s *sim) checkOpen(sc *simSched) {
	if !sc.cur.exists {
		return
	}
	var open []*simRun
	for _, r := range s.runs {
		if r.sid == sc.id && r.gen == sc.cur.gen && isOpen(r.status) && r.overlap != model.OverlapAllow {
			open = append(open, r)
		}
	}
	if len(open) > 1 {
		var d []string
		for _, r := range open {
			d = append(d, fmt.Sprintf("%s %s (%s)", r.runAt.Format(time.RFC3339), r.status, r.overlap))
		}
		s.fail("schedule %s has %d skip/queue runs in flight: %v", sc.id, len(open), d)
	}
	h, err := s.rdb.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "held", "inflight", "next").Result()
	s.noErr(err, "hmget")
	sc.heldBehind, sc.heldNext = "", time.Time{}
	if h[0] != nil {
		k, _ := h[1].(string)
		sc.heldBehind = k
		sc.heldNext, _ = parseMillis(fmt.Sprint(h[2]))
		if o := s.runs[k]; o == nil || !isOpen(o.status) {
			s.fail("schedule %s is held behind run %s, which is not in flight: %+v", sc.id, k, o)
		}
	}
}

// checkDue runs after the replicas ticked: no schedule of a ticked shard
// is left due, and no skip/queue run is in flight past its RUN_TIMEOUT.
func (s *sim) checkDue(ticked map[int]bool) {
	now := s.now()
	for sh := range simShards {
		if !ticked[sh] {
			continue
		}
		ids, err := s.rdb.ZRangeByScore(s.ctx, fmt.Sprintf("chronos:{s%02d}:due", sh), &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(now.UnixMilli())}).Result()
		s.noErr(err, "due")
		if len(ids) > 0 {
			s.fail("shard %d ticked at now still has due schedules %v", sh, ids)
		}
	}
	for _, sc := range s.scheds {
		if !sc.cur.exists || !ticked[queue.ShardOf(sc.id, simShards)] {
			continue
		}
		// (A held next time not due yet, after a timing change while held,
		// is planned at its own time.)
		if !sc.expect.IsZero() && !jittered(sc.cur.rec, model.IdempotencyKey(sc.id, sc.expect), sc.expect,
			time.Duration(sc.cur.rec.JitterMs)*time.Millisecond, sc.cur.began).After(now) {
			s.stats["release checked"]++
			// (A manual run's record in the schedule's shard stands for
			// a run whose key it took: README, POST /run-launcher/start.)
			if r := s.runs[model.IdempotencyKey(sc.id, sc.expect)]; (r == nil || r.sid != sc.id) && !s.manual[model.IdempotencyKey(sc.id, sc.expect)] {
				s.fail("queue schedule %s: its run at %s, held behind a run that ran, did not start when released", sc.id, sc.expect.Format(time.RFC3339))
			} else if r != nil && r.sid == sc.id && r.created.Equal(now) && len(sc.hist) == sc.expectHist {
				// (Only right after the release: a later tick may hold a
				// time that came due since.)
				s.checkDrained(sc)
			}
		}
		sc.expect = time.Time{}
		for _, r := range s.runs {
			if r.sid == sc.id && r.gen == sc.cur.gen && isOpen(r.status) && r.overlap != model.OverlapAllow &&
				!maxTime(r.fireAt, r.inflightSince).Add(s.cfg.RunTimeout).After(now) {
				s.fail("run %s of %s (%s since %s) is in flight past RUN_TIMEOUT", r.runAt.Format(time.RFC3339), sc.id, r.status, r.inflightSince)
			}
		}
	}
}

// checkDrained runs after a tick released sc's held run: under "queue"
// with catch-up none or latest, no backlog is left behind it. The runs
// due behind a released run are missed (model.MissedBefore): none drops
// them, so the schedule is not held at a time already due; latest keeps
// the last, so the time after the one it holds is not due. (Before issue
// 26's finding 5, each waited a tick behind the one before, and a
// per-second schedule never caught up.)
func (s *sim) checkDrained(sc *simSched) {
	rec := sc.cur.rec
	if rec.OverlapPolicy != model.OverlapQueue || rec.CatchupPolicy.Keeps() == model.KeepAllMissed {
		return
	}
	h, err := s.rdb.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "held", "next").Result()
	s.noErr(err, "hmget")
	if h[0] == nil {
		return // not held: nothing is left due (checkDue)
	}
	next, ok := parseMillis(fmt.Sprint(h[1]))
	if !ok {
		return
	}
	s.stats["drain checked"]++
	jitter := time.Duration(rec.JitterMs) * time.Millisecond
	due := func(t time.Time) bool {
		return !t.IsZero() && !jittered(rec, model.IdempotencyKey(sc.id, t), t, jitter, sc.cur.began).After(s.now())
	}
	switch {
	case rec.CatchupPolicy == model.CatchupNone && due(next):
		s.fail("queue schedule %s (none): released its run at %s, then held its run at %s, due behind it, instead of dropping it",
			sc.id, sc.expect.Format(time.RFC3339), next.Format(time.RFC3339))
	case rec.CatchupPolicy == model.CatchupLatest && due(sc.cur.sched.Next(next)):
		s.fail("queue schedule %s (latest): released its run at %s, then held its run at %s, not the last one due behind it",
			sc.id, sc.expect.Format(time.RFC3339), next.Format(time.RFC3339))
	}
}

// checkPassed: every fire time of the current epoch that the schedule has
// moved past (its stored next time) has a run, unless the run was
// legitimately dropped: it was missed (no tick found it on time) or waited
// behind a queue run. A stable (allow + fire_immediately) schedule drops
// none.
func (s *sim) checkPassed(sc *simSched) {
	st := sc.cur
	if !st.exists || st.paused {
		return
	}
	v, err := s.rdb.HGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "next").Result()
	if errors.Is(err, redis.Nil) {
		v = ""
	} else {
		s.noErr(err, "hget next")
	}
	next, ok := parseMillis(v)
	if !ok {
		// retired: every fire time is passed
		next = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	for t := st.sched.Next(sc.verified.Add(-time.Nanosecond)); !t.IsZero() && t.Before(next) && !t.After(s.now().Add(24*time.Hour)); t = st.sched.Next(t) {
		if !t.After(st.epochStart) {
			continue
		}
		if r := s.runs[model.IdempotencyKey(sc.id, t)]; (r != nil && r.sid == sc.id) || s.manual[model.IdempotencyKey(sc.id, t)] {
			continue // (a manual run's record in the schedule's shard stands for it)
		}
		if sc.stable {
			s.fail("stable (allow, fire_immediately) schedule %s dropped its run at %s (next is %s)", sc.id, t.Format(time.RFC3339), v)
		}
		if why := s.notMissed(sc, t); why != "" {
			s.fail("schedule %s dropped its run at %s (next %s), which was not missed: %s", sc.id, t.Format(time.RFC3339), v, why)
		}
		s.logf("%s dropped %s (missed)", sc.id, t.Format("15:04:05"))
		s.stats["dropped as missed"]++
	}
	if ok {
		sc.verified = next
	} else {
		sc.verified = s.now().Add(24 * time.Hour)
	}
}

// notMissed returns why the run of sc at t, of its current epoch, was not
// missed: a tick of its shard came between its act time and its jittered
// fire time plus MISFIRE_GRACE while its definition was that tick's ("" if
// none). Ticks when the schedule was queue (held runs are released or
// follow their catch-up policy) or made MAX_CATCHUP_PER_TICK runs prove
// nothing.
func (s *sim) notMissed(sc *simSched, t time.Time) string {
	sh := queue.ShardOf(sc.id, simShards)
	for _, tk := range s.ticks[sh] {
		var st *simState
		for i := range sc.hist {
			if sc.hist[i].seq < tk.seq {
				st = &sc.hist[i].st
			}
		}
		if st == nil || !st.exists || st.paused || st.epoch != sc.cur.epoch {
			continue
		}
		if st.rec.OverlapPolicy == model.OverlapQueue || tk.limited[sc.id] {
			continue
		}
		jitter := time.Duration(st.rec.JitterMs) * time.Millisecond
		fire := t // as plan.go's fireAt: no clamp without jitter
		if jitter > 0 {
			fire = jittered(st.rec, model.IdempotencyKey(sc.id, t), t, jitter, st.began)
		}
		act := fire
		if st.rec.OverlapPolicy == model.OverlapAllow {
			act = t.Add(-simLookahead - jitter)
		}
		if tk.at.Before(act) || tk.at.After(fire.Add(s.cfg.MisfireGrace)) {
			continue
		}
		// A skip schedule plans its runs in run_at order, each at its
		// jittered fire time: a run jittered early waits behind an earlier
		// one jittered late (plan.go: "it waits its turn"), so a tick
		// before that one is due proves nothing. (A record of that run
		// made in an earlier epoch is not this timing's planning: by the
		// schedule deleted before, it ran early; by the timing before a
		// change or a resume (seed 3845). The new timing plans that time
		// again at its own turn. Nor is one created after the tick, in
		// the same step or later. Epochs count across re-creations.)
		blocked := false
		if st.rec.OverlapPolicy == model.OverlapSkip && jitter > 0 {
			for u := st.sched.Next(maxTime(st.epochStart, t.Add(-2*jitter-time.Second))); !u.IsZero() && u.Before(t); u = st.sched.Next(u) {
				k := model.IdempotencyKey(sc.id, u)
				if r := s.runs[k]; (r == nil || r.epoch != st.epoch || r.seq > tk.seq) && jittered(st.rec, k, u, jitter, st.began).After(tk.at) {
					blocked = true
					break
				}
			}
		}
		if !blocked {
			return fmt.Sprintf("the tick at %s (seq %d) found it due and on time (act %s, fire %s) as %s; %d runs created in step %d",
				tk.at.Format(time.RFC3339Nano), tk.seq, act.Format(time.RFC3339), fire.Format(time.RFC3339), s.describe(st.rec), s.created[tk.step][sc.id], tk.step)
		}
	}
	return ""
}

// taskKey is the key of the asynq task of run key of schedule id, in its
// shard's run queue.
func (s *sim) taskKey(id, key string) string {
	return s.store.RunQueue(queue.ShardOf(id, simShards)).Keys().Task(key)
}
