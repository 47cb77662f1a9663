package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/scheduler"
)

// A schedule's life in three steps: the API upserts it, a scheduler's tick
// finds it due and commits its run (record and asynq task at once), and a
// launcher would then take the task. The clock is simulated, so the tick
// happens at 09:00 in Berlin without waiting for it.
func Example() {
	ctx := context.Background()
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	clock := queue.NewSimClock(time.Date(2026, 1, 5, 7, 30, 0, 0, time.UTC))
	store, err := queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: 1})
	if err != nil {
		panic(err)
	}

	// 1. Upsert: what POST /schedules/upsert does after decoding.
	rec := &model.ScheduleRecord{ID: "daily-report", Kind: model.KindCron, Target: model.TargetWorkflow,
		WorkflowID: "report", Version: "1", UserID: "me", CronExpr: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		OverlapPolicy: model.OverlapSkip, CatchupPolicy: model.CatchupNone}
	if err := rec.Validate(); err != nil {
		panic(err)
	}
	res, err := store.UpsertSchedule(ctx, rec)
	if err != nil {
		panic(err)
	}
	fmt.Println("next run:", res.Schedule.NextRunAt.Format(time.RFC3339))

	// 2. Tick: at 09:00 Berlin a scheduler commits the run.
	s, err := scheduler.New(store, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		panic(err)
	}
	clock.Set(time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC))
	if err := s.TickShard(ctx, 0); err != nil {
		panic(err)
	}

	// 3. The run: its record under its idempotency key, waiting for a
	// launcher; the schedule has moved on to the next weekday.
	key := model.IdempotencyKey("daily-report", time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC))
	run, err := store.GetScheduleRun(ctx, "daily-report", key)
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", run.RunAt.Format(time.RFC3339), run.Status)
	got, err := store.GetSchedule(ctx, "daily-report")
	if err != nil {
		panic(err)
	}
	fmt.Println("next run:", got.NextRunAt.Format(time.RFC3339))
	// Output:
	// next run: 2026-01-05T08:00:00Z
	// run: 2026-01-05T08:00:00Z ENQUEUED
	// next run: 2026-01-06T08:00:00Z
}
