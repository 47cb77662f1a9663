// Command declarative is an example program on chronos's declarative
// scheduler: it declares -tasks periodic tasks and runs them until
// SIGINT or SIGTERM. Run two copies on the same Redis and namespace and
// each task still runs once per due minute between them.
//
//	go run ./examples/declarative -redis redis://127.0.0.1:6379 -tasks 3
//
// Each callback appends a run record to the Redis list <namespace>:runs
// ("<task> <minute RFC 3339> <pid> <start RFC 3339>"), which is what the
// multi-process tests read.
//
// The -test-clock-* flags replace the host's clock with a fast one for the
// tests, so minutes pass in seconds; without them the program runs on the
// host's clock and zone, as a real program would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/scheduler/declarative"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "declarative:", err)
		os.Exit(1)
	}
}

// run parses args, initializes the scheduler and runs it until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("declarative", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", cmpOr(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379"), "Redis URL (env REDIS_URL)")
	ns := fs.String("namespace", "example", "namespace the processes of this program share")
	tasks := fs.Int("tasks", 3, "number of tasks, named task-0, task-1, …")
	cron := fs.String("cron", "* * * * *", "cron expression of every task")
	block := fs.String("block-task", "", "a task whose callback blocks until the program stops (to kill a process mid-callback)")
	leaseTTL := fs.Duration("lease-ttl", declarative.LeaseTTLDefault, "how long a dead process's run holds its task")
	clockStart := fs.String("test-clock-start", "", "tests only: the fake clock's time (RFC 3339) at -test-clock-origin-ms")
	clockOrigin := fs.Int64("test-clock-origin-ms", 0, "tests only: the real Unix time (ms) the fake clock starts from")
	clockSpeed := fs.Float64("test-clock-speed", 1, "tests only: fake seconds per real second")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	var clock declarative.Clock // nil: the host's clock
	if *clockStart != "" {
		start, err := time.Parse(time.RFC3339, *clockStart)
		if err != nil {
			return fmt.Errorf("-test-clock-start: %w", err)
		}
		if *clockSpeed <= 0 {
			return fmt.Errorf("-test-clock-speed must be positive, got %v", *clockSpeed)
		}
		clock = &fastClock{start: start, origin: time.UnixMilli(*clockOrigin), speed: *clockSpeed}
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s, err := declarative.New(declarative.Options{Redis: rdb, Namespace: *ns, Logger: logger, Clock: clock, LeaseTTL: *leaseTTL, Location: time.UTC})
	if err != nil {
		return err
	}
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	regs := make([]declarative.Registration, *tasks)
	for i := range regs {
		name := fmt.Sprintf("task-%d", i)
		if i == 0 && *block != "" {
			name = *block
		}
		regs[i] = declarative.Registration{Name: name, Cron: *cron, RetryDelay: time.Minute, Callback: func(cctx context.Context) error {
			t := now()
			rec := fmt.Sprintf("%s %s %d %s", name, t.Truncate(time.Minute).Format(time.RFC3339), os.Getpid(), t.Format(time.RFC3339Nano))
			if err := rdb.RPush(cctx, *ns+":runs", rec).Err(); err != nil {
				return err
			}
			if name == *block {
				select {
				case <-cctx.Done():
				case <-ctx.Done():
				}
				return errors.New("stopped while blocked")
			}
			return nil
		}}
	}
	if err := s.Initialize(ctx, regs); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// fastClock runs speed times faster than the host's clock from start,
// which it reads at the real instant origin. Processes given the same
// flags share one fake time.
type fastClock struct {
	start  time.Time
	origin time.Time
	speed  float64
}

func (c *fastClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.origin)) * c.speed))
}

func (c *fastClock) After(d time.Duration) <-chan time.Time {
	wait := time.Duration(float64(d) / c.speed)
	out := make(chan time.Time, 1)
	time.AfterFunc(wait, func() { out <- c.Now() })
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
