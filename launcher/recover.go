package launcher

import (
	"context"
	"time"
)

// A launcher that dies, or freezes past its tasks' leases, leaves them
// in their queues' active lists. Every launcher recovers such tasks in
// every run queue, as asynq's recoverer did inside the asynq server each
// launcher ran before: each goes to the retry set, its failed attempt
// counted, or to the archive when its retries are spent (then the
// archived sweep fails its run, archived.go). The run is started again
// with the same idempotency key; its record, written when the executor
// accepted it, keeps a run that launched from starting twice.
//
// asynq's recoverer passes once a minute and takes leases that ended 30
// s before (asynqwire.LeaseSlack), so a task is recovered 60 to 120 s
// after its launcher's last lease extension, as before. A shorter
// interval (RECOVER_INTERVAL) would recover sooner at the cost of one pipelined read of
// every queue's lease set per launcher per interval; the slack, which
// covers skew between launchers' host clocks, is what keeps a live
// launcher's tasks, so it stays.

// recoverLoop recovers lease-expired tasks every RecoverInterval until
// ctx ends (Start recovers them once first).
func (l *Launcher) recoverLoop(ctx context.Context) {
	t := time.NewTimer(l.cfg.RecoverInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.recoverExpired(ctx)
		t.Reset(l.cfg.RecoverInterval)
	}
}

// maxPasses bounds the batches one recovery or cleanup makes in a row;
// the next interval does the rest.
const maxPasses = 100

// recoverExpired recovers the lease-expired tasks of every queue, a
// batch per queue at a time, while batches come back full.
func (l *Launcher) recoverExpired(ctx context.Context) {
	delay := func(retried int) time.Duration { return retryDelay(retried, nil, nil) }
	for range maxPasses {
		r, err := l.store.Tasks().Recover(ctx, time.Now(), delay) // leases are scored by host clocks
		if r.Retried+r.Archived > 0 {
			l.logger.WarnContext(ctx, "recovered run tasks whose launcher died or froze (lease expired)",
				"retried", r.Retried, "archived", r.Archived)
		}
		if err != nil {
			if ctx.Err() == nil {
				l.logger.WarnContext(ctx, "recovering lease-expired run tasks failed; retrying next interval", "err", err)
			}
			return
		}
		if !r.Full {
			return
		}
	}
}

// completedInterval is how often a launcher deletes the completed run
// tasks whose retention ended: asynq's janitor's default interval.
const completedInterval = 8 * time.Second

// completedLoop deletes expired completed tasks every completedInterval
// until ctx ends. Every run task is kept completed for TASK_RETENTION
// (its id keeps rejecting a second enqueue of the run meanwhile), so
// without this the completed sets would grow for ever.
func (l *Launcher) completedLoop(ctx context.Context) {
	t := time.NewTicker(completedInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range maxPasses {
			_, full, err := l.store.Tasks().DeleteExpiredCompleted(ctx, time.Now()) // scored by host clocks
			if err != nil && ctx.Err() == nil {
				l.logger.WarnContext(ctx, "deleting expired completed run tasks failed; retrying", "err", err)
			}
			if err != nil || !full {
				break
			}
		}
	}
}
