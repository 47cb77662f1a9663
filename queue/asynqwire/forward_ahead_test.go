package asynqwire_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// ForwardAhead moves the tasks of the second that begins within its lead,
// no later one, each once, and stamps them pending since the call, not
// since their time: asynq's queue latency stays a time that has passed.
func TestForwardAheadMovesTheNextSecondEarlyAndStampsNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dev  bool // miniredis forwards by script alone (ForwardByScript)
	}{{"redis", false}, {"miniredis", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rdb redis.UniversalClient
			if tc.dev {
				rdb = (&queuetest.Redis{Addr: miniredis.RunT(t).Addr()}).Client(t)
			} else {
				rdb = queuetest.StartRedis(t).Universal(t)
			}
			now := time.Now().Add(time.Hour).Truncate(time.Second)
			store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(now), &queue.Config{Shards: 2})
			require.NoError(t, err)
			due := now.Add(time.Minute)
			enqueue := func(key string, at time.Time) {
				_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
					ScheduledFor: at, IdempotencyKey: key})
				require.NoError(t, err)
			}
			for i := range 700 { // more than a batch
				enqueue(fmt.Sprintf("k%d", i), due)
			}
			enqueue("next-second", due.Add(time.Second))

			at := due.Add(-400 * time.Millisecond)
			moved, err := store.Tasks().ForwardAhead(ctx, at, 300*time.Millisecond)
			require.NoError(t, err)
			require.Zero(t, moved, "the lead does not reach the second")

			moved, err = store.Tasks().ForwardAhead(ctx, at, 500*time.Millisecond)
			require.NoError(t, err)
			require.Equal(t, 700, moved)
			info := queuetest.RequireTask(t, rdb, queue.QueueNameDefault, "k0")
			require.Equal(t, asynq.TaskStatePending, info.State)
			since := rdb.HGet(ctx, queuetest.TaskKey(t, rdb, queue.QueueNameDefault, "k0"), "pending_since").Val()
			require.Equal(t, strconv.FormatInt(at.UnixNano(), 10), since, "pending since the call")
			require.Equal(t, asynq.TaskStateScheduled, queuetest.RequireTask(t, rdb, queue.QueueNameDefault, "next-second").State)

			moved, err = store.Tasks().ForwardAhead(ctx, at.Add(100*time.Millisecond), 500*time.Millisecond)
			require.NoError(t, err)
			require.Zero(t, moved, "each task moves once")
			moved, err = store.Tasks().Forward(ctx, due)
			require.NoError(t, err)
			require.Zero(t, moved, "nothing is left for the forward at the second")
		})
	}
}
