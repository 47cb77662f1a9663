package queue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// tickCase is a page of due schedules of one shard and the plans made
// from it: TickDue's fast path must leave Redis exactly as commit.lua
// leaves it with the same plans.
type tickCase struct {
	seed  redisState
	plans map[string]func(d queue.DueSchedule) queue.Plan
}

const tickShard = 5

func tickPageCase() tickCase {
	T := methodNow
	sh := tickShard
	def := func(next time.Time, kv ...string) map[string]string {
		h := map[string]string{queue.SfCreated: msStr(T.Add(-time.Hour)), queue.SfCron: "* * * * *", queue.SfZone: "UTC",
			queue.SfVer: "7", queue.SfNext: msStr(next)}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	enqueued := func(id string, at, fire time.Time) queue.PlannedRun {
		key := model.IdempotencyKey(id, at)
		return queue.PlannedRun{Key: key, RunAt: at, FireAt: fire, Status: model.RunEnqueued,
			Task: queue.TaskPayload{IdempotencyKey: key, ScheduleID: id, RunAt: at, FireAt: fire, WorkflowID: "wf", Version: "1", Source: model.SourceSchedule}}
	}
	hist := map[string]float64{}
	hashes := map[string]map[string]string{
		queue.ScheduleKey(sh, "pending"):  def(T),
		queue.ScheduleKey(sh, "later"):    def(T),
		queue.ScheduleKey(sh, "skipped"):  def(T, queue.SfInflight, "k-before", queue.SfReleased, queue.FlagSet),
		queue.ScheduleKey(sh, "held"):     def(T, queue.SfInflight, "k-held"),
		queue.ScheduleKey(sh, "retired"):  def(T),
		queue.ScheduleKey(sh, "longhist"): def(T),
	}
	// A full history: the commit names it, and its oldest run is trimmed.
	for i := range queue.RunHistoryDefault {
		at := T.Add(-time.Duration(i+1) * time.Minute)
		k := model.IdempotencyKey("longhist", at)
		hist[k] = float64(at.UnixMilli())
		hashes[queue.RunKey(sh, k)] = map[string]string{queue.RfSchedule: "longhist", queue.RfRunAt: msStr(at), queue.RfStatus: string(model.RunSuccess)}
	}
	due := map[string]float64{}
	for _, id := range []string{"pending", "later", "skipped", "held", "retired", "longhist"} {
		due[id] = float64(T.UnixMilli())
	}
	return tickCase{
		seed: redisState{hashes: hashes, zsets: map[string]map[string]float64{queue.DueKey(sh): due, queue.HistoryKey(sh, "longhist"): hist}},
		plans: map[string]func(d queue.DueSchedule) queue.Plan{
			"pending": func(d queue.DueSchedule) queue.Plan {
				p := d.Plan()
				p.Runs = []queue.PlannedRun{enqueued(d.ID, T, T)}
				p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
				return p
			},
			"later": func(d queue.DueSchedule) queue.Plan {
				p := d.Plan()
				p.Runs = []queue.PlannedRun{enqueued(d.ID, T, T.Add(3*time.Second))}
				p.Inflight, p.InflightDeadline = p.Runs[0].Key, T.Add(time.Hour)
				p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
				return p
			},
			"skipped": func(d queue.DueSchedule) queue.Plan {
				p := d.Plan()
				p.Runs = []queue.PlannedRun{{Key: model.IdempotencyKey(d.ID, T), RunAt: T, FireAt: T, Status: model.RunSkipped,
					Reason: model.ReasonOverlap, Error: "skipped: run k-before is still in flight (overlap_policy skip)"}}
				p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
				return p
			},
			"held": func(d queue.DueSchedule) queue.Plan {
				p := d.Plan()
				p.Hold, p.NewNext = true, T
				return p
			},
			"retired": func(d queue.DueSchedule) queue.Plan { return d.Plan() },
			"longhist": func(d queue.DueSchedule) queue.Plan {
				p := d.Plan()
				p.Runs = []queue.PlannedRun{enqueued(d.ID, T, T)}
				p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
				return p
			},
		},
	}
}

// planWith returns the PlanFunc of c's plans, committed at methodNow.
func (c tickCase) planWith(t *testing.T, also func()) queue.PlanFunc {
	return func(due []queue.DueSchedule) ([]queue.Plan, time.Time, error) {
		require.Len(t, due, len(c.plans))
		var out []queue.Plan
		for _, d := range due {
			require.NoError(t, d.Err)
			out = append(out, c.plans[d.ID](d))
		}
		if also != nil {
			also()
		}
		return out, methodNow, nil
	}
}

// luaSide empties b's database and returns a new store on it, with b's
// clock, for the commit.lua side of a comparison: after the fast side's
// dump, on the same database, as a cluster has one, which a test's cases
// take in turn (setupMethod).
func luaSide(t *testing.T, b *methodBundle) *methodBundle {
	t.Helper()
	queuetest.FlushAll(t, b.rdb)
	store, err := queue.NewStore(context.Background(), b.rdb, b.clock, nil)
	require.NoError(t, err)
	return &methodBundle{store: store, rdb: b.rdb, clock: b.clock}
}

// dumpDB returns every key of rdb's database with its type and content.
func dumpDB(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			ks, err := c.Keys(ctx, "*").Result()
			mu.Lock()
			keys = append(keys, ks...)
			mu.Unlock()
			return err
		}))
	} else {
		var err error
		keys, err = rdb.Keys(ctx, "*").Result()
		require.NoError(t, err)
	}
	out := map[string]string{}
	for _, k := range keys {
		typ := rdb.Type(ctx, k).Val()
		var v any
		switch typ {
		case "hash":
			v = rdb.HGetAll(ctx, k).Val()
		case "zset":
			v = rdb.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = rdb.LRange(ctx, k, 0, -1).Val()
		case "set":
			// A set's members come in its hash table's order, which
			// two servers that added the same members need not share.
			m := rdb.SMembers(ctx, k).Val()
			slices.Sort(m)
			v = m
		default:
			v = rdb.Get(ctx, k).Val()
		}
		out[k] = fmt.Sprintf("%s %v", typ, v)
	}
	return out
}

func TestTickDueFastPathWritesWhatCommitWrites(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	c := tickPageCase()
	ctx := context.Background()

	fast := setupMethod(t, r, 1)
	fast.seed(t, c.seed)
	due, plans, applied, err := fast.store.TickDue(ctx, tickShard, methodNow, 100, c.planWith(t, nil))
	require.NoError(t, err)
	require.Len(t, due, len(c.plans))
	require.Equal(t, []bool{true, true, true, true, true, true}, applied)
	require.EqualValues(t, 1, fast.store.FastPages(), "the page took the fast path")
	for _, p := range plans {
		for _, r := range p.Runs {
			require.True(t, r.Written, "%s: run %s", p.ID, r.Key)
		}
	}

	require.EqualValues(t, queue.RunHistoryDefault, fast.rdb.ZCard(ctx, queue.HistoryKey(tickShard, "longhist")).Val(), "the full history was trimmed")
	got := dumpDB(t, fast.rdb)

	slow := luaSide(t, fast)
	slow.seed(t, c.seed)
	sdue, err := slow.store.ReadDue(ctx, tickShard, methodNow, 100)
	require.NoError(t, err)
	splans, _, err := c.planWith(t, nil)(sdue)
	require.NoError(t, err)
	sapplied, err := slow.store.Commit(ctx, tickShard, methodNow, splans)
	require.NoError(t, err)
	require.Equal(t, applied, sapplied)
	require.Equal(t, plans, splans, "the same marks on the runs")
	require.Equal(t, dumpDB(t, slow.rdb), got)
}

func TestTickDueFallsBackToCommitScript(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	ctx := context.Background()
	T := methodNow
	mark := queue.ManualKeyPrefix(tickShard) + model.IdempotencyKey("pending", T)

	t.Run("a run's key is taken by a manual run", func(t *testing.T) {
		t.Parallel()
		c := tickPageCase()
		c.seed.strings = map[string]string{mark: "1"}
		fast := setupMethod(t, r, 3)
		fast.seed(t, c.seed)
		_, plans, applied, err := fast.store.TickDue(ctx, tickShard, methodNow, 100, c.planWith(t, nil))
		require.NoError(t, err)
		require.EqualValues(t, 0, fast.store.FastPages(), "commit.lua decides a page with a key taken")
		got := dumpDB(t, fast.rdb)

		slow := luaSide(t, fast)
		slow.seed(t, c.seed)
		sdue, err := slow.store.ReadDue(ctx, tickShard, methodNow, 100)
		require.NoError(t, err)
		splans, _, err := c.planWith(t, nil)(sdue)
		require.NoError(t, err)
		sapplied, err := slow.store.Commit(ctx, tickShard, methodNow, splans)
		require.NoError(t, err)
		require.Equal(t, sapplied, applied)
		require.Equal(t, splans, plans)
		require.Equal(t, dumpDB(t, slow.rdb), got)
		for _, p := range plans {
			if p.ID == "pending" {
				require.True(t, p.Runs[0].Taken, "recorded SKIPPED: its key is taken")
			}
		}
	})

	t.Run("a schedule changed while the page was planned", func(t *testing.T) {
		t.Parallel()
		c := tickPageCase()
		fast := setupMethod(t, r, 5)
		fast.seed(t, c.seed)
		skey := queue.ScheduleKey(tickShard, "pending")
		// An upsert between the read and the commit: a new version.
		change := func() { require.NoError(t, fast.rdb.HSet(ctx, skey, queue.SfVer, "8").Err()) }
		_, plans, applied, err := fast.store.TickDue(ctx, tickShard, methodNow, 100, c.planWith(t, change))
		require.NoError(t, err)
		require.EqualValues(t, 0, fast.store.FastPages(), "WATCH aborted the transaction")
		for i, p := range plans {
			require.Equal(t, p.ID != "pending", applied[i], p.ID)
		}
		require.Zero(t, fast.rdb.Exists(ctx, queue.RunKey(tickShard, model.IdempotencyKey("pending", T))).Val(), "the stale plan wrote nothing")
		require.EqualValues(t, 1, fast.rdb.Exists(ctx, queue.RunKey(tickShard, model.IdempotencyKey("later", T))).Val(), "the others applied")
	})

	t.Run("nothing due", func(t *testing.T) {
		t.Parallel()
		b := setupMethod(t, r, 6)
		due, plans, applied, err := b.store.TickDue(ctx, tickShard, methodNow, 100, func([]queue.DueSchedule) ([]queue.Plan, time.Time, error) {
			t.Fatal("nothing to plan")
			return nil, time.Time{}, nil
		})
		require.NoError(t, err)
		require.Empty(t, due)
		require.Empty(t, plans)
		require.Empty(t, applied)
	})

	t.Run("a plan error commits nothing", func(t *testing.T) {
		t.Parallel()
		c := tickPageCase()
		b := setupMethod(t, r, 7)
		b.seed(t, c.seed)
		before := dumpDB(t, b.rdb)
		_, _, _, err := b.store.TickDue(ctx, tickShard, methodNow, 100, func([]queue.DueSchedule) ([]queue.Plan, time.Time, error) {
			return nil, time.Time{}, fmt.Errorf("lease lost")
		})
		require.ErrorContains(t, err, "lease lost")
		require.Equal(t, before, dumpDB(t, b.rdb))
	})
}

// TestTickDueChunks: a page longer than a chunk is planned and committed
// chunk by chunk, each by the fast path, and writes what commit.lua writes.
func TestTickDueChunks(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	ctx := context.Background()
	T := methodNow
	const n = 2*queue.FastChunk + 5
	c := tickCase{seed: redisState{hashes: map[string]map[string]string{}, zsets: map[string]map[string]float64{queue.DueKey(tickShard): {}}},
		plans: map[string]func(d queue.DueSchedule) queue.Plan{}}
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		c.seed.hashes[queue.ScheduleKey(tickShard, id)] = map[string]string{queue.SfCron: "* * * * *", queue.SfZone: "UTC", queue.SfVer: "1", queue.SfNext: msStr(T)}
		c.seed.zsets[queue.DueKey(tickShard)][id] = float64(T.UnixMilli())
		c.plans[id] = func(d queue.DueSchedule) queue.Plan {
			p := d.Plan()
			key := model.IdempotencyKey(d.ID, T)
			p.Runs = []queue.PlannedRun{{Key: key, RunAt: T, FireAt: T, Status: model.RunEnqueued,
				Task: queue.TaskPayload{IdempotencyKey: key, ScheduleID: d.ID, RunAt: T, FireAt: T, WorkflowID: "wf", Version: "1", Source: model.SourceSchedule}}}
			p.NewNext, p.NewScore = T.Add(time.Minute), float64(T.Add(time.Minute).UnixMilli())
			return p
		}
	}
	calls := 0
	planAll := func(due []queue.DueSchedule) ([]queue.Plan, time.Time, error) {
		calls++
		var out []queue.Plan
		for _, d := range due {
			out = append(out, c.plans[d.ID](d))
		}
		return out, methodNow, nil
	}
	fast := setupMethod(t, r, 8)
	fast.seed(t, c.seed)
	due, _, applied, err := fast.store.TickDue(ctx, tickShard, T, 500, planAll)
	require.NoError(t, err)
	require.Len(t, due, n)
	require.Len(t, applied, n)
	require.Equal(t, 3, calls, "one plan call per chunk")
	require.EqualValues(t, 3, fast.store.FastPages())
	require.EqualValues(t, n, fast.rdb.LLen(ctx, fast.store.RunQueue(tickShard).Keys().Pending()).Val())
	got := dumpDB(t, fast.rdb)

	slow := luaSide(t, fast)
	slow.seed(t, c.seed)
	sdue, err := slow.store.ReadDue(ctx, tickShard, T, 500)
	require.NoError(t, err)
	splans, _, err := planAll(sdue)
	require.NoError(t, err)
	_, err = slow.store.Commit(ctx, tickShard, T, splans)
	require.NoError(t, err)
	require.Equal(t, dumpDB(t, slow.rdb), got)
}
