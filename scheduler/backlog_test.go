package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/launcher"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// backlogExecutor records each executor call: the run's time and when the
// call came, and ends the run at once.
type backlogExecutor struct {
	mu    sync.Mutex
	calls []backlogCall
}

type backlogCall struct {
	key    string
	runAt  time.Time
	called time.Time
}

func (e *backlogExecutor) Execute(_ context.Context, r launcher.Request) (launcher.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, backlogCall{key: r.Meta.IdempotencyKey, runAt: r.Meta.ScheduledFor, called: time.Now()})
	return launcher.Result{Status: model.RunSuccess}, nil
}

func (e *backlogExecutor) snapshot() []backlogCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]backlogCall(nil), e.calls...)
}

// Issue 26, finding 5: a per-second "queue" schedule under catch-up
// fire_immediately keeps every run of a stall, and each waits for the run
// before it. The run held behind one that ends must be planned when that
// run ends, not at the next tick: released one per tick, the backlog
// never shrinks, and the schedule stays as far behind as the stall put
// it, forever. Here the stall is every scheduler stopped for a few
// seconds; after it, the lag must come back to about a tick within the
// stall's runs and a few more, every run running once, in order.
func TestAQueueBacklogUnderFireImmediatelyCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scheduler and a launcher for about 15 seconds of real time")
	}
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	clock := queue.NewRedisClock(rdb)
	require.NoError(t, clock.Sync(ctx))
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 4})
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	ex := &backlogExecutor{}
	l, err := launcher.New(store, &launcher.Config{Executor: ex, ShutdownTimeout: time.Second}, nil, nil)
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	t.Cleanup(func() { require.NoError(t, l.Stop(context.Background())) })

	const tick = time.Second
	startScheduler := func() *scheduler.Scheduler {
		s, err := scheduler.New(store, &scheduler.Config{TickInterval: tick}, nil, nil)
		require.NoError(t, err)
		require.NoError(t, s.Start(ctx))
		t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
		return s
	}
	rec := model.ScheduleRecord{ID: "q1s", CronExpr: "* * * * * *", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u",
		OverlapPolicy: model.OverlapQueue, CatchupPolicy: model.CatchupFireImmediately}
	require.NoError(t, rec.Validate())
	_, err = store.UpsertSchedule(ctx, &rec)
	require.NoError(t, err)

	s := startScheduler()
	waitCalls := func(n int, timeout time.Duration, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return len(ex.snapshot()) >= n }, timeout, 10*time.Millisecond, what)
	}
	waitCalls(2, 10*time.Second, "the schedule never ran twice before the stall")
	require.NoError(t, s.Stop(ctx))
	// Real time must pass: the stall is the seconds no scheduler runs, and
	// the backlog it leaves is the runs due meanwhile.
	const stall = 5 * time.Second
	<-time.After(stall)
	before := len(ex.snapshot())
	startScheduler()

	// The stall's runs, then a few on time. Released one per tick, each
	// of these would run about the stall late.
	const bound = int(stall/time.Second) + 3 // runs after the stall until the lag is back
	const onTime = 4                         // runs then checked on time
	waitCalls(before+bound+onTime, 30*time.Second, "the schedule stopped running after the stall")

	calls := ex.snapshot()
	seen := map[string]bool{}
	for i, c := range calls {
		require.False(t, seen[c.key], "run %s executed twice", c.runAt.Format(time.TimeOnly))
		seen[c.key] = true
		require.Equal(t, model.IdempotencyKey(rec.ID, c.runAt), c.key)
		if i > 0 {
			require.Equal(t, calls[i-1].runAt.Add(time.Second), c.runAt,
				"runs out of order or one lost: %s after %s", c.runAt.Format(time.TimeOnly), calls[i-1].runAt.Format(time.TimeOnly))
		}
	}
	var lags []string
	for _, c := range calls[before:] {
		lags = append(lags, fmt.Sprintf("%s %.2fs", c.runAt.Format(time.TimeOnly), c.called.Sub(c.runAt).Seconds()))
	}
	t.Logf("runs after the stall, each with its lag: %s", strings.Join(lags, ", "))
	// About a tick: a run is planned within tickPhase of its second, and
	// a launcher polls every 50 ms; the rest is a loaded machine's slack.
	// Released one per tick, these runs would all be about the stall late.
	for _, c := range calls[before+bound:] {
		require.LessOrEqual(t, c.called.Sub(c.runAt), 2*tick,
			"run %s started %s late, %d runs after the stall", c.runAt.Format(time.TimeOnly), c.called.Sub(c.runAt), bound)
	}
	// The launcher records a run's status after its executor returns: the
	// last runs called may not be recorded SUCCESS yet.
	last := calls[len(calls)-1].runAt
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		runs, err := store.ListRuns(ctx, rec.ID, 100)
		require.NoError(c, err)
		for _, r := range runs {
			if !r.RunAt.After(last) {
				require.True(c, seen[r.IdempotencyKey], "run %s was planned and never executed", r.RunAt.Format(time.TimeOnly))
				require.Equal(c, model.RunSuccess, r.Status, "run %s", r.RunAt.Format(time.TimeOnly))
			}
		}
	}, 10*time.Second, 20*time.Millisecond)
}
