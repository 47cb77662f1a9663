package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestHistory checks that a schedule's run history stays bounded by
// RunHistory and cheap to trim, yet keeps every run whose task still waits.
func TestHistory(t *testing.T) {
	t.Parallel()

	// The history keeps RUN_HISTORY runs; a run still ENQUEUED (its task waits
	// in asynq) keeps its record however old, so its launcher can record it.
	// A STARTED one does not: an executor that never reports would keep it for
	// ever.
	t.Run("IsBoundedButKeepsRunsStillQueued", func(t *testing.T) {
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
		keys, err := queuetest.FindKeys(context.Background(), b.rdb, "chronos:*:run:*")
		require.NoError(t, err)
		require.Len(t, keys, 6, "trimmed run records are deleted")

		// Once it ends, the next commit trims it.
		b.report(t, rec.ID, pending, model.RunSuccess)
		b.runUntil(t, start.Add(21*time.Minute), time.Minute)
		_, _, err = b.store.GetRun(context.Background(), pending)
		require.ErrorIs(t, err, queue.ErrNotFound)
	})

	// The history stays bounded when a schedule plans more runs per commit
	// than a commit used to trim (a per-second schedule with a 30 s tick),
	// and when runs left ENQUEUED whose tasks are gone (deleted from asynqmon)
	// sit at its oldest end: no launcher will record them.
	t.Run("StaysBoundedWithManyRunsPerTickAndRunsWithoutTasks", func(t *testing.T) {
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
					n, err := asynq.NewInspectorFromRedisClient(b.rdb).DeleteAllScheduledTasks(b.store.RunQueue(queue.ShardOf("ps", b.store.Config().Shards)).Name())
					require.NoError(t, err)
					require.GreaterOrEqual(t, n, 50)
				}
				for b.clock.Now().Before(start.Add(10 * time.Minute)) {
					b.clock.Advance(tc.tick)
					b.tickAll(t)
					runs, err := b.store.ListRuns(ctx, "ps", 100000)
					require.NoError(t, err)
					for _, r := range runs { // launchers keep up with every run that has a task
						live := b.rdb.Exists(ctx, b.taskKey("ps", r.IdempotencyKey)).Val() == 1
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
				keys, err := queuetest.FindKeys(ctx, b.rdb, "chronos:*:run:*")
				require.NoError(t, err)
				require.LessOrEqual(t, len(keys), bound, "run records kept")
			})
		}
	})

	// With every launcher down, the oldest runs of a per-second schedule are
	// all ENQUEUED with their tasks waiting: kept. A commit looks at a
	// bounded number of them (trimScan), not at every run it could trim.
	t.Run("TrimmingLooksAtFewRunsWhileLaunchersAreDown", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setup(t, nil, &queue.Config{RunHistory: 20})
		const n = 50
		for i := range n {
			b.upsert(t, model.ScheduleRecord{ID: fmt.Sprintf("s%03d", i), CronExpr: "* * * * * *"})
		}
		b.runUntil(t, start.Add(2*time.Minute), time.Second)
		// Summed over every master: on a cluster, INFO answers from any
		// one node.
		hgets := func() int64 {
			var sum atomic.Int64
			add := func(ctx context.Context, rdb redis.UniversalClient) error {
				stats, err := rdb.Info(ctx, "commandstats").Result()
				if err != nil {
					return err
				}
				_, rest, found := strings.Cut(stats, "cmdstat_hget:calls=")
				if !found {
					return nil // this master ran no HGET
				}
				calls, _, _ := strings.Cut(rest, ",")
				v, err := strconv.ParseInt(calls, 10, 64)
				sum.Add(v)
				return err
			}
			var err error
			if c, ok := b.rdb.(*redis.ClusterClient); ok {
				err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return add(ctx, m) })
			} else {
				err = add(ctx, b.rdb)
			}
			require.NoError(t, err)
			return sum.Load()
		}
		before := hgets()
		b.runUntil(t, start.Add(2*time.Minute+10*time.Second), time.Second)
		perCommit := float64(hgets()-before) / (n * 10)
		// 2 per run looked at (status, task state), trimScan runs, plus the
		// commit's own few.
		require.LessOrEqual(t, perCommit, 45.0, "HGETs per schedule per commit")
	})

	// Catch-up after downtime plans more runs per tick than the history
	// keeps: the next tick must not delete the records of runs whose tasks
	// still wait in asynq.
	t.Run("CatchupDoesNotTrimRunsStillQueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		ctx := context.Background()
		b.upsert(t, model.ScheduleRecord{ID: "s", CronExpr: "* * * * * *"})
		b.clock.Set(start.Add(10 * time.Minute)) // the scheduler was down
		b.tickAll(t)
		b.clock.Advance(time.Second)
		b.tickAll(t)
		first := model.IdempotencyKey("s", start.Add(time.Second))
		require.Equal(t, "pending", b.rdb.HGet(ctx, b.taskKey("s", first), "state").Val())
		r, _, err := b.store.GetRun(ctx, first)
		require.NoError(t, err, "the record of a run still queued was trimmed")
		require.Equal(t, model.RunEnqueued, r.Status)
	})
}
