package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// lastBefore equals a forward walk over the fire times, in the odd DST
// zones and with start_at/end_at windows anywhere.
func TestLastBeforeMatchesAWalk(t *testing.T) {
	t.Parallel()
	zones := []string{"Australia/Lord_Howe", "America/Havana", "America/Santiago", "Atlantic/Azores", "Pacific/Chatham", "Pacific/Apia", "America/New_York"}
	exprs := []string{"0 0 * * *", "30 0,1,2 * * *", "*/30 * * * *", "15,45 1,2 * * *", "0 23 * * *", "0 0 1 * *", "59 23 * * *"}
	r := rand.New(rand.NewPCG(5, 5))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3000 {
		z, expr := zones[r.IntN(len(zones))], exprs[r.IntN(len(exprs))]
		rec := model.ScheduleRecord{CronExpr: expr, Timezone: z}
		if r.IntN(2) == 0 {
			s := base.Add(time.Duration(r.Int64N(int64(3 * 365 * 24 * time.Hour))))
			e := s.Add(time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))
			rec.StartAt, rec.EndAt = &s, &e
		}
		sched, err := rec.Compile()
		require.NoError(t, err)
		from := sched.Next(base.Add(time.Duration(r.Int64N(int64(3 * 365 * 24 * time.Hour)))))
		if from.IsZero() {
			continue
		}
		cutoff := from.Add(time.Duration(r.Int64N(int64(40*24*time.Hour))) + time.Nanosecond)
		want := from
		for n := sched.Next(from); !n.IsZero() && n.Before(cutoff); n = sched.Next(n) {
			want = n
		}
		require.Equal(t, want, lastBefore(sched, from, cutoff), "%s %s from %s cutoff %s", expr, z, from, cutoff)
	}
}

type countingSchedule struct {
	s model.Schedule
	n int
}

func (c *countingSchedule) Next(t time.Time) time.Time { c.n++; return c.s.Next(t) }

// With end_at inside an outage no backward window holds a fire time; the
// search must still cost a few dozen Next calls, not one per missed run.
func TestLastBeforeIsCheapWhenEndAtIsInsideTheOutage(t *testing.T) {
	t.Parallel()
	from := start.Add(time.Second)
	cutoff := from.Add(180 * 24 * time.Hour)
	end := cutoff.Add(-40 * 24 * time.Hour)
	rec := model.ScheduleRecord{CronExpr: "* * * * * *", Timezone: "UTC", EndAt: &end}
	s, err := rec.Compile()
	require.NoError(t, err)
	c := &countingSchedule{s: s}
	require.Equal(t, end.Truncate(time.Second), lastBefore(c, from, cutoff))
	require.Less(t, c.n, 100, "Next calls")
}

// Jitter never moves a fire time outside start_at/end_at.
func TestJitterStaysInsideTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	s, e := start.Add(10*time.Minute), start.Add(20*time.Minute)
	for i := range 4 {
		b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("jw%d", i), CronExpr: "* * * * *", StartAt: &s, EndAt: &e, JitterMs: 30000})
	}
	b.runUntil(t, start.Add(30*time.Minute), 5*time.Second)
	for i := range 4 {
		runs, err := b.store.ListRuns(context.Background(), fmt.Sprintf("jw%d", i), 1000)
		require.NoError(t, err)
		require.Len(t, runs, 11)
		for _, r := range runs {
			require.False(t, r.FireAt.Before(s) || r.FireAt.After(e), "run at %s fires at %s, outside [00:10, 00:20]",
				r.RunAt.Format(time.TimeOnly), r.FireAt.Format(time.TimeOnly))
		}
	}
}

// With overlap_policy skip and jitter, a run is SKIPPED only if the run
// before it is in flight at its fire time. Here every run ends the moment
// it fires, so a run that fires after the one before it is never skipped.
func TestSkipWithJitterSkipsOnlyRealOverlaps(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	ctx := context.Background()
	rec := b.upsert(t, model.ScheduleRecord{ID: "skj", CronExpr: "* * * * *", OverlapPolicy: model.OverlapSkip, JitterMs: 40000})
	finishFired := func() {
		runs, err := b.store.ListRuns(ctx, rec.ID, 1000)
		require.NoError(t, err)
		for _, r := range runs {
			if r.Status == model.RunEnqueued && !r.FireAt.After(b.clock.Now()) {
				b.report(t, rec.ID, r.IdempotencyKey, model.RunSuccess)
			}
		}
	}
	for b.clock.Now().Before(start.Add(30 * time.Minute)) {
		b.clock.Advance(time.Second)
		finishFired()
		b.tickAll(t)
		finishFired()
	}
	runs, err := b.store.ListRuns(ctx, rec.ID, 1000)
	require.NoError(t, err)
	fireOf := map[string]time.Time{}
	for _, r := range runs {
		fireOf[r.IdempotencyKey] = r.FireAt
	}
	for _, r := range runs {
		if r.Status != model.RunSkipped {
			continue
		}
		var prev string
		_, err := fmt.Sscanf(r.Error, "skipped: run %s is still in flight", &prev)
		require.NoError(t, err)
		require.False(t, fireOf[prev].Before(r.FireAt), "run %s (fire %s) skipped for a run that fired, and ended, at %s",
			r.RunAt.Format(time.TimeOnly), r.FireAt.Format(time.TimeOnly), fireOf[prev].Format(time.TimeOnly))
	}
}

// With a jitter longer than the period, the runs a long outage missed end
// where the first run's jittered fire time is within the grace. Catch-up
// none and latest jump over the runs surely missed and look at those near
// the cutoff one by one: the plan agrees with a walk over every run.
func TestCatchupOfAJitterLongerThanThePeriod(t *testing.T) {
	t.Parallel()
	const jitter = 6 * time.Hour
	rec := &model.ScheduleRecord{ID: "s", Kind: model.KindEvery, EverySeconds: 1, JitterMs: jitter.Milliseconds(),
		OverlapPolicy: model.OverlapSkip}
	anchor := start
	rec.StartAt = &anchor
	sched, err := rec.Compile()
	require.NoError(t, err)
	cfg := Config{MisfireGrace: 10 * time.Second, MaxCatchupPerTick: 100}
	pl := planner{cfg: cfg, lead: func(*model.ScheduleRecord) time.Duration { return jitter }}
	now := start.Add(12 * time.Hour)
	cutoff := now.Add(-cfg.MisfireGrace)

	// The walk: missed runs are those up to the first that is not.
	var lastMissed, firstKept time.Time
	for at := sched.Next(start.Add(-time.Second)); ; at = sched.Next(at) {
		if !jittered(rec, model.IdempotencyKey("s", at), at, jitter, time.Time{}).Before(cutoff) {
			firstKept = at
			break
		}
		lastMissed = at
	}
	require.True(t, firstKept.After(cutoff.Add(-jitter)), "the test needs missed runs near the cutoff")

	for _, policy := range []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest} {
		r := *rec
		r.CatchupPolicy = policy
		p, missed := pl.plan(queue.DueSchedule{ID: "s", Next: sched.Next(start.Add(-time.Second))}, &r, sched, now)
		require.Equal(t, 1, missed, policy)
		require.Equal(t, model.ReasonCatchupDropped, p.Runs[0].Reason, "the record of the runs dropped comes first")
		runs, next := p.Runs[1:], p.NewNext
		switch policy {
		case model.CatchupNone:
			if len(runs) > 0 { // its jittered time has come
				next = runs[0].RunAt
			}
			require.Equal(t, firstKept, next, "none: the first run not missed is the next one")
		case model.CatchupLatest:
			require.Len(t, runs, 1)
			require.Equal(t, lastMissed, runs[0].RunAt, "latest: the last missed run")
			require.True(t, runs[0].CaughtUp)
		}
	}
}

// With end_at inside an outage every run up to it is missed (jitter never
// moves a fire time past end_at): catch-up none and latest must not walk
// them one by one.
func TestCatchupIsCheapWhenEndAtIsInsideTheOutageWithJitter(t *testing.T) {
	t.Parallel()
	const jitter = 24 * time.Hour
	now := start.Add(72 * time.Hour)
	end := now.Add(-time.Minute)
	rec := &model.ScheduleRecord{ID: "s", Kind: model.KindEvery, EverySeconds: 1, JitterMs: jitter.Milliseconds(),
		OverlapPolicy: model.OverlapSkip, EndAt: &end}
	s, err := rec.Compile()
	require.NoError(t, err)
	pl := planner{cfg: Config{MisfireGrace: 10 * time.Second, MaxCatchupPerTick: 100},
		lead: func(*model.ScheduleRecord) time.Duration { return jitter }}
	for _, cp := range []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest} {
		rec.CatchupPolicy = cp
		c := &countingSchedule{s: s}
		p, _ := pl.plan(queue.DueSchedule{ID: "s", Next: s.Next(start)}, rec, c, now)
		require.Less(t, c.n, 1000, "%s: Next calls", cp)
		require.True(t, p.NewNext.IsZero(), "%s: nothing after end_at", cp)
		require.Equal(t, model.ReasonCatchupDropped, p.Runs[0].Reason, "%s: the record of the runs dropped", cp)
		if cp == model.CatchupLatest {
			require.Len(t, p.Runs, 2)
			require.Equal(t, end.Truncate(time.Second), p.Runs[1].RunAt)
			require.Equal(t, end.Truncate(time.Second).Add(-time.Second), p.Runs[0].RunAt, "the last run dropped")
		} else {
			require.Len(t, p.Runs, 1)
			require.Equal(t, end.Truncate(time.Second), p.Runs[0].RunAt, "the last run dropped")
		}
	}
}
