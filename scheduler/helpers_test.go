package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	rdb   redis.UniversalClient
	store *queue.Store
	clock *queue.SimClock
	sched *Scheduler
}

// start is in the past of the real clock on purpose: asynq, which reads
// the real clock, then treats every run as due now.
var start = time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC)

func setup(t *testing.T, cfg *Config, qcfg *queue.Config) *testBundle {
	t.Helper()
	rdb := queuetest.StartRedis(t).Universal(t)
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

// taskKey is the key of the asynq task of run key of schedule id, in its
// shard's run queue.
func (b *testBundle) taskKey(id, key string) string {
	return b.store.RunQueue(queue.ShardOf(id, b.store.Config().Shards)).Keys().Task(key)
}

// skipWhilePaused has a launcher take run key of schedule id (its task
// active, so pausing leaves the run to it), pauses the schedule, records
// the run SKIPPED as that launcher does while the schedule is paused, and
// resumes it.
func (b *testBundle) skipWhilePaused(t *testing.T, id, key string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.rdb.HSet(ctx, b.taskKey(id, key), "state", "active").Err())
	_, err := b.store.SetPaused(ctx, id, true)
	require.NoError(t, err)
	b.report(t, id, key, model.RunSkipped)
	_, err = b.store.SetPaused(ctx, id, false)
	require.NoError(t, err)
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

// heldShards counts the shards a replica holds.
func heldShards(s *Scheduler) int { return len(s.snapshot()) }

func histogramOf(t *testing.T, h prometheus.Histogram) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram()
}
