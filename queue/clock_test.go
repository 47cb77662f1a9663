package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// slowRoundTrip is how long slowFirstTimes holds up a TIME command.
const slowRoundTrip = 400 * time.Millisecond

// slowFirstTimes holds up the first n TIME commands on their way to Redis,
// as a GC pause, a busy CPU or an uneven network path would.
type slowFirstTimes struct {
	n    int32
	seen atomic.Int32
}

func (h *slowFirstTimes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowFirstTimes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *slowFirstTimes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "time" && h.seen.Add(1) <= h.n {
			// Real time must pass: the latency itself is what the clock
			// must not mistake for Redis TIME having moved on.
			<-time.After(slowRoundTrip)
		}
		return next(ctx, cmd)
	}
}

// After a Sync whose round trips were all slow on the way out, the clock is
// late, never ahead of Redis TIME: a run due at T is never planned, and
// with "process now" started, before T. And a later Sync that corrects it
// never moves it backwards.
func TestRedisClockIsNeverAheadNorRunsBackwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	rdb.AddHook(&slowFirstTimes{n: 3})
	c := queue.NewRedisClock(rdb)
	require.NoError(t, c.Sync(ctx)) // three slow samples

	ours := c.Now()
	redisNow, err := rdb.Time(ctx).Result() // a fast one
	require.NoError(t, err)
	require.False(t, ours.After(redisNow), "clock ahead of Redis TIME by %s", ours.Sub(redisNow))

	before := c.Now()
	require.NoError(t, c.Sync(ctx)) // fast samples: the clock jumps forward
	after := c.Now()
	require.False(t, after.Before(before), "clock ran backwards by %s", before.Sub(after))
	asked := time.Now()
	redisNow, err = rdb.Time(ctx).Result()
	require.NoError(t, err)
	// Within a round trip: this one's, measured, as a loaded machine (the
	// suite on Sentinel and Cluster at once, under -race) stretches it.
	rtt := time.Since(asked)
	require.InDelta(t, 0, c.Now().Sub(redisNow).Seconds(), (rtt + 50*time.Millisecond).Seconds(), "corrected within a round trip (%s)", rtt)
}
