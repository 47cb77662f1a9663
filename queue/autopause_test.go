package queue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// Runs that time out in flight (RUN_TIMEOUT, expire_inflight.lua) are
// FAILED runs too: the second in a row pauses a "skip" schedule with
// pause_after_failures 2, in the script that fails it, and the store
// logs it.
func TestAutoPauseOnRunTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs bytes.Buffer
	b := bfSetup(t, &queue.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := &model.ScheduleRecord{ID: "to", CronExpr: "0 * * * *", Timezone: "UTC", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone,
		PauseAfterFailures: 2}
	require.NoError(t, rec.Validate())
	_, err := b.store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	sched, err := scheduler.New(b.store, &scheduler.Config{RunTimeout: 10 * time.Minute}, nil, nil)
	require.NoError(t, err)
	shard := queue.ShardOf("to", b.store.Config().Shards)
	for h := 1; h <= 2; h++ {
		b.clock.Set(bfT0.Add(time.Duration(h) * time.Hour))
		require.NoError(t, sched.TickShard(ctx, shard))
		b.clock.Set(bfT0.Add(time.Duration(h)*time.Hour + 11*time.Minute))
		failed, err := b.store.ExpireInflight(ctx, shard, b.clock.Now(), 100, "RUN_TIMEOUT passed")
		require.NoError(t, err)
		require.Equal(t, []string{model.IdempotencyKey("to", bfT0.Add(time.Duration(h)*time.Hour))}, failed)
	}
	got, err := b.store.GetSchedule(ctx, "to")
	require.NoError(t, err)
	require.True(t, got.Paused)
	require.Equal(t, model.PausedFailures, got.PausedReason)
	require.Equal(t, 2, got.ConsecutiveFailures)
	require.Equal(t, "RUN_TIMEOUT passed", got.LastError)
	require.Equal(t, bfT0.Add(2*time.Hour+11*time.Minute), got.PausedAt.UTC())
	require.Equal(t, 1.0, testutil.ToFloat64(b.store.AutoPausedCollector()))
	require.Contains(t, logs.String(), "schedule paused after consecutive failed runs")
	require.Contains(t, logs.String(), "schedule_id=to")

	// Paused, it plans nothing; 03:00 and 04:00 pass.
	b.clock.Set(bfT0.Add(4*time.Hour + 30*time.Minute))
	require.NoError(t, sched.TickShard(ctx, shard))
	queuetest.RequireRuns(t, b.store, "to", model.RunFailed, hours(bfT0.Add(time.Hour), 2)...)
}

// A resume whose replay was recorded but not enqueued (the process died
// between the two) is finished by the next resume with catchup replay,
// though the schedule runs already; its runs are created once.
func TestReplayPendingIsFinishedByTheNextResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := bfSetup(t, nil)
	b.hourly(t, "rp")
	_, _, err := b.store.ChangePause(ctx, "rp", queue.PauseChange{Paused: true, Note: "maintenance"})
	require.NoError(t, err)
	got, err := b.store.GetSchedule(ctx, "rp")
	require.NoError(t, err)
	require.Equal(t, "maintenance", got.PausedNote)
	b.clock.Set(bfT0.Add(3*time.Hour + 30*time.Minute))
	// The process dies after the resume: every script after pause.lua's
	// fails, so its replay is recorded and not enqueued.
	hooked := b.r.Universal(t)
	dying, err := queue.NewStore(ctx, hooked, b.clock, nil)
	require.NoError(t, err)
	hooked.AddHook(&dieAfterScripts{left: 1})
	_, _, err = dying.ChangePause(ctx, "rp", queue.PauseChange{Replay: &queue.Backfill{MaxRuns: 100, Rate: 10}})
	require.ErrorContains(t, err, "process died")
	got, err = b.store.GetSchedule(ctx, "rp")
	require.NoError(t, err)
	require.False(t, got.Paused, "resumed")
	queuetest.RequireRuns(t, b.store, "rp", "")

	_, res, err := b.store.ChangePause(ctx, "rp", queue.PauseChange{Replay: &queue.Backfill{MaxRuns: 100, Rate: 10}})
	require.NoError(t, err)
	require.Equal(t, 3, res.Created) // 11:00, 12:00, 13:00
	queuetest.RequireRuns(t, b.store, "rp", model.RunEnqueued, hours(bfT0.Add(time.Hour), 3)...)
	_, res, err = b.store.ChangePause(ctx, "rp", queue.PauseChange{Replay: &queue.Backfill{MaxRuns: 100, Rate: 10}})
	require.NoError(t, err)
	require.Zero(t, res.Created, "the replay is done and forgotten")
	require.Equal(t, 3, queuetest.CountTasks(t, b.r.Universal(t), queue.QueueNameDefault))
}

// dieAfterScripts lets left scripts through, then fails every later one,
// as if the process died there.
type dieAfterScripts struct{ left int }

func (h *dieAfterScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *dieAfterScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *dieAfterScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			if h.left == 0 {
				cmd.SetErr(errors.New("process died"))
				return cmd.Err()
			}
			h.left--
		}
		return next(ctx, cmd)
	}
}
