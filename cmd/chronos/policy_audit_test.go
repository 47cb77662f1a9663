package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// policyRun is a run record as stored.
type policyRun struct {
	key, sid, st, err, src string
	rsn                    string // the ledger's reason (model.RunReason)
	at, fire, cr, up, enq  time.Time
	hasEnq                 bool
}

func msField(m map[string]string, f string) (time.Time, bool) {
	v, ok := m[f]
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

func (c *chaosCluster) readRuns(records map[string]string) map[string]*policyRun {
	cmds := map[string]*redis.MapStringStringCmd{}
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for key, rk := range records {
			cmds[key] = p.HGetAll(c.ctx, rk)
		}
		return nil
	})
	require.NoError(c.t, err)
	out := map[string]*policyRun{}
	for key, cmd := range cmds {
		m := cmd.Val()
		r := &policyRun{key: key, sid: m["sid"], st: m["st"], err: m["err"], src: m["src"], rsn: m["rsn"]}
		r.at, _ = msField(m, "at")
		r.fire, _ = msField(m, "fire")
		r.cr, _ = msField(m, "cr")
		r.up, _ = msField(m, "up")
		r.enq, r.hasEnq = msField(m, "enq")
		out[key] = r
	}
	return out
}

// isFireTime says whether at is a fire time of cron in zone.
func isFireTime(t *testing.T, cron, zone string, at time.Time) bool {
	rec := &model.ScheduleRecord{Kind: model.KindCron, CronExpr: cron, Timezone: zone}
	s, err := rec.Compile()
	require.NoError(t, err)
	return s.Next(at.Add(-time.Millisecond)).Equal(at)
}

// fireTimes returns the fire times of cron in zone with after < t < before.
func fireTimes(t *testing.T, cron, zone string, after, before time.Time) []time.Time {
	rec := &model.ScheduleRecord{Kind: model.KindCron, CronExpr: cron, Timezone: zone}
	s, err := rec.Compile()
	require.NoError(t, err)
	var out []time.Time
	for at := s.Next(after); !at.IsZero() && at.Before(before); at = s.Next(at) {
		out = append(out, at.UTC())
	}
	return out
}

// policyAudit holds what auditPolicies reads and what its checks share:
// the tasks found, each key's first executor call, and the counts logged.
type policyAudit struct {
	c                         *chaosCluster
	t                         *testing.T
	runs                      map[string]*policyRun
	calls                     []policyCall
	tEnd, pauseAll            time.Time
	outStart, outEnd          time.Time
	tasks                     map[string]bool
	first                     map[string]policyCall
	dupCalls                  int
	skippedOverlap, timedOut  int
	timedOutNeverCalled       int
	launcherSkipped, caughtUp int
	stableChecked             int
}

// scheduleAudit is one schedule's runs in run_at order, its events, and
// whether its timing ever changed or it was ever paused.
type scheduleAudit struct {
	s                    *policySchedule
	rs                   []*policyRun
	events               []policyEvent
	upserted, pausedEver bool
}

// runSpan is the time a run is in flight: from its first executor call to
// its final status.
type runSpan struct {
	r        *policyRun
	from, to time.Time
}

// auditPolicies checks the invariants listed at the top of the file.
func (c *chaosCluster) auditPolicies(schedules []*policySchedule, byID map[string]*policySchedule, runs map[string]*policyRun,
	records map[string]string, calls []policyCall, tEnd, pauseAll, outStart, outEnd time.Time) {
	t := c.t
	t.Helper()
	a := &policyAudit{c: c, t: t, runs: runs, calls: calls, tEnd: tEnd, pauseAll: pauseAll, outStart: outStart, outEnd: outEnd}
	a.tasksMatchRecords(byID)
	a.executorCallsMatchRecords()
	bySched := map[string][]*policyRun{}
	for _, r := range runs {
		bySched[r.sid] = append(bySched[r.sid], r)
	}
	for _, s := range schedules {
		sa := newScheduleAudit(s, bySched[s.id])
		a.runTimesAreFireTimes(sa)
		a.noRunFiresBeforeItsJitter(sa)
		a.pausesAndTimingChangesHold(sa)
		a.launcherSkipsAreExplained(sa)
		if s.overlap != "allow" {
			a.overlapSkipsNameARunInFlight(sa)
			spans := a.neverTwoRunsInFlight(sa)
			if s.overlap == "queue" {
				a.heldRunsStartAtOnceInOrder(sa, spans)
			}
		}
		if !sa.upserted && !sa.pausedEver {
			a.catchupFollowsThePolicy(sa)
		}
	}
	t.Logf("audited %d schedules (%d stable): %d run records, %d asynq tasks, %d executor calls (%d repeated deliveries)",
		len(schedules), a.stableChecked, len(runs), len(a.tasks), len(calls), a.dupCalls)
	t.Logf("%d runs SKIPPED for overlap, %d SKIPPED by launchers (paused/changed), %d FAILED by RUN_TIMEOUT (%d never reached the executor), %d runs recorded late (caught up) on stable schedules",
		a.skippedOverlap, a.launcherSkipped, a.timedOut, a.timedOutNeverCalled, a.caughtUp)
}

func newScheduleAudit(s *policySchedule, rs []*policyRun) *scheduleAudit {
	slices.SortFunc(rs, func(a, b *policyRun) int { return a.at.Compare(b.at) })
	s.mu.Lock()
	events := slices.Clone(s.events)
	s.mu.Unlock()
	return &scheduleAudit{s: s, rs: rs, events: events,
		upserted:   slices.ContainsFunc(events, func(e policyEvent) bool { return e.kind == "upsert" }),
		pausedEver: slices.ContainsFunc(events, func(e policyEvent) bool { return e.kind == "pause" && !e.final }),
	}
}

// tasksMatchRecords checks that there is one asynq task per enqueued run
// record of a known schedule, under the run's key, and none otherwise.
func (a *policyAudit) tasksMatchRecords(byID map[string]*policySchedule) {
	t, c, runs := a.t, a.c, a.runs
	t.Helper()
	tasks := map[string]bool{}
	for _, k := range c.scanKeys("asynq:{*}:t:*") {
		m := taskKeyRE.FindStringSubmatch(k)
		require.NotNil(t, m, "unexpected asynq task key %q", k)
		require.False(t, tasks[m[1]], "asynq task %s in two queues", m[1])
		r, ok := runs[m[1]]
		require.True(t, ok, "asynq task %s has no run record", m[1])
		require.True(t, r.hasEnq, "asynq task %s: its record (%s, %s) was never enqueued", m[1], r.sid, r.st)
		tasks[m[1]] = true
	}
	enqueued := 0
	for k, r := range runs {
		_, known := byID[r.sid]
		require.True(t, known, "run %s of unknown schedule %q", k, r.sid)
		require.Equal(t, "schedule", r.src, "run %s", k)
		want := model.IdempotencyKey(r.sid, r.at)
		if r.rsn == string(model.ReasonCatchupDropped) {
			want = model.CatchupDroppedKey(r.sid, r.at) // a record of dropped runs, no run's
		}
		require.Equal(t, want, k, "key of run of %s at %s", r.sid, r.at)
		if r.hasEnq {
			enqueued++
			require.True(t, tasks[k], "run %s of %s at %s was enqueued but has no asynq task", k, r.sid, r.at)
		}
	}
	require.Equal(t, enqueued, queuetest.CountTasks(t, c.rdb, chaosQueue))
	a.tasks = tasks
}

// executorCallsMatchRecords checks that the executor never receives a run
// without a record, a SKIPPED run, or a run before its fire time, and that
// every allow run is called, never FAILED, when SUCCESS.
func (a *policyAudit) executorCallsMatchRecords() {
	t, runs := a.t, a.runs
	t.Helper()
	// First call per key.
	first := map[string]policyCall{}
	for _, call := range a.calls {
		if _, ok := first[call.key]; ok {
			a.dupCalls++
			continue
		}
		first[call.key] = call
	}
	a.first = first
	for k, call := range first {
		r, ok := runs[k]
		require.True(t, ok, "executor received %s (%s at %s), which has no run record", k, call.sid, call.runAt)
		require.NotEqual(t, "SKIPPED", r.st, "run %s of %s at %s reached the executor but is SKIPPED: %s", k[:8], r.sid, r.at, r.err)
		require.False(t, call.at.Before(r.fire.Add(-policyTol)),
			"run %s of %s (run_at %s) reached the executor at %s, before its fire time %s",
			k[:8], r.sid, r.at.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), r.fire.Format(time.TimeOnly+".000"))
	}
	for k, r := range runs {
		if r.st == "SUCCESS" && strings.HasPrefix(r.sid, "pa-") {
			_, ok := first[k]
			require.True(t, ok, "allow run %s of %s at %s is SUCCESS but never reached the executor", k[:8], r.sid, r.at)
		}
		if strings.HasPrefix(r.sid, "pa-") {
			require.NotEqual(t, "FAILED", r.st, "allow run %s of %s at %s FAILED: %s", k[:8], r.sid, r.at, r.err)
		}
	}
}

// runTimesAreFireTimes checks that every run time is a fire time of a
// timing the schedule had.
func (a *policyAudit) runTimesAreFireTimes(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	for _, r := range sa.rs {
		ok := isFireTime(t, s.crons[0], s.zone, r.at) || (sa.upserted && isFireTime(t, s.crons[1], s.zone, r.at))
		require.True(t, ok, "run of %s at %s is no fire time of its timings %v", s.id, r.at, s.crons)
	}
}

// noRunFiresBeforeItsJitter checks that a run never fires before its
// jittered planned time (the clamps and catch-up only move it later), and
// that only spread moves a fire time past the enqueue. The jitter in force
// is known for stable schedules only.
func (a *policyAudit) noRunFiresBeforeItsJitter(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	if sa.upserted {
		return
	}
	j := time.Duration(s.jitters[0]) * time.Millisecond
	for _, r := range sa.rs {
		// (A catch-up's record of dropped runs, under a key of its own,
		// has the last dropped run's jittered time: its run's key's.)
		want := r.at.Add(model.JitterOffset(model.IdempotencyKey(r.sid, r.at), j))
		require.False(t, r.fire.Before(want.Truncate(time.Millisecond)),
			"run of %s at %s: fire %s before its jittered time %s (jitter %s)", s.id, r.at, r.fire, want, j)
		if r.fire.After(want.Add(time.Millisecond)) && r.hasEnq && r.fire.After(r.enq.Add(time.Second)) {
			// Only spread moves a fire time past the enqueue.
			require.Equal(t, "spread", s.catchup, "run of %s at %s fires %s, after its enqueue %s", s.id, r.at, r.fire, r.enq)
			require.False(t, r.fire.After(r.enq.Add(policySpreadWindow+time.Second)), "spread run of %s at %s fires %s, over a minute after its enqueue %s", s.id, r.at, r.fire, r.enq)
		}
	}
}

// pausesAndTimingChangesHold checks that no run reaches the executor while
// its schedule is paused, that a pause leaves no run queued ahead whose
// fire time had not come (it removes them in the same step, so none shows
// ENQUEUED), and that after a timing change only the new timing's fire
// times reach it.
func (a *policyAudit) pausesAndTimingChangesHold(sa *scheduleAudit) {
	t, s, events := a.t, sa.s, sa.events
	t.Helper()
	var sc []policyCall
	for _, call := range a.calls {
		if call.sid == s.id {
			sc = append(sc, call)
		}
	}
	// after returns the calls that reached the executor once event i
	// took effect (policyInFlight after it was done) and before the
	// next event of kind next began.
	after := func(i int, next string) (until time.Time, in []policyCall) {
		until = a.tEnd.Add(time.Hour)
		for _, later := range events[i+1:] {
			if later.kind == next {
				until = later.begin
				break
			}
		}
		for _, call := range sc {
			if call.at.After(events[i].done.Add(policyInFlight)) && call.at.Before(until) {
				in = append(in, call)
			}
		}
		return until, in
	}
	for i, ev := range events {
		switch ev.kind {
		case "pause":
			until, in := after(i, "resume")
			for _, call := range in {
				require.Fail(t, "run reached the executor while its schedule was paused",
					"run of %s at %s reached the executor at %s, while the schedule was paused (%s to %s)",
					s.id, call.runAt.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), ev.done.Format(time.TimeOnly+".000"), until.Format(time.TimeOnly+".000"))
			}
			// A run created before the pause began, for a time after it
			// returned, whose task no launcher could take yet (its fire
			// time policyInFlight later still), was settled by the pause:
			// removed, so no record of it remains. One planned again
			// after a resume is created after it.
			for _, r := range sa.rs {
				if r.cr.Before(ev.begin) && r.at.After(ev.done) && r.fire.After(ev.done.Add(policyInFlight)) {
					require.Fail(t, "a pause left a run queued ahead",
						"run of %s at %s (fire %s, created %s, %s %q) outlived the pause of %s to %s",
						s.id, r.at.Format(time.TimeOnly), r.fire.Format(time.TimeOnly+".000"), r.cr.Format(time.TimeOnly+".000"),
						r.st, r.err, ev.begin.Format(time.TimeOnly+".000"), ev.done.Format(time.TimeOnly+".000"))
				}
			}
		case "upsert":
			_, in := after(i, "upsert")
			for _, call := range in {
				require.True(t, isFireTime(t, ev.cron, s.zone, call.runAt),
					"run of %s at %s reached the executor at %s, after its timing became %q (%s)",
					s.id, call.runAt.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), ev.cron, ev.done.Format(time.TimeOnly+".000"))
			}
		}
	}
}

// launcherSkipsAreExplained checks that every SKIPPED run was skipped for
// a reason the schedule gave: an overlap on a skip schedule, a pause, or a
// timing change.
func (a *policyAudit) launcherSkipsAreExplained(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	for _, r := range sa.rs {
		if r.st != "SKIPPED" {
			continue
		}
		switch {
		case r.rsn == string(model.ReasonCatchupDropped):
			// The record of the runs a catch-up dropped
			// (catchupFollowsThePolicy checks that they were missed).
			require.Contains(t, []string{"none", "latest"}, s.catchup, "run of %s at %s: %s", s.id, r.at, r.err)
		case strings.HasPrefix(r.err, "skipped: run ") && strings.Contains(r.err, "still in flight"):
			require.Equal(t, "skip", s.overlap, "run of %s at %s: %s", s.id, r.at, r.err)
		case strings.Contains(r.err, "paused"):
			require.True(t, sa.pausedEver || !r.up.Before(a.pauseAll.Add(-policyTol)), "run of %s at %s: %s (never paused)", s.id, r.at, r.err)
			a.launcherSkipped++
		case strings.Contains(r.err, "schedule changed"):
			require.True(t, sa.upserted, "run of %s at %s: %s (never changed)", s.id, r.at, r.err)
			a.launcherSkipped++
		default:
			t.Fatalf("run of %s at %s SKIPPED for an unexpected reason: %s", s.id, r.at, r.err)
		}
	}
}

// overlapSkipsNameARunInFlight checks that a run skipped for overlap names
// an earlier run of its schedule, created before it and still in flight
// when it was skipped, as far as the stamps tell: an end's stamp precedes
// its write by up to policyEndLag.
func (a *policyAudit) overlapSkipsNameARunInFlight(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	byKey := map[string]*policyRun{}
	for _, r := range sa.rs {
		byKey[r.key] = r
	}
	for _, r := range sa.rs {
		if r.st != "SKIPPED" || !strings.HasPrefix(r.err, "skipped: run ") {
			continue
		}
		a.skippedOverlap++
		other := strings.Fields(strings.TrimPrefix(r.err, "skipped: run "))[0]
		o, ok := byKey[other]
		require.True(t, ok, "run of %s at %s skipped for %s, no run of its schedule", s.id, r.at, other)
		require.True(t, o.at.Before(r.at), "run of %s at %s skipped for a later run at %s", s.id, r.at, o.at)
		require.False(t, o.cr.After(r.cr.Add(policyTol)), "run of %s at %s skipped for %s created after it", s.id, r.at, other)
		require.False(t, o.up.Before(r.cr.Add(-policyTol-policyEndLag)),
			"run of %s at %s SKIPPED at %s for run %s (at %s), which had ended at %s (%s: %s)",
			s.id, r.at, r.cr.Format(time.TimeOnly+".000"), other[:8], o.at.Format(time.TimeOnly), o.up.Format(time.TimeOnly+".000"), o.st, o.err)
	}
}

// neverTwoRunsInFlight checks that, on a skip or queue schedule, no run
// reaches the executor while another is in flight: from its first
// executor call to its final status. It returns the runs' spans.
func (a *policyAudit) neverTwoRunsInFlight(sa *scheduleAudit) []runSpan {
	t, s := a.t, sa.s
	t.Helper()
	var spans []runSpan
	for _, r := range sa.rs {
		if strings.Contains(r.err, "RUN_TIMEOUT") {
			a.timedOut++
		}
		call, ok := a.first[r.key]
		if !ok {
			if strings.Contains(r.err, "RUN_TIMEOUT") {
				a.timedOutNeverCalled++
			}
			continue
		}
		spans = append(spans, runSpan{r: r, from: call.at, to: r.up})
	}
	for _, x := range spans {
		for _, y := range spans {
			if x.r == y.r {
				continue
			}
			if y.from.After(x.from) && y.from.Before(x.to.Add(-policyTol)) {
				t.Fatalf("schedule %s (%s): run at %s reached the executor at %s while the run at %s was in flight (executor call %s, %s at %s: %s)",
					s.id, s.overlap, y.r.at.Format(time.TimeOnly), y.from.Format(time.TimeOnly+".000"),
					x.r.at.Format(time.TimeOnly), x.from.Format(time.TimeOnly+".000"), x.r.st, x.r.up.Format(time.TimeOnly+".000"), x.r.err)
			}
		}
	}
	return spans
}

// heldRunsStartAtOnceInOrder checks that a queue schedule's held run,
// released by the end of the run before it, starts at once whatever the
// catch-up policy (only the first run missed in the outage, nothing held,
// may be spread past its enqueue), and that runs start in run_at order.
func (a *policyAudit) heldRunsStartAtOnceInOrder(sa *scheduleAudit, spans []runSpan) {
	t, s, rs := a.t, sa.s, sa.rs
	t.Helper()
	var delayed []string
	for _, r := range rs {
		if r.hasEnq && r.fire.After(r.enq.Add(time.Second)) {
			delayed = append(delayed, fmt.Sprintf("%s fires %s after its enqueue", r.at.Format(time.TimeOnly), r.fire.Sub(r.enq).Round(time.Millisecond)))
		}
	}
	require.LessOrEqual(t, len(delayed), 1, "queue schedule %s (%s): runs released from the hold wait past their enqueue: %v", s.id, s.catchup, delayed)
	for i := 1; i < len(spans); i++ {
		// (A timing change re-anchors the schedule: with a
		// negative jitter, a run of the new timing can fire
		// before a run of the old one's later time.)
		if !sa.upserted && spans[i].from.Before(spans[i-1].from) {
			var b strings.Builder
			for _, r := range rs {
				call := a.first[r.key].at
				fmt.Fprintf(&b, "\n  run %s %s: fire %s cr %s enq %s up %s call %s %s %q", r.key[:8], r.at.Format(time.TimeOnly),
					r.fire.Format(time.TimeOnly+".000"), r.cr.Format(time.TimeOnly+".000"), r.enq.Format(time.TimeOnly+".000"),
					r.up.Format(time.TimeOnly+".000"), call.Format(time.TimeOnly+".000"), r.st, r.err)
			}
			for _, ev := range sa.events {
				fmt.Fprintf(&b, "\n  event %s %s..%s %q jitter %d", ev.kind, ev.begin.Format(time.TimeOnly+".000"), ev.done.Format(time.TimeOnly+".000"), ev.cron, ev.jitter)
			}
			t.Fatalf("queue schedule %s started its run at %s before the run at %s:%s", s.id, spans[i].r.at, spans[i-1].r.at, b.String())
		}
	}
}

// catchupFollowsThePolicy checks, on a stable schedule (its fire times
// are known), that fire_immediately and spread leave no fire time without
// a run, that none and latest drop only fire times in the outage, and that
// none records no missed run and latest at most one.
func (a *policyAudit) catchupFollowsThePolicy(sa *scheduleAudit) {
	t, c, s, rs := a.t, a.c, sa.s, sa.rs
	t.Helper()
	outStart, outEnd := a.outStart, a.outEnd
	a.stableChecked++
	j := time.Duration(s.jitters[0]) * time.Millisecond
	planned := func(r *policyRun) time.Time { return r.at.Add(model.JitterOffset(r.key, j)) }
	// The record of the runs a catch-up dropped stands for a dropped
	// fire time: it is checked as one.
	rs = slices.DeleteFunc(slices.Clone(rs), func(r *policyRun) bool { return r.rsn == string(model.ReasonCatchupDropped) })
	var late []*policyRun
	for _, r := range rs {
		if r.cr.Sub(planned(r)) > policyMisfireGrace+2*time.Second {
			late = append(late, r)
		}
	}
	a.caughtUp += len(late)
	have := map[int64]bool{}
	for _, r := range rs {
		have[r.at.UnixMilli()] = true
	}
	var upTo time.Time
	if s.overlap == "queue" {
		nextMS, err := c.rdb.HGet(c.ctx, shardKey(s.shard, "sched:"+s.id), "next").Int64()
		require.NoError(t, err)
		upTo = time.UnixMilli(nextMS).Add(-time.Second)
		upTo = minTime(upTo, a.tEnd)
	} else {
		upTo = a.tEnd
	}
	var missing []time.Time
	for _, at := range fireTimes(t, s.crons[0], s.zone, s.created, upTo) {
		if !have[at.UnixMilli()] {
			missing = append(missing, at)
		}
	}
	switch s.catchup {
	case "fire_immediately", "spread":
		require.Empty(t, missing, "schedule %s (%s, %s): fire times without a run", s.id, s.overlap, s.catchup)
	case "none", "latest":
		if s.overlap == "queue" {
			break // a held schedule drops what its wait made late, anywhere
		}
		// A skip schedule plans its runs in run_at order, each at its
		// jittered fire time: with a jitter over half the period, a run
		// jittered early waits for the run before it, jittered late,
		// and when that one is missed it is missed with it (plan.go: the
		// missed runs are a prefix from the schedule's next time). So a
		// run can be planned no earlier than the latest fire time of the
		// runs up to it: that is what must fall in the outage. A run
		// plannable shortly before the outage is missed too when its
		// shard's owner had not ticked yet (a takeover, a loaded host)
		// by the time every scheduler froze: up to MISFIRE_GRACE_MS.
		ready := map[int64]time.Time{}
		var latest time.Time
		for _, at := range fireTimes(t, s.crons[0], s.zone, s.created, upTo) {
			fire := at.Add(model.JitterOffset(model.IdempotencyKey(s.id, at), j))
			if fire.After(latest) || s.overlap == "allow" { // allow plans ahead, in order anyway
				latest = fire
			}
			ready[at.UnixMilli()] = latest
		}
		for _, at := range missing {
			fire := at.Add(model.JitterOffset(model.IdempotencyKey(s.id, at), j))
			require.True(t, !ready[at.UnixMilli()].Before(outStart.Add(-policyMisfireGrace)) && !fire.After(outEnd.Add(4*time.Second)),
				"schedule %s (%s, %s): fire time %s (jittered %s, plannable from %s) dropped outside the outage (%s to %s)",
				s.id, s.overlap, s.catchup, at.Format(time.TimeOnly), fire.Format(time.TimeOnly+".000"),
				ready[at.UnixMilli()].Format(time.TimeOnly+".000"),
				outStart.Format(time.TimeOnly+".000"), outEnd.Format(time.TimeOnly+".000"))
		}
		// A run is late by when it could be planned (ready), not by
		// its own jittered time: behind a run of its schedule jittered
		// later and not missed, it is planned with that run (SKIPPED
		// for overlap, never enqueued), not dropped.
		late = slices.DeleteFunc(late, func(r *policyRun) bool {
			from, ok := ready[r.at.UnixMilli()]
			return ok && r.cr.Sub(from) <= policyMisfireGrace+2*time.Second
		})
		if s.catchup == "none" {
			for _, r := range late {
				t.Fatalf("schedule %s (%s, none): run at %s (planned %s) was recorded at %s, missed yet not dropped",
					s.id, s.overlap, r.at.Format(time.TimeOnly), planned(r).Format(time.TimeOnly+".000"), r.cr.Format(time.TimeOnly+".000"))
			}
		} else {
			require.LessOrEqual(t, len(late), 1, "schedule %s (%s, latest): %d missed runs recorded, want at most the latest of the outage", s.id, s.overlap, len(late))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
