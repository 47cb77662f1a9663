package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"))
}

type testBundle struct {
	rdb   *redis.Client
	store *queue.Store
	clock *queue.SimClock
	sched *Scheduler
}

// start is in the past of the real clock on purpose: asynq, which reads
// the real clock, then treats every run as due now.
var start = time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T, cfg *Config, qcfg *queue.Config) *testBundle {
	t.Helper()
	rdb := queuetest.StartRedis(t).Client(t)
	clock := queue.NewSimClock(start)
	qc := queue.Config{Shards: 4}
	if qcfg != nil {
		qc = *qcfg
		qc.Shards = 4
	}
	store, err := queue.NewStore(context.Background(), rdb, clock, &qc)
	require.NoError(t, err)
	s, err := New(store, cfg, nil, nil)
	require.NoError(t, err)
	return &testBundle{rdb: rdb, store: store, clock: clock, sched: s}
}

func (b *testBundle) tickAll(t *testing.T) {
	t.Helper()
	for sh := range b.store.Config().Shards {
		require.NoError(t, b.sched.TickShard(context.Background(), sh))
	}
}

// runUntil advances the clock in steps, ticking every shard after each.
func (b *testBundle) runUntil(t *testing.T, until time.Time, step time.Duration) {
	t.Helper()
	for b.clock.Now().Before(until) {
		b.clock.Advance(step)
		b.tickAll(t)
	}
}

func (b *testBundle) upsert(t *testing.T, rec model.ScheduleRecord) *model.ScheduleRecord {
	t.Helper()
	rec.Target = model.TargetWorkflow
	if rec.WorkflowID == "" {
		rec.WorkflowID, rec.Version, rec.UserID = "wf", "1", "u"
	}
	rec.OverlapPolicy = cmpOr(rec.OverlapPolicy, model.OverlapAllow)
	rec.CatchupPolicy = cmpOr(rec.CatchupPolicy, model.CatchupFireImmediately)
	require.NoError(t, rec.Validate())
	res, err := b.store.UpsertSchedule(context.Background(), &rec)
	require.NoError(t, err)
	return res.Schedule
}

func (b *testBundle) report(t *testing.T, id, key string, st model.RunStatus) {
	t.Helper()
	_, err := b.store.UpdateRunStatus(context.Background(), key, queue.StatusUpdate{Status: st})
	require.NoError(t, err)
}

// skipWhilePaused pauses schedule id, records its run key SKIPPED as a
// launcher does while the schedule is paused, and resumes it.
func (b *testBundle) skipWhilePaused(t *testing.T, id, key string) {
	t.Helper()
	ctx := context.Background()
	_, err := b.store.SetPaused(ctx, id, true)
	require.NoError(t, err)
	b.report(t, id, key, model.RunSkipped)
	_, err = b.store.SetPaused(ctx, id, false)
	require.NoError(t, err)
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

func times(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return out
}

func expected(t *testing.T, rec *model.ScheduleRecord, after, until time.Time) []string {
	t.Helper()
	s, err := rec.Compile()
	require.NoError(t, err)
	var out []time.Time
	for n := s.Next(after); !n.IsZero() && !n.After(until); n = s.Next(n) {
		out = append(out, n)
	}
	return times(out)
}

func TestEveryPlannedRunFiresOnceAcrossDST(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	ny := b.upsert(t, model.ScheduleRecord{ID: "ny", CronExpr: "30 1,2,3 * * *", Timezone: "America/New_York"})
	lh := b.upsert(t, model.ScheduleRecord{ID: "lh", CronExpr: "15 1,2 * * *", Timezone: "Australia/Lord_Howe"})
	until := start.Add(72 * time.Hour)
	b.runUntil(t, until, 7*time.Minute)

	for _, rec := range []*model.ScheduleRecord{ny, lh} {
		want := expected(t, rec, start, until)
		require.NotEmpty(t, want)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, want...)
		for _, r := range runs {
			require.Equal(t, model.IdempotencyKey(rec.ID, r.RunAt), r.IdempotencyKey)
			queuetest.RequireTask(t, b.rdb, "chronos", r.IdempotencyKey)
			require.NotNil(t, r.EnqueuedAt)
		}
	}
	// 2024-03-10 02:30 does not exist in New York: only 01:30 EST and
	// 03:30 EDT fire that day.
	require.Equal(t, []string{"2024-03-09T06:30:00Z", "2024-03-09T07:30:00Z", "2024-03-09T08:30:00Z",
		"2024-03-10T06:30:00Z", "2024-03-10T07:30:00Z", "2024-03-11T05:30:00Z"},
		expected(t, ny, start, until)[:6])
	require.Equal(t, 0, queuetest.CountTasks(t, b.rdb, "chronos")-len(expected(t, ny, start, until))-len(expected(t, lh, start, until)))
}

func TestLookaheadEnqueuesAheadWithFireTime(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	rec := b.upsert(t, model.ScheduleRecord{ID: "la", CronExpr: "0 * * * * *"})
	b.clock.Advance(30 * time.Second)
	b.tickAll(t)
	// At 00:00:30 the run of 00:01:00 is within the minute of lookahead.
	runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
	require.Equal(t, start.Add(30*time.Second), *runs[0].EnqueuedAt)
	require.Equal(t, start.Add(time.Minute), runs[0].FireAt)
}

func TestPausedEmitsNothingAndResumeSkipsPausedTime(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "p", CronExpr: "*/10 * * * *"})
	_, err := b.store.SetPaused(context.Background(), rec.ID, true)
	require.NoError(t, err)
	b.runUntil(t, start.Add(time.Hour), time.Minute)
	queuetest.RequireRuns(t, b.store, rec.ID, "")
	_, err = b.store.SetPaused(context.Background(), rec.ID, false)
	require.NoError(t, err)
	b.runUntil(t, start.Add(90*time.Minute), time.Minute)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
		"2024-03-09T01:10:00Z", "2024-03-09T01:20:00Z", "2024-03-09T01:30:00Z")
}

func TestWindowAndRetirement(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	s, e := start.Add(20*time.Minute), start.Add(50*time.Minute)
	rec := b.upsert(t, model.ScheduleRecord{ID: "w", CronExpr: "*/10 * * * *", StartAt: &s, EndAt: &e})
	b.runUntil(t, start.Add(2*time.Hour), time.Minute)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
		"2024-03-09T00:20:00Z", "2024-03-09T00:30:00Z", "2024-03-09T00:40:00Z", "2024-03-09T00:50:00Z")
	got, err := b.store.GetSchedule(context.Background(), rec.ID)
	require.NoError(t, err)
	require.Nil(t, got.NextRunAt, "a schedule past end_at is retired")
	n, err := b.rdb.ZScore(context.Background(), "chronos:{s0"+fmt.Sprint(queue.ShardOf("w", 4))+"}:due", "w").Result()
	require.NoError(t, err)
	require.Greater(t, n, 1e300, "retired schedules are never due")
}

func TestOnceFiresOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	at := start.Add(5 * time.Minute)
	rec := b.upsert(t, model.ScheduleRecord{ID: "once", Kind: model.KindOnce, FireAt: &at})
	b.runUntil(t, start.Add(time.Hour), 30*time.Second)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:05:00Z")
}

func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "sk", CronExpr: "* * * * *", OverlapPolicy: model.OverlapSkip})
	b.runUntil(t, start.Add(3*time.Minute), 15*time.Second)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:03:00Z")
	require.Equal(t, model.RunEnqueued, runs[0].Status)
	require.Equal(t, model.RunSkipped, runs[1].Status)
	require.Contains(t, runs[1].Error, "still in flight")
	require.Equal(t, model.RunSkipped, runs[2].Status)
	require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, "chronos"), "skipped runs get no task")

	b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunSuccess)
	b.runUntil(t, start.Add(4*time.Minute), 15*time.Second)
	runs = queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z",
		"2024-03-09T00:03:00Z", "2024-03-09T00:04:00Z")
	require.Equal(t, model.RunEnqueued, runs[3].Status, "after the in-flight run ended, the next one starts")
}

func TestOverlapQueueHoldsThenEmitsNext(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *", OverlapPolicy: model.OverlapQueue})
	b.runUntil(t, start.Add(3*time.Minute), 15*time.Second)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")

	b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunStarted)
	b.tickAll(t)
	queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z")

	// The run ends at 00:03:20: the held 00:02 run starts at once.
	b.clock.Advance(20 * time.Second)
	b.report(t, rec.ID, runs[0].IdempotencyKey, model.RunSuccess)
	b.tickAll(t)
	runs = queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
	require.Equal(t, model.RunEnqueued, runs[1].Status)
	require.Equal(t, start.Add(3*time.Minute+20*time.Second), *runs[1].EnqueuedAt)
}

// A run held behind a long in-flight run ("queue") is not missed: when
// that run ends, it starts, whatever the catch-up policy, which applies
// to the times after it only.
func TestQueuedRunStartsWhateverTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	for policy, want := range map[model.CatchupPolicy][]string{
		// 00:03 and 00:04 are dropped; 00:05 comes after 00:02 ended.
		model.CatchupNone: {"2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:05:00Z"},
		// 00:04, the latest of those missed, waits for 00:02.
		model.CatchupLatest: {"2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z", "2024-03-09T00:04:00Z"},
	} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *",
				OverlapPolicy: model.OverlapQueue, CatchupPolicy: policy})
			b.runUntil(t, start.Add(4*time.Minute+30*time.Second), 5*time.Second) // 00:01 runs until 00:04:30
			first := model.IdempotencyKey(rec.ID, start.Add(time.Minute))
			b.report(t, rec.ID, first, model.RunSuccess)
			b.clock.Advance(time.Second)
			b.tickAll(t)
			runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
			require.Equal(t, model.RunEnqueued, runs[1].Status, "the queued run starts when the one in flight ends")

			b.report(t, rec.ID, runs[1].IdempotencyKey, model.RunSuccess)
			b.runUntil(t, start.Add(6*time.Minute+5*time.Second), 5*time.Second)
			runs = queuetest.RequireRuns(t, b.store, rec.ID, "", want...)
			require.Equal(t, model.RunEnqueued, runs[2].Status)
			keys := b.rdb.Keys(context.Background(), "chronos:*:sched:q").Val()
			require.Len(t, keys, 1)
			require.False(t, b.rdb.HExists(context.Background(), keys[0], "rel").Val(), "the release mark outlived its plan")
		})
	}
}

// Released late from its hold, a "spread" schedule's queued run starts at
// once too: spreading it over the next minute would hold the schedule that
// long (and, behind each late run, again).
func TestQueuedRunReleasedWithSpreadStartsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "q", CronExpr: "* * * * *",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupSpread})
	b.runUntil(t, start.Add(4*time.Minute+30*time.Second), 5*time.Second) // 00:01 runs until 00:04:30
	b.report(t, rec.ID, model.IdempotencyKey(rec.ID, start.Add(time.Minute)), model.RunSuccess)
	b.clock.Advance(time.Second)
	b.tickAll(t)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
	require.Equal(t, model.RunEnqueued, runs[1].Status)
	require.Equal(t, b.clock.Now(), runs[1].FireAt, "the released run fires %s after its release", runs[1].FireAt.Sub(b.clock.Now()))
}

// A "skip" or "queue" schedule decides at a run's jittered fire time
// whether the run before it is in flight: a run with a negative offset is
// planned (here held) at its fire time, not at its unjittered time, and
// released by the run before it ending, it starts at once.
func TestHeldRunKeepsItsJitteredFireTime(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	const jitter = 30 * time.Second
	second := start.Add(2 * time.Minute)
	var id string
	var off time.Duration
	for i := 0; ; i++ { // an id whose 00:02 run fires at least 10 s early
		id = fmt.Sprintf("qj%d", i)
		if off = model.JitterOffset(model.IdempotencyKey(id, second), jitter); off < -10*time.Second {
			break
		}
	}
	rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
		OverlapPolicy: model.OverlapQueue})
	b.runUntil(t, second.Add(off).Add(-time.Second), time.Second)
	first := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
	b.runUntil(t, second.Add(off).Add(2*time.Second), time.Second) // 00:02 came due: held behind 00:01

	b.report(t, rec.ID, first[0].IdempotencyKey, model.RunSuccess)
	b.tickAll(t)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
	require.Equal(t, model.RunEnqueued, runs[1].Status)
	require.Equal(t, b.clock.Now(), *runs[1].EnqueuedAt, "enqueued when released")
	require.Equal(t, second.Add(off), runs[1].FireAt)
}

func TestRunTimeoutReleasesSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "to", CronExpr: "*/2 * * * *", OverlapPolicy: model.OverlapQueue})
	// 00:02 runs and never reports; 00:04 is held behind it; at 00:07 the
	// 00:02 run times out, which releases 00:04; at 00:09 that one times out
	// in turn and 00:06 starts.
	b.runUntil(t, start.Add(12*time.Minute+30*time.Second), 30*time.Second)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, "", "2024-03-09T00:02:00Z", "2024-03-09T00:04:00Z",
		"2024-03-09T00:06:00Z")
	require.Equal(t, model.RunFailed, runs[0].Status)
	require.Contains(t, runs[0].Error, "RUN_TIMEOUT")
	require.Equal(t, model.RunFailed, runs[1].Status)
	require.Equal(t, model.RunEnqueued, runs[2].Status)
}

// A "queue" run held behind one that RUN_TIMEOUT failed before any
// launcher started it (every launcher down) was missed as well: catchup
// none drops it rather than start it minutes late.
func TestARunHeldBehindARunThatTimedOutUnstartedFollowsTheCatchupPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "qn", CronExpr: "* * * * *",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone})
	b.runUntil(t, start.Add(6*time.Minute+30*time.Second), 5*time.Second)
	runs, err := b.store.ListRuns(context.Background(), rec.ID, 100)
	require.NoError(t, err)
	byTime := map[time.Time]*model.Run{}
	for _, r := range runs {
		byTime[r.RunAt] = r
	}
	require.Equal(t, model.RunFailed, byTime[start.Add(time.Minute)].Status, "00:01 timed out")
	require.NotContains(t, byTime, start.Add(2*time.Minute), "00:02, held behind a run that never started, was enqueued late")
}

// A "queue" run whose executor calls failed (a launcher is retrying it:
// still ENQUEUED), or whose first call is in progress (its task active),
// was being started: when RUN_TIMEOUT fails it, the run held behind it
// waited, as behind a STARTED one, and starts.
func TestARunHeldBehindARunBeingRetriedStartsWhenItTimesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, &Config{RunTimeout: 5 * time.Minute}, nil)
	ids := []string{"started", "retrying", "launching"}
	for _, id := range ids {
		b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "*/2 * * * *",
			OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupNone})
	}
	b.runUntil(t, start.Add(2*time.Minute), 30*time.Second) // 00:02 in flight
	b.report(t, "started", model.IdempotencyKey("started", start.Add(2*time.Minute)), model.RunStarted)
	require.NoError(t, b.store.RecordFailedAttempt(ctx, &queue.TaskPayload{
		IdempotencyKey: model.IdempotencyKey("retrying", start.Add(2*time.Minute)), ScheduleID: "retrying"},
		b.clock.Now().Add(time.Minute), "boom"))
	require.NoError(t, b.rdb.HSet(ctx, "asynq:{chronos}:t:"+model.IdempotencyKey("launching", start.Add(2*time.Minute)), "state", "active").Err())
	// 00:04 is held behind 00:02; at 00:07 RUN_TIMEOUT fails 00:02.
	b.runUntil(t, start.Add(7*time.Minute+30*time.Second), 30*time.Second)
	for _, id := range ids {
		runs, err := b.store.ListRuns(ctx, id, 100)
		require.NoError(t, err)
		byTime := map[time.Time]*model.Run{}
		for _, r := range runs {
			byTime[r.RunAt] = r
		}
		require.Equal(t, model.RunFailed, byTime[start.Add(2*time.Minute)].Status, "%s: 00:02 timed out", id)
		require.Contains(t, byTime, start.Add(4*time.Minute), "%s: 00:04, held behind 00:02, was dropped", id)
	}
}

func TestCatchupPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy  model.CatchupPolicy
		want    int     // runs recorded for the missed hour (00:05 to 00:55: 11 missed)
		dropped float64 // chronos_runs_missed_total: catch-ups that dropped runs
	}{
		{model.CatchupNone, 0, 1},
		{model.CatchupLatest, 1, 1},
		{model.CatchupFireImmediately, 11, 0},
		{model.CatchupSpread, 11, 0},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			rec := b.upsert(t, model.ScheduleRecord{ID: "c", CronExpr: "*/5 * * * *", CatchupPolicy: tc.policy})
			// Down for an hour: the first tick is at 01:00:03.
			b.clock.Set(start.Add(time.Hour + 3*time.Second))
			b.tickAll(t)
			runs, err := b.store.ListRuns(context.Background(), rec.ID, 100)
			require.NoError(t, err)
			var missed []*model.Run
			for _, r := range runs {
				if r.RunAt.Before(start.Add(time.Hour)) {
					missed = append(missed, r)
				}
			}
			require.Len(t, missed, tc.want)
			now := b.clock.Now()
			for _, r := range missed {
				switch tc.policy {
				case model.CatchupSpread:
					require.False(t, r.FireAt.Before(now))
					require.False(t, r.FireAt.After(now.Add(SpreadWindowDefault)))
				default:
					require.Equal(t, now, r.FireAt)
				}
			}
			if tc.policy == model.CatchupLatest {
				require.Equal(t, start.Add(55*time.Minute), missed[0].RunAt)
			}
			require.Equal(t, tc.dropped, testutil.ToFloat64(b.sched.metrics.missed))
			// Caught-up runs show their lateness (run_at to now) in their
			// own histogram, not as enqueue drift.
			var lateness float64
			for _, r := range missed {
				lateness += now.Sub(r.RunAt).Seconds()
			}
			catchup := histogramOf(t, b.sched.metrics.catchupLateness)
			require.Equal(t, uint64(tc.want), catchup.GetSampleCount())
			require.InDelta(t, lateness, catchup.GetSampleSum(), 1e-6)
			require.Equal(t, uint64(1), histogramOf(t, b.sched.metrics.drift).GetSampleCount(), "the 01:00 run")
			// The 01:00 run was within the misfire grace: it fires as planned.
			require.Equal(t, start.Add(time.Hour), runs[0].RunAt)
		})
	}
}

// With one missed run, "latest" fires it and drops nothing.
func TestCatchupLatestWithOneMissedRunDropsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "h", CronExpr: "0 * * * *", CatchupPolicy: model.CatchupLatest})
	b.clock.Set(start.Add(time.Hour + 30*time.Second)) // the 01:00 run is found 30 s late
	b.tickAll(t)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T01:00:00Z")
	require.Zero(t, testutil.ToFloat64(b.sched.metrics.missed))
}

// A misfire grace shorter than a shard takeover would make a replica's
// death look like downtime to the catch-up policies: refused at start.
func TestMisfireGraceMustCoverTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	_, err := New(b.store, &Config{MisfireGrace: 5 * time.Second}, nil, nil)
	require.ErrorContains(t, err, "Config.MisfireGrace (5s) must exceed")
	require.ErrorContains(t, err, "= 7.667s")
	_, err = New(b.store, &Config{MisfireGrace: 5 * time.Second, LeaseTTL: 2 * time.Second}, nil, nil)
	require.NoError(t, err)
}

// A per-second schedule's backlog must shrink each tick, or a catch-up
// never finishes: the limit per tick must exceed twice its runs per tick.
func TestMaxCatchupPerTickMustOutpaceAPerSecondSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	_, err := New(b.store, &Config{MaxCatchupPerTick: 2}, nil, nil)
	require.ErrorContains(t, err, "Config.MaxCatchupPerTick (2) must exceed 2")
	_, err = New(b.store, &Config{MaxCatchupPerTick: 10, TickInterval: 5 * time.Second}, nil, nil)
	require.ErrorContains(t, err, "Config.MaxCatchupPerTick (10) must exceed 10")
	_, err = New(b.store, &Config{MaxCatchupPerTick: 3}, nil, nil)
	require.NoError(t, err)
}

// A tick whose context ends (Stop, a shard given away) finishes the page
// it is on and stops; the next tick carries on, each run once.
func TestTickStopsBetweenPagesWhenCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{PageSize: 2}, nil)
	const n = 20
	for i := range n {
		b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("p%02d", i), CronExpr: "* * * * *"})
	}
	b.clock.Set(start.Add(time.Minute + 3*time.Second))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	count := func() int {
		total := 0
		for i := range n {
			runs, err := b.store.ListRuns(context.Background(), fmt.Sprintf("p%02d", i), 10)
			require.NoError(t, err)
			total += len(runs)
		}
		return total
	}
	for sh := range b.store.Config().Shards {
		require.NoError(t, b.sched.TickShard(cancelled, sh))
	}
	require.LessOrEqual(t, count(), 2*b.store.Config().Shards, "one page per shard")
	require.Positive(t, count(), "the page in progress is finished")
	b.tickAll(t)
	require.Equal(t, n, count())
}

func TestMaxCatchupPerTick(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxCatchupPerTick: 10}, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "m", CronExpr: "* * * * *"})
	b.clock.Set(start.Add(time.Hour))
	b.tickAll(t)
	runs, err := b.store.ListRuns(context.Background(), rec.ID, 1000)
	require.NoError(t, err)
	require.Len(t, runs, 10)
	for range 6 {
		b.clock.Advance(time.Second)
		b.tickAll(t)
	}
	runs, err = b.store.ListRuns(context.Background(), rec.ID, 1000)
	require.NoError(t, err)
	require.Len(t, runs, 60, "the backlog drains over later ticks, each run once")
}

func TestJitterIsDeterministicAndBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "j", CronExpr: "*/10 * * * *", JitterMs: 30000})
	b.runUntil(t, start.Add(2*time.Hour), 20*time.Second)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, expected(t, rec, start, start.Add(2*time.Hour))...)
	distinct := map[time.Duration]bool{}
	for _, r := range runs {
		off := r.FireAt.Sub(r.RunAt)
		require.LessOrEqual(t, off.Abs(), 30*time.Second)
		require.Equal(t, model.JitterOffset(r.IdempotencyKey, 30*time.Second), off)
		distinct[off] = true
	}
	require.Greater(t, len(distinct), 3)
}

// A skip or queue schedule is planned at each run's jittered fire time,
// which with a jitter above MISFIRE_GRACE is more than the grace after
// the run's own time: that is on time, not missed. Under catchup none (or
// latest) a run jittered late must still fire, at its jittered time.
func TestRunsJitteredPastTheMisfireGraceAreNotMissed(t *testing.T) {
	t.Parallel()
	for _, policy := range []model.OverlapPolicy{model.OverlapSkip, model.OverlapQueue} {
		for _, catchup := range []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest, model.CatchupFireImmediately} {
			t.Run(string(policy)+"/"+string(catchup), func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, nil)
				ctx := context.Background()
				id := "j-" + string(policy) + string(catchup)
				rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "*/5 * * * *", JitterMs: 60000,
					OverlapPolicy: policy, CatchupPolicy: catchup})
				end := start.Add(58*time.Minute + 30*time.Second) // before 01:00 can fire (jitter ≤ 60 s)
				for b.clock.Now().Before(end) {
					b.clock.Advance(time.Second)
					b.tickAll(t)
					runs, err := b.store.ListRuns(ctx, id, 100)
					require.NoError(t, err)
					for _, r := range runs {
						if r.Status == model.RunEnqueued { // the executor ends it at once
							require.False(t, r.FireAt.After(b.clock.Now()), "%s planned before its fire time %s", r.RunAt, r.FireAt)
							b.report(t, id, r.IdempotencyKey, model.RunSuccess)
						}
					}
				}
				want := expected(t, rec, start, end)
				queuetest.RequireRuns(t, b.store, id, model.RunSuccess, want...)
			})
		}
	}
}

// A run jittered to before its schedule existed (or was resumed) was never
// missable: with ticks every second from then on, catch-up "none" drops
// nothing. It fires when the schedule came to be, not missed.
func TestRunsJitteredBeforeTheScheduleBeganAreNotMissed(t *testing.T) {
	t.Parallel()
	const jitter = 5 * time.Minute
	// A schedule id whose run at minute m is jittered more than 70 s early.
	earlyAt := func(m time.Time) string {
		for i := 0; ; i++ {
			if id := fmt.Sprintf("jn%d", i); model.JitterOffset(model.IdempotencyKey(id, m), jitter) < -70*time.Second {
				return id
			}
		}
	}
	for _, resume := range []bool{false, true} {
		t.Run(fmt.Sprintf("resumed=%v", resume), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
			began := start
			if resume {
				began = start.Add(time.Hour)
			}
			first := began.Add(time.Minute)
			id := earlyAt(first)
			rec := b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
				CatchupPolicy: model.CatchupNone})
			if resume {
				_, err := b.store.SetPaused(context.Background(), id, true)
				require.NoError(t, err)
				b.runUntil(t, began, time.Minute)
				_, err = b.store.SetPaused(context.Background(), id, false)
				require.NoError(t, err)
			}
			end := began.Add(10 * time.Minute)
			b.runUntil(t, end.Add(jitter+time.Second), time.Second)
			runs, err := b.store.ListRuns(context.Background(), id, 1000)
			require.NoError(t, err)
			var got []time.Time
			for _, r := range runs {
				if !r.RunAt.After(end) {
					got = append(got, r.RunAt)
				}
				if r.RunAt.Equal(first) {
					require.True(t, r.FireAt.Equal(began), "the first run fires at %s, want when the schedule began (%s)", r.FireAt, began)
				}
			}
			slices.SortFunc(got, time.Time.Compare)
			require.Equal(t, expected(t, rec, began, end), times(got))
		})
	}
}

// The history keeps RUN_HISTORY runs; a run still ENQUEUED (its task waits
// in asynq) keeps its record however old, so its launcher can record it.
// A STARTED one does not: an executor that never reports would keep it for
// ever.
func TestHistoryIsBoundedButKeepsRunsStillQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{RunHistory: 5})
	rec := b.upsert(t, model.ScheduleRecord{ID: "h", CronExpr: "* * * * *"})
	pending := model.IdempotencyKey(rec.ID, start.Add(time.Minute))
	started := model.IdempotencyKey(rec.ID, start.Add(2*time.Minute))
	for b.clock.Now().Before(start.Add(20 * time.Minute)) {
		b.clock.Advance(time.Minute)
		b.tickAll(t)
		switch key := model.IdempotencyKey(rec.ID, b.clock.Now()); key {
		case pending:
		case started:
			b.report(t, rec.ID, key, model.RunStarted)
		default:
			b.report(t, rec.ID, key, model.RunSuccess)
		}
	}
	runs, err := b.store.ListRuns(context.Background(), rec.ID, 100)
	require.NoError(t, err)
	require.Len(t, runs, 6)
	require.Equal(t, start.Add(20*time.Minute), runs[0].RunAt)
	require.Equal(t, pending, runs[5].IdempotencyKey)
	require.Equal(t, model.RunEnqueued, runs[5].Status)
	keys, err := b.rdb.Keys(context.Background(), "chronos:*:run:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 6, "trimmed run records are deleted")

	// Once it ends, the next commit trims it.
	b.report(t, rec.ID, pending, model.RunSuccess)
	b.runUntil(t, start.Add(21*time.Minute), time.Minute)
	_, _, err = b.store.GetRun(context.Background(), pending)
	require.ErrorIs(t, err, queue.ErrNotFound)
}

// The history stays bounded when a schedule plans more runs per commit
// than a commit used to trim (a per-second schedule with a 30 s tick),
// and when runs left ENQUEUED whose tasks are gone (deleted from asynqmon)
// sit at its oldest end: no launcher will record them.
func TestHistoryStaysBoundedWithManyRunsPerTickAndRunsWithoutTasks(t *testing.T) {
	t.Parallel()
	const keep = 10
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		tick      time.Duration
		lookahead time.Duration
	}{{"30 runs a tick", 30 * time.Second, 0}, {"tasks deleted", time.Second, time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &Config{TickInterval: tc.tick, MisfireGrace: time.Minute}, &queue.Config{RunHistory: keep, Lookahead: tc.lookahead})
			b.upsert(t, model.ScheduleRecord{ID: "ps", CronExpr: "* * * * * *"})
			if tc.lookahead > 0 {
				b.tickAll(t) // a minute of runs enqueued ahead, in asynq's scheduled set (asynq reads the real clock)
				n, err := asynq.NewInspectorFromRedisClient(b.rdb).DeleteAllScheduledTasks(queue.QueueNameDefault)
				require.NoError(t, err)
				require.GreaterOrEqual(t, n, 50)
			}
			for b.clock.Now().Before(start.Add(10 * time.Minute)) {
				b.clock.Advance(tc.tick)
				b.tickAll(t)
				runs, err := b.store.ListRuns(ctx, "ps", 100000)
				require.NoError(t, err)
				for _, r := range runs { // launchers keep up with every run that has a task
					live := b.rdb.Exists(ctx, "asynq:{chronos}:t:"+r.IdempotencyKey).Val() == 1
					if r.Status == model.RunEnqueued && !r.RunAt.After(b.clock.Now()) && live {
						b.report(t, "ps", r.IdempotencyKey, model.RunSuccess)
					}
				}
			}
			// At most the history kept, the runs enqueued ahead and one
			// tick's runs.
			bound := keep + int(tc.lookahead/time.Second) + int(tc.tick/time.Second)
			runs, err := b.store.ListRuns(ctx, "ps", 100000)
			require.NoError(t, err)
			require.LessOrEqual(t, len(runs), bound)
			keys, err := b.rdb.Keys(ctx, "chronos:*:run:*").Result()
			require.NoError(t, err)
			require.LessOrEqual(t, len(keys), bound, "run records kept")
		})
	}
}

// With every launcher down, the oldest runs of a per-second schedule are
// all ENQUEUED with their tasks waiting: kept. A commit looks at a
// bounded number of them (trimScan), not at every run it could trim.
func TestTrimmingLooksAtFewRunsWhileLaunchersAreDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil, &queue.Config{RunHistory: 20})
	const n = 50
	for i := range n {
		b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("s%03d", i), CronExpr: "* * * * * *"})
	}
	b.runUntil(t, start.Add(2*time.Minute), time.Second)
	hgets := func() int64 {
		stats, err := b.rdb.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		_, rest, _ := strings.Cut(stats, "cmdstat_hget:calls=")
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err)
		return v
	}
	before := hgets()
	b.runUntil(t, start.Add(2*time.Minute+10*time.Second), time.Second)
	perCommit := float64(hgets()-before) / (n * 10)
	// 2 per run looked at (status, task state), trimScan runs, plus the
	// commit's own few.
	require.LessOrEqual(t, perCommit, 45.0, "HGETs per schedule per commit")
}

// Catch-up after downtime plans more runs per tick than the history
// keeps: the next tick must not delete the records of runs whose tasks
// still wait in asynq.
func TestCatchupDoesNotTrimRunsStillQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	ctx := context.Background()
	b.upsert(t, model.ScheduleRecord{ID: "s", CronExpr: "* * * * * *"})
	b.clock.Set(start.Add(10 * time.Minute)) // the scheduler was down
	b.tickAll(t)
	b.clock.Advance(time.Second)
	b.tickAll(t)
	first := model.IdempotencyKey("s", start.Add(time.Second))
	require.Equal(t, "pending", b.rdb.HGet(ctx, "asynq:{chronos}:t:"+first, "state").Val())
	r, _, err := b.store.GetRun(ctx, first)
	require.NoError(t, err, "the record of a run still queued was trimmed")
	require.Equal(t, model.RunEnqueued, r.Status)
}

// Paused, the schedule's run is skipped by the launcher; resumed before
// that run's time, the schedule plans the same run again. Its record has
// ended, so it must not become the in-flight run: nothing would release
// it, and every run until RUN_TIMEOUT would be skipped.
func TestReplannedRunThatEndedIsNotInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	ctx := context.Background()
	const jitter = 20 * time.Second
	var at time.Time // an hour whose run fires at least 5 s early
	for h := 2; ; h++ {
		at = start.Add(time.Duration(h) * time.Hour)
		if model.JitterOffset(model.IdempotencyKey("w", at), jitter) < -5*time.Second {
			break
		}
	}
	b.clock.Set(at.Add(-time.Hour - time.Minute))
	b.upsert(t, model.ScheduleRecord{ID: "w", CronExpr: "0 * * * *", JitterMs: jitter.Milliseconds(), OverlapPolicy: model.OverlapSkip})
	b.runUntil(t, at.Add(-time.Hour+jitter), time.Second)
	b.report(t, "w", model.IdempotencyKey("w", at.Add(-time.Hour)), model.RunSuccess)
	b.runUntil(t, at.Add(model.JitterOffset(model.IdempotencyKey("w", at), jitter)), time.Second) // its fire time
	key := model.IdempotencyKey("w", at)
	_, err := b.store.GetScheduleRun(ctx, "w", key)
	require.NoError(t, err, "the run at %s is planned", at)

	_, err = b.store.SetPaused(ctx, "w", true)
	require.NoError(t, err)
	b.report(t, "w", key, model.RunSkipped) // as the launcher does while paused
	b.clock.Set(at.Add(-2 * time.Second))   // resumed before the run's own time: it comes again
	_, err = b.store.SetPaused(ctx, "w", false)
	require.NoError(t, err)
	b.runUntil(t, at.Add(time.Hour+time.Minute), time.Second)

	r, err := b.store.GetScheduleRun(ctx, "w", model.IdempotencyKey("w", at.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, r.Status, "nothing is in flight: %s", r.Error)
}

// The same re-planned run that ended, but found in one plan with a later
// run (the scheduler was down meanwhile): the plan decided the later run
// (held for "queue", SKIPPED for "skip") as if the ended run were in
// flight. Nothing was: the later run must be planned as if nothing were,
// not held for ever or skipped.
func TestReplannedRunThatEndedDoesNotHoldOrSkipTheNextInOnePlan(t *testing.T) {
	t.Parallel()
	for _, policy := range []model.OverlapPolicy{model.OverlapQueue, model.OverlapSkip} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			ctx := context.Background()
			const jitter = 30 * time.Second
			second := start.Add(2 * time.Minute)
			var id string
			var off time.Duration
			for i := 0; ; i++ { // an id whose 00:02 run fires at least 10 s early
				id = fmt.Sprintf("%s%d", policy, i)
				if off = model.JitterOffset(model.IdempotencyKey(id, second), jitter); off < -10*time.Second {
					break
				}
			}
			b.clock.Set(second.Add(off).Add(-5 * time.Second))
			b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(), OverlapPolicy: policy})
			b.runUntil(t, second.Add(off).Add(time.Second), time.Second)
			key := model.IdempotencyKey(id, second)
			queuetest.RequireRuns(t, b.store, id, model.RunEnqueued, "2024-03-09T00:02:00Z")

			b.skipWhilePaused(t, id, key) // before 00:02: it is next again

			// The scheduler is down until 00:04:05.
			b.clock.Set(start.Add(4*time.Minute + 5*time.Second))
			b.tickAll(t)
			b.runUntil(t, start.Add(6*time.Minute), 5*time.Second)
			for _, m := range []time.Duration{3, 4, 5} {
				r, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, start.Add(m*time.Minute)))
				require.NoError(t, err, "the 00:0%d run is planned", m)
				if policy == model.OverlapSkip && m > 3 {
					continue // the 00:03 run is in flight (no launcher here): these are skipped
				}
				require.Equal(t, model.RunEnqueued, r.Status, "00:0%d: %s", m, r.Error)
				if policy == model.OverlapQueue {
					break // 00:04 waits for 00:03
				}
			}
		})
	}
}

// A plan cut at a re-planned run that ended is planned again a tick later;
// the run behind it, found on time (within MISFIRE_GRACE) by the cut plan,
// must not be judged missed by then and dropped under catchup none.
func TestARunBehindACutPlanIsNotJudgedMissedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	ctx := context.Background()
	const jitter = 90 * time.Second
	r, nb := start.Add(2*time.Minute), start.Add(3*time.Minute)
	var id string
	var fr, fb time.Time
	for i := 0; ; i++ { // R (00:02) fires 1-55 s early, B (00:03) 1-300 ms after R
		id = fmt.Sprintf("cut%d", i)
		fr = r.Add(model.JitterOffset(model.IdempotencyKey(id, r), jitter))
		fb = nb.Add(model.JitterOffset(model.IdempotencyKey(id, nb), jitter))
		if d := fb.Sub(fr); fr.Before(r.Add(-time.Second)) && fr.After(r.Add(-55*time.Second)) && d > 0 && d <= 300*time.Millisecond {
			break
		}
	}
	b.clock.Set(start.Add(time.Minute + time.Second))
	b.upsert(t, model.ScheduleRecord{ID: id, CronExpr: "* * * * *", JitterMs: jitter.Milliseconds(),
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone})
	b.clock.Set(fr)
	b.tickAll(t)
	keyR := model.IdempotencyKey(id, r)
	queuetest.RequireRuns(t, b.store, id, model.RunEnqueued, "2024-03-09T00:02:00Z")
	b.skipWhilePaused(t, id, keyR) // before 00:02: it is next again

	// The scheduler next ticks 9.5 s after B's fire time: B is on time.
	b.clock.Set(fb.Add(9500 * time.Millisecond))
	b.tickAll(t)
	b.clock.Advance(time.Second)
	b.tickAll(t)
	rb, err := b.store.GetScheduleRun(ctx, id, model.IdempotencyKey(id, nb))
	require.NoError(t, err, "the 00:03 run, found 9.5 s after its fire time, is planned")
	require.Equal(t, model.RunEnqueued, rb.Status, rb.Error)
}

// Two replicas that both believe they hold every shard (a lease that
// expired while its holder was paused) tick concurrently: every planned run
// still has one record and one task.
func TestConcurrentReplicasNeverDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{PageSize: 7}, nil)
	other, err := New(b.store, &Config{PageSize: 7}, nil, nil)
	require.NoError(t, err)
	var recs []*model.ScheduleRecord
	for i := range 40 {
		recs = append(recs, b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("s%02d", i), CronExpr: "*/20 * * * * *"}))
	}
	until := start.Add(5 * time.Minute)
	for b.clock.Now().Before(until) {
		b.clock.Advance(10 * time.Second)
		var wg sync.WaitGroup
		for _, s := range []*Scheduler{b.sched, other, b.sched, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sh := range 4 {
					require.NoError(t, s.TickShard(context.Background(), sh))
				}
			}()
		}
		wg.Wait()
	}
	total := 0
	for _, rec := range recs {
		want := expected(t, rec, start, until)
		runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, want...)
		for _, r := range runs {
			queuetest.RequireTask(t, b.rdb, "chronos", r.IdempotencyKey)
		}
		total += len(want)
	}
	require.Equal(t, total, queuetest.CountTasks(t, b.rdb, "chronos"))
}

// planAlone reads schedule id, due now and alone on its shard, and plans it
// as a tick would, without committing.
func (b *testBundle) planAlone(t *testing.T, id string) (shard int, now time.Time, p queue.Plan) {
	t.Helper()
	shard, now = queue.ShardOf(id, 4), b.clock.Now()
	due, err := b.store.ReadDue(context.Background(), shard, now, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	p, _, err = b.sched.planOne(due[0], now)
	require.NoError(t, err)
	return shard, now, p
}

// A plan's run records, asynq tasks and the schedule's advance are one
// atomic commit: committing the same plan again (a second replica that
// planned from the same state, or a retried tick) writes nothing.
func TestCommitAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "ob", CronExpr: "* * * * *"})
	b.clock.Advance(time.Minute)
	sh, now, p := b.planAlone(t, rec.ID)
	applied, err := b.store.Commit(context.Background(), sh, now, []queue.Plan{p})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	runs := queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
	queuetest.RequireTask(t, b.rdb, "chronos", runs[0].IdempotencyKey)

	applied, err = b.store.Commit(context.Background(), sh, now, []queue.Plan{p})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	b.tickAll(t)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T00:01:00Z")
	require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, "chronos"))
}

func TestUpsertChangingTimingReplans(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	rec := b.upsert(t, model.ScheduleRecord{ID: "u", CronExpr: "0 * * * *"})
	b.runUntil(t, start.Add(90*time.Minute), 5*time.Minute)
	rec.CronExpr = "*/15 * * * *"
	rec2 := *rec
	b.upsert(t, rec2)
	b.runUntil(t, start.Add(2*time.Hour), 5*time.Minute)
	queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued,
		"2024-03-09T01:00:00Z", "2024-03-09T01:45:00Z", "2024-03-09T02:00:00Z")
}

// heldShards counts the shards a replica holds.
func heldShards(s *Scheduler) int { return len(s.snapshot()) }

// When a replica dies without releasing its leases, the survivors own every
// shard again within a lease TTL and a renew interval, although the dead
// replica still looks live until its heartbeat ages out.
func TestShardsOfADeadReplicaAreTakenOver(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Client(t)
	store, err := queue.NewStore(context.Background(), rdb, queue.RealClock{}, &queue.Config{Shards: 16})
	require.NoError(t, err)
	cfg := &Config{LeaseTTL: time.Second, TickInterval: 50 * time.Millisecond}
	var reps []*Scheduler
	for range 3 {
		s, err := New(store, cfg, nil, nil)
		require.NoError(t, err)
		require.NoError(t, s.Start(context.Background()))
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		reps = append(reps, s)
	}
	require.Eventually(t, func() bool {
		total := 0
		for _, s := range reps {
			if heldShards(s) == 0 {
				return false
			}
			total += heldShards(s)
		}
		return total == 16
	}, 10*time.Second, 10*time.Millisecond, "three replicas never shared the 16 shards")

	dead := reps[0]
	deadHeld := heldShards(dead)
	dead.abandon = true
	require.NoError(t, dead.Stop(context.Background()))
	died := time.Now()
	require.Eventually(t, func() bool { return heldShards(reps[1])+heldShards(reps[2]) == 16 },
		5*time.Second, 10*time.Millisecond, "the dead replica's %d shards were not taken over", deadHeld)
	took := time.Since(died)
	t.Logf("%d orphaned shards taken over in %s", deadHeld, took)
	// Before replicas adopted orphans, this took three TTLs: until the dead
	// replica's heartbeat aged out.
	require.Less(t, took, 2*cfg.LeaseTTL+cfg.LeaseTTL/3)
}

// A plan made from a definition that an upsert has replaced since is
// stale even when the new timing happens to have the same next fire time:
// committing it would advance the schedule by the old timing and lose the
// new one's runs in between.
func TestCommitOfAPlanFromAReplacedDefinitionIsStale(t *testing.T) {
	t.Parallel()
	for _, recreate := range []bool{false, true} { // upserted, or deleted and created again
		t.Run(fmt.Sprintf("recreate=%v", recreate), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
			rec := b.upsert(t, model.ScheduleRecord{ID: "v", CronExpr: "0 */2 * * *"})
			b.clock.Set(start.Add(time.Hour + 59*time.Minute + 30*time.Second))
			sh, now, p := b.planAlone(t, rec.ID)
			require.Equal(t, start.Add(4*time.Hour), p.NewNext, "the old timing's next after 02:00")

			if recreate {
				require.NoError(t, b.store.DeleteSchedule(context.Background(), rec.ID))
			}
			rec2 := *rec
			rec2.CronExpr = "0 * * * *" // next is 02:00 as well
			b.upsert(t, rec2)
			applied, err := b.store.Commit(context.Background(), sh, now, []queue.Plan{p})
			require.NoError(t, err)
			require.Equal(t, []bool{false}, applied)

			b.tickAll(t)
			b.runUntil(t, start.Add(3*time.Hour+30*time.Minute), time.Minute)
			queuetest.RequireRuns(t, b.store, rec.ID, model.RunEnqueued, "2024-03-09T02:00:00Z", "2024-03-09T03:00:00Z")
		})
	}
}

func histogramOf(t *testing.T, h prometheus.Histogram) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram()
}

// A schedule whose state in Redis is corrupt is retired with an error,
// not retried forever: the other schedules of its shard keep firing, and
// pausing and resuming it schedules it again.
func TestCorruptScheduleIsRetiredAndTheShardGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	good := b.upsert(t, model.ScheduleRecord{ID: "good", CronExpr: "* * * * *"})
	bad := "bad"
	for i := 0; queue.ShardOf(bad, 4) != queue.ShardOf(good.ID, 4); i++ {
		bad = fmt.Sprintf("bad-%d", i)
	}
	b.upsert(t, model.ScheduleRecord{ID: bad, CronExpr: "* * * * *"})
	key := fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(bad, 4), bad)
	require.NoError(t, b.rdb.HSet(context.Background(), key, "next", "not-a-time").Err())

	b.runUntil(t, start.Add(2*time.Minute), 10*time.Second)
	queuetest.RequireRuns(t, b.store, good.ID, model.RunEnqueued, "2024-03-09T00:01:00Z", "2024-03-09T00:02:00Z")
	queuetest.RequireRuns(t, b.store, bad, model.RunEnqueued)
	got, err := b.store.GetSchedule(context.Background(), bad)
	require.NoError(t, err)
	require.Nil(t, got.NextRunAt)

	_, err = b.store.SetPaused(context.Background(), bad, true)
	require.NoError(t, err)
	_, err = b.store.SetPaused(context.Background(), bad, false)
	require.NoError(t, err)
	b.runUntil(t, start.Add(3*time.Minute), 10*time.Second)
	queuetest.RequireRuns(t, b.store, bad, model.RunEnqueued, "2024-03-09T00:03:00Z")
}

// Paused and resumed within the lookahead, a schedule plans again a run
// already enqueued: nothing is written twice, and it is counted once.
func TestARunPlannedAgainIsCountedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	ctx := context.Background()
	b.upsert(t, model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *"})
	b.clock.Advance(59 * time.Minute) // 00:59: the 01:00 run is enqueued ahead
	b.tickAll(t)
	_, err := b.store.SetPaused(ctx, "s", true)
	require.NoError(t, err)
	b.clock.Advance(10 * time.Second)
	_, err = b.store.SetPaused(ctx, "s", false)
	require.NoError(t, err)
	b.clock.Advance(10 * time.Second)
	b.tickAll(t)
	queuetest.RequireRuns(t, b.store, "s", model.RunEnqueued, "2024-03-09T01:00:00Z")
	require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
	require.Equal(t, 1.0, testutil.ToFloat64(b.sched.metrics.emitted))
}

// Deleted and created again within the lookahead, a schedule plans afresh
// the time its former self had enqueued a run for (that run is removed on
// re-creation): one run, one task, in the new schedule's history and kept
// with it, not left to the delete's expiry.
func TestARecreatedSchedulePlansAgainATimeItsFormerSelfEnqueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
	ctx := context.Background()
	rec := b.upsert(t, model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *"})
	b.clock.Advance(59 * time.Minute)
	b.tickAll(t)
	require.NoError(t, b.store.DeleteSchedule(ctx, "s"))
	b.upsert(t, *rec)
	b.clock.Advance(time.Second)
	b.tickAll(t)
	runs := queuetest.RequireRuns(t, b.store, "s", model.RunEnqueued, "2024-03-09T01:00:00Z")
	keys := b.rdb.Keys(ctx, "chronos:*:run:"+runs[0].IdempotencyKey).Val()
	require.Len(t, keys, 1)
	require.Equal(t, time.Duration(-1), b.rdb.TTL(ctx, keys[0]).Val(), "the run record expires with the deleted schedule's")
	require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
}
