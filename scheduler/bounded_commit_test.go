package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestBoundedCommit checks that a tick whose page carries more runs than
// one commit call may (queue.CommitRunsMax) commits them over several
// calls, and that a replica dying between two of them neither loses nor
// repeats a run: the rest is planned again at the next tick, by it or by
// another replica.
func TestBoundedCommit(t *testing.T) {
	t.Parallel()

	t.Run("MaxCatchupPerTickIsBounded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		_, err := New(b.store, &Config{MaxCatchupPerTick: MaxCatchupPerTickMax + 1}, nil, nil)
		require.ErrorContains(t, err, fmt.Sprintf("Config.MaxCatchupPerTick must be at most %d", queue.CommitRunsMax))
		_, err = New(b.store, &Config{MaxCatchupPerTick: MaxCatchupPerTickMax}, nil, nil)
		require.NoError(t, err)
	})

	t.Run("DyingBetweenCallsLosesAndRepeatsNothing", func(t *testing.T) {
		t.Parallel()
		const schedules = 25 // × 100 runs caught up: three calls (1,000, 1,000, 500)
		ctx := context.Background()
		hook := &queuetest.ScriptHook{Match: queuetest.CommitKeys}
		rdb := queuetest.StartRedis(t).Client(t)
		rdb.AddHook(hook)
		clock := queue.NewSimClock(start)
		store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 1, RunHistory: 1000})
		require.NoError(t, err)
		dying, err := New(store, nil, nil, nil)
		require.NoError(t, err)
		other, err := New(store, nil, nil, nil)
		require.NoError(t, err)
		b := &testBundle{rdb: rdb, store: store, clock: clock, sched: dying}
		var ids []string
		for i := range schedules {
			rec := b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("c%02d", i), CronExpr: "* * * * * *",
				OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupFireImmediately})
			ids = append(ids, rec.ID)
		}
		// Down for 200 s: each schedule has MaxCatchupPerTick (100) runs
		// to catch up this tick.
		clock.Set(start.Add(200 * time.Second))
		died := errors.New("replica died before its second commit call")
		hook.Fail = func(n int) error {
			if n == 2 {
				return died
			}
			return nil
		}
		require.ErrorIs(t, dying.TickShard(ctx, 0), died)
		require.Len(t, hook.Calls(), 1)
		withRuns := 0
		for _, id := range ids {
			runs, err := store.ListRuns(ctx, id, 1000)
			require.NoError(t, err)
			if len(runs) > 0 {
				require.Len(t, runs, MaxCatchupPerTickDefault, id)
				withRuns++
			}
		}
		require.Equal(t, queue.CommitRunsMax/MaxCatchupPerTickDefault, withRuns, "the first call's plans applied, no other")

		// Another replica carries on, tick after tick, until the backlog
		// is made up and the schedules fire on time again.
		hook.Fail = nil
		for range 4 {
			require.NoError(t, other.TickShard(ctx, 0))
		}
		for range 10 {
			clock.Advance(time.Second)
			require.NoError(t, other.TickShard(ctx, 0))
		}
		total := 0
		for _, id := range ids {
			runs, err := store.ListRuns(ctx, id, 1000)
			require.NoError(t, err)
			seen := map[time.Time]bool{}
			for _, r := range runs {
				require.False(t, seen[r.RunAt], "%s: run at %s twice", id, r.RunAt)
				seen[r.RunAt] = true
			}
			for at := start.Add(time.Second); !at.After(clock.Now()); at = at.Add(time.Second) {
				require.True(t, seen[at], "%s: no run at %s", id, at)
			}
			total += len(runs)
		}
		require.Equal(t, total, queuetest.CountTasks(t, rdb, queue.QueueNameDefault), "one task per run")
	})
}
