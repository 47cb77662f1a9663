package queue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The fast path RESTOREs its runs' records from payloads it builds
// (recorddump.go). These tests hold those records to commit.lua's, byte
// for byte as Redis serializes them, and check what happens when the
// server refuses a RESTORE that NewStore's probe made.

// runDumps returns the DUMP of the records of plans' runs in rdb.
func runDumps(t *testing.T, rdb redis.UniversalClient, plans []queue.Plan) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range plans {
		for _, r := range p.Runs {
			k := queue.RunKey(tickShard, r.Key)
			v, err := rdb.Dump(context.Background(), k).Result()
			require.NoError(t, err, k)
			out[k] = v
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestTickDueRestoresTheRecordsCommitScriptWrites(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	c := tickPageCase()
	ctx := context.Background()

	fast := setupMethod(t, r, 1)
	require.True(t, fast.store.RestoresRecords(), "this Redis builds records from DUMP payloads")
	fast.seed(t, c.seed)
	_, plans, _, err := fast.store.TickDue(ctx, tickShard, methodNow, 100, c.planWith(t, nil))
	require.NoError(t, err)
	require.EqualValues(t, 1, fast.store.FastPages(), "the page took the fast path")
	got := runDumps(t, fast.rdb, plans)

	slow := luaSide(t, fast)
	slow.seed(t, c.seed)
	sdue, err := slow.store.ReadDue(ctx, tickShard, methodNow, 100)
	require.NoError(t, err)
	splans, _, err := c.planWith(t, nil)(sdue)
	require.NoError(t, err)
	_, err = slow.store.Commit(ctx, tickShard, methodNow, splans)
	require.NoError(t, err)
	require.Equal(t, runDumps(t, slow.rdb, splans), got, "the same records, encoded alike")
}

// corruptRestores is a go-redis hook that spoils the checksum of every
// RESTORE payload a pipeline sends: the server refuses it when the
// transaction runs.
type corruptRestores struct{}

func (corruptRestores) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (corruptRestores) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (corruptRestores) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "restore" {
				p := slices.Clone(c.Args()[3].([]byte))
				p[len(p)-1] ^= 0xFF
				c.Args()[3] = p
			}
		}
		return next(ctx, cmds)
	}
}

func TestTickDueWritesRecordsWhenRestoreIsRefused(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	if r.Cluster() != nil {
		t.Skip("the hook and the ACL sit on one node; TestTickDue* cover the cluster")
	}
	ctx := context.Background()
	cases := []struct {
		name string
		// refuse makes the server refuse the fast store's RESTOREs from
		// now on, after NewStore's probe took them.
		refuse func(t *testing.T, admin *redis.Client, fc *redis.Client)
	}{
		{"refused as run: a payload the server does not take", func(t *testing.T, _, fc *redis.Client) {
			fc.AddHook(corruptRestores{})
		}},
		{"refused as queued: an ACL without RESTORE", func(t *testing.T, admin, _ *redis.Client) {
			require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "ticker", "-restore").Err())
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setupMethod(t, r, 13+i)
			admin := r.Client(t)
			require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "ticker", "reset", "on", ">pw", "~*", "&*", "+@all").Err())
			fc := redis.NewClient(&redis.Options{Addr: r.Addr, DB: 13 + i, Username: "ticker", Password: "pw"})
			t.Cleanup(func() { _ = fc.Close() })
			fast, err := queue.NewStore(ctx, fc, b.clock, nil)
			require.NoError(t, err)
			require.True(t, fast.RestoresRecords())
			c.refuse(t, admin, fc)

			id := "refused"
			sh := runsMadeSchedule(t, b.store, b.clock, id)
			key := model.IdempotencyKey(id, runsMadeT)
			_, plans, applied, err := fast.TickDue(ctx, sh, runsMadeT.Add(time.Second), 100, planAt)
			require.NoError(t, err)
			require.Equal(t, []bool{true}, applied)
			require.True(t, plans[0].Runs[0].Written)
			require.False(t, fast.RestoresRecords(), "records are written by HSET from now on")

			run, _, err := b.store.GetRun(ctx, key)
			require.NoError(t, err, "the run has its record")
			require.Equal(t, model.RunEnqueued, run.Status)
			require.Equal(t, id, run.ScheduleID)
			require.Equal(t, runsMadeT, run.RunAt)
			require.NotNil(t, run.EnqueuedAt)
			qs := queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, key)
			require.Len(t, qs, 1, "one task for the run")
			require.Equal(t, []string{key}, b.rdb.LRange(ctx, "asynq:{"+qs[0]+"}:pending", 0, -1).Val(), "the run's task is pending once")
			require.Equal(t, msStr(runsMadeT.Add(time.Minute)), b.rdb.HGet(ctx, queue.ScheduleKey(sh, id), queue.SfNext).Val())

			// The next chunk takes the fast path with HSET.
			id2 := "after"
			sh2 := runsMadeSchedule(t, b.store, b.clock, id2)
			pages := fast.FastPages()
			_, _, applied, err = fast.TickDue(ctx, sh2, runsMadeT.Add(time.Second), 100, planAt)
			require.NoError(t, err)
			require.Equal(t, []bool{true}, applied)
			require.Equal(t, pages+1, fast.FastPages())
			_, _, err = b.store.GetRun(ctx, model.IdempotencyKey(id2, runsMadeT))
			require.NoError(t, err)
		})
	}
}
