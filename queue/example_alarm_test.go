package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// An agent's alarm: created once per idempotency key, listed and
// cancelled by its owner only.
func ExampleStore_CreateAlarm() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, _ := queue.NewStore(ctx, rdb, queue.NewSimClock(now), nil)

	owner := "did:matrix:user-1:key-1"
	at := now.Add(10 * time.Minute)
	rec := &model.ScheduleRecord{
		ID: store.NewAlarmID(owner), Owner: owner, UserID: "user-1", Target: model.TargetWake,
		Kind: model.KindOnce, FireAt: &at, Timezone: "UTC",
		OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		Alarm: &model.Alarm{WakeMessage: "tea is ready", Payload: json.RawMessage(`{"cups": 2}`),
			IdempotencyKey: "tea", MaxFailures: 5},
	}
	if err := rec.Validate(); err != nil {
		panic(err)
	}
	a, deduped, _ := store.CreateAlarm(ctx, rec)
	fmt.Println(a.Alarm.Status, a.NextRunAt.Format(time.RFC3339), string(a.Alarm.Payload), deduped)

	again, deduped, _ := store.CreateAlarm(ctx, rec) // the same key: the same alarm
	fmt.Println(again.ID == a.ID, deduped)

	_, err := store.GetAlarm(ctx, "did:matrix:user-2:key-2", a.ID)
	fmt.Println(err != nil)

	c, _ := store.CancelAlarm(ctx, owner, a.ID)
	fmt.Println(c.Alarm.Status, c.NextRunAt == nil)
	// Output:
	// active 2026-01-01T12:10:00Z {"cups": 2} false
	// true true
	// true
	// cancelled true
}
