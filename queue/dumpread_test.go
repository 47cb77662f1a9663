package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TickDue's fast path reads schedule hashes by DUMP (dumpread.go). These
// tests hold what it reads to what HGETALL gives, on the server itself,
// and check the fallbacks: a hash that is no listpack, a server that
// refuses DUMP.

// dumpReadValues are values of every kind a listpack holds: integers of
// every width at their bounds, numbers Redis keeps as strings, strings
// of the lengths its encodings change at, and repeats LZF compresses.
func dumpReadValues(long bool) []string {
	vals := []string{"", "0", "1", "-1", "127", "128", "-4096", "4095", "4096", "-4097", "32767", "-32768", "32768",
		"8388607", "-8388608", "8388608", "2147483647", "-2147483648", "2147483648", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "007", "+1", "-0", "1.5", " 1", "1767225600000",
		"x", strings.Repeat("a", 63), strings.Repeat("ab", 32), "0 5 1 * * *", "fire_immediately"}
	if long {
		vals = append(vals, strings.Repeat("b", 127), strings.Repeat("c", 128), strings.Repeat("d", 4095),
			strings.Repeat("e", 4096), strings.Repeat("fg", 9000), strings.Repeat("h", 16383-2))
	}
	return vals
}

func TestHashDumpReadsAsHGETALL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
		long  bool
	}{
		{"defaults", nil, false},
		{"uncompressed", []string{"--rdbcompression", "no"}, false},
		// Long values kept in a listpack: every string length encoding
		// and back lengths of two and three bytes.
		{"long values", []string{"--hash-max-listpack-value", "100000", "--hash-max-listpack-entries", "100000"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := queuetest.StartServer(t, tc.extra...)
			rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
			t.Cleanup(func() { _ = rdb.Close() })
			ctx := context.Background()
			vals := dumpReadValues(tc.long)
			var hashes []map[string]string
			// One hash of every value, fields named by values too.
			all := map[string]string{}
			for i, v := range vals {
				all[fmt.Sprintf("f%d", i)] = v
				all[v] = strconv.Itoa(i)
			}
			hashes = append(hashes, all)
			// Small hashes, one or two fields, in the order HSET appends.
			for i, v := range vals {
				hashes = append(hashes, map[string]string{"v": v}, map[string]string{v: vals[(i+7)%len(vals)], "n": v})
			}
			for i, h := range hashes {
				k := fmt.Sprintf("h:%d", i)
				require.NoError(t, rdb.HSet(ctx, k, h).Err())
				dump, err := rdb.Dump(ctx, k).Result()
				require.NoError(t, err)
				got, ok := queue.ReadHashDump(dump)
				enc := rdb.ObjectEncoding(ctx, k).Val()
				if enc != "listpack" {
					require.False(t, ok, "%s is a %s", k, enc)
					continue
				}
				require.True(t, ok, "%s reads: %q", k, dump)
				require.Equal(t, rdb.HGetAll(ctx, k).Val(), got, k)
				require.Len(t, got, len(h))
			}
		})
	}
}

func TestHashDumpRefusesWhatIsNoListpackHash(t *testing.T) {
	t.Parallel()
	n := queuetest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	require.NoError(t, rdb.HSet(ctx, "small", "k", "cron", "c", "0 5 1 * * *", "a", "1767225600000").Err())
	require.NoError(t, rdb.HSet(ctx, "table", "w", strings.Repeat("w", 65)).Err())
	require.NoError(t, rdb.Set(ctx, "string", "v", 0).Err())
	require.NoError(t, rdb.RPush(ctx, "list", "a", "b").Err())
	dump := rdb.Dump(ctx, "small").Val()
	_, ok := queue.ReadHashDump(dump)
	require.True(t, ok)
	for _, k := range []string{"table", "string", "list"} {
		_, ok := queue.ReadHashDump(rdb.Dump(ctx, k).Val())
		require.False(t, ok, k)
	}
	// Any byte changed, or the payload cut short, fails the checksum or
	// the framing.
	for i := range len(dump) {
		b := []byte(dump)
		b[i] ^= 0x10
		_, ok := queue.ReadHashDump(string(b))
		require.False(t, ok, "byte %d changed", i)
		_, ok = queue.ReadHashDump(dump[:i])
		require.False(t, ok, "cut at %d", i)
	}
}

// tickDueReads returns what TickDue read of shard's due page, without
// committing it, and what ReadDue (HGETALL in a MULTI) reads.
func tickDueReads(t *testing.T, store *queue.Store, shard int, until time.Time) (fast, multi []queue.DueSchedule) {
	t.Helper()
	ctx := context.Background()
	stop := fmt.Errorf("read only")
	_, _, _, err := store.TickDue(ctx, shard, until, 500, func(due []queue.DueSchedule) ([]queue.Plan, time.Time, error) {
		fast = append(fast, due...)
		return nil, time.Time{}, stop
	})
	require.ErrorIs(t, err, stop)
	multi, err = store.ReadDue(ctx, shard, until, 500)
	require.NoError(t, err)
	return fast, multi
}

// dumpReadSchedules registers plain schedules, one with a value too long
// for a listpack (a hash table, read again by HGETALL), one paused, and
// returns the shard they share and when they are due.
func dumpReadSchedules(t *testing.T, store *queue.Store) (int, time.Time) {
	t.Helper()
	ctx := context.Background()
	shard := queue.ShardOf("dump-0", queue.ShardsDefault)
	n := 0
	for i := 0; n < 30; i++ {
		id := fmt.Sprintf("dump-%d", i)
		if queue.ShardOf(id, queue.ShardsDefault) != shard {
			continue
		}
		rec := model.ScheduleRecord{ID: id, Kind: model.KindCron, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1",
			UserID: "u", CronExpr: "*/5 * * * *", Timezone: "Europe/Berlin", OverlapPolicy: model.OverlapSkip}
		switch n {
		case 3:
			rec.WorkflowID = strings.Repeat("w", 100)
		case 5:
			rec.JitterMs = 1500
			rec.CatchupPolicy = model.CatchupFireImmediately
		}
		_, err := store.UpsertSchedule(ctx, &rec)
		require.NoError(t, err)
		if n == 7 {
			_, err := store.SetPaused(ctx, id, true)
			require.NoError(t, err)
		}
		n++
	}
	return shard, methodNow.Add(time.Hour)
}

func TestTickDueReadsByDumpWhatHGETALLReads(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	b := setupMethod(t, r, 2)
	require.True(t, b.store.ReadsByDump())
	shard, until := dumpReadSchedules(t, b.store)
	fast, multi := tickDueReads(t, b.store, shard, until)
	require.GreaterOrEqual(t, len(multi), 29)
	require.Equal(t, multi, fast)
	require.True(t, b.store.ReadsByDump())
}

func TestTickDueReadsByHGETALLWhenDumpIsRefused(t *testing.T) {
	t.Parallel()
	n := queuetest.StartServer(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nodump", "on", ">pw", "~*", "&*", "+@all", "-dump").Err())
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, Username: "nodump", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := queue.NewSimClock(methodNow)
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	require.True(t, store.ReadsByDump(), "not known before the first tick")
	shard, until := dumpReadSchedules(t, store)
	fast, multi := tickDueReads(t, store, shard, until)
	require.False(t, store.ReadsByDump(), "refused once, DUMP is not tried again")
	require.GreaterOrEqual(t, len(multi), 29)
	require.Equal(t, multi, fast)
}

// FuzzReadHashDump feeds readHashDump payloads cut and changed from a
// real one's shape: it never panics, and what it reads it reads whole.
func FuzzReadHashDump(f *testing.F) {
	f.Add("\x10\xc3@\xb0@\xbe\x1f\xbe\x00\x00\x00\x1e\x00\x81k\x02\x84cron\x05\x81t\x02")
	f.Add("\x10\x0c\x0c\x00\x00\x00\x02\x00\x81k\x02\x01\x01\xff\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	f.Add("")
	f.Fuzz(func(t *testing.T, p string) {
		h, ok := queue.ReadHashDump(p)
		if !ok {
			require.Nil(t, h)
		}
	})
}
