package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	due, emitted, skipped, missed, stale prometheus.Counter
	wakes                                prometheus.Counter
	drift, catchupLateness               prometheus.Histogram
	tick                                 prometheus.Histogram
	shards                               prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		due: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_schedules_due_total",
			Help: "Due schedules a scheduler planned."}),
		emitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_runs_emitted_total",
			Help: "Runs handed to asynq."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_runs_skipped_overlap_total",
			Help: "Runs recorded SKIPPED because the previous run was in flight (overlap_policy skip)."}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_runs_missed_total",
			Help: "Catch-up events where missed runs were dropped (catchup_policy none or latest)."}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_plans_stale_total",
			Help: "Plans not applied because the schedule changed meanwhile (another replica, an upsert, a status)."}),
		drift: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chronos_enqueue_drift_seconds",
			Help:    "Actual enqueue time minus planned fire time; 0 when the task was enqueued ahead with ProcessAt. Runs caught up after they were missed are in chronos_run_catchup_lateness_seconds instead.",
			Buckets: []float64{0, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		catchupLateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chronos_run_catchup_lateness_seconds",
			Help:    "For runs enqueued by catch-up after they were missed (downtime longer than MISFIRE_GRACE_MS): enqueue time minus the run's planned time.",
			Buckets: []float64{10, 30, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 7 * 24 * 3600}}),
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chronos_tick_duration_seconds",
			Help: "Time to work one shard for one tick.", Buckets: prometheus.DefBuckets}),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronos_shard_wakes_total",
			Help: "Ticks of a shard between its tick boundaries: a schedule became due at once when its run in flight ended (a queue schedule's held run)."}),
		shards: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chronos_shards_owned",
			Help: "Shards whose lease this replica holds."}),
	}
	if reg != nil {
		reg.MustRegister(m.due, m.emitted, m.skipped, m.missed, m.stale, m.drift, m.catchupLateness, m.tick, m.shards, m.wakes)
	}
	return m
}
