package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock is the one source of "now". Logic never calls time.Now directly.
type Clock interface {
	Now() time.Time
}

// RealClock reads the local wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// SimClock is a settable clock for tests.
type SimClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewSimClock returns a SimClock set to t.
func NewSimClock(t time.Time) *SimClock { return &SimClock{now: t} }

// Now returns the simulated time.
func (c *SimClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *SimClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *SimClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// RedisClock is the local clock corrected by the Redis server's TIME, so all
// replicas agree on "now" within a round trip regardless of their hosts'
// clock skew. Call Sync periodically (RunSync does).
type RedisClock struct {
	rdb    redis.UniversalClient
	offset atomic.Int64 // nanoseconds to add to the local clock
}

// NewRedisClock returns a clock synced to rdb; it starts with no correction.
func NewRedisClock(rdb redis.UniversalClient) *RedisClock { return &RedisClock{rdb: rdb} }

// Now returns the corrected time.
func (c *RedisClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// Sync measures the offset to Redis TIME, assuming a symmetric round trip.
func (c *RedisClock) Sync(ctx context.Context) error {
	before := time.Now()
	t, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	after := time.Now()
	mid := before.Add(after.Sub(before) / 2)
	c.offset.Store(int64(t.Sub(mid)))
	return nil
}

// RunSync syncs now and then every interval until ctx ends. Errors keep
// the previous offset: a short Redis outage must not stop the clock.
func (c *RedisClock) RunSync(ctx context.Context, interval time.Duration) {
	_ = c.Sync(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = c.Sync(ctx)
		}
	}
}
