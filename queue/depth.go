package queue

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// depthTimeout bounds the read of a scrape: well inside Prometheus's
// default 10 s scrape timeout, so a stalled Redis costs the scrape the
// queue depth only, not every other metric.
const depthTimeout = 2 * time.Second

// DepthCollector reports the run queue's depth per asynq state at scrape
// time, so every process's /metrics shows it without a polling loop.
type DepthCollector struct {
	rdb   redis.UniversalClient
	queue string
	desc  *prometheus.Desc
}

// NewDepthCollector returns a collector for the store's run queue.
func (s *Store) NewDepthCollector() *DepthCollector {
	return &DepthCollector{
		rdb:   s.rdb,
		queue: s.cfg.QueueName,
		desc: prometheus.NewDesc("chronos_queue_depth", "Run tasks in the asynq queue, by state.",
			[]string{"queue", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DepthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. It reads the sizes of asynq's
// lists and sets in one pipeline (asynq's Inspector.GetQueueInfo takes no
// context, and computes much more).
func (c *DepthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), depthTimeout)
	defer cancel()
	q := c.queue
	var (
		lists = map[string]string{"pending": asynqPendingKey(q), "active": asynqActiveKey(q)}
		sets  = map[string]string{"scheduled": asynqScheduledKey(q), "retry": asynqRetryKey(q),
			"archived": asynqArchivedKey(q), "completed": asynqCompletedKey(q)}
		sizes = make(map[string]*redis.IntCmd, len(lists)+len(sets))
	)
	err := bounded(ctx, func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for state, key := range lists {
				sizes[state] = p.LLen(ctx, key)
			}
			for state, key := range sets {
				sizes[state] = p.ZCard(ctx, key)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return // Redis down or stalled: report nothing rather than zeros
	}
	for state, n := range sizes {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Val()), q, state)
	}
}
