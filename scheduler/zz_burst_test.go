package scheduler

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/stretchr/testify/require"
)

func TestZZBurst(t *testing.T) {
	if os.Getenv("BURST") == "" {
		t.Skip()
	}
	n := 100000
	rdb := queuetest.StartRedis(t).Client(t)
	clock := queue.NewSimClock(start)
	store, err := queue.NewStore(context.Background(), rdb, clock, &queue.Config{Shards: 16})
	require.NoError(t, err)
	s, err := New(store, nil, nil, nil)
	require.NoError(t, err)
	at := start.Add(time.Hour)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				rec := model.ScheduleRecord{ID: fmt.Sprintf("s%07d", i), Kind: model.KindOnce, FireAt: &at, WorkflowID: "wf", Version: "1", OverlapPolicy: "allow", CatchupPolicy: "fire_immediately"}
				require.NoError(t, rec.Validate())
				_, err := store.UpsertSchedule(context.Background(), &rec)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("registered %d in %s", n, time.Since(t0))
	mem, _ := rdb.Info(context.Background(), "memory").Result()
	t.Log(mem[:200])
	clock.Set(at)
	rdb.ConfigResetStat(context.Background())
	f, _ := os.Create("/tmp/burst.prof")
	pprof.StartCPUProfile(f)
	t0 = time.Now()
	for sh := range 16 {
		wg.Add(1)
		go func() { defer wg.Done(); require.NoError(t, s.TickShard(context.Background(), sh)) }()
	}
	wg.Wait()
	pprof.StopCPUProfile()
	d := time.Since(t0)
	t.Logf("burst %d in %s = %.0f/s", n, d, float64(n)/d.Seconds())
	st, _ := rdb.Info(context.Background(), "commandstats").Result()
	t.Log(st)
	require.Equal(t, n, queuetest.CountTasks(t, rdb, "chronos"))
}
