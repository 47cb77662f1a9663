package launcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// recoverBundle is a Redis with manual runs of workflow wf, an executor
// that counts its calls per run, and no launcher yet.
type recoverBundle struct {
	testBundle
	mu    sync.Mutex
	calls map[string]int
	// block, when not nil, holds each executor call until it is closed;
	// called receives each call's key.
	block  chan struct{}
	called chan string
}

func setupRecover(t *testing.T, qcfg *queue.Config) *recoverBundle {
	t.Helper()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, qcfg) // asynq's leases and retries go by host clocks
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{}`)))
	return &recoverBundle{testBundle: testBundle{rdb: rdb, store: store}, calls: map[string]int{}, called: make(chan string, 16)}
}

func (b *recoverBundle) Execute(ctx context.Context, r Request) (Result, error) {
	b.mu.Lock()
	b.calls[r.Meta.IdempotencyKey]++
	block := b.block
	b.mu.Unlock()
	b.called <- r.Meta.IdempotencyKey
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	return Result{Status: model.RunSuccess}, nil
}

func (b *recoverBundle) callsOf(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[key]
}

// start starts a launcher that recovers every 50 ms.
func (b *recoverBundle) start(t *testing.T, cfg Config) *Launcher {
	t.Helper()
	cfg.Executor, cfg.RecoverInterval, cfg.ShutdownTimeout = b, 50*time.Millisecond, time.Second
	l, err := New(b.store, &cfg, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)
	return l
}

// manualNow books a manual run of wf due now.
func (b *recoverBundle) manualNow(t *testing.T, key string) {
	t.Helper()
	_, started, err := b.store.StartManualRun(context.Background(), queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
		ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, started)
}

// takeAndDie takes the pending run tasks as a launcher does, and leaves
// them as a launcher that died holding them: leased until died plus
// asynq's lease, never finished.
func (b *recoverBundle) takeAndDie(t *testing.T, n int, died time.Time) []*asynqwire.Task {
	t.Helper()
	ctx := context.Background()
	tasks, err := b.store.Tasks().Take(ctx, n)
	require.NoError(t, err)
	require.Len(t, tasks, n)
	for _, tk := range tasks {
		lease := asynqwire.Keys{Queue: tk.Queue()}.Lease()
		require.NoError(t, b.rdb.ZAddXX(ctx, lease, redis.Z{Member: tk.ID, Score: float64(died.Add(asynqwire.LeaseDuration).Unix())}).Err())
	}
	return tasks
}

// A launcher died holding two run tasks: one before it called the
// executor, one after the executor accepted the run and its STARTED was
// recorded. Another launcher, with one slot (LAUNCHER_CONCURRENCY=1: the
// lane alone), recovers both once their leases have expired, as asynq's
// recoverer would: each is retried, its attempt counted with asynq's
// lease error. The first run is carried out then, once; the second is
// not started again. Their completed tasks are deleted when their
// retention ends.
func TestADeadLaunchersTasksAreRecoveredAndRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRecover(t, nil)
	b.manualNow(t, "untried")
	b.manualNow(t, "launched")
	tasks := b.takeAndDie(t, 2, time.Now().Add(-2*time.Minute))
	for _, tk := range tasks {
		if tk.ID != "launched" {
			continue
		}
		p, err := queue.DecodeTaskPayload(tk.Payload)
		require.NoError(t, err)
		require.NoError(t, b.store.ReportTaskStatus(ctx, p, queue.StatusUpdate{Status: model.RunStarted, RunID: "wf-run-1", From: model.RunEnqueued}))
	}

	b.start(t, Config{Concurrency: 1})
	b.waitStatus(t, "untried", model.RunSuccess)
	for _, key := range []string{"untried", "launched"} {
		require.Eventually(t, func() bool {
			return queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, key).State == asynq.TaskStateCompleted
		}, 10*time.Second, 10*time.Millisecond, key)
		info := queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, key)
		require.Equal(t, 1, info.Retried, key)
		require.Equal(t, asynqwire.LeaseExpired, info.LastErr, key)
	}
	require.Equal(t, 1, b.callsOf("untried"))
	require.Zero(t, b.callsOf("launched"), "its executor call was made by the launcher that died")
	run, _, err := b.store.GetRun(ctx, "launched")
	require.NoError(t, err)
	require.Equal(t, model.RunStarted, run.Status)
	require.Equal(t, "wf-run-1", run.RunID)

	deleted, _, err := b.store.Tasks().DeleteExpiredCompleted(ctx, time.Now().Add(queue.TaskRetentionDefault+time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, deleted)
	require.Zero(t, queuetest.CountTasks(t, b.rdb, queue.QueueNameDefault))
}

// A launcher that extended its lease in time keeps its task: another
// launcher's recovery leaves it, and the run ends once, with no attempt
// counted.
func TestAnExtendedLeaseIsNotRecovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRecover(t, nil)
	b.block = make(chan struct{})
	b.manualNow(t, "held")
	holder := b.start(t, Config{})
	require.Equal(t, "held", <-b.called)

	// Its lease ran out (a late extension), then the lane extended it.
	holder.lane.mu.Lock()
	var held []*asynqwire.Task
	for tk := range holder.lane.held {
		held = append(held, tk)
	}
	holder.lane.mu.Unlock()
	require.Len(t, held, 1)
	lease := asynqwire.Keys{Queue: held[0].Queue()}.Lease()
	require.NoError(t, b.rdb.ZAddXX(ctx, lease, redis.Z{Member: "held", Score: float64(time.Now().Add(-time.Minute).Unix())}).Err())
	require.NoError(t, b.store.Tasks().ExtendLeases(ctx, held))

	other, err := New(b.store, &Config{Executor: b}, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	other.recoverExpired(ctx)
	require.Equal(t, asynq.TaskStateActive, queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, "held").State)

	close(b.block)
	b.waitStatus(t, "held", model.RunSuccess)
	require.Eventually(t, func() bool {
		return queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, "held").State == asynq.TaskStateCompleted
	}, 10*time.Second, 10*time.Millisecond)
	info := queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, "held")
	require.Zero(t, info.Retried)
	require.Empty(t, info.LastErr)
	require.Equal(t, 1, b.callsOf("held"))
}

// A launcher died holding the last attempt of a run (TASK_MAX_RETRY 0):
// recovery archives its task, as asynq's recoverer does, and the
// archived sweep then fails the run, which nothing will retry.
func TestARecoveredTaskWithItsRetriesSpentFailsItsRun(t *testing.T) {
	t.Parallel()
	b := setupRecover(t, &queue.Config{TaskMaxRetry: queue.NoRetry})
	b.manualNow(t, "last")
	b.takeAndDie(t, 1, time.Now().Add(-2*time.Minute))

	b.start(t, Config{ArchiveSweepInterval: 50 * time.Millisecond})
	run := b.waitStatus(t, "last", model.RunFailed)
	require.Equal(t, model.ReasonLaunchAbandoned, run.Reason)
	require.Contains(t, run.Error, "launch abandoned: asynq archived its task")
	require.Contains(t, run.Error, asynqwire.LeaseExpired)
	info := queuetest.RequireTask(t, b.rdb, queue.QueueNameDefault, "last")
	require.Equal(t, asynq.TaskStateArchived, info.State)
	require.Zero(t, b.callsOf("last"))
}

// asynqmon's Servers tab lists each running launcher, as it listed the
// asynq server each ran before: its concurrency, its queues and the runs
// it holds; a launcher that stops leaves the list.
func TestALauncherIsListedInAsynqmon(t *testing.T) {
	t.Parallel()
	b := setupRecover(t, nil)
	b.block = make(chan struct{})
	b.manualNow(t, "shown")
	l := b.start(t, Config{Concurrency: 3})
	require.Equal(t, "shown", <-b.called)
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	taskQueue := queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, "shown")[0]
	require.Eventually(t, func() bool {
		srvs, err := insp.Servers()
		if err != nil || len(srvs) != 1 {
			return false
		}
		s := srvs[0]
		return s.Concurrency == 3 && s.Status == "active" && len(s.Queues) == len(b.store.Tasks().Names()) &&
			len(s.ActiveWorkers) == 1 && s.ActiveWorkers[0].TaskID == "shown" && s.ActiveWorkers[0].Queue == taskQueue
	}, 10*time.Second, 20*time.Millisecond, "the launcher and its run listed")

	close(b.block)
	require.NoError(t, l.Stop(context.Background()))
	srvs, err := insp.Servers()
	require.NoError(t, err)
	require.Empty(t, srvs, "a stopped launcher leaves the list")
}
