package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// asynq can archive a run task without the handler having recorded an
// end: a launcher dies (or freezes past its lease) during the last
// attempt, the handler's own status report fails on the last attempt, or
// an operator archives the task from the dashboard. Nothing would ever
// run it, yet its record would say ENQUEUED for as long as it is kept,
// and a skip or queue schedule would wait for it until RUN_TIMEOUT. So
// every launcher looks at what asynq archived since its last look and
// marks those runs FAILED. Only ENQUEUED ones: a run the executor started
// goes on elsewhere and reports its own end.

// archivedLookback is how far back a starting launcher looks: further
// than any plausible downtime of all launchers, since archiving happens
// only while one runs (recovery runs in launchers: recover.go).
const archivedLookback = 24 * time.Hour

// archivedClockSkew is how far behind the shared clock each sweep starts
// again at the latest: asynq scores an archived task by the local clock
// of the process that archived it, so one launcher running ahead would
// otherwise move the start past tasks that launchers with right clocks
// archive later. Sweeping a task again changes nothing.
const archivedClockSkew = 10 * time.Minute

// sweepArchived fails the ENQUEUED runs of tasks archived since since and
// returns the since to use next time.
func (l *Launcher) sweepArchived(ctx context.Context, since time.Time) (time.Time, error) {
	tasks, next, err := l.store.Tasks().Archived(ctx, since)
	if err != nil {
		return since, err
	}
	for _, r := range tasks {
		if r.Type != queue.TaskTypeRun {
			continue
		}
		p, err := queue.DecodeTaskPayload(r.Payload)
		if err != nil {
			continue // the lane dropped it already: nothing to record
		}
		// A task with no error was archived (from the dashboard) before
		// any launcher tried it: it did not run, which a run held behind
		// it must know (ReleaseAbandoned). One with an error may have: a
		// launcher killed inside the executor call leaves only asynq's
		// lease expiry.
		release := queue.ReleaseByStatus
		if r.LastErr == "" {
			release = queue.ReleaseAbandoned
		}
		reason := fmt.Sprintf("launch abandoned: asynq archived its task at %s (%s); nothing will retry it",
			r.ArchivedAt.UTC().Format(time.RFC3339), r.LastErr)
		err = l.store.ReportTaskStatus(ctx, p, queue.StatusUpdate{Status: model.RunFailed, From: model.RunEnqueued, Error: reason, Reason: model.ReasonLaunchAbandoned, Release: release})
		switch {
		case errors.Is(err, queue.ErrConflict), errors.Is(err, queue.ErrNotFound):
			continue // ended, started, or no longer kept
		case err != nil:
			return since, err
		}
		l.metrics.failedLaunch.Inc()
		l.logger.WarnContext(ctx, "run failed: its task was archived before it launched",
			"idempotency_key", p.IdempotencyKey, "schedule_id", p.ScheduleID, "last_error", r.LastErr)
	}
	if latest := l.store.Clock().Now().Add(-archivedClockSkew); next.After(latest) {
		next = latest
	}
	return next, nil
}

// archivedLoop sweeps every ArchiveSweepInterval until ctx ends.
func (l *Launcher) archivedLoop(ctx context.Context) {
	since := l.store.Clock().Now().Add(-archivedLookback)
	t := time.NewTicker(l.cfg.ArchiveSweepInterval)
	defer t.Stop()
	for {
		var err error
		if since, err = l.sweepArchived(ctx, since); err != nil && ctx.Err() == nil {
			l.logger.ErrorContext(ctx, "sweep of archived run tasks failed; retrying next interval", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
