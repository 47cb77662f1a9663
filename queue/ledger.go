package queue

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chronos-sched/chronos/model"
)

// ledgerMetrics counts the runs this process's store recorded SKIPPED or
// FAILED, by reason (model.RunReason), as the scripts that made each
// transition answer it: a run counts once, in the process whose script
// ended it. docs/ledger.md says what each reason means.
type ledgerMetrics struct {
	skipped, failed *prometheus.CounterVec
}

// reasonNone labels a SKIPPED or FAILED run recorded without a reason
// (none is known to have one; the label keeps the count honest).
const reasonNone = "none"

func newLedgerMetrics() *ledgerMetrics {
	m := &ledgerMetrics{
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronos_runs_skipped_total",
			Help: "Planned runs recorded SKIPPED (never started), by reason (docs/ledger.md)."}, []string{"reason"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronos_runs_failed_total",
			Help: "Runs recorded FAILED, by reason (docs/ledger.md)."}, []string{"reason"}),
	}
	// Every reason shows from the start, at 0, so a rate over it is
	// defined before the first run of that reason.
	for _, r := range model.SkipReasons {
		m.skipped.WithLabelValues(string(r))
	}
	for _, r := range model.FailReasons {
		m.failed.WithLabelValues(string(r))
	}
	return m
}

// count counts n runs ended with reason r (its status follows from it).
func (m *ledgerMetrics) count(r model.RunReason, n int) {
	if n > 0 {
		m.countStatusN(r.Status(), r, n)
	}
}

// countStatus counts one run ended with status st and reason r ("" when
// it has none).
func (m *ledgerMetrics) countStatus(st model.RunStatus, r model.RunReason) {
	m.countStatusN(st, r, 1)
}

func (m *ledgerMetrics) countStatusN(st model.RunStatus, r model.RunReason, n int) {
	label := string(r)
	if label == "" {
		label = reasonNone
	}
	switch st {
	case model.RunSkipped:
		m.skipped.WithLabelValues(label).Add(float64(n))
	case model.RunFailed:
		m.failed.WithLabelValues(label).Add(float64(n))
	}
}

// RegisterMetrics registers on reg the store's counts of SKIPPED and
// FAILED runs by reason (chronos_runs_skipped_total,
// chronos_runs_failed_total). Each part of a process that has metrics
// (API, scheduler, launcher) calls it with the process's registry: the
// store is the process's, so registering it again is a no-op. (A second
// store of one process, as some tests open, finds the first's counters
// there and counts on unseen.)
func (s *Store) RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{s.ledger.skipped, s.ledger.failed} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			return fmt.Errorf("register run ledger metrics: %w", err)
		}
	}
	return nil
}

// codeAndCount reads a script's answer that is a code, or {code, runs
// counted} (pause.lua, delete.lua).
func codeAndCount(v any) (code, n int) {
	switch v := v.(type) {
	case int64:
		return int(v), 0
	case []any:
		if len(v) == 2 {
			c, _ := v[0].(int64)
			k, _ := v[1].(int64)
			return int(c), int(k)
		}
	}
	return 0, 0
}
