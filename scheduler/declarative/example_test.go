package declarative_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/scheduler/declarative"
)

// A program declares its periodic tasks once; chronos keeps their state
// in Redis. "* * * * *" matches every minute, so on a first start the task
// runs at once.
func Example() {
	mr, _ := miniredis.Run() // any redis.UniversalClient; miniredis keeps the example self-contained
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	ran := make(chan string, 10)
	s, err := declarative.New(declarative.Options{Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	err = s.Initialize(ctx, []declarative.Registration{
		{Name: "heartbeat", Cron: "* * * * *", Callback: func(context.Context) error {
			ran <- "heartbeat"
			return nil
		}, RetryDelay: time.Minute},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-ran, "ran")
	if err := s.Stop(ctx); err != nil {
		panic(err)
	}

	// Invalid registrations come back as typed errors before anything is
	// written.
	err = s.Initialize(ctx, []declarative.Registration{{Name: "bad", Cron: "*/5 * * * *", Callback: func(context.Context) error { return nil }}})
	fmt.Println(err)
	// Output:
	// heartbeat ran
	// Invalid cron expression "*/5 * * * *": minute field does not allow steps ("*/5")
}
