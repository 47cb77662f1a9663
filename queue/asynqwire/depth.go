package asynqwire

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// depthTimeout bounds the read of a scrape: well inside Prometheus's
// default 10 s scrape timeout, so a stalled Redis costs the scrape the
// queue depth only, not every other metric.
const depthTimeout = 2 * time.Second

// Collector reports the queues' depth per asynq state at scrape time, as
// chronos_queue_depth{queue, state}, so every process's /metrics shows it
// without a polling loop.
type Collector struct {
	qs   []*Queue
	desc *prometheus.Desc
}

// Collector returns a collector of the queue's depth.
func (q *Queue) Collector() *Collector { return newCollector([]*Queue{q}) }

// Collector returns a collector of the depth of every queue of the set.
func (s *Set) Collector() *Collector { return newCollector(s.queues) }

func newCollector(qs []*Queue) *Collector {
	return &Collector{
		qs: qs,
		desc: prometheus.NewDesc("chronos_queue_depth", "Run tasks in the asynq queue, by state.",
			[]string{"queue", "state"}, nil),
	}
}

// Depth returns how many tasks the queue holds in each state: pending,
// active, scheduled, retry, archived, completed.
func (q *Queue) Depth(ctx context.Context) (map[string]int64, error) {
	k := q.keys
	var (
		lists = map[string]string{"pending": k.Pending(), "active": k.Active()}
		sets  = map[string]string{"scheduled": k.Scheduled(), "retry": k.Retry(),
			"archived": k.Archived(), "completed": k.Completed()}
		sizes = make(map[string]*redis.IntCmd, len(lists)+len(sets))
	)
	if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for state, key := range lists {
			sizes[state] = p.LLen(ctx, key)
		}
		for state, key := range sets {
			sizes[state] = p.ZCard(ctx, key)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read depth of %s: %w", k.Queue, err)
	}
	out := make(map[string]int64, len(sizes))
	for state, n := range sizes {
		out[state] = n.Val()
	}
	return out, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. It reads the sizes of asynq's
// lists and sets in one pipeline (asynq's Inspector.GetQueueInfo takes no
// context, and computes much more).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), depthTimeout)
	defer cancel()
	sizes := make([]map[string]int64, len(c.qs))
	err := bounded(ctx, func(ctx context.Context) error {
		for i, q := range c.qs {
			var err error
			if sizes[i], err = q.Depth(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return // Redis down or stalled: report nothing rather than zeros
	}
	for i, q := range c.qs {
		for state, n := range sizes[i] {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), q.keys.Queue, state)
		}
	}
}

// bounded runs fn, a Redis call, and returns its error, or ctx's as soon
// as ctx ends: go-redis waits for its own socket timeouts and retries
// (seconds) whatever the context's deadline, and a scrape must answer
// within its own. fn goes on in the background until go-redis gives up.
func bounded(ctx context.Context, fn func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
