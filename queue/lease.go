package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Leases hands out per-shard leases: redsync mutexes that a holder renews
// and stops trusting before they expire.
type Leases struct {
	rs  *redsync.Redsync
	ttl time.Duration
}

// NewLeases returns shard leases of the given TTL on the store's Redis.
func (s *Store) NewLeases(ttl time.Duration) *Leases {
	return &Leases{rs: redsync.New(goredis.NewPool(s.rdb)), ttl: ttl}
}

// Lease is a held shard lease.
type Lease struct {
	Shard int
	mu    *redsync.Mutex
	// until mirrors mu.Until() for readers on other goroutines: only the
	// owner goroutine calls mu's methods. A time.Time, not Unix
	// nanoseconds, so that it keeps Go's monotonic reading: a step of the
	// host's wall clock must not stretch or cut a lease.
	until atomic.Pointer[time.Time]
}

func (l *Lease) setUntil(t time.Time) { l.until.Store(&t) }

// TryAcquire takes shard's lease if it is free; (nil, nil) when another
// holder has it.
func (l *Leases) TryAcquire(ctx context.Context, shard int) (*Lease, error) {
	mu := l.rs.NewMutex(leaseKey(shard), redsync.WithExpiry(l.ttl), redsync.WithTries(1))
	if err := mu.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
			return nil, nil
		}
		return nil, fmt.Errorf("acquire lease of shard %d: %w", shard, err)
	}
	l2 := &Lease{Shard: shard, mu: mu}
	l2.setUntil(mu.Until())
	return l2, nil
}

// Extend renews the lease; false means it was lost.
func (l *Lease) Extend(ctx context.Context) (bool, error) {
	ok, err := l.mu.ExtendContext(ctx)
	if err != nil {
		var taken *redsync.ErrTaken
		if errors.Is(err, redsync.ErrExtendFailed) || errors.As(err, &taken) {
			return false, nil
		}
		return false, fmt.Errorf("extend lease of shard %d: %w", l.Shard, err)
	}
	l.setUntil(l.mu.Until())
	return ok, nil
}

// Until is when the lease expires, by the local clock at acquire/extend.
// Safe to call from any goroutine.
func (l *Lease) Until() time.Time { return *l.until.Load() }

// Release gives the lease up.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.mu.UnlockContext(ctx)
	return err
}

// Heartbeat records a scheduler replica as alive, holding held shards, and
// returns the live replicas (seen within window) with the shards each holds.
func (s *Store) Heartbeat(ctx context.Context, replica string, held int, now time.Time, window time.Duration) (map[string]int, error) {
	res, err := heartbeatScript.Run(ctx, s.rdb, []string{schedulersKey, schedulersHeldKey},
		replica, ms(now), held, ms(now.Add(-window))).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("scheduler heartbeat: %w", err)
	}
	live := make(map[string]int, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		n, _ := strconv.Atoi(res[i+1])
		live[res[i]] = n
	}
	return live, nil
}

// Leave removes a scheduler replica from the live set.
func (s *Store) Leave(ctx context.Context, replica string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, schedulersKey, replica)
		p.HDel(ctx, schedulersHeldKey, replica)
		return nil
	})
	return err
}
