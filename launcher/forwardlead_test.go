package launcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Schedulers make runs runnable up to queue.ForwardLeadMax before their
// time (Config.ForwardLead): a launcher that takes one that early holds
// it until its time, rather than take it for one moved from the
// dashboard and start it at once.
func TestRunsForwardedAheadByTheLeadStartOnTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := storeWithRunsAhead(t, queuetest.StartRedis(t).Universal(t), queue.RealClock{})
	fwdCtx, stopFwd := context.WithCancel(ctx)
	var fwd sync.WaitGroup
	fwd.Go(func() {
		// As a scheduler's forward loop does with the longest lead, more
		// often, so that runs come as early as the lead allows.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = store.Tasks().ForwardAhead(fwdCtx, store.Clock().Now(), queue.ForwardLeadMax)
			select {
			case <-fwdCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	defer func() { stopFwd(); fwd.Wait() }()
	requireNoEarlyStarts(t, store, time.Now)
}
