package queue

import (
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
)

// DepthCollector reports the run queue's depth per asynq state at scrape
// time, so every process's /metrics shows it without a polling loop.
type DepthCollector struct {
	inspector *asynq.Inspector
	queue     string
	desc      *prometheus.Desc
}

// NewDepthCollector returns a collector for the store's run queue.
func (s *Store) NewDepthCollector() *DepthCollector {
	return &DepthCollector{
		inspector: asynq.NewInspectorFromRedisClient(s.rdb),
		queue:     s.cfg.QueueName,
		desc: prometheus.NewDesc("chronos_queue_depth", "Run tasks in the asynq queue, by state.",
			[]string{"queue", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DepthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *DepthCollector) Collect(ch chan<- prometheus.Metric) {
	info, err := c.inspector.GetQueueInfo(c.queue)
	if err != nil {
		return // queue not created yet, or Redis down: report nothing
	}
	for state, n := range map[string]int{
		"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
		"retry": info.Retry, "archived": info.Archived, "completed": info.Completed,
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), c.queue, state)
	}
}
