package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// BenchmarkCommitWaitReplicas is what REDIS_WAIT_REPLICAS=1 costs a
// scheduler: one op is a tick of one shard that commits a second of runs
// of 100 schedules firing every second, on a primary with one replica in
// sync (a Sentinel set of its own), without the wait and with it, in the
// same run.
//
//	go test -run '^$' -bench CommitWaitReplicas -benchtime 200x ./queue/
func BenchmarkCommitWaitReplicas(b *testing.B) {
	sets := []*queuetest.Sentinel{queuetest.StartSentinel(b), queuetest.StartSentinel(b)}
	for i, waitReplicas := range []int{0, 1} {
		rdb := sets[i].Client(b)
		b.Run(fmt.Sprintf("wait=%d", waitReplicas), func(b *testing.B) {
			ctx := context.Background()
			require.NoError(b, rdb.FlushAll(ctx).Err())
			start := time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC)
			clock := queue.NewSimClock(start)
			cfg := &queue.Config{Shards: 1, WaitReplicas: waitReplicas}
			store, err := queue.NewStore(ctx, rdb, clock, cfg)
			require.NoError(b, err)
			for n := range 100 {
				rec := &model.ScheduleRecord{ID: fmt.Sprintf("w%d-%03d", i, n), CronExpr: "* * * * * *", Timezone: "UTC",
					Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1", UserID: "u",
					OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
				require.NoError(b, rec.Validate())
				_, err := store.UpsertSchedule(ctx, rec)
				require.NoError(b, err)
			}
			sched, err := scheduler.New(store, nil, nil, nil)
			require.NoError(b, err)
			b.ResetTimer()
			for k := range b.N {
				clock.Set(start.Add(time.Duration(k+1) * time.Second))
				require.NoError(b, sched.TickShard(ctx, 0))
			}
		})
	}
}
