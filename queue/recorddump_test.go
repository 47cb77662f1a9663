package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// A run record RESTOREd from its payload is the record HSET makes, byte
// for byte in Redis's own serialization: the same listpack, each value
// in the encoding Redis picks (integers of every width, numbers it keeps
// as strings), the same fields in the same order.
func TestRunRecordDumpIsWhatHSETBuilds(t *testing.T) {
	t.Parallel()
	// Uncompressed DUMPs, so the payloads compare before their footers
	// (the server's RDB version may be later than the payload's).
	n := queuetest.StartServer(t, "--rdbcompression", "no")
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	type rec struct {
		sid      string
		at, fire int64
		st       model.RunStatus
		now      int64
		err, rsn string
	}
	recs := []rec{
		{"sched-0000001", 1767225600000, 1767225600000, model.RunEnqueued, 1767225600017, "", ""},
		{"42", 1767225600000, 1767225601234, model.RunEnqueued, 1767225600017, "", ""},
		{"-7", 0, 127, model.RunSkipped, 128, "skipped: overlap", string(model.ReasonOverlap)},
		{"0", -4096, 4095, model.RunSkipped, -32768, "", string(model.ReasonOverlap)},
		{"007", 32767, 8388607, model.RunFailed, -8388608, "x", ""},
		{"9223372036854775807", 2147483647, -2147483648, model.RunEnqueued, 1 << 40, "", ""},
		{"18446744073709551616", 1, 2, model.RunEnqueued, 3, fmt.Sprintf("%063d", 1), ""},
	}
	for i, r := range recs {
		key := fmt.Sprintf("chronos:test:run:%d", i)
		args := append([]any{"HSET", key}, queue.RunRecordHSETArgs(r.sid, r.at, r.fire, string(r.st), r.now, r.err, r.rsn)...)
		require.NoError(t, rdb.Do(ctx, args...).Err())
		want, err := rdb.Dump(ctx, key).Result()
		require.NoError(t, err)
		got := queue.RunRecordDump(r.sid, r.at, r.fire, string(r.st), r.now, r.err, r.rsn)
		require.Equal(t, []byte(want[:len(want)-10]), got[:len(got)-10], "record %d", i)

		// And the server takes it: version and checksum.
		require.NoError(t, rdb.Restore(ctx, key+":restored", 0, string(got)).Err(), "record %d", i)
		a, err := rdb.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		b, err := rdb.HGetAll(ctx, key+":restored").Result()
		require.NoError(t, err)
		require.Equal(t, a, b, "record %d", i)
	}
}

// NewStore RESTOREs records on a Redis that builds them as HSET does, and
// not where RESTORE is missing (miniredis) or refused.
func TestRestoreBuildsRecordsProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	s, err := queue.NewStore(ctx, r.Universal(t), queue.NewSimClock(time.Unix(0, 0)), nil)
	require.NoError(t, err)
	require.True(t, s.RestoresRecords())

	mr := miniredis.RunT(t)
	mc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = mc.Close() })
	ms, err := queue.NewStore(ctx, mc, queue.NewSimClock(time.Unix(0, 0)), nil)
	require.NoError(t, err)
	require.False(t, queue.RestoreBuildsRecords(ctx, ms))
	require.False(t, ms.RestoresRecords())

	// A user whose ACL refuses RESTORE.
	rdb := r.Client(t)
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "norestore", "on", ">pw", "~*", "&*", "+@all", "-restore").Err())
	nc := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "norestore", Password: "pw"})
	t.Cleanup(func() { _ = nc.Close() })
	ns, err := queue.NewStore(ctx, nc, queue.NewSimClock(time.Unix(0, 0)), nil)
	require.NoError(t, err)
	require.False(t, ns.RestoresRecords())
}
