package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestReplicas checks several schedulers on one store: overlapping
// holders never duplicate a run, and a dead replica's shards are taken over.
func TestReplicas(t *testing.T) {
	t.Parallel()

	// Two replicas that both believe they hold every shard (a lease that
	// expired while its holder was paused) tick concurrently: every planned run
	// still has one record and one task.
	t.Run("ConcurrentReplicasNeverDuplicate", func(t *testing.T) {
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
	})

	// When a replica dies without releasing its leases, the survivors own every
	// shard again within a lease TTL and a renew interval, although the dead
	// replica still looks live until its heartbeat ages out.
	t.Run("ShardsOfADeadReplicaAreTakenOver", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t).Universal(t)
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
	})
}

// TestNew checks the configurations New refuses because they would break
// a promise: takeover looking like downtime, a catch-up that never ends.
func TestNew(t *testing.T) {
	t.Parallel()

	// A misfire grace shorter than a shard takeover would make a replica's
	// death look like downtime to the catch-up policies: refused at start.
	t.Run("MisfireGraceMustCoverTakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		_, err := New(b.store, &Config{MisfireGrace: 5 * time.Second}, nil, nil)
		require.ErrorContains(t, err, "Config.MisfireGrace (5s) must exceed")
		require.ErrorContains(t, err, "= 7.667s")
		_, err = New(b.store, &Config{MisfireGrace: 5 * time.Second, LeaseTTL: 2 * time.Second}, nil, nil)
		require.NoError(t, err)
	})

	// A per-second schedule's backlog must shrink each tick, or a catch-up
	// never finishes: the limit per tick must exceed twice its runs per tick.
	t.Run("MaxCatchupPerTickMustOutpaceAPerSecondSchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		_, err := New(b.store, &Config{MaxCatchupPerTick: 2}, nil, nil)
		require.ErrorContains(t, err, "Config.MaxCatchupPerTick (2) must exceed 2")
		_, err = New(b.store, &Config{MaxCatchupPerTick: 10, TickInterval: 5 * time.Second}, nil, nil)
		require.ErrorContains(t, err, "Config.MaxCatchupPerTick (10) must exceed 10")
		_, err = New(b.store, &Config{MaxCatchupPerTick: 3}, nil, nil)
		require.NoError(t, err)
	})
}
