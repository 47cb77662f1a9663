package model_test

import (
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
)

func ExampleParseCron() {
	s, err := model.ParseCron("0 9 * * *", "America/New_York", model.DialectStandard, time.Time{})
	if err != nil {
		panic(err)
	}
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, t := range model.Preview(s, after, 3) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-01-01T14:00:00Z
	// 2026-01-02T14:00:00Z
	// 2026-01-03T14:00:00Z
}

// A local time that happens twice, when clocks fall back, fires twice.
func ExamplePreview_fallBack() {
	s, err := model.ParseCron("30 1 * * *", "America/New_York", "", time.Time{})
	if err != nil {
		panic(err)
	}
	after := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	for _, t := range model.Preview(s, after, 3) {
		fmt.Println(t.Format(time.RFC3339))
	}
	// Output:
	// 2026-11-01T05:30:00Z
	// 2026-11-01T06:30:00Z
	// 2026-11-02T06:30:00Z
}

func ExampleParseCron_posix() {
	_, err := model.ParseCron("*/5 * * * *", "", model.DialectPosix, time.Time{})
	fmt.Println(err)
	// Output:
	// Invalid cron expression "*/5 * * * *": minute field does not allow steps ("*/5")
}

func ExampleIdempotencyKey() {
	runAt := time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC)
	key := model.IdempotencyKey("nightly", runAt)
	fmt.Println(key)
	fmt.Println(model.JitterOffset(key, 30*time.Second))
	// Output:
	// 237dc51181b851105c5b4e4f1d54c385cae17d26ff413c7e9cb8d92f16855a37
	// -20.282s
}

func ExampleResolveOnce() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	delay := int64(600)
	at, err := model.ResolveOnce(&delay, "", now)
	fmt.Println(at.Format(time.RFC3339), err)
	_, err = model.ResolveOnce(nil, "2025-12-31T00:00:00Z", now)
	fmt.Println(err)
	// Output:
	// 2026-01-01T12:10:00Z <nil>
	// fire_at 2025-12-31T00:00:00Z is not in the future
}
