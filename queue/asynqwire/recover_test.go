package asynqwire_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// leaseAt scores the leases of ids in q at t, as a taker whose last
// extension was LeaseDuration before t left them.
func leaseAt(t *testing.T, rdb redis.UniversalClient, q asynqwire.Keys, at time.Time, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, rdb.ZAddXX(context.Background(), q.Lease(), redis.Z{Member: id, Score: float64(at.Unix())}).Err())
	}
}

// Tasks taken by a taker that died, recovered by asynq's own recoverer
// (an asynq server's, at its start) in one queue and by Recover in
// another, read back the same through asynq's Inspector (and so
// asynqmon): states, attempts, errors, retry times and counters. A lease
// that ended less than LeaseSlack ago, or not yet, is left in both.
func TestRecoverDoesWhatAsynqsRecovererDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := queuetest.StartRedis(t).Universal(t)
	c := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	const retryIn = 10 * time.Minute
	now := time.Now()
	for _, name := range []string{"theirs", "ours"} {
		for id, retry := range map[string]int{"retry": 2, "archive": 0, "slack": 2, "live": 2} {
			_, err := c.Enqueue(asynq.NewTask("run", []byte(id)), asynq.Queue(name), asynq.TaskID(id), asynq.MaxRetry(retry))
			require.NoError(t, err)
		}
		got, err := asynqwire.New(rdb, name, nil).Take(ctx, 10)
		require.NoError(t, err)
		require.Len(t, got, 4)
		k := asynqwire.Keys{Queue: name}
		leaseAt(t, rdb, k, now.Add(-2*time.Minute), "retry", "archive")
		leaseAt(t, rdb, k, now.Add(-asynqwire.LeaseSlack/2), "slack")
	}

	// asynq's recoverer recovers at its server's start; the queue has no
	// pending task for its worker.
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{"theirs": 1},
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return retryIn }, LogLevel: asynq.FatalLevel})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })))
	theirs := asynqwire.Keys{Queue: "theirs"}
	require.Eventually(t, func() bool {
		return rdb.ZCard(ctx, theirs.Retry()).Val() == 1 && rdb.ZCard(ctx, theirs.Archived()).Val() == 1
	}, 20*time.Second, 10*time.Millisecond, "asynq's recoverer recovered")
	srv.Shutdown()

	r, err := asynqwire.New(rdb, "ours", nil).Recover(ctx, time.Now(), func(retried int) time.Duration {
		require.Equal(t, 0, retried)
		return retryIn
	})
	require.NoError(t, err)
	require.Equal(t, asynqwire.Recovered{Retried: 1, Archived: 1}, r)

	for _, id := range []string{"retry", "archive", "slack", "live"} {
		want, err := insp.GetTaskInfo("theirs", id)
		require.NoError(t, err)
		got, err := insp.GetTaskInfo("ours", id)
		require.NoError(t, err)
		require.Equal(t, want.State, got.State, id)
		require.Equal(t, want.Retried, got.Retried, id)
		require.Equal(t, want.MaxRetry, got.MaxRetry, id)
		require.Equal(t, want.LastErr, got.LastErr, id)
		require.WithinDuration(t, want.NextProcessAt, got.NextProcessAt, 5*time.Second, id)
		require.WithinDuration(t, want.LastFailedAt, got.LastFailedAt, 5*time.Second, id)
	}
	info, err := insp.GetTaskInfo("ours", "retry")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateRetry, info.State)
	require.Equal(t, 1, info.Retried)
	require.Equal(t, asynqwire.LeaseExpired, info.LastErr)
	require.Equal(t, asynq.ErrLeaseExpired.Error(), asynqwire.LeaseExpired)
	info, err = insp.GetTaskInfo("ours", "archive")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateArchived, info.State)
	for _, id := range []string{"slack", "live"} {
		info, err = insp.GetTaskInfo("ours", id)
		require.NoError(t, err)
		require.Equal(t, asynq.TaskStateActive, info.State, id)
	}

	want, err := insp.GetQueueInfo("theirs")
	require.NoError(t, err)
	got, err := insp.GetQueueInfo("ours")
	require.NoError(t, err)
	for _, f := range []struct {
		name      string
		want, got int
	}{
		{"active", want.Active, got.Active}, {"retry", want.Retry, got.Retry}, {"archived", want.Archived, got.Archived},
		{"processed", want.Processed, got.Processed}, {"failed", want.Failed, got.Failed},
		{"processed total", want.ProcessedTotal, got.ProcessedTotal}, {"failed total", want.FailedTotal, got.FailedTotal},
	} {
		require.Equal(t, f.want, f.got, f.name)
	}
	require.Equal(t, 2, got.Processed)
	require.Equal(t, 2, got.Failed)
}

// Recover reads the expired leases and the tasks' messages, then moves
// them in one script call that checks each still holds: a lease extended
// in between is kept by its taker, a task another recoverer moved is
// left where it is, and one whose message changed (retried and taken
// again since) is left for the next read.
func TestRecoverMovesOnlyTheTasksStillExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rdb redis.UniversalClient
	var q *asynqwire.Queue
	rdb, q, hook, c := casQueue(t, ":active", func(n int) {
		if n != 1 {
			return
		}
		k := q.Keys()
		leaseAt(t, rdb, k, time.Now().Add(asynqwire.LeaseDuration), "extended")
		// another launcher recovered "moved"
		require.NoError(t, rdb.LRem(ctx, k.Active(), 0, "moved").Err())
		require.NoError(t, rdb.ZRem(ctx, k.Lease(), "moved").Err())
		require.NoError(t, rdb.ZAdd(ctx, k.Retry(), redis.Z{Member: "moved", Score: float64(time.Now().Unix())}).Err())
		require.NoError(t, rdb.HSet(ctx, k.Task("moved"), "state", "retry").Err())
		// "changed" was retried (Retried 1: field 6) and taken again
		msg := rdb.HGet(ctx, k.Task("changed"), "msg").Val()
		require.NoError(t, rdb.HSet(ctx, k.Task("changed"), "msg", msg+"\x30\x01").Err())
	})
	enqueue(t, c, []asynq.Option{asynq.MaxRetry(3)}, "extended", "moved", "changed", "expired")
	got, err := q.Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 4)
	leaseAt(t, rdb, q.Keys(), time.Now().Add(-time.Minute), "extended", "moved", "changed", "expired")

	r, err := q.Recover(ctx, time.Now(), func(int) time.Duration { return time.Minute })
	require.NoError(t, err)
	require.Equal(t, asynqwire.Recovered{Retried: 1}, r)
	require.Len(t, hook.Calls(), 1)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for id, want := range map[string]asynq.TaskState{"extended": asynq.TaskStateActive, "moved": asynq.TaskStateRetry,
		"changed": asynq.TaskStateActive, "expired": asynq.TaskStateRetry} {
		info, err := insp.GetTaskInfo("cas", id)
		require.NoError(t, err)
		require.Equal(t, want, info.State, id)
	}
	info, err := insp.GetTaskInfo("cas", "moved")
	require.NoError(t, err)
	require.Zero(t, info.Retried, "left as the other recoverer wrote it")
	require.Empty(t, info.LastErr)
	info, err = insp.GetTaskInfo("cas", "expired")
	require.NoError(t, err)
	require.Equal(t, 1, info.Retried)
	require.Equal(t, asynqwire.LeaseExpired, info.LastErr)

	// The next pass finds the changed task, still expired, and recovers
	// it with its new count.
	r, err = q.Recover(ctx, time.Now(), func(retried int) time.Duration {
		require.Equal(t, 1, retried)
		return time.Minute
	})
	require.NoError(t, err)
	require.Equal(t, asynqwire.Recovered{Retried: 1}, r)
	info, err = insp.GetTaskInfo("cas", "changed")
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateRetry, info.State)
	require.Equal(t, 2, info.Retried)
}

// Recover moves at most RecoverBatch tasks of a queue a call, and says
// when there are more.
func TestRecoverIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, q, _, c := casQueue(t, ":none", func(int) {})
	ids := make([]string, asynqwire.RecoverBatch+5)
	for i := range ids {
		ids[i] = "t" + string(rune('A'+i/26)) + string(rune('a'+i%26))
	}
	enqueue(t, c, []asynq.Option{asynq.MaxRetry(1)}, ids...)
	got, err := q.Take(ctx, len(ids))
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	leaseAt(t, rdb, q.Keys(), time.Now().Add(-time.Minute), ids...)
	delay := func(int) time.Duration { return time.Minute }
	r, err := q.Recover(ctx, time.Now(), delay)
	require.NoError(t, err)
	require.Equal(t, asynqwire.Recovered{Retried: asynqwire.RecoverBatch, Full: true}, r)
	r, err = q.Recover(ctx, time.Now(), delay)
	require.NoError(t, err)
	require.Equal(t, asynqwire.Recovered{Retried: 5}, r)
	require.Zero(t, rdb.LLen(ctx, q.Keys().Active()).Val())
}

// DeleteExpiredCompleted deletes the completed tasks past their retention
// as asynq's janitor does, checking in its script that each read is
// still completed and expired: one enqueued again, or completed again
// with a later expiry, in between is left.
func TestDeleteExpiredCompletedDeletesOnlyThoseStillExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	later := time.Now().Add(2 * time.Hour)
	var rdb redis.UniversalClient
	var q *asynqwire.Queue
	rdb, q, hook, c := casQueue(t, ":completed", func(n int) {
		if n != 1 {
			return
		}
		k := q.Keys()
		require.NoError(t, rdb.ZRem(ctx, k.Completed(), "again").Err()) // enqueued again
		require.NoError(t, rdb.HSet(ctx, k.Task("again"), "state", "pending").Err())
		require.NoError(t, rdb.LPush(ctx, k.Pending(), "again").Err())
		require.NoError(t, rdb.ZAdd(ctx, k.Completed(), redis.Z{Member: "kept", Score: float64(later.Add(time.Hour).Unix())}).Err())
	})
	enqueue(t, c, []asynq.Option{asynq.Retention(time.Hour)}, "expired", "again", "kept", "fresh")
	got, err := q.Take(ctx, 10)
	require.NoError(t, err)
	require.Len(t, got, 4)
	for _, tk := range got {
		if tk.ID == "fresh" {
			continue
		}
		mine, err := q.Finish(ctx, tk, asynqwire.Done, time.Time{}, "")
		require.NoError(t, err)
		require.True(t, mine)
	}

	n, err := q.DeleteExpiredCompleted(ctx, later)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, hook.Calls(), 1)
	require.Zero(t, rdb.Exists(ctx, q.Keys().Task("expired")).Val())
	require.Equal(t, []string{"kept"}, rdb.ZRange(ctx, q.Keys().Completed(), 0, -1).Val())
	require.Equal(t, "pending", rdb.HGet(ctx, q.Keys().Task("again"), "state").Val())
	require.Equal(t, "completed", rdb.HGet(ctx, q.Keys().Task("kept"), "state").Val())
	require.Equal(t, "active", rdb.HGet(ctx, q.Keys().Task("fresh"), "state").Val())

	n, err = q.DeleteExpiredCompleted(ctx, later)
	require.NoError(t, err)
	require.Zero(t, n, "nothing expired left")
}
