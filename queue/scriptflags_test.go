package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestScriptsRefusedWholeWhenFull runs every script on a full Redis: each
// one that may write is refused before it runs (so none can write part of
// its work past maxmemory), and each read-only one runs.
func TestScriptsRefusedWholeWhenFull(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction").Universal(t)
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	require.True(t, store.ScriptFlags(), "Redis 7 understands script flags")
	require.NoError(t, store.CheckWritable(ctx))
	filler := queuetest.Fill(t, rdb)

	scripts := queue.LoadedScripts()
	require.NotEmpty(t, scripts)
	for name, l := range scripts {
		src := l.Source
		require.True(t, strings.HasPrefix(src, "#!lua"), "%s: the flags line must come first", name)
		// Sixteen keys and arguments: each script finds what it reads
		// (mostly missing keys) and would go on to write.
		keys := make([]string, 16)
		args := make([]any, 16)
		for i := range keys {
			keys[i] = "{x}:k" + string(rune('a'+i))
			args[i] = "1"
		}
		err := l.Script.Run(ctx, rdb, keys, args...).Err()
		if l.Writes && !l.RunsWhenFull {
			require.True(t, queue.IsFull(err), "%s: want refused as full, got %v", name, err)
		} else {
			require.False(t, queue.IsFull(err), "%s reads or frees only, and must run on a full Redis: %v", name, err)
		}
	}
	require.True(t, queue.IsFull(store.CheckWritable(ctx)))

	queuetest.DelKeys(t, rdb, filler)
	require.NoError(t, store.CheckWritable(ctx))
}

// TestScriptFlagsOnMiniredis: miniredis does not parse the flags line, so
// the store cuts it off there and every script still runs.
func TestScriptFlagsOnMiniredis(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	require.False(t, store.ScriptFlags())
	// A second store on the same client adds no second hook.
	_, err = queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	require.NoError(t, store.CheckWritable(ctx))
	for range 2 { // the second run goes by digest, which the hook maps to the script as cut
		// trim_history with no schedules to trim: it removes nothing.
		n, err := queue.LoadedScripts()["trim_history"].Script.Run(ctx, rdb, nil, 1, 0).Int()
		require.NoError(t, err)
		require.Zero(t, n)
	}
	for name, l := range queue.LoadedScripts() {
		require.NoError(t, rdb.Do(ctx, "SCRIPT", "LOAD", l.Source).Err(), name)
	}
}

// TestUpsertOnAFullRedisWritesNothing is the finding of issue 26: upsert.lua
// starts with an HDEL (which frees memory), so without script flags a full
// Redis let every upsert through and grew past maxmemory.
func TestUpsertOnAFullRedisWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction").Universal(t)
	ctx := context.Background()
	store, err := queue.NewStore(ctx, rdb, queue.NewSimClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	require.NoError(t, err)
	rec := func(expr string) *model.ScheduleRecord {
		rec := &model.ScheduleRecord{ID: "full", CronExpr: expr, Timezone: "UTC", Target: model.TargetWorkflow,
			WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
		require.NoError(t, rec.Validate())
		return rec
	}
	_, err = store.UpsertSchedule(ctx, rec("0 * * * *"))
	require.NoError(t, err)
	key := queuetest.Keys(t, rdb, "chronos:*:sched:full")[0]
	before := rdb.HGetAll(ctx, key).Val()
	filler := queuetest.Fill(t, rdb)

	_, err = store.UpsertSchedule(ctx, rec("*/5 * * * *"))
	require.True(t, queue.IsFull(err), "want refused as full, got %v", err)
	_, err = store.UpsertSchedule(ctx, rec("*/5 * * * *"))
	require.True(t, queue.IsFull(err), "want refused as full, got %v", err)
	require.Equal(t, before, rdb.HGetAll(ctx, key).Val(), "nothing of the refused upsert was written")
	_, err = store.SetPaused(ctx, "full", true)
	require.True(t, queue.IsFull(err), "want refused as full, got %v", err)
	require.True(t, queue.IsFull(store.DeleteSchedule(ctx, "full")))
	got, err := store.GetSchedule(ctx, "full")
	require.NoError(t, err, "reads go on")
	require.Equal(t, "0 * * * *", got.CronExpr)

	queuetest.DelKeys(t, rdb, filler)
	_, err = store.UpsertSchedule(ctx, rec("*/5 * * * *"))
	require.NoError(t, err, "writes resume once memory is freed")
}
