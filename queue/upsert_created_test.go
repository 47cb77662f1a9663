package queue_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestUpsertCreatedAnswerIsTheStoredSchedule upserts new schedules of
// every kind and option, and requires the answer, which UpsertSchedule
// builds from what it sent, to be what GetSchedule then reads from Redis;
// and the due score to be the next fire time less the act lead, which the
// caller now computes for the script.
func TestUpsertCreatedAnswerIsTheStoredSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 3, 29, 0, 30, 15, 123456789, time.UTC)
	rdb := queuetest.StartRedis(t).Universal(t) // with the key guard
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(now), &queue.Config{Lookahead: 2 * time.Second})
	require.NoError(t, err)
	at := func(t time.Time) *time.Time { return &t }
	for _, rec := range []model.ScheduleRecord{
		{ID: "plain", CronExpr: "*/5 * * * *", Timezone: "Europe/Berlin"},
		{ID: "window", CronExpr: "0 * * * *", Timezone: "UTC", StartAt: at(now.Add(-time.Hour + 123456)),
			EndAt: at(now.Add(24*time.Hour + 999)), JitterMs: 250, OverlapPolicy: model.OverlapAllow},
		{ID: "dst", CronExpr: "30 2 * * *", Timezone: "Europe/Berlin", PauseAfterFailures: 5,
			DSTPolicy: model.DSTPolicy{SpringForward: model.SpringForwardShift, FallBack: model.FallBackLast}},
		{ID: "posix", CronExpr: "0 9 * * 1-5", Dialect: model.Dialect("posix"), Timezone: "America/New_York"},
		{ID: "every", Kind: model.KindEvery, EverySeconds: 90, Timezone: "UTC"},
		{ID: "once", Kind: model.KindOnce, FireAt: at(now.Add(10*time.Minute + 4321)), DelaySeconds: 600, Timezone: "UTC"},
		{ID: "ended", CronExpr: "0 0 1 1 *", Timezone: "UTC", EndAt: at(now.Add(time.Hour))},
	} {
		rec.Target, rec.WorkflowID, rec.Version, rec.UserID = model.TargetWorkflow, "wf", "1", "u"
		if rec.Kind == "" {
			rec.Kind = model.KindCron
		}
		if rec.OverlapPolicy == "" {
			rec.OverlapPolicy = model.OverlapSkip
		}
		rec.CatchupPolicy = model.CatchupNone
		require.NoError(t, rec.Validate(), rec.ID)
		res, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(t, err, rec.ID)
		require.True(t, res.Created && res.Changed, rec.ID)
		got, err := store.GetSchedule(ctx, rec.ID)
		require.NoError(t, err, rec.ID)
		require.Equal(t, got, res.Schedule, "%s: the answer is the stored schedule", rec.ID)
		score, err := rdb.ZScore(ctx, queue.DueKey(queue.ShardOf(rec.ID, queue.ShardsDefault)), rec.ID).Result()
		require.NoError(t, err, rec.ID)
		if got.NextRunAt == nil {
			require.True(t, math.IsInf(score, 1), "%s: no next fire time, score %v", rec.ID, score)
			continue
		}
		require.Equal(t, float64(got.NextRunAt.Add(-store.ActLead(got)).UnixMilli()), score, rec.ID)
	}
}
