package main

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pingEvery is the period of the Redis latency probe.
const pingEvery = 10 * time.Millisecond

// pingProbe measures Redis's own latency while a scenario runs: a PING
// every pingEvery on a connection of its own, each round trip recorded.
// Redis runs one command or script at a time, so a long script shows as
// a PING that waits for it.
type pingProbe struct {
	rdb    *redis.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	rtts   []time.Duration
	errs   int
}

func startPingProbe(ctx context.Context, addr string) *pingProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &pingProbe{rdb: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MinIdleConns: 1}),
		cancel: cancel, done: make(chan struct{})}
	_ = p.rdb.Ping(ctx).Err() // dial before measuring
	go func() {
		defer close(p.done)
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			began := time.Now()
			err := p.rdb.Ping(ctx).Err()
			rtt := time.Since(began)
			p.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					p.errs++
				}
			} else {
				p.rtts = append(p.rtts, rtt)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// stop ends the probe and returns its round trips' percentiles.
func (p *pingProbe) stop() durStats {
	p.cancel()
	<-p.done
	_ = p.rdb.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return percentiles(p.rtts)
}
