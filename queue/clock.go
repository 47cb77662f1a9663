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

// RedisClock is Redis's TIME carried forward by the local monotonic clock,
// so all replicas agree on "now" within a round trip regardless of their
// hosts' clock skew, and a step of a host's wall clock does not move it.
// Call Sync periodically (RunSync does).
//
// It is never ahead of Redis: Redis read its TIME at some instant of the
// round trip, so the offset is measured against the round trip's end (a
// slow trip makes the clock late, not early, and the shortest of a few
// trips is kept). And it never runs backwards: a correction that would
// move it back holds it still until it catches up. So a run is never
// planned or started before its time.
type RedisClock struct {
	rdb    redis.UniversalClient
	anchor atomic.Pointer[clockAnchor] // nil until the first Sync
	last   atomic.Int64                // the latest Now returned, unix ns
}

// clockAnchor pairs a Redis TIME with the local instant it stood for
// (which carries Go's monotonic clock reading).
type clockAnchor struct{ local, redis time.Time }

// NewRedisClock returns a clock synced to rdb; until its first Sync it
// reads the local clock.
func NewRedisClock(rdb redis.UniversalClient) *RedisClock { return &RedisClock{rdb: rdb} }

// Now returns the corrected time, never earlier than a time it returned.
func (c *RedisClock) Now() time.Time {
	var now int64
	if a := c.anchor.Load(); a != nil {
		now = a.redis.Add(time.Since(a.local)).UnixNano() // time.Since is monotonic
	} else {
		now = time.Now().UnixNano()
	}
	for {
		last := c.last.Load()
		if now <= last {
			return time.Unix(0, last)
		}
		if c.last.CompareAndSwap(last, now) {
			return time.Unix(0, now)
		}
	}
}

// syncSamples is how many round trips one Sync measures; the shortest
// bounds the error best.
const syncSamples = 3

// Sync measures the offset to Redis TIME.
func (c *RedisClock) Sync(ctx context.Context) error {
	var best *clockAnchor
	bestRTT := time.Duration(-1)
	for range syncSamples {
		before := time.Now()
		t, err := c.rdb.Time(ctx).Result()
		if err != nil {
			return err
		}
		after := time.Now()
		if rtt := after.Sub(before); bestRTT < 0 || rtt < bestRTT {
			best, bestRTT = &clockAnchor{local: after, redis: t}, rtt
		}
	}
	c.anchor.Store(best)
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
