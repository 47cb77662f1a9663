package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// RedisClock holds still after a correction that would move it back (a
// Redis failover to a host whose clock is behind, or this host's clock
// stepped back). Shard loops must keep ticking once per TICK_MS meanwhile,
// not spin against Redis because the time to the next tick boundary, read
// on a clock that does not move, never shrinks.
func TestShardLoopsDoNotSpinWhileTheClockHoldsStill(t *testing.T) {
	t.Parallel()
	// The clock's Redis TIME comes from miniredis, whose time the test sets.
	mr := miniredis.RunT(t)
	tr := queuetest.StartRedis(t)
	trc := tr.Universal(t)
	mrc := (&queuetest.Redis{Addr: mr.Addr()}).Client(t)
	clock := queue.NewRedisClock(mrc)
	mr.SetTime(time.Now()) // miniredis's TIME stands still at what is set
	require.NoError(t, clock.Sync(context.Background()))
	// The last time read is 990 ms into a second...
	require.Eventually(t, func() bool { return clock.Now().UnixMilli()%1000 >= 985 },
		3*time.Second, time.Millisecond, "the clock never read 985 ms or more into a second")
	// ...when Redis TIME steps back 5 s: the clock holds still for 5 s.
	mr.SetTime(time.Now().Add(-5 * time.Second))
	require.NoError(t, clock.Sync(context.Background()))

	store, err := queue.NewStore(context.Background(), trc, clock, &queue.Config{Shards: 4})
	require.NoError(t, err)
	// The commands are counted as the client sends them: on a cluster,
	// INFO answers from any node, and two answers from two nodes of a set
	// other tests used before differ by thousands.
	var sent commandCounter
	trc.AddHook(&sent)
	s, err := New(store, &Config{TickInterval: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	// Real time must pass: the test counts the Redis commands the loops
	// send over a stretch of wall time while the clock holds still.
	const watched = 2 * time.Second
	<-time.After(watched)
	require.NoError(t, s.Stop(context.Background()))
	// 4 shards ticking once a second for 2 s, a few Redis commands a tick,
	// plus lease and heartbeat work: well under 200.
	n := sent.n.Load()
	t.Logf("%d Redis commands sent in %s", n, watched)
	require.Positive(t, n, "the loops sent no command at all: the count is not counting")
	require.Less(t, n, int64(200), "Redis commands in 2 s with 4 shards and TICK_MS=1000 while the clock holds still")
}

// commandCounter is a go-redis hook that counts the commands a client
// sends, one by one and in pipelines.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Once the clock moves again after holding still, the loop ticks on every
// boundary: had it moved its boundary on at each tick while the clock held
// (waits of 1, 2, 3… ticks), it would sleep long past the boundaries that
// come, and runs due then would be found late, judged missed.
func TestTicksResumeOnEveryBoundaryAfterTheClockHeldStill(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	clock := queue.NewRedisClock((&queuetest.Redis{Addr: mr.Addr()}).Client(t))
	mr.SetTime(time.Now())
	require.NoError(t, clock.Sync(context.Background()))
	clock.Now()
	const hold = 3 * time.Second
	mr.SetTime(time.Now().Add(-hold)) // Redis TIME steps back: the clock holds still 3 s
	require.NoError(t, clock.Sync(context.Background()))
	resumes := time.Now().Add(hold)

	const tick = 100 * time.Millisecond
	s := &Scheduler{clock: clock, cfg: Config{TickInterval: tick}}
	ctx, cancel := context.WithCancel(context.Background())
	var ticks []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.onTicks(ctx, func() {
			if time.Now().After(resumes) {
				ticks = append(ticks, clock.Now())
			}
		})
	}()
	// Real time must pass: the clock holds still until resumes, and the
	// ticks of the 2 s after it are what the test checks.
	<-time.After(time.Until(resumes.Add(2 * time.Second)))
	cancel()
	<-done
	require.Greater(t, len(ticks), 5)
	for i := 1; i < len(ticks); i++ {
		require.LessOrEqual(t, ticks[i].Sub(ticks[i-1]), 2*tick, "ticks %d and %d after the clock moved again", i-1, i)
	}
}
