package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// A status report that ends a "queue" schedule's run in flight while the
// next run waits behind it, already due, tells the shard's schedulers at
// once (WatchReleased), so a held backlog drains as fast as its runs end.
// A report that leaves nothing due at once says nothing. On Redis 7, whose
// scripts declare flags, and on miniredis, which chronos dev embeds.
func TestAReleaseThatMakesAScheduleDueIsPublished(t *testing.T) {
	t.Parallel()
	for _, server := range []string{"redis", "miniredis"} {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var rdb redis.UniversalClient
			if server == "redis" {
				rdb = queuetest.StartRedis(t).Universal(t)
			} else {
				rdb = (&queuetest.Redis{Addr: miniredis.RunT(t).Addr()}).Client(t)
			}
			clock := queue.NewSimClock(time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC))
			store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 4})
			require.NoError(t, err)
			sched, err := scheduler.New(store, nil, nil, nil)
			require.NoError(t, err)
			tick := func(advance time.Duration) {
				clock.Advance(advance)
				for sh := range 4 {
					require.NoError(t, sched.TickShard(ctx, sh))
				}
			}
			rec := &model.ScheduleRecord{ID: "q", CronExpr: "* * * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
				WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupFireImmediately}
			require.NoError(t, rec.Validate())
			_, err = store.UpsertSchedule(ctx, rec)
			require.NoError(t, err)
			shard := queue.ShardOf(rec.ID, 4)
			channel := fmt.Sprintf("chronos:{s%02d}:released", shard)

			type released struct {
				shard int
				id    string
			}
			got := make(chan released, 10)
			watchCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				store.WatchReleased(watchCtx, func(sh int, id string) { got <- released{sh, id} })
			}()
			t.Cleanup(func() { stop(); <-done })
			// Subscribed once a message published reaches a subscriber.
			require.Eventually(t, func() bool { return rdb.Publish(ctx, channel, "ready").Val() == 1 },
				5*time.Second, 10*time.Millisecond, "WatchReleased never subscribed")
			next := func() released {
				t.Helper()
				for {
					select {
					case r := <-got:
						if r.id != "ready" {
							return r
						}
					case <-time.After(5 * time.Second):
						t.Fatal("no release published")
					}
				}
			}
			report := func(at time.Time) {
				t.Helper()
				_, err := store.UpdateRunStatus(ctx, model.IdempotencyKey(rec.ID, at), queue.StatusUpdate{Status: model.RunSuccess})
				require.NoError(t, err)
			}

			t0 := clock.Now()
			tick(time.Second) // 00:01 in flight
			tick(time.Second) // 00:02 due behind it: held
			report(t0.Add(time.Second))
			require.Equal(t, released{shard, rec.ID}, next(), "00:01 ended with 00:02 due behind it")

			tick(time.Second) // 00:02 planned (released), 00:03 held behind it
			report(t0.Add(2 * time.Second))
			require.Equal(t, released{shard, rec.ID}, next(), "00:02 ended with 00:03 due behind it")
			tick(0) // 00:03 in flight, nothing held: 00:04 is not due
			report(t0.Add(3 * time.Second))
			rdb.Publish(ctx, channel, "after") // messages come in order
			require.Equal(t, released{shard, "after"}, next(), "a release with nothing due was published")
		})
	}
}
