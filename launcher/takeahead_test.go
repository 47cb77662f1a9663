package launcher

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// While its executor calls fill its Concurrency, a lane holds takeAhead
// Concurrencies more tasks taken, and no more: they wait, leased, for a
// slot, and the executor never gets more than Concurrency calls. When
// the calls end, every run is carried out once.
func TestLaneTakesAheadOfItsSlots(t *testing.T) {
	t.Parallel()
	const n, limit = 40, 4
	ctx := context.Background()
	store := storeWithDueRuns(t, n)
	var inCall, most atomic.Int32
	release := make(chan struct{})
	calls := map[string]*atomic.Int32{}
	for i := range n {
		calls[fmt.Sprintf("k%03d", i)] = &atomic.Int32{}
	}
	ex := executorFunc(func(ctx context.Context, r Request) (Result, error) {
		c := inCall.Add(1)
		defer inCall.Add(-1)
		for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
		}
		calls[r.Meta.IdempotencyKey].Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Result{Status: model.RunSuccess}, nil
	})
	l, err := New(store, &Config{Executor: ex, Concurrency: limit, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)

	insp := asynq.NewInspectorFromRedisClient(store.Redis())
	count := func() (active, completed int) {
		for _, q := range store.Tasks().Names() {
			if qi, err := insp.GetQueueInfo(q); err == nil {
				active, completed = active+qi.Active, completed+qi.Completed
			}
		}
		return active, completed
	}
	held := (1 + takeAhead) * limit
	require.Eventually(t, func() bool {
		active, _ := count()
		return inCall.Load() == limit && active == held
	}, 10*time.Second, 10*time.Millisecond, "the slots full and as many tasks again taken ahead")
	// Nothing frees a hold: a moment later the lane has taken no more.
	<-time.After(100 * time.Millisecond)
	active, _ := count()
	require.Equal(t, held, active)
	require.Equal(t, int32(limit), inCall.Load())

	close(release)
	require.Eventually(t, func() bool {
		_, completed := count()
		return completed == n
	}, 20*time.Second, 20*time.Millisecond)
	require.LessOrEqual(t, most.Load(), int32(limit))
	for key, c := range calls {
		require.Equal(t, int32(1), c.Load(), "%s called %d times", key, c.Load())
	}
}

// With executor calls longer than takeAheadMaxCall, a lane takes no more
// tasks than its slots: one taken ahead would wait a whole call, leased
// here while another launcher may have a free slot.
func TestLaneTakesNoneAheadOfLongCalls(t *testing.T) {
	t.Parallel()
	const n, limit = 80, 4
	ctx := context.Background()
	store := storeWithDueRuns(t, n)
	var done atomic.Int32
	ex := executorFunc(func(ctx context.Context, r Request) (Result, error) {
		defer done.Add(1)
		<-time.After(4 * takeAheadMaxCall)
		return Result{Status: model.RunSuccess}, nil
	})
	l, err := New(store, &Config{Executor: ex, Concurrency: limit, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	stopAtCleanup(t, l)

	// The first calls, before their time is known, may have been taken
	// ahead, takeAhead Concurrencies of them, which take as many calls to
	// start; once the average passes takeAheadMaxCall none are.
	require.Eventually(t, func() bool { return time.Duration(l.lane.callTime.Load()) > takeAheadMaxCall },
		10*time.Second, time.Millisecond)
	for range (takeAhead + 2) * 4 {
		<-time.After(takeAheadMaxCall)
	}
	most := 0
	for done.Load() < n-limit {
		most = max(most, len(l.lane.holds))
		<-time.After(time.Millisecond)
	}
	require.LessOrEqual(t, most, limit)
	require.Positive(t, most, "the lane was sampled while it held tasks")
}

// storeWithDueRuns is a store on a fresh Redis with n manual runs due,
// keys k000 on.
func storeWithDueRuns(t *testing.T, n int) *queue.Store {
	t.Helper()
	ctx := context.Background()
	store, err := queue.NewStore(ctx, queuetest.StartRedis(t).Universal(t), queue.RealClock{}, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	for i := range n {
		_, _, err := store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: fmt.Sprintf("k%03d", i)})
		require.NoError(t, err)
	}
	return store
}
