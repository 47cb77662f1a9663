package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// commitRuns is how many runs a commit call with these arguments carries.
func commitRuns(t *testing.T, argv []any) int {
	t.Helper()
	var plans int
	_, err := fmt.Sscan(fmt.Sprint(argv[queue.CommitHeaderArgs-1]), &plans)
	require.NoError(t, err)
	runArgs := len(argv) - queue.CommitHeaderArgs - plans*queue.CommitPlanArgs
	require.Zero(t, runArgs%queue.CommitRunArgs)
	return runArgs / queue.CommitRunArgs
}

// TestCommitBounded checks that Commit sends a page in calls of at most
// queue.CommitRunsMax runs, and that a page whose calls stop part way (a
// process dying between two calls) still commits every run exactly once
// when the rest is planned again, as the next tick does.
func TestCommitBounded(t *testing.T) {
	t.Parallel()
	const (
		schedules = 25
		perPlan   = 100 // 2,500 runs: calls of 10 plans (1,000 runs), 10 and 5
	)
	T := methodNow
	now := T.Add(perPlan * time.Second)

	type bundle struct {
		store *queue.Store
		rdb   *redis.Client
		hook  *queuetest.ScriptHook
	}
	setup := func(t *testing.T) *bundle {
		t.Helper()
		hook := &queuetest.ScriptHook{Match: queuetest.CommitKeys}
		rdb := queuetest.StartRedis(t).Client(t)
		rdb.AddHook(hook)
		clock := queue.NewSimClock(T)
		store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{Shards: 1, RunHistory: 1000})
		require.NoError(t, err)
		for i := range schedules {
			rec := model.ScheduleRecord{ID: fmt.Sprintf("b%02d", i), Kind: model.KindCron, Target: model.TargetWorkflow,
				WorkflowID: "wf", Version: "1", UserID: "u", CronExpr: "* * * * * *", Timezone: "UTC",
				OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately}
			require.NoError(t, rec.Validate())
			_, err := store.UpsertSchedule(context.Background(), &rec)
			require.NoError(t, err)
		}
		clock.Set(now)
		return &bundle{store: store, rdb: rdb, hook: hook}
	}
	// plan reads the due page and plans each schedule's runs from its
	// next time up to now, one a second.
	plan := func(t *testing.T, b *bundle) []queue.Plan {
		t.Helper()
		due, err := b.store.ReadDue(context.Background(), 0, now, 500)
		require.NoError(t, err)
		plans := make([]queue.Plan, 0, len(due))
		for _, d := range due {
			p := d.Plan()
			at := d.Next
			for ; !at.After(now); at = at.Add(time.Second) {
				key := model.IdempotencyKey(d.ID, at)
				p.Runs = append(p.Runs, queue.PlannedRun{Key: key, RunAt: at, FireAt: now, Status: model.RunEnqueued,
					Task: queue.TaskPayload{IdempotencyKey: key, ScheduleID: d.ID, RunAt: at, FireAt: now,
						WorkflowID: "wf", Version: "1", UserID: "u", Source: model.SourceSchedule}})
			}
			p.NewNext, p.NewScore = at, float64(at.UnixMilli())
			plans = append(plans, p)
		}
		return plans
	}
	// requireOnce: every schedule has exactly its runs from T+1s to now,
	// each with its task, and nothing else was written.
	requireOnce := func(t *testing.T, b *bundle) {
		t.Helper()
		for i := range schedules {
			id := fmt.Sprintf("b%02d", i)
			runs, err := b.store.ListRuns(context.Background(), id, 1000)
			require.NoError(t, err)
			require.Len(t, runs, perPlan, id)
			seen := map[time.Time]bool{}
			for _, r := range runs {
				require.False(t, seen[r.RunAt], "%s: run at %s twice", id, r.RunAt)
				seen[r.RunAt] = true
				require.Equal(t, model.RunEnqueued, r.Status)
			}
			for at := T.Add(time.Second); !at.After(now); at = at.Add(time.Second) {
				require.True(t, seen[at], "%s: no run at %s", id, at)
			}
		}
		require.Equal(t, schedules*perPlan, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
		due, err := b.store.ReadDue(context.Background(), 0, now, 500)
		require.NoError(t, err)
		require.Empty(t, due, "every schedule advanced past now")
	}

	t.Run("a page goes in calls of at most CommitRunsMax runs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		plans := plan(t, b)
		require.Len(t, plans, schedules)
		applied, err := b.store.Commit(context.Background(), 0, now, plans)
		require.NoError(t, err)
		require.Len(t, applied, schedules)
		for i, ok := range applied {
			require.True(t, ok, plans[i].ID)
			for _, r := range plans[i].Runs {
				require.True(t, r.Written)
			}
		}
		var sizes []int
		for _, argv := range b.hook.Calls() {
			sizes = append(sizes, commitRuns(t, argv))
		}
		require.Equal(t, []int{1000, 1000, 500}, sizes)
		requireOnce(t, b)
	})

	t.Run("a plan is never split", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		plans := plan(t, b)
		// 650 runs in the first plan: it and the next three (950) fit,
		// and the fourth waits for the next call, whole.
		extra := plans[0].Runs[0]
		for range 650 - perPlan {
			plans[0].Runs = append(plans[0].Runs, extra) // written once, then kept
		}
		_, err := b.store.Commit(context.Background(), 0, now, plans)
		require.NoError(t, err)
		var sizes []int
		for _, argv := range b.hook.Calls() {
			sizes = append(sizes, commitRuns(t, argv))
		}
		require.Equal(t, []int{950, 1000, 1000, 100}, sizes)
	})

	t.Run("a process dying between calls loses and repeats nothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		died := errors.New("died before the second call")
		b.hook.Fail = func(n int) error {
			if n == 2 {
				return died
			}
			return nil
		}
		first := plan(t, b)
		_, err := b.store.Commit(context.Background(), 0, now, first)
		require.ErrorIs(t, err, died)
		require.Len(t, b.hook.Calls(), 1)

		// The first call's ten plans applied; the other fifteen wrote
		// nothing and are due at the same next time.
		again := plan(t, b)
		require.Len(t, again, schedules-10)
		for i, p := range again {
			require.Equal(t, first[10+i].ID, p.ID)
			require.Equal(t, first[10+i].Runs[0].RunAt, p.Runs[0].RunAt)
		}
		for _, p := range first[:10] {
			runs, err := b.store.ListRuns(context.Background(), p.ID, 1000)
			require.NoError(t, err)
			require.Len(t, runs, perPlan)
		}
		for _, p := range first[10:] {
			runs, err := b.store.ListRuns(context.Background(), p.ID, 1000)
			require.NoError(t, err)
			require.Empty(t, runs)
		}

		b.hook.Fail = nil
		applied, err := b.store.Commit(context.Background(), 0, now, again)
		require.NoError(t, err)
		require.NotContains(t, applied, false)
		// Another replica that planned the whole page from the same read
		// commits it late: every plan is stale, nothing is written.
		for i := range first {
			for j := range first[i].Runs {
				first[i].Runs[j].Written = false
			}
		}
		applied, err = b.store.Commit(context.Background(), 0, now, first)
		require.NoError(t, err)
		require.NotContains(t, applied, true)
		requireOnce(t, b)
	})
}
