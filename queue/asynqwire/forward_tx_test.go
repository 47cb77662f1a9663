package asynqwire_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Forward moves a batch with native commands in one MULTI/EXEC under a
// WATCH of the set it reads (Queue.forwardBatch); when the set changed
// since the read, the EXEC writes nothing and forward.lua moves the ids
// read, checking each. These tests change the set between the read and
// the EXEC.

// beforeExec is a go-redis hook that calls change before each forward
// transaction its client sends (a pipeline with a ZREMRANGEBYRANK: a
// cluster client's hook sees the commands before MULTI and EXEC wrap
// them), with the transaction's number (from 1).
type beforeExec struct {
	change func(n int)
	mu     sync.Mutex
	n      int
}

func (h *beforeExec) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beforeExec) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (h *beforeExec) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "zremrangebyrank" }) {
			h.mu.Lock()
			h.n++
			n := h.n
			h.mu.Unlock()
			h.change(n)
		}
		return next(ctx, cmds)
	}
}

// addTo adds the hook to rdb; on a cluster, to each master's client
// too, which runs the forward's WATCH and transaction.
func (h *beforeExec) addTo(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		require.NoError(t, cc.ForEachShard(context.Background(), func(_ context.Context, c *redis.Client) error {
			c.AddHook(h)
			return nil
		}))
		return
	}
	rdb.AddHook(h)
}

func (h *beforeExec) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// A task written ahead into the scheduled set between the read and the
// EXEC (a scheduler committing the next runs) aborts the transaction:
// the script moves the ids read, and the task written ahead stays.
func TestForwardFallsBackToTheScriptWhenTheSetChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c *asynq.Client
	at := time.Now().Add(time.Hour)
	exec := &beforeExec{change: func(n int) {
		if n == 1 {
			enqueue(t, c, []asynq.Option{asynq.ProcessAt(at.Add(time.Hour))}, "ahead")
		}
	}}
	rdb, q, hook, client := casQueue(t, ":scheduled", func(int) {})
	c = client
	exec.addTo(t, rdb)
	enqueue(t, c, []asynq.Option{asynq.ProcessAt(at)}, "k1", "k2", "k3")

	moved, err := q.Forward(ctx, at.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 3, moved)
	require.Equal(t, 1, exec.count(), "one transaction, aborted")
	require.Len(t, hook.Calls(), 1, "then the script")
	require.ElementsMatch(t, []string{"k1", "k2", "k3"}, rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val())
	require.Equal(t, []string{"ahead"}, rdb.ZRange(ctx, q.Keys().Scheduled(), 0, -1).Val())
	requireStates(t, rdb, q, map[string]asynq.TaskState{"k1": asynq.TaskStatePending, "k2": asynq.TaskStatePending,
		"k3": asynq.TaskStatePending, "ahead": asynq.TaskStateScheduled})
}

// Nothing changed between the read and the EXEC: the transaction moves
// the batch, no script runs, and asynq's Inspector reads each task as
// its own forwarder would leave it.
func TestForwardMovesABatchInOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := &beforeExec{change: func(int) {}}
	rdb, q, hook, c := casQueue(t, ":scheduled", func(int) {})
	exec.addTo(t, rdb)
	at := time.Now().Add(time.Hour)
	enqueue(t, c, []asynq.Option{asynq.ProcessAt(at)}, "k1", "k2")
	enqueue(t, c, []asynq.Option{asynq.ProcessAt(at.Add(time.Second))}, "next")

	moved, err := q.Forward(ctx, at)
	require.NoError(t, err)
	require.Equal(t, 2, moved)
	require.Equal(t, 1, exec.count())
	require.Empty(t, hook.Calls())
	require.Equal(t, []string{"k2", "k1"}, rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val(), "k1 is taken first")
	requireStates(t, rdb, q, map[string]asynq.TaskState{"k1": asynq.TaskStatePending, "k2": asynq.TaskStatePending,
		"next": asynq.TaskStateScheduled})
	require.NotEmpty(t, rdb.HGet(ctx, q.Keys().Task("k1"), "pending_since").Val())

	moved, err = q.Forward(ctx, at)
	require.NoError(t, err)
	require.Zero(t, moved, "each task moves once")
}

// requireStates reads each task through asynq's Inspector.
func requireStates(t *testing.T, rdb redis.UniversalClient, q *asynqwire.Queue, want map[string]asynq.TaskState) {
	t.Helper()
	in := asynq.NewInspectorFromRedisClient(rdb)
	for id, st := range want {
		info, err := in.GetTaskInfo(q.Name(), id)
		require.NoError(t, err, id)
		require.Equal(t, st, info.State, id)
	}
}

// Several forwarders (schedulers and launchers) forward the same queues
// at once, more than a batch each, while tasks are written ahead into
// the same sets: every task due is moved exactly once, none before its
// second, and the pending lists hold each once.
func TestConcurrentForwardersMoveEachTaskOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	scripts := &queuetest.ScriptHook{Match: func(keys []string) bool { return len(keys) > 0 && strings.HasSuffix(keys[0], ":scheduled") }}
	exec := &beforeExec{change: func(int) {}}
	rdb.AddHook(scripts)
	exec.addTo(t, rdb)
	const shards, n, forwarders = 4, 3*asynqwire.ForwardBatch + 7, 4
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	clock := queue.NewSimClock(at.Add(-time.Minute))
	stores := make([]*queue.Store, forwarders)
	for i := range stores {
		var err error
		stores[i], err = queue.NewStore(ctx, rdb, clock, &queue.Config{Shards: shards})
		require.NoError(t, err)
	}
	start := func(key string, due time.Time) {
		_, started, err := stores[0].StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: due, IdempotencyKey: key})
		require.NoError(t, err)
		require.True(t, started)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				start(fmt.Sprintf("due-%05d", i), at)
			}
		})
	}
	wg.Wait()

	// Forwarders, and a writer that keeps writing tasks ahead into the
	// same sets meanwhile, so transactions abort and scripts run too.
	var moved [forwarders]int
	writing := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-writing:
				return
			default:
			}
			start(fmt.Sprintf("later-%05d", i), at.Add(time.Second))
		}
	})
	for i, st := range stores {
		wg.Go(func() {
			for range 3 {
				m, err := st.Tasks().Forward(ctx, at)
				if !noErr(t, err) {
					return
				}
				moved[i] += m
			}
		})
	}
	wg.Wait()
	close(writing)
	writer.Wait()
	m, err := stores[0].Tasks().Forward(ctx, at)
	require.NoError(t, err)
	total := m
	for _, k := range moved {
		total += k
	}
	require.Equal(t, n, total, "moved once in all: %v", moved)

	seen := map[string]int{}
	for sh := range shards {
		q := stores[0].RunQueue(sh)
		for _, id := range rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val() {
			seen[id]++
			require.Equal(t, "pending", rdb.HGet(ctx, q.Keys().Task(id), "state").Val(), id)
		}
		for _, id := range rdb.ZRange(ctx, q.Keys().Scheduled(), 0, -1).Val() {
			require.Contains(t, id, "later-", "only tasks of the next second wait")
			require.Equal(t, "scheduled", rdb.HGet(ctx, q.Keys().Task(id), "state").Val(), id)
		}
	}
	require.Len(t, seen, n)
	t.Logf("%d transactions, %d scripts after one aborted", exec.count(), len(scripts.Calls()))
	for id, k := range seen {
		require.Equal(t, 1, k, "%s pending once", id)
		require.Contains(t, id, "due-")
	}
}
