package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A store trusts WATCH on redis-server and not on miniredis, whose WATCH
// misses a ZREM that leaves members in the set; the probe leaves no key.
func TestStoreTrustsWatchOnlyWhereItSeesEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, rdb := range map[string]redis.UniversalClient{
		"redis-server": queuetest.StartRedis(t).Universal(t),
		"miniredis":    (&queuetest.Redis{Addr: miniredis.RunT(t).Addr()}).Client(t),
	} {
		store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1})
		require.NoError(t, err, name)
		require.Equal(t, name == "redis-server", store.WatchSeesWrites(), name)
		require.Empty(t, rdb.Keys(ctx, "chronos:probe:*").Val(), name)
	}
}

// On miniredis (chronos dev), a forward whose ids another forwarder moves
// between its read and its write moves each task once: without a WATCH
// to trust it calls forward.lua, which moves only the ids still due.
func TestForwardOnMiniredisMovesEachTaskOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := miniredis.RunT(t).Addr()
	rdb := (&queuetest.Redis{Addr: addr}).Client(t)
	other := (&queuetest.Redis{Addr: addr}).Client(t)
	store, err := queue.NewStore(ctx, rdb, queue.RealClock{}, &queue.Config{Shards: 1})
	require.NoError(t, err)
	q := store.RunQueue(0)
	c := asynq.NewClientFromRedisClient(rdb)
	at := time.Now().Add(time.Hour)
	for _, id := range []string{"k1", "k2", "k3"} {
		_, err := c.Enqueue(asynq.NewTask("run", nil), asynq.Queue(q.Name()), asynq.TaskID(id), asynq.ProcessAt(at))
		require.NoError(t, err)
	}
	rdb.AddHook(afterRead{once: &sync.Once{}, key: q.Keys().Scheduled(), then: func() {
		// The other forwarder moves k1, as a forward's writes do.
		require.NoError(t, other.HSet(ctx, q.Keys().Task("k1"), "state", "pending").Err())
		require.NoError(t, other.ZRem(ctx, q.Keys().Scheduled(), "k1").Err())
		require.NoError(t, other.LPush(ctx, q.Keys().Pending(), "k1").Err())
	}})

	moved, err := q.Forward(ctx, at.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, moved, "k1 was moved by the other")
	require.ElementsMatch(t, []string{"k1", "k2", "k3"}, rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val(), "each task once")
	require.Zero(t, rdb.ZCard(ctx, q.Keys().Scheduled()).Val())
}

// afterRead is a go-redis hook that calls then once, after the first
// ZRANGEBYSCORE of key has answered.
type afterRead struct {
	once *sync.Once
	key  string
	then func()
}

func (h afterRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "zrangebyscore" && len(cmd.Args()) > 1 && cmd.Args()[1] == h.key {
			h.once.Do(h.then)
		}
		return err
	}
}

func (h afterRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// On miniredis a page of due schedules is committed by commit.lua, the
// compare-and-set that needs no WATCH, and applies as on redis-server.
func TestTickDueOnMiniredisCommitsByScript(t *testing.T) {
	t.Parallel()
	c := tickPageCase()
	b := setupMethod(t, &queuetest.Redis{Addr: miniredis.RunT(t).Addr()}, 0)
	b.seed(t, c.seed)
	due, _, applied, err := b.store.TickDue(context.Background(), tickShard, methodNow, 100, c.planWith(t, nil))
	require.NoError(t, err)
	require.Len(t, due, len(c.plans))
	require.Equal(t, []bool{true, true, true, true, true, true}, applied)
	require.Zero(t, b.store.FastPages(), "no fast path without a WATCH to trust")
}
