package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestCommit checks that a plan commits once, and not at all once its
// schedule's definition changed: one record and one task per run.
func TestCommit(t *testing.T) {
	t.Parallel()

	// A plan's run records, asynq tasks and the schedule's advance are one
	// atomic commit: committing the same plan again (a second replica that
	// planned from the same state, or a retried tick) writes nothing.
	t.Run("AppliesOnce", func(t *testing.T) {
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
	})

	// A plan made from a definition that an upsert has replaced since is
	// stale even when the new timing happens to have the same next fire time:
	// committing it would advance the schedule by the old timing and lose the
	// new one's runs in between.
	t.Run("OfAPlanFromAReplacedDefinitionIsStale", func(t *testing.T) {
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
	})

	// Paused and resumed within the lookahead, a schedule plans again a run
	// already enqueued that a launcher holds (pausing leaves such a run to
	// it, and removes the others): nothing is written twice, and it is
	// counted once.
	t.Run("ARunPlannedAgainIsCountedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, &queue.Config{Lookahead: time.Minute})
		ctx := context.Background()
		b.upsert(t, model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *"})
		b.clock.Advance(59 * time.Minute) // 00:59: the 01:00 run is enqueued ahead
		b.tickAll(t)
		key := model.IdempotencyKey("s", start.Add(time.Hour))
		require.NoError(t, b.rdb.HSet(ctx, b.taskKey("s", key), "state", "active").Err()) // moved ahead and taken
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
	})

	// Deleted and created again within the lookahead, a schedule plans afresh
	// the time its former self had enqueued a run for (that run is removed on
	// re-creation): one run, one task, in the new schedule's history and kept
	// with it, not left to the delete's expiry.
	t.Run("ARecreatedSchedulePlansAgainATimeItsFormerSelfEnqueued", func(t *testing.T) {
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
		keys := queuetest.Keys(t, b.rdb, "chronos:*:run:"+runs[0].IdempotencyKey)
		require.Len(t, keys, 1)
		require.Equal(t, time.Duration(-1), b.rdb.TTL(ctx, keys[0]).Val(), "the run record expires with the deleted schedule's")
		require.Equal(t, 1, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
	})
}

// TestTick checks how one tick of a shard goes on or stops: between
// pages when cancelled, past a schedule it cannot read.
func TestTick(t *testing.T) {
	t.Parallel()

	// A tick whose context ends (Stop, a shard given away) finishes the page
	// it is on and stops; the next tick carries on, each run once.
	t.Run("StopsBetweenPagesWhenCancelled", func(t *testing.T) {
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
	})

	// A schedule whose state in Redis is corrupt is retired with an error,
	// not retried forever: the other schedules of its shard keep firing, and
	// pausing and resuming it schedules it again.
	t.Run("CorruptScheduleIsRetiredAndTheShardGoesOn", func(t *testing.T) {
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
	})
}
