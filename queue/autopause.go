package queue

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// decodePauseState reads the auto-pause and pause fields of a schedule
// hash into rec: the failure streak, the last FAILED run's error, and
// while paused why, the note and since when.
func decodePauseState(rec *model.ScheduleRecord, h map[string]string) {
	rec.ConsecutiveFailures, _ = strconv.Atoi(h[sfFailStreak])
	rec.LastError = h[sfFailErr]
	if !rec.Paused {
		return
	}
	rec.PausedReason = model.PausedReason(h[sfPausedWhy])
	rec.PausedNote = h[sfPausedNote]
	if t, ok := parseMS(h[sfPausedAt]); ok {
		rec.PausedAt = &t
	}
}

// autoPausedKey counts the schedules of shard s that auto-pause paused.
func autoPausedKey(s int) string { return shardPrefix(s) + segAutoPaused }

// AutoPaused says that a run's end paused its schedule
// (pause_after_failures): the script that recorded the FAILED run paused
// it in the same step.
type AutoPaused struct {
	ScheduleID string
	// Failures is the streak of FAILED runs that paused it.
	Failures int
	// Error is the last FAILED run's error.
	Error string
}

// logAutoPaused logs that the end of run key paused its schedule.
func (s *Store) logAutoPaused(ctx context.Context, key string, a AutoPaused) {
	if s.cfg.Logger == nil {
		return
	}
	s.cfg.Logger.WarnContext(ctx, "schedule paused after consecutive failed runs (pause_after_failures)",
		"schedule_id", a.ScheduleID, "failures", a.Failures, "idempotency_key", key, "last_error", a.Error)
}

// AutoPausedCollector reports chronos_schedules_auto_paused_total: how
// many times schedules paused themselves after consecutive FAILED runs.
// The count is kept in Redis by the script that pauses (one counter per
// shard, summed at scrape time), so it is never lost with a process and
// every process's /metrics shows the same total.
func (s *Store) AutoPausedCollector() prometheus.Collector {
	return &autoPausedCollector{s: s, desc: prometheus.NewDesc("chronos_schedules_auto_paused_total",
		"Times a schedule paused itself after pause_after_failures consecutive FAILED runs.", nil, nil)}
}

type autoPausedCollector struct {
	s    *Store
	desc *prometheus.Desc
}

func (c *autoPausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *autoPausedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var total float64
	err := bounded(ctx, func(ctx context.Context) error {
		// One GET per shard, not an MGET: each counter is in its
		// shard's slot.
		cmds := make([]*redis.StringCmd, c.s.cfg.Shards)
		_, err := c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.Get(ctx, autoPausedKey(i))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for _, cmd := range cmds {
			n, _ := strconv.ParseFloat(cmd.Val(), 64)
			total += n
		}
		return nil
	})
	if err != nil {
		return // Redis down or stalled: report nothing rather than zero
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, total)
}
