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
	live, err := s.heartbeat(ctx, schedulersKey, schedulersHeldKey, replica, int64(held), now, window)
	if err != nil {
		return nil, fmt.Errorf("scheduler heartbeat: %w", err)
	}
	out := make(map[string]int, len(live))
	for id, n := range live {
		out[id] = int(n)
	}
	return out, nil
}

// LauncherHeartbeat records a launcher replica as alive with its host
// clock's skew against the shared clock (positive: ahead), and returns
// the largest skew among the live launchers (seen within window), its own
// included. Launchers of older versions let asynq's forwarder move runs
// enqueued ahead to the pending list by their host's clock, so during a
// rolling upgrade a run can reach any launcher as early as the fastest
// such host's skew.
func (s *Store) LauncherHeartbeat(ctx context.Context, replica string, skew time.Duration, now time.Time, window time.Duration) (time.Duration, error) {
	live, err := s.heartbeat(ctx, launchersKey, launchersSkewKey, replica, skew.Milliseconds(), now, window)
	if err != nil {
		return 0, fmt.Errorf("launcher heartbeat: %w", err)
	}
	most := skew
	for _, ms := range live {
		most = max(most, time.Duration(ms)*time.Millisecond)
	}
	return most, nil
}

// heartbeat runs heartbeat.lua on a replica set (zset of last heartbeats,
// hash of values) and returns the live replicas' values.
func (s *Store) heartbeat(ctx context.Context, zkey, hkey, replica string, value int64, now time.Time, window time.Duration) (map[string]int64, error) {
	res, err := heartbeatScript.Run(ctx, s.rdb, []string{zkey, hkey},
		replica, ms(now), value, ms(now.Add(-window))).StringSlice()
	if err != nil {
		return nil, err
	}
	live := make(map[string]int64, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		n, _ := strconv.ParseInt(res[i+1], 10, 64)
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
