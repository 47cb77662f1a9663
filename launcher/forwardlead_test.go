package launcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Schedulers make runs runnable up to queue.ForwardLeadMax before their
// time (Config.ForwardLead): a launcher that takes one that early holds
// it until its time, rather than take it for one moved from the
// dashboard and start it at once.
func TestRunsForwardedAheadByTheLeadStartOnTime(t *testing.T) {
	t.Parallel()
	store := storeWithRunsAhead(t, queuetest.StartRedis(t).Universal(t), queue.RealClock{})
	// As a scheduler's forward loop does with the longest lead, more
	// often, so that runs come as early as the lead allows.
	forwardEvery(t, 50*time.Millisecond, func(ctx context.Context) {
		_, _ = store.Tasks().ForwardAhead(ctx, store.Clock().Now(), queue.ForwardLeadMax)
	})
	requireNoEarlyStarts(t, store, time.Now)
}

// forwardEvery calls forward at once and then every interval, until the
// test ends.
func forwardEvery(t *testing.T, interval time.Duration, forward func(context.Context)) {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			forward(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
}

// A run's wait for its time in its slot is not call time: after a burst
// forwarded ahead, the lane still takes ahead for the quick calls that
// follow (holdLimit).
func TestWaitingForTheFireTimeIsNotCallTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := queue.NewStore(ctx, queuetest.StartRedis(t).Universal(t), queue.RealClock{}, &queue.Config{Lookahead: time.Minute})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	const n = 8
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	for i := range n {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: at, IdempotencyKey: fmt.Sprintf("k%d", i)})
		require.NoError(t, err)
	}
	// Moved the longest lead ahead of their second, after it came near.
	<-time.After(time.Until(at.Add(-queue.ForwardLeadMax)))
	moved, err := store.Tasks().ForwardAhead(ctx, store.Clock().Now(), queue.ForwardLeadMax)
	require.NoError(t, err)
	require.Equal(t, n, moved)

	ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
	l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)
	b := &testBundle{store: store}
	for i := range n {
		b.waitStatus(t, fmt.Sprintf("k%d", i), model.RunSuccess)
	}
	// Counted, each run's second-long wait would make the average over
	// half a second; its calls take milliseconds.
	require.Less(t, time.Duration(l.lane.callTime.Load()), 100*time.Millisecond,
		"the runs waited about a second each for their time; their calls were quick")
}
