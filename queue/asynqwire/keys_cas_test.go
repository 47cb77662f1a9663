package asynqwire_test

import (
	"context"
	"fmt"
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

// The run queue's scripts get every key in KEYS: the caller reads the
// task ids first and names their task keys; the script checks what was
// read is still so, and acts only on that. These tests change the queue
// between the read and the script. (queuetest.KeyGuard, on every test
// client, fails a script that touches a key not in KEYS.)

// casQueue is a queue of its own on a fresh Redis, with asynq's Client
// to enqueue tasks into it in asynq's layout, and a hook on the script
// calls whose first key ends in suffix, which calls change before the
// n-th of them once (the hook sees a call again after NOSCRIPT).
func casQueue(t *testing.T, suffix string, change func(n int)) (redis.UniversalClient, *asynqwire.Queue, *queuetest.ScriptHook, *asynq.Client) {
	t.Helper()
	rdb := queuetest.StartRedis(t).Universal(t)
	changed := map[int]bool{}
	hook := &queuetest.ScriptHook{Match: func(keys []string) bool { return strings.HasSuffix(keys[0], suffix) }, Fail: func(n int) error {
		if !changed[n] {
			changed[n] = true
			change(n)
		}
		return nil
	}}
	rdb.AddHook(hook)
	return rdb, asynqwire.New(rdb, "cas", nil), hook, asynq.NewClientFromRedisClient(rdb)
}

func enqueue(t *testing.T, c *asynq.Client, opts []asynq.Option, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := c.Enqueue(asynq.NewTask("run", []byte(id)), append(opts, asynq.Queue("cas"), asynq.TaskID(id))...)
		require.NoError(t, err)
	}
}

func ids(tasks []*asynqwire.Task) []string {
	out := make([]string, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

// Another taker took the list's end between Take's read and its script:
// the script takes the ids after those, in the same call. A task put
// back at the end meanwhile is none of the ids read: the script takes
// nothing, and Take reads again.
func TestTakeNamesTheIDsItReadAndTakesThoseStillAtTheEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rdb redis.UniversalClient
	var q *asynqwire.Queue
	rdb, q, hook, c := casQueue(t, ":pending", func(n int) {
		switch n {
		case 1: // an asynq server takes k1, the list's end
			require.NoError(t, rdb.RPopLPush(ctx, q.Keys().Pending(), q.Keys().Active()).Err())
		case 2: // k1 is put back at the end (a launcher stopping)
			require.NoError(t, rdb.LRem(ctx, q.Keys().Active(), 0, "k1").Err())
			require.NoError(t, rdb.RPush(ctx, q.Keys().Pending(), "k1").Err())
		}
	})
	enqueue(t, c, nil, "k1", "k2", "k3", "k4")

	got, err := q.Take(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"k2", "k3"}, ids(got), "k1 was taken first; the next two")
	require.Len(t, hook.Calls(), 1)

	got, err = q.Take(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"k1", "k4"}, ids(got), "read again after k1 came back")
	require.Len(t, hook.Calls(), 3, "stale, then taken")
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		require.Equal(t, "active", rdb.HGet(ctx, q.Keys().Task(id), "state").Val(), id)
	}
	require.Zero(t, rdb.LLen(ctx, q.Keys().Pending()).Val())
	require.Equal(t, int64(4), rdb.ZCard(ctx, q.Keys().Lease()).Val())
}

// Two launchers take from the same queues at once, each from the ids it
// read and kept: every task is taken once, and all are taken.
func TestTwoSetsTakeEveryTaskOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	const shards, n = 4, 400
	var stores [2]*queue.Store
	for i := range stores {
		var err error
		stores[i], err = queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: shards})
		require.NoError(t, err)
	}
	for i := range n {
		_, started, err := stores[0].StartManualRun(ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: time.Now().Add(-time.Second), IdempotencyKey: fmt.Sprintf("k%03d", i)})
		require.NoError(t, err)
		require.True(t, started)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, st := range stores {
		wg.Go(func() {
			for empty := 0; empty < 3; {
				got, err := st.Tasks().Take(ctx, 7)
				if !noErr(t, err) {
					return
				}
				if len(got) == 0 {
					empty++
					continue
				}
				empty = 0
				mu.Lock()
				for _, tk := range got {
					seen[tk.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, n, "every task taken")
	for id, k := range seen {
		require.Equal(t, 1, k, "%s taken once", id)
	}
}

func noErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// Forward reads the ids due, then moves them; one another forwarder
// moved in between is moved once, by that one. (The move is a MULTI/EXEC
// under WATCH, which the other's move aborts; then the script moves
// the ids read that are still due: forward_tx_test.go.)
func TestForwardMovesOnlyTheIDsStillDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rdb redis.UniversalClient
	var q *asynqwire.Queue
	rdb, q, hook, c := casQueue(t, ":scheduled", func(int) {})
	(&beforeExec{change: func(n int) {
		if n == 1 { // another forwarder moves k1
			require.NoError(t, rdb.ZRem(ctx, q.Keys().Scheduled(), "k1").Err())
			require.NoError(t, rdb.LPush(ctx, q.Keys().Pending(), "k1").Err())
			require.NoError(t, rdb.HSet(ctx, q.Keys().Task("k1"), "state", "pending").Err())
		}
	}}).addTo(t, rdb)
	at := time.Now().Add(time.Hour)
	enqueue(t, c, []asynq.Option{asynq.ProcessAt(at)}, "k1", "k2", "k3")
	enqueue(t, c, []asynq.Option{asynq.ProcessAt(at.Add(time.Hour))}, "later")

	moved, err := q.Forward(ctx, at.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, moved, "k2 and k3; k1 was moved by the other")
	require.Len(t, hook.Calls(), 1)
	require.ElementsMatch(t, []string{"k1", "k2", "k3"}, rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val())
	require.Equal(t, []string{"later"}, rdb.ZRange(ctx, q.Keys().Scheduled(), 0, -1).Val())
	for _, id := range []string{"k2", "k3"} {
		require.Equal(t, "pending", rdb.HGet(ctx, q.Keys().Task(id), "state").Val())
		require.NotEmpty(t, rdb.HGet(ctx, q.Keys().Task(id), "pending_since").Val())
	}
}

// Archiving a task trims the archive as asynq does: tasks archived more
// than 90 days ago go with their hashes. A task archived between the
// read of what to drop and the trim is left by that call (its key was
// not named) and dropped by the next read.
func TestArchiveTrimsWithTheKeysItRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := float64(time.Now().Add(-100 * 24 * time.Hour).Unix())
	var rdb redis.UniversalClient
	var q *asynqwire.Queue
	rdb, q, hook, c := casQueue(t, ":archived", func(n int) {
		if n == 1 { // another archive lands an old task
			require.NoError(t, rdb.HSet(ctx, q.Keys().Task("late"), "state", "archived").Err())
			require.NoError(t, rdb.ZAdd(ctx, q.Keys().Archived(), redis.Z{Member: "late", Score: old}).Err())
		}
	})
	enqueue(t, c, nil, "run")
	require.NoError(t, rdb.HSet(ctx, q.Keys().Task("old"), "state", "archived").Err())
	require.NoError(t, rdb.ZAdd(ctx, q.Keys().Archived(), redis.Z{Member: "old", Score: old}).Err())
	got, err := q.Take(ctx, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)

	mine, err := q.Finish(ctx, got[0], asynqwire.Archive, time.Time{}, "failed for good")
	require.NoError(t, err)
	require.True(t, mine)
	require.Len(t, hook.Calls(), 2, "one trim left the late task, the next dropped it")
	require.Equal(t, []string{"run"}, rdb.ZRange(ctx, q.Keys().Archived(), 0, -1).Val())
	require.Zero(t, rdb.Exists(ctx, q.Keys().Task("old"), q.Keys().Task("late")).Val())
	require.Equal(t, "archived", rdb.HGet(ctx, q.Keys().Task("run"), "state").Val())
}
