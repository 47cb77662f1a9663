package launcher

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"
)

// Launchers before this version let asynq's forwarder move runs
// enqueued ahead to the pending list by their own host's clock, so any
// launcher could be handed a run as early as the fastest such host was
// ahead of Redis. Launchers now forward by the shared clock (forwardLoop),
// but during a rolling upgrade old ones still run: each launcher reports
// its host's skew in a heartbeat and learns the largest among the live
// ones (fleetSkew), which waitForFireTime waits out. Once no launcher of
// an older version runs, this heartbeat can go.
const (
	// skewReportInterval is how often a launcher reports its skew.
	skewReportInterval = 5 * time.Second
	// skewWindow is how long a launcher's report counts after it stops.
	skewWindow = 30 * time.Second
)

// newReplicaID names this launcher process in the heartbeat.
func newReplicaID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:8])
}

// hostSkew is how far this host's wall clock is ahead of the shared clock.
func (l *Launcher) hostSkew() time.Duration {
	shared := l.store.Clock().Now()
	return time.Now().Round(0).Sub(shared.Round(0)) // wall clocks, not monotonic readings
}

// reportSkew reports this host's skew and keeps the fleet's largest.
func (l *Launcher) reportSkew(ctx context.Context) error {
	most, err := l.store.LauncherHeartbeat(ctx, l.id, l.hostSkew(), l.store.Clock().Now(), skewWindow)
	if err != nil {
		return err
	}
	l.fleetSkew.Store(int64(most))
	return nil
}

// skewLoop reports this host's skew every skewReportInterval until ctx
// ends. A failed report keeps the last fleet skew.
func (l *Launcher) skewLoop(ctx context.Context) {
	t := time.NewTicker(skewReportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.reportSkew(ctx); err != nil && ctx.Err() == nil {
			l.logger.WarnContext(ctx, "clock skew report failed; keeping the last fleet skew", "err", err)
		}
	}
}
