package declarative

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Set moves the clock to t and fires the timers due by then.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- t
	}
	c.waiters = kept
}

// recorder keeps every event in order.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// types returns the events' types, of task's events only when task is
// not empty.
func (r *recorder) types(task string) []EventType {
	var out []EventType
	for _, ev := range r.all() {
		if task == "" || ev.Task == task {
			out = append(out, ev.Type)
		}
	}
	return out
}

// count returns how many events of type typ task had.
func (r *recorder) count(task string, typ EventType) int {
	n := 0
	for _, ev := range r.all() {
		if ev.Task == task && ev.Type == typ {
			n++
		}
	}
	return n
}

// starts returns the clock times task's callback started at (retries
// included).
func (r *recorder) starts(task string) []time.Time {
	var out []time.Time
	for _, ev := range r.all() {
		if ev.Task == task && (ev.Type == TaskRunStarted || ev.Type == TaskRetryStarted) {
			out = append(out, ev.Time)
		}
	}
	return out
}

// bundle is one test's Redis, clock and scheduler.
type bundle struct {
	redis *queuetest.Redis
	rdb   redis.UniversalClient
	clock *fakeClock
	ev    *recorder
	ns    string
	loc   *time.Location
}

// setup starts a Redis and a fake clock at start.
func setup(t *testing.T, start time.Time) *bundle {
	t.Helper()
	r := queuetest.StartRedis(t)
	return &bundle{redis: r, rdb: r.Universal(t), clock: newFakeClock(start), ev: &recorder{}, ns: "test", loc: start.Location()}
}

// newScheduler makes a scheduler on b's Redis, clock and recorder, and
// stops it at the end of the test.
func (b *bundle) newScheduler(t *testing.T) *Scheduler {
	t.Helper()
	s, err := New(Options{
		Redis:     b.rdb,
		Namespace: b.ns,
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:     b.clock,
		Location:  b.loc,
		OnEvent:   b.ev.add,
		LeaseTTL:  time.Hour,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

// testWriter routes logs to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// settled reports whether s's loop has looked at the clock's time c,
// found nothing more to start, and every callback it started has been
// recorded.
func (s *Scheduler) settled(c time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle && !s.pending && s.active == 0 && (!s.idleNow.Before(c) || s.idleNext.IsZero() || s.idleNext.After(c))
}

// advance moves the clock to to and waits for every scheduler in ss to
// settle there.
func (b *bundle) advance(t *testing.T, to time.Time, ss ...*Scheduler) {
	t.Helper()
	b.settle(t, b.clock.Now(), ss...)
	b.clock.Set(to)
	b.settle(t, to, ss...)
}

// settle waits for every scheduler in ss to settle at the clock's time c.
func (b *bundle) settle(t *testing.T, c time.Time, ss ...*Scheduler) {
	t.Helper()
	for _, s := range ss {
		require.Eventually(t, func() bool { return s.settled(c) }, 10*time.Second, time.Millisecond, "scheduler did not settle at %s", c)
	}
}

// walk advances the clock minute by minute from its time to to.
func (b *bundle) walk(t *testing.T, to time.Time, ss ...*Scheduler) {
	t.Helper()
	b.advance(t, b.clock.Now(), ss...)
	for m := b.clock.Now().Truncate(time.Minute).Add(time.Minute); !m.After(to); m = m.Add(time.Minute) {
		b.advance(t, m, ss...)
	}
	b.advance(t, to, ss...)
}

// state reads a task's hash.
func (b *bundle) state(t *testing.T, name string) map[string]string {
	t.Helper()
	h, err := b.rdb.HGetAll(context.Background(), taskKey(b.ns, name)).Result()
	require.NoError(t, err)
	return h
}

// ok is a callback that succeeds.
func ok(context.Context) error { return nil }

// msStr formats t as the hash stores it.
func msStr(t time.Time) string { return fmt.Sprint(t.UnixMilli()) }
