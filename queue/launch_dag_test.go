package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// getsCounted is a go-redis hook that counts the GETs its client sends
// in pipelines.
type getsCounted struct{ n *atomic.Int32 }

func (getsCounted) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (getsCounted) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h getsCounted) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "get" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// The runs read together read each workflow version's DAG once, and each
// gets its own version's.
func TestLoadLaunchesReadsEachDAGOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	require.NoError(t, store.PutWorkflow(ctx, "wf", "1", []byte(`{"v":1}`)))
	require.NoError(t, store.PutWorkflow(ctx, "wf", "2", []byte(`{"v":2}`)))
	var ps []*queue.TaskPayload
	for i, v := range []string{"1", "2", "1", "1", "3"} {
		key := fmt.Sprintf("k%d", i)
		if v != "3" {
			_, _, err = store.StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: v, UserID: "u",
				ScheduledFor: clock.Now(), IdempotencyKey: key})
			require.NoError(t, err)
		}
		ps = append(ps, &queue.TaskPayload{IdempotencyKey: key, WorkflowID: "wf", Version: v, Source: model.SourceManual})
	}
	var gets atomic.Int32
	rdb.AddHook(getsCounted{&gets})

	states, errs := store.LoadLaunches(ctx, ps)
	require.Equal(t, int32(3), gets.Load(), "one GET per workflow version")
	for i, want := range []string{`{"v":1}`, `{"v":2}`, `{"v":1}`, `{"v":1}`, ""} {
		require.NoError(t, errs[i])
		if want == "" {
			require.Nil(t, states[i].DAG, "a version not registered has no DAG")
			continue
		}
		require.JSONEq(t, want, string(states[i].DAG))
	}
	states[0].DAG[0] = 'x'
	require.JSONEq(t, `{"v":1}`, string(states[2].DAG), "each run has its own copy")
}
