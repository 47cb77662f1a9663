package queue_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// lostReplyStore is a store whose next script's reply is lost on the way
// back (a network blip, a proxy restart, a failover) once arm is called:
// the script ran, and go-redis sends it again on a new connection. On a
// cluster every node sits behind a proxy of its own, and the reply lost
// is the one from the master of the script's first key.
func lostReplyStore(t *testing.T) (store *queue.Store, arm func()) {
	t.Helper()
	r := queuetest.StartRedis(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	cl := r.Cluster()
	if cl == nil {
		proxy := queuetest.StartProxy(t, r.Addr)
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr, MinRetryBackoff: time.Millisecond})
		t.Cleanup(func() { rdb.Close() })
		hook := &queuetest.BeforeScriptHook{}
		rdb.AddHook(hook)
		store, err := queue.NewStore(context.Background(), rdb, clock, nil)
		require.NoError(t, err)
		return store, func() { hook.Fn = proxy.DropNextReply }
	}
	proxies := map[string]*queuetest.Proxy{}
	for _, n := range cl.Nodes {
		proxies[n.Addr] = queuetest.StartProxy(t, n.Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           []string{cl.Nodes[0].Addr},
		MinRetryBackoff: time.Millisecond,
		// The cluster names its nodes by their own addresses; every
		// connection to one goes through its proxy.
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			p, ok := proxies[addr]
			if !ok {
				return nil, fmt.Errorf("no proxy for node %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, p.Addr)
		},
	})
	t.Cleanup(func() { rdb.Close() })
	// Every master has every script, so the lost reply is the script's
	// own and not a NOSCRIPT before it.
	require.NoError(t, rdb.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		for _, l := range queue.LoadedScripts() {
			if err := m.ScriptLoad(ctx, l.Source).Err(); err != nil {
				return err
			}
		}
		return nil
	}))
	hook := &firstKeyScriptHook{}
	rdb.AddHook(hook)
	store, err := queue.NewStore(context.Background(), rdb, clock, nil)
	require.NoError(t, err)
	return store, func() {
		hook.fn = func(key string) {
			m, err := rdb.MasterForKey(context.Background(), key)
			require.NoError(t, err)
			proxies[m.Options().Addr].DropNextReply()
		}
	}
}

// firstKeyScriptHook calls fn (once) with the first key of the client's
// next script, just before it is sent.
type firstKeyScriptHook struct{ fn func(key string) }

func (h *firstKeyScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *firstKeyScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *firstKeyScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// EVALSHA sha numkeys key ...
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && h.fn != nil && len(cmd.Args()) > 3 {
			f := h.fn
			h.fn = nil
			f(fmt.Sprint(cmd.Args()[3]))
		}
		return next(ctx, cmd)
	}
}

// The call that deleted a schedule says so, though its script ran twice.
func TestDeleteSentAgainAfterALostReplyReportsTheDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, arm := lostReplyStore(t)
	rec := &model.ScheduleRecord{ID: "d", CronExpr: "0 * * * *", Target: model.TargetWorkflow,
		WorkflowID: "wf", Version: "1", UserID: "u", OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupNone}
	require.NoError(t, rec.Validate())
	_, err := store.UpsertSchedule(ctx, rec)
	require.NoError(t, err)
	require.ErrorIs(t, store.DeleteSchedule(ctx, "other"), queue.ErrNotFound) // the script is loaded

	arm()
	require.NoError(t, store.DeleteSchedule(ctx, "d"))
	_, err = store.GetSchedule(ctx, "d")
	require.ErrorIs(t, err, queue.ErrNotFound)
	require.ErrorIs(t, store.DeleteSchedule(ctx, "d"), queue.ErrNotFound, "a later delete finds nothing")
}

// The call that started a manual run says it started it, though its
// script ran twice; another call with the key did not.
func TestManualRunSentAgainAfterALostReplyReportsTheStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, arm := lostReplyStore(t)
	m := queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u", ScheduledFor: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), IdempotencyKey: "first"}
	_, started, err := store.StartManualRun(ctx, m) // the script is loaded
	require.NoError(t, err)
	require.True(t, started)

	arm()
	m.IdempotencyKey = "second"
	run, started, err := store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.Equal(t, model.RunEnqueued, run.Status)
	require.True(t, started, "this call created the run and its task")
	_, started, err = store.StartManualRun(ctx, m)
	require.NoError(t, err)
	require.False(t, started, "a later call with the key")
}
