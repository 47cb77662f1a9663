package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestLaunch checks what a launcher does with a run it takes: calls the
// executor with the run's DAG and key, records the answer (bounded, never
// over what the executor recorded itself), and gives the run back to the
// queue when it stops mid-call.
func TestLaunch(t *testing.T) {
	t.Parallel()

	t.Run("LaunchesRunWithDAGAndKey", func(t *testing.T) {
		t.Parallel()
		ex := &recordingExecutor{res: Result{RunID: "r-1", Status: model.RunSuccess}}
		b := setup(t, ex, nil)
		b.manual(t, "key-1", true)
		run := b.waitStatus(t, "key-1", model.RunSuccess)
		require.Equal(t, "r-1", run.RunID)
		ex.mu.Lock()
		defer ex.mu.Unlock()
		require.Len(t, ex.reqs, 1)
		require.JSONEq(t, `{"nodes":["a"]}`, string(ex.reqs[0].DAG))
		require.Equal(t, Meta{Source: model.SourceManual, WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: b.clock.Now(), IdempotencyKey: "key-1"}, ex.reqs[0].Meta)
	})

	t.Run("MissingWorkflowFailsTheRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &recordingExecutor{}, nil)
		b.manual(t, "key-2", false)
		run := b.waitStatus(t, "key-2", model.RunFailed)
		require.Contains(t, run.Error, "workflow wf version 1 not found")
		require.Contains(t, run.Error, "PUT /workflows/wf/versions/1")
		requireCount(t, b.launcher.metrics.failedLaunch, 1.0)
	})

	// An executor that names no final status has started a run that goes on
	// elsewhere.
	t.Run("ResultWithoutStatusIsStarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &recordingExecutor{res: Result{RunID: "r-9"}}, nil)
		b.manual(t, "key-6", true)
		run := b.waitStatus(t, "key-6", model.RunStarted)
		require.Equal(t, "r-9", run.RunID)
		require.Equal(t, 1.0, testutil.ToFloat64(b.launcher.metrics.launched.WithLabelValues("STARTED")))
	})

	// What an executor answers is bounded like what the API accepts: error
	// text cut at model.MaxRunErrorLen bytes, a run id at model.MaxIDLen.
	t.Run("ExecutorAnswersAreBounded", func(t *testing.T) {
		t.Parallel()
		big := strings.Repeat("é", 256<<10)
		b := setup(t, &recordingExecutor{res: Result{RunID: big, Status: model.RunFailed, Error: big}}, nil)
		b.manual(t, "key-big", true)
		run := b.waitStatus(t, "key-big", model.RunFailed)
		require.Len(t, run.Error, model.MaxRunErrorLen)
		require.Len(t, run.RunID, model.MaxIDLen)
	})

	// A launcher stopped during an executor call longer than its shutdown
	// timeout gives the run back to the queue, even on its last attempt: the
	// next launcher starts it, rather than finding it FAILED.
	t.Run("ShutdownDuringAnExecutorCallRequeuesTheRun", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		inCall := make(chan struct{}, 1)
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case inCall <- struct{}{}:
			default:
			}
			_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
			select {
			case <-r.Context().Done(): // the launcher gave up
			case <-time.After(20 * time.Second):
			}
		}))
		t.Cleanup(slow.Close)
		b := setup(t, NewHTTPExecutor(slow.URL, 30*time.Second, 2), &queue.Config{TaskMaxRetry: queue.NoRetry})
		b.manual(t, "key-stop", true)
		select {
		case <-inCall:
		case <-time.After(20 * time.Second):
			t.Fatal("the executor was never called")
		}
		require.NoError(t, b.launcher.Stop(context.Background())) // SIGTERM; ShutdownTimeout is 1 s
		r, _, err := b.store.GetRun(ctx, "key-stop")
		require.NoError(t, err)
		require.Equal(t, model.RunEnqueued, r.Status, "error: %s", r.Error)

		ex := &recordingExecutor{res: Result{Status: model.RunSuccess}}
		next, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, next.Start(ctx))
		stopAtCleanup(t, next)
		b.waitStatus(t, "key-stop", model.RunSuccess)
	})

	// A run the executor has (STARTED, or ended) is never overwritten by its
	// launcher: not FAILED on the last attempt, not SKIPPED when a retry finds
	// its schedule paused; a retry does not call the executor again, and the
	// metrics count only what was recorded.
	t.Run("ALaunchedRunIsNeverOverwrittenByItsLauncher", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		t.Run("last attempt", func(t *testing.T) {
			t.Parallel()
			for _, st := range []model.RunStatus{model.RunStarted, model.RunSuccess} {
				b := setup(t, &recordingExecutor{}, &queue.Config{TaskMaxRetry: queue.NoRetry})
				require.NoError(t, b.launcher.Stop(context.Background()))
				ex := &reportsThenErrs{store: b.store, status: st}
				l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
				require.NoError(t, err)
				b.manual(t, "key", true)
				require.NoError(t, l.Start(ctx))
				stopAtCleanup(t, l)
				require.Eventually(t, func() bool {
					info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, "key"), "key")
					return err == nil && info.State == asynq.TaskStateArchived
				}, 20*time.Second, 20*time.Millisecond)
				r, _, err := b.store.GetRun(ctx, "key")
				require.NoError(t, err)
				require.Equal(t, st, r.Status, "error: %s", r.Error)
				require.Zero(t, testutil.ToFloat64(l.metrics.failedLaunch))
			}
		})
		t.Run("retry after a pause", func(t *testing.T) {
			t.Parallel()
			b, sched := setupLaunchersDown(t, &recordingExecutor{})
			rec := &model.ScheduleRecord{ID: "s", CronExpr: "0 * * * *", WorkflowID: "wf", Version: "1",
				OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupFireImmediately}
			b.upsert(t, rec)
			b.clock.Advance(time.Hour)
			b.tick(t, sched)
			key := model.IdempotencyKey("s", b.clock.Now())
			ex := &reportsThenErrs{store: b.store, status: model.RunStarted, onFail: func() {
				_, err := b.store.SetPaused(context.Background(), "s", true)
				assert.NoError(t, err)
			}}
			l, err := New(b.store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
			require.NoError(t, err)
			require.NoError(t, l.Start(ctx))
			stopAtCleanup(t, l)
			require.Eventually(t, func() bool { // the retry comes after a 2 s backoff
				info, err := asynq.NewInspectorFromRedisClient(b.rdb).GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, key), key)
				return err == nil && info.State == asynq.TaskStateCompleted
			}, 20*time.Second, 20*time.Millisecond)
			r, _, err := b.store.GetRun(ctx, key)
			require.NoError(t, err)
			require.Equal(t, model.RunStarted, r.Status, "error: %s", r.Error)
			require.Equal(t, int32(1), ex.calls.Load())
			require.Equal(t, uint64(1), histogramCount(t, l.metrics.startDelay), "start delay observed once per run")
			_, err = b.store.UpdateRunStatus(ctx, key, queue.StatusUpdate{Status: model.RunSuccess})
			require.NoError(t, err, "the executor's own end is recorded")
		})
	})

	// The executor accepted a run on its only attempt (TASK_MAX_RETRY=0) and
	// the status write then failed for a moment: the write is retried, the
	// task not archived (and the run swept FAILED while the executor has it).
	t.Run("ALostStatusWriteAfterTheExecutorAcceptedIsRetried", func(t *testing.T) {
		t.Parallel()
		rdb := queuetest.StartRedis(t).Universal(t)
		ex := &breaksTheRecordOnce{rdb: rdb}
		clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{TaskMaxRetry: queue.NoRetry})
		require.NoError(t, err)
		b := &testBundle{rdb: rdb, store: store, clock: clock}
		b.manual(t, "lost-write", true)
		l, err := New(store, &Config{Executor: ex, ShutdownTimeout: time.Second}, nil, prometheus.NewRegistry())
		require.NoError(t, err)
		require.NoError(t, l.Start(context.Background()))
		stopAtCleanup(t, l)

		run := b.waitStatus(t, "lost-write", model.RunStarted)
		require.Equal(t, "wf-run", run.RunID)
		require.Equal(t, int32(1), ex.calls.Load())
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(queuetest.TaskQueue(rdb, queue.QueueNameDefault, "lost-write"), "lost-write")
		require.NoError(t, err)
		require.NotEqual(t, asynq.TaskStateArchived, info.State)
	})
}

// reportsThenErrs is an executor that records the run itself (as a
// workflow system does through POST /runs/:key/status) but whose answer
// to the launcher is lost: the launcher sees an error. onFail runs first.
type reportsThenErrs struct {
	store  *queue.Store
	status model.RunStatus
	onFail func()
	calls  atomic.Int32
}

func (e *reportsThenErrs) Execute(ctx context.Context, r Request) (Result, error) {
	e.calls.Add(1)
	if _, err := e.store.UpdateRunStatus(ctx, r.Meta.IdempotencyKey, queue.StatusUpdate{Status: e.status, RunID: "wf-run-1"}); err != nil {
		return Result{}, err
	}
	if e.onFail != nil {
		e.onFail()
	}
	return Result{}, errors.New("call executor: context deadline exceeded")
}

// breaksTheRecordOnce accepts runs, but the first time it also turns the
// run's record into a string for a moment, so the launcher's status
// write after the call fails (as when Redis is briefly unreachable).
type breaksTheRecordOnce struct {
	rdb   redis.UniversalClient
	calls atomic.Int32
}

func (e *breaksTheRecordOnce) Execute(ctx context.Context, r Request) (Result, error) {
	if e.calls.Add(1) > 1 {
		return Result{RunID: "wf-run"}, nil
	}
	keys, err := queuetest.FindKeys(ctx, e.rdb, "*run:"+r.Meta.IdempotencyKey)
	if err != nil || len(keys) != 1 {
		return Result{}, fmt.Errorf("run record of %s: %v %v", r.Meta.IdempotencyKey, keys, err)
	}
	fields, err := e.rdb.HGetAll(ctx, keys[0]).Result()
	if err != nil {
		return Result{}, err
	}
	e.rdb.Del(ctx, keys[0])
	e.rdb.Set(ctx, keys[0], "broken", 0)
	go func() {
		// Real time must pass: the record stays broken for a moment, as
		// through a short Redis outage, while the launcher writes the status.
		const brokenFor = 300 * time.Millisecond
		<-time.After(brokenFor)
		// In one transaction: a status write between the two would find
		// no record, and rightly give up.
		_, _ = e.rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
			p.Del(context.Background(), keys[0])
			p.HSet(context.Background(), keys[0], fields)
			return nil
		})
	}()
	return Result{RunID: "wf-run"}, nil
}
