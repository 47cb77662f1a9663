package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The fast path (TickDue, commitFast) checks with EXISTS that no run of
// its chunk has a record, task or manual mark, and then writes under a
// WATCH of the schedules' hashes and of the shard's runs-made counter
// only, not of each run's keys. These tests make a run's record, task or
// mark between that EXISTS and the EXEC, by each writer that can make
// one outside the schedule's own commit, and check that the transaction
// aborts and commit.lua decides: the run is enqueued once.

// afterExists is a go-redis hook that calls make once, after the fast
// path's check of its runs' keys (the pipeline of WATCH and EXISTS) ran:
// between the check and the EXEC.
type afterExists struct {
	make func()
	once sync.Once
}

func (h *afterExists) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *afterExists) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *afterExists) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "exists" }) &&
			slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "watch" }) {
			h.once.Do(h.make)
		}
		return err
	}
}

// runsMadeT is the second the tests' runs are planned at.
var runsMadeT = methodNow

// runsMadeSchedule registers an every-minute schedule, overlap allow (so
// a backfill writes nothing to its hash), whose next run is runsMadeT,
// on store, and returns its shard.
func runsMadeSchedule(t *testing.T, store *queue.Store, clock *queue.SimClock, id string) int {
	t.Helper()
	clock.Set(runsMadeT.Add(-30 * time.Second))
	rec := &model.ScheduleRecord{ID: id, CronExpr: "* * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := store.UpsertSchedule(context.Background(), rec)
	require.NoError(t, err)
	clock.Set(runsMadeT.Add(time.Second))
	return queue.ShardOf(id, queue.ShardsDefault)
}

// planAt plans one ENQUEUED run at runsMadeT for each due schedule, and
// the next a minute later.
func planAt(due []queue.DueSchedule) ([]queue.Plan, time.Time, error) {
	T := runsMadeT
	out := make([]queue.Plan, 0, len(due))
	for _, d := range due {
		p := d.Plan()
		key := model.IdempotencyKey(d.ID, T)
		p.Runs = []queue.PlannedRun{{Key: key, RunAt: T, FireAt: T, Status: model.RunEnqueued,
			Task: queue.TaskPayload{IdempotencyKey: key, ScheduleID: d.ID, RunAt: T, FireAt: T, WorkflowID: "wf", Version: "1", Source: model.SourceSchedule}}}
		p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
		out = append(out, p)
	}
	return out, runsMadeT.Add(time.Second), nil
}

func TestTickDueFastPathSeesRunsMadeAfterItsCheck(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	if r.Cluster() != nil {
		t.Skip("the hook sits on one client; TestTickDue* cover the cluster")
	}
	ctx := context.Background()

	// otherShardID returns a schedule id whose run at runsMadeT has a key
	// of another shard than the schedule's: a manual run of that key
	// without the schedule's id lives in the key's shard and marks the
	// others.
	otherShardID := func() string {
		for i := 0; ; i++ {
			id := fmt.Sprintf("far-%d", i)
			if queue.ShardOf(model.IdempotencyKey(id, runsMadeT), queue.ShardsDefault) != queue.ShardOf(id, queue.ShardsDefault) {
				return id
			}
		}
	}

	cases := []struct {
		name string
		id   string
		// make makes the run's key with maker, the other writer.
		make func(t *testing.T, maker *queue.Store, id, key string)
		// check asserts what became of the run.
		check func(t *testing.T, b *methodBundle, plans []queue.Plan, sh int, key string)
	}{
		{
			name: "no writer: the fast path applies",
			id:   "plain",
			make: nil,
		},
		{
			name: "a manual run naming the schedule (manual_run.lua)",
			id:   "named",
			make: func(t *testing.T, maker *queue.Store, id, key string) {
				_, started, err := maker.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
					ScheduledFor: runsMadeT, IdempotencyKey: key, ScheduleID: id})
				require.NoError(t, err)
				require.True(t, started)
			},
			check: func(t *testing.T, b *methodBundle, plans []queue.Plan, sh int, key string) {
				require.False(t, plans[0].Runs[0].Written, "the manual run's record was found: not written again")
				run, _, err := b.store.GetRun(ctx, key)
				require.NoError(t, err)
				require.Equal(t, model.SourceManual, run.Source)
			},
		},
		{
			name: "a manual run of the key in its own shard (markEveryShard)",
			id:   otherShardID(),
			make: func(t *testing.T, maker *queue.Store, _, key string) {
				_, started, err := maker.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
					ScheduledFor: runsMadeT, IdempotencyKey: key})
				require.NoError(t, err)
				require.True(t, started)
			},
			check: func(t *testing.T, b *methodBundle, plans []queue.Plan, sh int, key string) {
				require.True(t, plans[0].Runs[0].Taken, "recorded SKIPPED: the manual run took its key")
				require.Equal(t, string(model.RunSkipped), b.rdb.HGet(ctx, queue.RunKey(sh, key), queue.RfStatus).Val())
			},
		},
		{
			name: "a backfill (backfill.lua)",
			id:   "filled",
			make: func(t *testing.T, maker *queue.Store, id, _ string) {
				res, err := maker.RunBackfill(ctx, queue.Backfill{ScheduleID: id, From: runsMadeT, To: runsMadeT.Add(time.Second), MaxRuns: 10, Rate: 10})
				require.NoError(t, err)
				require.Len(t, res.Runs, 1)
			},
			check: func(t *testing.T, b *methodBundle, plans []queue.Plan, sh int, key string) {
				require.False(t, plans[0].Runs[0].Written, "the backfill's record was found: not written again")
				run, _, err := b.store.GetRun(ctx, key)
				require.NoError(t, err)
				require.Equal(t, model.SourceBackfill, run.Source)
			},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupMethod(t, r, 9+i)
			sh := runsMadeSchedule(t, b.store, b.clock, c.id)
			key := model.IdempotencyKey(c.id, runsMadeT)

			// The fast path's store sends through a client with the hook;
			// the writer's store through b's.
			fc := redis.NewClient(&redis.Options{Addr: r.Addr, DB: 9 + i})
			t.Cleanup(func() { _ = fc.Close() })
			if c.make != nil {
				fc.AddHook(&afterExists{make: func() { c.make(t, b.store, c.id, key) }})
			}
			fast, err := queue.NewStore(ctx, fc, b.clock, nil)
			require.NoError(t, err)

			due, plans, applied, err := fast.TickDue(ctx, sh, runsMadeT.Add(time.Second), 100, planAt)
			require.NoError(t, err)
			require.Len(t, due, 1)
			require.Equal(t, []bool{true}, applied, "the schedule moved on")
			require.Equal(t, msStr(runsMadeT.Add(time.Minute)), b.rdb.HGet(ctx, queue.ScheduleKey(sh, c.id), queue.SfNext).Val())
			// Exactly once: one task for the run's key, in one queue.
			qs := queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, key)
			require.Len(t, qs, 1, "one task for the run")
			pending := b.rdb.LRange(ctx, "asynq:{"+qs[0]+"}:pending", 0, -1).Val()
			n := 0
			for _, id := range pending {
				if id == key {
					n++
				}
			}
			require.Equal(t, 1, n, "the run's task is pending once")
			if c.make == nil {
				require.EqualValues(t, 1, fast.FastPages(), "nothing made the run's keys: the fast path applied")
				require.True(t, plans[0].Runs[0].Written)
				return
			}
			require.EqualValues(t, 0, fast.FastPages(), "the runs-made counter moved: the EXEC aborted and commit.lua decided")
			c.check(t, b, plans, sh, key)
		})
	}
}
