package queue_test

import (
	"cmp"
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Per-method tests of the scripts a scheduler runs, in asynq's rdb_test
// shape: each case writes the Redis state before, makes one call, and
// compares the state after, key by key. Each case has its own Redis
// database, so the cases run in parallel on one redis-server.

// redisState is the content of some keys: hashes (field -> value) and
// sorted sets (member -> score), strings. In a want, a nil map says the key does
// not exist.
type redisState struct {
	hashes  map[string]map[string]string
	zsets   map[string]map[string]float64
	strings map[string]string
}

// methodBundle is one case's store on its own database.
type methodBundle struct {
	store *queue.Store
	rdb   redis.UniversalClient
	clock *queue.SimClock
}

// clusterTurns holds one lock per cluster, which its cases take in turn.
var clusterTurns sync.Map // *queuetest.Redis -> *sync.Mutex

func clusterTurn(r *queuetest.Redis) *sync.Mutex {
	m, _ := clusterTurns.LoadOrStore(r, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// methodNow is the cases' clock reading.
var methodNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func msStr(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// setupMethod returns a store on database db (1-15) of r, empty. A
// cluster has one database: there the cases of r take it in turn, each
// emptying it first.
func setupMethod(t *testing.T, r *queuetest.Redis, db int) *methodBundle {
	t.Helper()
	ctx := context.Background()
	var rdb redis.UniversalClient
	if r.Cluster() != nil {
		turn := clusterTurn(r)
		turn.Lock()
		t.Cleanup(turn.Unlock)
		rdb = r.Universal(t)
		queuetest.FlushAll(t, rdb)
	} else {
		c := redis.NewClient(&redis.Options{Addr: r.Addr, DB: db})
		c.AddHook(queuetest.NewKeyGuard())
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.FlushDB(ctx).Err())
		rdb = c
	}
	clock := queue.NewSimClock(methodNow)
	store, err := queue.NewStore(ctx, rdb, clock, nil)
	require.NoError(t, err)
	return &methodBundle{store: store, rdb: rdb, clock: clock}
}

func (b *methodBundle) seed(t *testing.T, s redisState) {
	t.Helper()
	ctx := context.Background()
	for k, h := range s.hashes {
		require.NoError(t, b.rdb.HSet(ctx, k, h).Err())
	}
	for k, v := range s.strings {
		require.NoError(t, b.rdb.Set(ctx, k, v, 0).Err())
	}
	for k, z := range s.zsets {
		for m, score := range z {
			require.NoError(t, b.rdb.ZAdd(ctx, k, redis.Z{Member: m, Score: score}).Err())
		}
	}
}

// requireState compares the keys of want with Redis.
func (b *methodBundle) requireState(t *testing.T, want redisState) {
	t.Helper()
	ctx := context.Background()
	for k, h := range want.hashes {
		got, err := b.rdb.HGetAll(ctx, k).Result()
		require.NoError(t, err)
		if h == nil {
			require.Empty(t, got, "%s should not exist", k)
			continue
		}
		require.Equal(t, h, got, "hash %s", k)
	}
	for k, z := range want.zsets {
		zs, err := b.rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		require.NoError(t, err)
		got := map[string]float64{}
		for _, m := range zs {
			got[m.Member.(string)] = m.Score
		}
		if z == nil {
			require.Empty(t, got, "%s should not exist", k)
			continue
		}
		require.Equal(t, z, got, "zset %s", k)
	}
}

// taskState is the state of the asynq task with id key ("" when none).
func (b *methodBundle) taskState(t *testing.T, key string) string {
	t.Helper()
	qs := queuetest.TaskQueues(t, b.rdb, queue.QueueNameDefault, key)
	if len(qs) == 0 {
		return ""
	}
	require.Len(t, qs, 1, "queues holding task %s", key)
	return b.rdb.HGet(context.Background(), "asynq:{"+qs[0]+"}:t:"+key, "state").Val()
}

func TestCommit(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	const id = "s1"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	T := methodNow
	next := T.Add(time.Minute)
	k1, k2 := model.IdempotencyKey(id, T), model.IdempotencyKey(id, next)
	sched, runs, due, infl := queue.ScheduleKey(sh, id), queue.HistoryKey(sh, id), queue.DueKey(sh), queue.InflightKey(sh)
	nowMS := msStr(T)
	idle := map[string]string{queue.SfCreated: nowMS, queue.SfVer: "1", queue.SfNext: msStr(T)}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	task := func(key string, at time.Time) queue.TaskPayload {
		return queue.TaskPayload{IdempotencyKey: key, ScheduleID: id, RunAt: at, FireAt: at, WorkflowID: "wf", Version: "1", UserID: "u", Source: model.SourceSchedule}
	}
	enqueued := func(key string, at time.Time) queue.PlannedRun {
		return queue.PlannedRun{Key: key, RunAt: at, FireAt: at, Status: model.RunEnqueued, Task: task(key, at)}
	}
	// plan is the plan a scheduler makes of the idle schedule: run k1 at
	// T, next at T+1m.
	plan := func(edit func(*queue.Plan)) queue.Plan {
		p := queue.Plan{ID: id, Expect: queue.ExpectState(msStr(T), "", "1"), NewNext: next, NewScore: float64(next.UnixMilli()),
			Runs: []queue.PlannedRun{enqueued(k1, T)}}
		if edit != nil {
			edit(&p)
		}
		return p
	}
	record := func(key string, at time.Time, kv ...string) map[string]string {
		return with(map[string]string{queue.RfSchedule: id, queue.RfRunAt: msStr(at), queue.RfFireAt: msStr(at), queue.RfStatus: string(model.RunEnqueued),
			queue.RfCreated: nowMS, queue.RfUpdated: nowMS, queue.RfEnqueued: nowMS, queue.RfSource: string(model.SourceSchedule)}, kv...)
	}
	for i, tc := range []struct {
		name        string
		before      redisState
		plan        queue.Plan
		wantApplied bool
		wantWritten []bool
		after       redisState
		wantTasks   map[string]string // idempotency key -> asynq task state
	}{
		{
			name:        "a plan of an idle schedule writes its run and task and advances it",
			before:      redisState{hashes: map[string]map[string]string{sched: idle}, zsets: map[string]map[string]float64{due: {id: float64(T.UnixMilli())}}},
			plan:        plan(nil),
			wantApplied: true, wantWritten: []bool{true},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfNext, msStr(next)), queue.RunKey(sh, k1): record(k1, T)},
				zsets:  map[string]map[string]float64{due: {id: float64(next.UnixMilli())}, runs: {k1: float64(T.UnixMilli())}, infl: nil},
			},
			wantTasks: map[string]string{k1: "pending"},
		},
		{
			name:   "a run ahead of now is scheduled in asynq",
			before: redisState{hashes: map[string]map[string]string{sched: idle}},
			plan: plan(func(p *queue.Plan) {
				p.Runs = []queue.PlannedRun{enqueued(k2, next)}
				p.NewNext = next.Add(time.Minute)
			}),
			wantApplied: true, wantWritten: []bool{true},
			after:     redisState{hashes: map[string]map[string]string{queue.RunKey(sh, k2): record(k2, next)}},
			wantTasks: map[string]string{k2: "scheduled"},
		},
		{
			name:        "a stale version writes nothing",
			before:      redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfVer, "2")}, zsets: map[string]map[string]float64{due: {id: 1}}},
			plan:        plan(nil),
			wantApplied: false, wantWritten: []bool{false},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfVer, "2"), queue.RunKey(sh, k1): nil},
				zsets:  map[string]map[string]float64{due: {id: 1}, runs: nil},
			},
			wantTasks: map[string]string{k1: ""},
		},
		{
			name:        "a stale in-flight run writes nothing",
			before:      redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfInflight, "other")}},
			plan:        plan(nil),
			wantApplied: false, wantWritten: []bool{false},
			after: redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfInflight, "other"), queue.RunKey(sh, k1): nil}},
		},
		{
			name:        "a paused schedule writes nothing",
			before:      redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfPaused, queue.FlagSet)}, zsets: map[string]map[string]float64{due: {id: math.Inf(1)}}},
			plan:        plan(nil),
			wantApplied: false, wantWritten: []bool{false},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfPaused, queue.FlagSet), queue.RunKey(sh, k1): nil},
				zsets:  map[string]map[string]float64{due: {id: math.Inf(1)}},
			},
		},
		{
			name:        "a deleted schedule leaves the due set",
			before:      redisState{zsets: map[string]map[string]float64{due: {id: 1}}},
			plan:        plan(nil),
			wantApplied: false, wantWritten: []bool{false},
			after: redisState{hashes: map[string]map[string]string{sched: nil, queue.RunKey(sh, k1): nil}, zsets: map[string]map[string]float64{due: nil}},
		},
		{
			name:   "a run put in flight is recorded with its deadline",
			before: redisState{hashes: map[string]map[string]string{sched: idle}},
			plan: plan(func(p *queue.Plan) {
				p.Inflight, p.InflightDeadline = k1, T.Add(time.Hour)
			}),
			wantApplied: true, wantWritten: []bool{true},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfNext, msStr(next), queue.SfInflight, k1), queue.RunKey(sh, k1): record(k1, T)},
				zsets:  map[string]map[string]float64{infl: {id: float64(T.Add(time.Hour).UnixMilli())}, due: {id: float64(next.UnixMilli())}},
			},
		},
		{
			name: "a run due behind one in flight holds the schedule (queue)",
			before: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfInflight, "k0")},
				zsets:  map[string]map[string]float64{due: {id: 1}, infl: {id: 5}},
			},
			plan: plan(func(p *queue.Plan) {
				p.Expect, p.Hold, p.Runs, p.NewNext, p.NewScore = queue.ExpectState(msStr(T), "k0", "1"), true, nil, T, math.Inf(1)
			}),
			wantApplied: true, wantWritten: []bool{},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfInflight, "k0", queue.SfHeld, queue.FlagSet)},
				zsets:  map[string]map[string]float64{due: {id: math.Inf(1)}, infl: {id: 5}},
			},
		},
		{
			name: "a run skipped behind one in flight is recorded, not enqueued (skip)",
			before: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfInflight, "k0")},
			},
			plan: plan(func(p *queue.Plan) {
				p.Expect = queue.ExpectState(msStr(T), "k0", "1")
				p.Runs[0].Status, p.Runs[0].Error = model.RunSkipped, "skipped: run k0 is still in flight"
			}),
			wantApplied: true, wantWritten: []bool{true},
			after: redisState{hashes: map[string]map[string]string{
				sched:                with(idle, queue.SfInflight, "k0", queue.SfNext, msStr(next)),
				queue.RunKey(sh, k1): record(k1, T, queue.RfStatus, string(model.RunSkipped), queue.RfError, "skipped: run k0 is still in flight", queue.RfEnqueued, ""),
			}},
			wantTasks: map[string]string{k1: ""},
		},
		{
			name:        "the last fire time retires the schedule",
			before:      redisState{hashes: map[string]map[string]string{sched: idle}},
			plan:        plan(func(p *queue.Plan) { p.NewNext, p.NewScore = time.Time{}, math.Inf(1) }),
			wantApplied: true, wantWritten: []bool{true},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(idle, queue.SfNext, "")},
				zsets:  map[string]map[string]float64{due: {id: math.Inf(1)}},
			},
		},
		{
			name:        "a plan clears the released mark it was planned from",
			before:      redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfReleased, queue.FlagSet)}},
			plan:        plan(nil),
			wantApplied: true, wantWritten: []bool{true},
			after: redisState{hashes: map[string]map[string]string{sched: with(idle, queue.SfNext, msStr(next))}},
		},
		{
			name: "a run planned again keeps its record",
			before: redisState{hashes: map[string]map[string]string{
				sched:                idle,
				queue.RunKey(sh, k1): record(k1, T, queue.RfStatus, string(model.RunSuccess), queue.RfCreated, "1", queue.RfUpdated, "2"),
			}},
			plan:        plan(nil),
			wantApplied: true, wantWritten: []bool{false},
			after: redisState{
				hashes: map[string]map[string]string{queue.RunKey(sh, k1): record(k1, T, queue.RfStatus, string(model.RunSuccess), queue.RfCreated, "1", queue.RfUpdated, "2")},
				zsets:  map[string]map[string]float64{runs: {k1: float64(T.UnixMilli())}},
			},
			wantTasks: map[string]string{k1: ""},
		},
		{
			name: "a key a manual run took is recorded SKIPPED",
			before: redisState{
				hashes:  map[string]map[string]string{sched: idle},
				strings: map[string]string{queue.ManualKeyPrefix(sh) + k1: queue.FlagSet},
			},
			plan:        plan(nil),
			wantApplied: true, wantWritten: []bool{false},
			after: redisState{hashes: map[string]map[string]string{
				queue.RunKey(sh, k1): record(k1, T, queue.RfStatus, string(model.RunSkipped), queue.RfEnqueued, "",
					queue.RfError, "skipped: its idempotency key is taken by a manual run started with it",
					queue.RfReason, string(model.ReasonManualKeyTaken)),
			}},
		},
		{
			name: "a run to put in flight that ended already cuts the plan short",
			before: redisState{hashes: map[string]map[string]string{
				sched:                idle,
				queue.RunKey(sh, k1): record(k1, T, queue.RfStatus, string(model.RunSuccess)),
			}},
			plan: plan(func(p *queue.Plan) {
				p.Runs = append(p.Runs, enqueued(k2, next))
				p.NewNext = next.Add(time.Minute)
				p.Inflight, p.InflightDeadline = k1, T.Add(time.Hour)
			}),
			wantApplied: true, wantWritten: []bool{false, false},
			after: redisState{
				hashes: map[string]map[string]string{
					sched:                with(idle, queue.SfNext, msStr(next), queue.SfReleased, queue.FlagSet),
					queue.RunKey(sh, k2): nil,
				},
				zsets: map[string]map[string]float64{due: {id: float64(T.UnixMilli() + 1)}, infl: nil},
			},
			wantTasks: map[string]string{k2: ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupMethod(t, r, i+1)
			b.seed(t, tc.before)
			plans := []queue.Plan{tc.plan}
			got, err := b.store.Commit(context.Background(), sh, T, plans)
			require.NoError(t, err)
			require.Equal(t, []bool{tc.wantApplied}, got)
			written := []bool{}
			for _, run := range plans[0].Runs {
				written = append(written, run.Written)
			}
			require.Equal(t, tc.wantWritten, written)
			b.requireState(t, tc.after)
			for key, state := range tc.wantTasks {
				require.Equal(t, state, b.taskState(t, key), "asynq task %s", key)
			}
		})
	}

	// commit.lua reads a page by its strides (commitPlanArgs,
	// commitRunArgs): plans of different sizes, a stale one among them,
	// each apply to their own schedule.
	t.Run("a page of plans of different sizes", func(t *testing.T) {
		t.Parallel()
		b := setupMethod(t, r, 15)
		ids := []string{"p0", "p1", "p2", "p3"}
		hashes := map[string]map[string]string{}
		for _, pid := range ids {
			hashes[queue.ScheduleKey(sh, pid)] = idle
		}
		hashes[queue.ScheduleKey(sh, "p2")] = with(idle, queue.SfVer, "9") // stale
		b.seed(t, redisState{hashes: hashes})
		var plans []queue.Plan
		for n, pid := range ids {
			p := queue.Plan{ID: pid, Expect: queue.ExpectState(msStr(T), "", "1"), NewNext: T.Add(time.Hour), NewScore: float64(T.Add(time.Hour).UnixMilli())}
			for j := range n {
				at := T.Add(time.Duration(j) * time.Minute)
				run := enqueued(model.IdempotencyKey(pid, at), at)
				run.Task.ScheduleID = pid
				p.Runs = append(p.Runs, run)
			}
			plans = append(plans, p)
		}
		got, err := b.store.Commit(context.Background(), sh, T, plans)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false, true}, got)
		for n, pid := range ids {
			keys := b.rdb.ZRange(context.Background(), queue.HistoryKey(sh, pid), 0, -1).Val()
			if pid == "p2" {
				require.Empty(t, keys, pid)
				continue
			}
			require.Len(t, keys, n, pid)
			require.Equal(t, msStr(T.Add(time.Hour)), b.rdb.HGet(context.Background(), queue.ScheduleKey(sh, pid), queue.SfNext).Val(), pid)
			for j := range n {
				at := T.Add(time.Duration(j) * time.Minute)
				rec := b.rdb.HGetAll(context.Background(), queue.RunKey(sh, model.IdempotencyKey(pid, at))).Val()
				require.Equal(t, pid, rec[queue.RfSchedule])
				require.Equal(t, msStr(at), rec[queue.RfRunAt])
			}
		}
	})
}

func TestReadDue(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	const sh = 3
	T := methodNow
	due := queue.DueKey(sh)
	def := map[string]string{queue.SfCreated: msStr(T), queue.SfCron: "* * * * *", queue.SfZone: "UTC", queue.SfVer: "4"}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range def {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	a := with(queue.SfNext, msStr(T), queue.SfInflight, "k0", queue.SfReleased, queue.FlagSet, queue.SfResumed, msStr(T.Add(-time.Hour)))
	b := with(queue.SfNext, msStr(T.Add(-time.Second)))
	// dueView is what a test compares of a DueSchedule: its compiled
	// schedule aside, and its definition by its cron expression.
	type dueView struct {
		ID        string
		Cron      string // "" when Schedule is nil
		Next      time.Time
		Inflight  string
		Released  bool
		ResumedAt time.Time
		Expect    queue.Expectation
	}
	view := func(d queue.DueSchedule) dueView {
		v := dueView{ID: d.ID, Next: d.Next, Inflight: d.Inflight, Released: d.Released, ResumedAt: d.ResumedAt, Expect: d.Plan().Expect}
		if d.Schedule != nil {
			v.Cron = d.Schedule.CronExpr
			require.NotNil(t, d.Compiled, d.ID)
		}
		return v
	}
	for i, tc := range []struct {
		name   string
		before redisState
		until  time.Time
		limit  int
		want   []dueView
	}{
		{
			name: "schedules due by until come with the state their plans compare, earliest first",
			before: redisState{
				hashes: map[string]map[string]string{queue.ScheduleKey(sh, "a"): a, queue.ScheduleKey(sh, "b"): b, queue.ScheduleKey(sh, "c"): def},
				zsets:  map[string]map[string]float64{due: {"a": float64(T.UnixMilli()), "b": float64(T.UnixMilli() - 1000), "c": float64(T.UnixMilli() + 1)}},
			},
			until: T, limit: 10,
			want: []dueView{
				{ID: "b", Cron: "* * * * *", Next: T.Add(-time.Second), Expect: queue.ExpectState(msStr(T.Add(-time.Second)), "", "4")},
				{ID: "a", Cron: "* * * * *", Next: T, Inflight: "k0", Released: true, ResumedAt: T.Add(-time.Hour), Expect: queue.ExpectState(msStr(T), "k0", "4")},
			},
		},
		{
			name: "a page holds at most limit",
			before: redisState{
				hashes: map[string]map[string]string{queue.ScheduleKey(sh, "a"): a, queue.ScheduleKey(sh, "b"): b},
				zsets:  map[string]map[string]float64{due: {"a": 2, "b": 1}},
			},
			until: T, limit: 1,
			want: []dueView{{ID: "b", Cron: "* * * * *", Next: T.Add(-time.Second), Expect: queue.ExpectState(msStr(T.Add(-time.Second)), "", "4")}},
		},
		{
			name:   "a member whose schedule is gone comes without a schedule",
			before: redisState{zsets: map[string]map[string]float64{due: {"gone": 1}}},
			until:  T, limit: 10,
			want: []dueView{{ID: "gone"}},
		},
		{
			name:   "a retired schedule has no next",
			before: redisState{hashes: map[string]map[string]string{queue.ScheduleKey(sh, "c"): def}, zsets: map[string]map[string]float64{due: {"c": 1}}},
			until:  T, limit: 10,
			want: []dueView{{ID: "c", Cron: "* * * * *", Expect: queue.ExpectState("", "", "4")}},
		},
		{
			name:   "nothing due",
			before: redisState{hashes: map[string]map[string]string{queue.ScheduleKey(sh, "a"): a}, zsets: map[string]map[string]float64{due: {"a": math.Inf(1)}}},
			until:  T, limit: 10,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bd := setupMethod(t, r, i+1)
			bd.seed(t, tc.before)
			got, err := bd.store.ReadDue(context.Background(), sh, tc.until, tc.limit)
			require.NoError(t, err)
			var views []dueView
			for _, d := range got {
				require.NoError(t, d.Err, d.ID)
				views = append(views, view(d))
			}
			require.Equal(t, tc.want, views)
		})
	}

	t.Run("equal definitions share one compiled schedule", func(t *testing.T) {
		t.Parallel()
		bd := setupMethod(t, r, 15)
		other := with(queue.SfCron, "0 * * * *")
		bd.seed(t, redisState{
			hashes: map[string]map[string]string{queue.ScheduleKey(sh, "a"): a, queue.ScheduleKey(sh, "b"): b, queue.ScheduleKey(sh, "o"): other},
			zsets:  map[string]map[string]float64{due: {"a": 1, "b": 2, "o": 3}},
		})
		got, err := bd.store.ReadDue(context.Background(), sh, T, 10)
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.Same(t, got[0].Schedule, got[1].Schedule, "a and b differ only in state")
		require.NotSame(t, got[0].Schedule, got[2].Schedule, "o has another cron expression")
		require.Equal(t, "0 * * * *", got[2].Schedule.CronExpr)
	})

	t.Run("a corrupt next time is reported on its schedule", func(t *testing.T) {
		t.Parallel()
		bd := setupMethod(t, r, 14)
		bd.seed(t, redisState{
			hashes: map[string]map[string]string{queue.ScheduleKey(sh, "x"): with(queue.SfNext, "soon")},
			zsets:  map[string]map[string]float64{due: {"x": 1}},
		})
		got, err := bd.store.ReadDue(context.Background(), sh, T, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.ErrorContains(t, got[0].Err, `corrupt next fire time "soon"`)
		require.Nil(t, got[0].Schedule)
	})

	t.Run("a definition that no longer compiles is reported on its schedule", func(t *testing.T) {
		t.Parallel()
		bd := setupMethod(t, r, 13)
		bd.seed(t, redisState{
			hashes: map[string]map[string]string{queue.ScheduleKey(sh, "x"): with(queue.SfNext, msStr(T), queue.SfCron, "not a cron")},
			zsets:  map[string]map[string]float64{due: {"x": 1}},
		})
		got, err := bd.store.ReadDue(context.Background(), sh, T, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.ErrorContains(t, got[0].Err, "schedule x")
		require.Nil(t, got[0].Schedule)
		require.Equal(t, queue.ExpectState(msStr(T), "", "4"), got[0].Plan().Expect, "the plan that retires it still compares")
	})
}

func TestExpireInflight(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t)
	const id, reason = "s1", "RUN_TIMEOUT passed"
	sh := queue.ShardOf(id, queue.ShardsDefault)
	T := methodNow
	past, later := float64(T.UnixMilli()-1), float64(T.UnixMilli()+1)
	sched, due, infl, run := queue.ScheduleKey(sh, id), queue.DueKey(sh), queue.InflightKey(sh), queue.RunKey(sh, "k1")
	next := T.Add(-time.Minute) // the held run's time, due already
	const jitter = 5000
	act := float64(next.UnixMilli() - jitter)
	inFlight := map[string]string{queue.SfCreated: "1", queue.SfVer: "1", queue.SfNext: msStr(next), queue.SfJitter: strconv.Itoa(jitter), queue.SfInflight: "k1"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	held := with(inFlight, queue.SfHeld, queue.FlagSet)
	rec := func(st model.RunStatus, kv ...string) map[string]string {
		return with(map[string]string{queue.RfSchedule: id, queue.RfStatus: string(st), queue.RfUpdated: "1"}, kv...)
	}
	failed := rec(model.RunFailed, queue.RfError, reason, queue.RfUpdated, msStr(T), queue.RfReason, string(model.ReasonRunTimeout))
	for i, tc := range []struct {
		name     string
		before   redisState
		limit    int
		wantKeys []string
		after    redisState
	}{
		{
			name: "a run past its deadline fails and frees its schedule",
			before: redisState{
				hashes: map[string]map[string]string{sched: inFlight, run: rec(model.RunEnqueued)},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: 7}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, ""), run: failed},
				zsets:  map[string]map[string]float64{infl: nil, due: {id: 7}},
			},
		},
		{
			name: "a run within its deadline is left alone",
			before: redisState{
				hashes: map[string]map[string]string{sched: inFlight, run: rec(model.RunStarted)},
				zsets:  map[string]map[string]float64{infl: {id: later}},
			},
			wantKeys: []string{},
			after: redisState{
				hashes: map[string]map[string]string{sched: inFlight, run: rec(model.RunStarted)},
				zsets:  map[string]map[string]float64{infl: {id: later}},
			},
		},
		{
			name: "a held run behind one that started is released",
			before: redisState{
				hashes: map[string]map[string]string{sched: held, run: rec(model.RunStarted)},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: math.Inf(1)}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, "", queue.SfReleased, queue.FlagSet), run: failed},
				zsets:  map[string]map[string]float64{infl: nil, due: {id: act}},
			},
		},
		{
			name: "a held run behind one no launcher took is due, its catch-up policy judging it",
			before: redisState{
				hashes: map[string]map[string]string{sched: held, run: rec(model.RunEnqueued)},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: math.Inf(1)}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, ""), run: failed},
				zsets:  map[string]map[string]float64{infl: nil, due: {id: act}},
			},
		},
		{
			name: "a run whose executor call was retried counts as started",
			before: redisState{
				hashes: map[string]map[string]string{sched: held, run: rec(model.RunEnqueued, queue.RfAttempts, "1")},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: math.Inf(1)}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, "", queue.SfReleased, queue.FlagSet), run: with(failed, queue.RfAttempts, "1")},
				zsets:  map[string]map[string]float64{due: {id: act}},
			},
		},
		{
			name: "a run a launcher holds counts as started",
			before: redisState{
				hashes: map[string]map[string]string{sched: held, run: rec(model.RunEnqueued), "asynq:{" + queue.ShardQueue(queue.QueueNameDefault, sh) + "}:t:k1": {"state": "active"}},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: math.Inf(1)}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, "", queue.SfReleased, queue.FlagSet), run: failed},
				zsets:  map[string]map[string]float64{due: {id: act}},
			},
		},
		{
			name: "a paused schedule only loses its hold",
			before: redisState{
				hashes: map[string]map[string]string{sched: with(held, queue.SfPaused, queue.FlagSet), run: rec(model.RunStarted)},
				zsets:  map[string]map[string]float64{infl: {id: past}, due: {id: math.Inf(1)}},
			},
			wantKeys: []string{"k1"},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, "", queue.SfPaused, queue.FlagSet), run: failed},
				zsets:  map[string]map[string]float64{infl: nil, due: {id: math.Inf(1)}},
			},
		},
		{
			name: "a run that ended keeps its status and frees its schedule",
			before: redisState{
				hashes: map[string]map[string]string{sched: inFlight, run: rec(model.RunSuccess)},
				zsets:  map[string]map[string]float64{infl: {id: past}},
			},
			wantKeys: []string{},
			after: redisState{
				hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, ""), run: rec(model.RunSuccess)},
				zsets:  map[string]map[string]float64{infl: nil},
			},
		},
		{
			name:     "a member without a run in flight is dropped",
			before:   redisState{hashes: map[string]map[string]string{sched: with(inFlight, queue.SfInflight, "")}, zsets: map[string]map[string]float64{infl: {id: past}}},
			wantKeys: []string{},
			after:    redisState{zsets: map[string]map[string]float64{infl: nil}},
		},
		{
			name: "a call expires at most limit runs, the earliest deadline first",
			before: redisState{
				hashes: map[string]map[string]string{
					sched: inFlight, run: rec(model.RunStarted),
					queue.ScheduleKey(sh, "s2"): with(inFlight, queue.SfInflight, "k2"), queue.RunKey(sh, "k2"): rec(model.RunStarted),
				},
				zsets: map[string]map[string]float64{infl: {id: past, "s2": past - 1}},
			},
			limit:    1,
			wantKeys: []string{"k2"},
			after: redisState{
				hashes: map[string]map[string]string{run: rec(model.RunStarted)},
				zsets:  map[string]map[string]float64{infl: {id: past}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupMethod(t, r, i+1)
			b.seed(t, tc.before)
			keys, err := b.store.ExpireInflight(context.Background(), sh, T, cmp.Or(tc.limit, 100), reason)
			require.NoError(t, err)
			require.Equal(t, tc.wantKeys, append([]string{}, keys...))
			b.requireState(t, tc.after)
		})
	}
}
