package queue_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestStatusFieldsLoadWhatTheCallerDidNotRead: status.lua reads only the
// schedule fields a run's end needs (4 for the SUCCESS of a run not in
// flight) and hands the libraries h, which reads a field it lacks from
// the hash when one asks (status_fields), and keeps it. alarm_of, on a
// workflow's schedule, reads nothing more. On miniredis (chronos dev)
// and a real Redis.
func TestStatusFieldsLoadWhatTheCallerDidNotRead(t *testing.T) {
	t.Parallel()
	// The Redis case takes the topology's own client: on a Cluster the
	// schedule's key may live on any master.
	for name, client := range map[string]func(t *testing.T) redis.UniversalClient{
		"miniredis": func(t *testing.T) redis.UniversalClient {
			rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		},
		"redis": func(t *testing.T) redis.UniversalClient { return queuetest.StartRedis(t).Universal(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := client(t)
			// t: target, next: the next fire time (queue/schema.go).
			require.NoError(t, rdb.HSet(ctx, "sched", "t", "workflow", "next", "1700000000000").Err())
			got, err := rdb.Eval(ctx, queue.StatusFieldsProbe, []string{"sched"}).StringSlice()
			require.NoError(t, err)
			require.Equal(t, []string{"true", "true", "1700000000000", "false", "1700000000000"}, got)
		})
	}
}
