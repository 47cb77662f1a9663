package launcher

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
)

// endsHeld is a go-redis hook that holds every pipeline of script calls
// that is not a take (the runs' ends) until release is closed.
type endsHeld struct {
	release chan struct{}
}

func (endsHeld) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (endsHeld) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h endsHeld) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		end := false
		for _, c := range cmds {
			args := c.Args()
			if name, _ := args[0].(string); name != "evalsha" && name != "eval" {
				continue
			}
			end = true
			for _, a := range args {
				if s, ok := a.(string); ok && strings.HasSuffix(s, ":pending") {
					end = false // a take
				}
			}
		}
		if end {
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// While the statuses and task ends of its runs wait on Redis, a lane
// goes on calling the executor for the tasks it holds: a finishing place
// per hold, so the runs waiting for their writes keep no slot until as
// many wait as it holds. With a place per slot, the runs of one take
// waiting for one write filled them, and the next runs kept their slots.
func TestLaneRunsWaitingForTheirWritesKeepNoSlot(t *testing.T) {
	t.Parallel()
	const n, limit = 60, 4
	ctx := context.Background()
	store := storeWithDueRuns(t, n)
	hold := endsHeld{release: make(chan struct{})}
	store.Redis().AddHook(hold)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold.release)
		}
	}
	var calls atomic.Int32
	ex := executorFunc(func(context.Context, Request) (Result, error) {
		calls.Add(1)
		return Result{Status: model.RunSuccess}, nil
	})
	l, err := New(store, &Config{Executor: ex, Concurrency: limit, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	t.Cleanup(release) // before the stop: cleanups run last first

	// Every hold's run waiting for its write, and a slot's more, each
	// past its executor call.
	want := int32((1+takeAhead)*limit + limit)
	require.Eventually(t, func() bool { return calls.Load() == want }, 10*time.Second, 10*time.Millisecond,
		"executor calls while the writes wait")
	<-time.After(100 * time.Millisecond)
	require.Equal(t, want, calls.Load(), "no more calls while every finishing place waits")

	release()
	require.Eventually(t, func() bool { return calls.Load() == n }, 20*time.Second, 20*time.Millisecond)
}
