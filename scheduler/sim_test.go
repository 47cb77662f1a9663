package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

const (
	simShards     = 4
	simLookahead  = 20 * time.Second
	simDuration   = 3 * time.Hour
	simRunTimeout = 5 * time.Minute
)

// simStarts are instants a couple of hours before DST changes, so the
// simulated hours cross them: New York spring forward and fall back, Lord
// Howe's 30-minute changes.
var simStarts = []time.Time{
	time.Date(2024, 3, 10, 5, 0, 0, 0, time.UTC),   // NY 02:00 EST -> 03:00 EDT at 07:00Z
	time.Date(2024, 11, 3, 4, 0, 0, 0, time.UTC),   // NY 02:00 EDT -> 01:00 EST at 06:00Z
	time.Date(2024, 4, 6, 13, 30, 0, 0, time.UTC),  // Lord Howe 02:00 -> 01:30 at 15:00Z
	time.Date(2024, 10, 5, 13, 30, 0, 0, time.UTC), // Lord Howe 02:00 -> 02:30 at 15:30Z
	time.Date(2024, 3, 31, 0, 0, 0, 0, time.UTC),   // Berlin 02:00 -> 03:00 at 01:00Z
}

var simCrons = []string{
	"* * * * * *", "*/7 * * * * *", "0,20,40 * * * * *", "*/5 * * * *", "0 * * * *",
	"30 1,2,3 * * *", "15,45 1,2 * * *", "*/10 0-3 * * *", "@every 97s", "@hourly", "0 2 * * *",
}

var simZones = []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Europe/Berlin"}

// TestSim is a deterministic randomized simulation of the scheduler's
// planning and commit logic against a real redis-server: two replicas
// (scheduler.New on one store) tick every shard in random interleavings on a
// simulated clock, sometimes one or both down for seconds to hours; five
// schedules (two always allow + fire_immediately) get random cron
// expressions (per-second ones, DST zones: America/New_York,
// Australia/Lord_Howe, Europe/Berlin), jitter, start/end windows and
// policies, and random operations: upserts changing timing, jitter,
// policies or version, the same body again, pause, resume, delete and
// re-create, manual runs taking a future run's key; plans go stale under a
// concurrent tick or operation (read and plan, then the other replica's
// tick or an operation, then commit); a simulated launcher reports random
// statuses (STARTED, SUCCESS, FAILED, SKIPPED late or as no longer planned,
// a failed executor attempt, or nothing ever: RUN_TIMEOUT, shortened to 5
// minutes, must clean up). Each seed simulates 3 hours in ~200-400 steps.
//
// After every phase it checks what README.md promises (see the check*
// functions), keeping its own model of every schedule's definitions over
// time:
//   - each run's key is its (schedule, run_at) key and its record is
//     written once (created at the commit, never rewritten, a final status
//     never changes); every run enqueued has a live asynq task, and at the
//     end asynq holds exactly one task per enqueued run;
//   - run_at is a fire time of the definition in force when the run was
//     created (so inside start_at/end_at), after its timing took effect
//     (creation, timing change, resume); never created while paused or
//     deleted;
//   - fire_at is the deterministic jittered time (within ±jitter, clamped
//     to when the schedule began and to its window) or, for a run found
//     more than MISFIRE_GRACE late, now (spread: within the spread window);
//   - a run SKIPPED at planning names a run of its skip schedule then in
//     flight (or its key was taken by a manual run); a skip/queue schedule
//     never has two runs in flight; none stays in flight past RUN_TIMEOUT
//     once its shard ticked; a held queue schedule waits for a run in
//     flight; a queue schedule enqueues its runs in run_at order, and the
//     run held behind one that ran starts when it ends, however late,
//     and the runs due behind it follow the catch-up policy (none drops
//     them, latest keeps the last): a held backlog drains;
//   - every fire time a schedule has moved past has a run, unless it was
//     missed: no tick of its shard came between its act time and its
//     jittered fire time + MISFIRE_GRACE (a queue schedule's, a tick that
//     reached MAX_CATCHUP_PER_TICK, or a skip run waiting behind an earlier
//     one jittered later, prove nothing); an allow + fire_immediately
//     schedule drops none, outages or not;
//   - a tick leaves nothing of its shard due.
//
// A failure prints the seed, the step and the last steps. Knobs:
// SIM_SEEDS=from-to runs other seeds (TestSim/seed=N names them),
// SIM_TRACE=n prints n trace lines, SIM_DEBUG=<schedule id> traces its
// stored state after each tick of its shard.
func TestSim(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	if v := os.Getenv("SIM_SEEDS"); v != "" { // "from-to", to explore
		var from, to uint64
		_, err := fmt.Sscanf(v, "%d-%d", &from, &to)
		require.NoError(t, err, "SIM_SEEDS")
		seeds = nil
		for n := from; n <= to; n++ {
			seeds = append(seeds, n)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			newSim(t, seed).run()
		})
	}
}

// simState is a schedule's state as the model knows it at one moment.
type simState struct {
	exists, paused bool
	gen            int // bumped by each creation (a re-create after delete starts a new one)
	epoch          int // bumped by creation, a timing change and a resume: it never repeats, so an equal epoch means an equal gen
	epochStart     time.Time
	rec            *model.ScheduleRecord // as stored (anchor included)
	sched          model.Schedule
	began          time.Time // max(anchor, rs): no jittered fire time before it
}

type simSched struct {
	id     string
	stable bool // always allow + fire_immediately: nothing it plans is ever dropped
	cur    simState
	// history of states, each with the sequence number it took effect at
	hist []struct {
		seq int
		st  simState
	}
	known    map[string]bool // keys in its current history zset
	verified time.Time       // fire times of the current epoch before it are checked
	// for the queue order check: the latest run_at enqueued in an epoch
	queueEpoch int
	queueLast  time.Time
	// a held queue schedule: the run it waits for and its next time
	heldBehind string
	heldNext   time.Time
	// expect: the run at this time must be planned by the next tick (a
	// queue run released by a run that ran starts however late);
	// expectHist is len(hist) then (no operation since)
	expect     time.Time
	expectHist int
}

type simRun struct {
	key, sid      string
	gen, epoch    int // the schedule's, when the run was created (epochs count across generations)
	runAt, fireAt time.Time
	created       time.Time
	seq           int // s.seq when it was found: created after the tick or commit of that seq, before the next
	status        model.RunStatus
	overlap       model.OverlapPolicy // at creation
	inflightSince time.Time
	lost          bool // the simulated launcher never reports it again
	attempts      int  // failed executor attempts recorded (it is being retried)
	task          bool // created ENQUEUED, with its asynq task
}

type simTick struct {
	seq, step int
	at        time.Time
	// schedules the tick left due just past now: their plan reached
	// MAX_CATCHUP_PER_TICK, the next tick continues them
	limited map[string]bool
}

type sim struct {
	t     *testing.T
	seed  uint64
	r     *rand.Rand
	ctx   context.Context
	rdb   *redis.Client
	store *queue.Store
	clock *queue.SimClock
	reps  [2]*Scheduler
	down  [2]time.Time // a replica is down until then
	cfg   Config

	scheds   []*simSched
	runs     map[string]*simRun
	enqueued int // runs created ENQUEUED (each with one asynq task)
	ticks    [simShards][]simTick
	ticked   map[int]bool // shards ticked since the last operation on them
	seq      int
	step     int
	created  map[int]map[string]int // step -> schedule id -> runs created
	trace    []string
	stats    map[string]int  // what the run exercised
	manual   map[string]bool // keys of manual runs started
}

func newSim(t *testing.T, seed uint64) *sim {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := simStarts[r.IntN(len(simStarts))]
	rdb := queuetest.StartRedis(t).Client(t)
	clock := queue.NewSimClock(start)
	store, err := queue.NewStore(context.Background(), rdb, clock,
		&queue.Config{Shards: simShards, Lookahead: simLookahead, RunHistory: 1 << 30})
	require.NoError(t, err)
	s := &sim{t: t, seed: seed, r: r, ctx: context.Background(), rdb: rdb, store: store, clock: clock,
		runs: map[string]*simRun{}, ticked: map[int]bool{}, created: map[int]map[string]int{0: {}}, stats: map[string]int{}, manual: map[string]bool{}}
	// RUN_TIMEOUT shortened from its hour so that it comes into play.
	// Small pages, in some seeds, make a tick commit page after page.
	pageSize := []int{1, 2, 0}[r.IntN(3)]
	s.cfg = (&Config{RunTimeout: simRunTimeout, PageSize: pageSize}).WithDefaults()
	for i := range s.reps {
		s.reps[i], err = New(store, &Config{ReplicaID: fmt.Sprintf("r%d", i), RunTimeout: simRunTimeout, PageSize: pageSize}, nil, nil)
		require.NoError(t, err)
	}
	for i := range 5 {
		s.scheds = append(s.scheds, &simSched{id: fmt.Sprintf("s%d", i), stable: i < 2, known: map[string]bool{}})
	}
	return s
}

func (s *sim) now() time.Time { return s.clock.Now() }

func (s *sim) logf(format string, args ...any) {
	line := fmt.Sprintf("step %d %s: ", s.step, s.now().Format("15:04:05.000")) + fmt.Sprintf(format, args...)
	s.trace = append(s.trace, line)
	if len(s.trace) > traceLen {
		s.trace = s.trace[1:]
	}
}

// traceLen is how many trace lines a failure prints (SIM_TRACE overrides).
var traceLen = func() int {
	n := 150
	if v := os.Getenv("SIM_TRACE"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	return n
}()

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed %d step %d at %s: %s\nlast steps:\n%s", s.seed, s.step, s.now().Format(time.RFC3339),
		fmt.Sprintf(format, args...), strings.Join(s.trace, "\n"))
}

func (s *sim) noErr(err error, what string) {
	s.t.Helper()
	if err != nil {
		s.fail("%s: %v", what, err)
	}
}

func (s *sim) run() {
	for _, sc := range s.scheds {
		s.create(sc)
	}
	s.check()
	end := s.now().Add(simDuration)
	for s.step = 1; s.now().Before(end); s.step++ {
		s.created[s.step] = map[string]int{}
		if s.r.Float64() < 0.25 {
			s.operate(s.scheds[s.r.IntN(len(s.scheds))])
			s.check()
		}
		if s.r.Float64() < 0.5 {
			s.launch()
			s.check()
		}
		s.advance()
		s.tickReplicas()
	}
	// Every run created ENQUEUED has its one task, and no task is without a run.
	n := queuetest.CountTasks(s.t, s.rdb, queue.QueueNameDefault)
	if n != s.enqueued {
		s.fail("asynq holds %d run tasks, %d runs were enqueued", n, s.enqueued)
	}
	s.t.Logf("seed %d: %d steps, %d runs (%d enqueued), %v", s.seed, s.step, len(s.runs), s.enqueued, s.stats)
}

// advance moves the clock: mostly a few seconds, sometimes minutes, now and
// then a long jump (an outage of every replica, as far as the plan goes).
func (s *sim) advance() {
	var d time.Duration
	switch x := s.r.Float64(); {
	case x < 0.7:
		d = time.Duration(1+s.r.IntN(5)) * time.Second
	case x < 0.9:
		d = time.Duration(5+s.r.IntN(25)) * time.Second
	case x < 0.98:
		d = time.Duration(30+s.r.IntN(270)) * time.Second
	default:
		d = time.Duration(5+s.r.IntN(35)) * time.Minute
	}
	if s.r.IntN(4) == 0 { // off the second boundary
		d += time.Duration(s.r.IntN(1000)) * time.Millisecond
	}
	s.clock.Advance(d)
	s.logf("clock +%s", d)
}

// tickReplicas ticks every shard with each replica that is up, in a random
// interleaving; sometimes a replica plans a shard, the other ticks it (and
// maybe a schedule changes) before the first commits: that plan is stale.
func (s *sim) tickReplicas() {
	for i := range s.reps {
		if !s.now().Before(s.down[i]) && s.r.Float64() < 0.01 {
			var d time.Duration
			if s.r.IntN(3) == 0 {
				d = time.Duration(10+s.r.IntN(110)) * time.Minute
			} else {
				d = time.Duration(5+s.r.IntN(120)) * time.Second
			}
			s.down[i] = s.now().Add(d)
			s.logf("replica %d down for %s", i, d)
		}
	}
	type job struct{ rep, shard int }
	var jobs []job
	for i := range s.reps {
		if s.now().Before(s.down[i]) {
			continue
		}
		for sh := range simShards {
			jobs = append(jobs, job{i, sh})
		}
	}
	s.r.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	s.ticked = map[int]bool{}
	for _, j := range jobs {
		if s.r.Float64() < 0.1 {
			s.staleTick(j.rep, j.shard)
		} else {
			s.seq++
			s.noErr(s.reps[j.rep].TickShard(s.ctx, j.shard), "tick")
			s.ticks[j.shard] = append(s.ticks[j.shard], s.tickRecord(j.shard))
			s.logf("replica %d ticked shard %d (seq %d)", j.rep, j.shard, s.seq)
			s.collectShard(j.shard)
			s.debugState(j.shard)
			s.ticked[j.shard] = true
		}
	}
	s.check()
	s.checkDue(s.ticked)
}

// debugState traces the stored state of schedule SIM_DEBUG (an id) after
// each tick of its shard.
func (s *sim) debugState(shard int) {
	id := os.Getenv("SIM_DEBUG")
	if id == "" || queue.ShardOf(id, simShards) != shard {
		return
	}
	h, err := s.rdb.HGetAll(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", shard, id)).Result()
	s.noErr(err, "debug")
	for _, f := range []string{"w", "v", "u", "t", "tk", "cr"} {
		delete(h, f)
	}
	s.logf("  %s: %v", id, h)
}

// tickRecord records a full tick of shard, just made.
func (s *sim) tickRecord(shard int) simTick {
	tk := simTick{seq: s.seq, step: s.step, at: s.now(), limited: map[string]bool{}}
	for _, sc := range s.scheds {
		if queue.ShardOf(sc.id, simShards) != shard {
			continue
		}
		score, err := s.rdb.ZScore(s.ctx, fmt.Sprintf("chronos:{s%02d}:due", shard), sc.id).Result()
		if err == nil && int64(score) == s.now().UnixMilli()+1 {
			tk.limited[sc.id] = true
		}
	}
	return tk
}

// staleTick: replica rep reads and plans shard; the other replica ticks it,
// or a schedule of the shard is changed; then rep commits its plans.
func (s *sim) staleTick(rep, shard int) {
	a := s.reps[rep]
	now := s.now()
	due, err := s.store.ReadDue(s.ctx, shard, now, a.cfg.PageSize)
	s.noErr(err, "read due")
	var plans []queue.Plan
	for _, d := range due {
		p, _, err := a.planOne(d, now)
		s.noErr(err, "plan")
		plans = append(plans, p)
	}
	s.logf("replica %d planned shard %d (%d due)", rep, shard, len(due))
	if s.r.IntN(2) == 0 {
		s.seq++
		s.noErr(s.reps[1-rep].TickShard(s.ctx, shard), "tick")
		s.ticks[shard] = append(s.ticks[shard], s.tickRecord(shard))
		s.logf("replica %d ticked shard %d", 1-rep, shard)
		s.ticked[shard] = true
		s.check()
	}
	if s.r.IntN(2) == 0 {
		var ids []*simSched
		for _, sc := range s.scheds {
			if queue.ShardOf(sc.id, simShards) == shard {
				ids = append(ids, sc)
			}
		}
		if len(ids) > 0 {
			s.operate(ids[s.r.IntN(len(ids))])
			s.check()
		}
	}
	s.seq++ // runs the commit creates come after the ticks before it
	applied, err := s.store.Commit(s.ctx, shard, now, plans)
	s.noErr(err, "commit")
	s.logf("replica %d committed shard %d: %v", rep, shard, applied)
	for _, ok := range applied {
		s.stats[fmt.Sprintf("stale commit applied=%v", ok)]++
	}
	s.check()
}

// randDef draws a definition for sc.
func (s *sim) randDef(sc *simSched) model.ScheduleRecord {
	rec := model.ScheduleRecord{ID: sc.id, Target: model.TargetWorkflow, WorkflowID: "wf", Version: "1", UserID: "u"}
	s.randTiming(&rec)
	s.randJitter(&rec)
	rec.OverlapPolicy, rec.CatchupPolicy = model.OverlapAllow, model.CatchupFireImmediately
	if !sc.stable {
		s.randPolicies(&rec)
	}
	return rec
}

func (s *sim) randTiming(rec *model.ScheduleRecord) {
	rec.CronExpr = simCrons[s.r.IntN(len(simCrons))]
	rec.Timezone = simZones[s.r.IntN(len(simZones))]
	rec.StartAt, rec.EndAt = nil, nil
	if s.r.Float64() < 0.3 {
		st := s.now().Add(time.Duration(s.r.IntN(60*60*1000)-20*60*1000) * time.Millisecond)
		en := st.Add(time.Duration(2*60+s.r.IntN(90*60)) * time.Second)
		if s.r.IntN(2) == 0 {
			rec.StartAt = &st
		}
		if s.r.IntN(2) == 0 {
			rec.EndAt = &en
		}
	}
	if rec.CronExpr == "* * * * * *" && rec.EndAt == nil {
		// a per-second schedule makes many runs: keep it to a window
		en := s.now().Add(time.Duration(1+s.r.IntN(20)) * time.Minute)
		if rec.StartAt != nil && rec.StartAt.After(s.now()) {
			en = rec.StartAt.Add(time.Duration(1+s.r.IntN(20)) * time.Minute)
		}
		rec.EndAt = &en
	}
	s.clampJitter(rec)
}

func (s *sim) randJitter(rec *model.ScheduleRecord) {
	rec.JitterMs = []int64{0, 0, 0, 800, 3000, 15000, 90000, 600000}[s.r.IntN(8)]
	s.clampJitter(rec)
}

// clampJitter keeps a frequent schedule's runs per tick (lookahead + jitter)
// under MAX_CATCHUP_PER_TICK.
func (s *sim) clampJitter(rec *model.ScheduleRecord) {
	switch rec.CronExpr {
	case "* * * * * *":
		rec.JitterMs = min(rec.JitterMs, 3000)
	case "*/7 * * * * *", "0,20,40 * * * * *":
		rec.JitterMs = min(rec.JitterMs, 90000)
	}
}

func (s *sim) randPolicies(rec *model.ScheduleRecord) {
	rec.OverlapPolicy = []model.OverlapPolicy{model.OverlapAllow, model.OverlapSkip, model.OverlapQueue}[s.r.IntN(3)]
	rec.CatchupPolicy = []model.CatchupPolicy{model.CatchupNone, model.CatchupLatest,
		model.CatchupFireImmediately, model.CatchupSpread}[s.r.IntN(4)]
}

func (s *sim) describe(rec *model.ScheduleRecord) string {
	w := ""
	if rec.StartAt != nil {
		w += " start " + rec.StartAt.Format("15:04:05.000")
	}
	if rec.EndAt != nil {
		w += " end " + rec.EndAt.Format("15:04:05.000")
	}
	return fmt.Sprintf("%q %s jitter %dms %s/%s%s v%s", rec.CronExpr, rec.Timezone, rec.JitterMs,
		rec.OverlapPolicy, rec.CatchupPolicy, w, rec.Version)
}

func (s *sim) create(sc *simSched) {
	rec := s.randDef(sc)
	s.upsert(sc, rec)
}

func (s *sim) upsert(sc *simSched, rec model.ScheduleRecord) {
	require.NoError(s.t, rec.Validate())
	_, err := s.store.UpsertSchedule(s.ctx, &rec)
	s.noErr(err, "upsert")
	st := sc.cur
	if !st.exists {
		s.recreated(sc)
		st = simState{exists: true, gen: st.gen + 1, epoch: st.epoch + 1, epochStart: s.now()}
		sc.known = map[string]bool{} // the new schedule starts its own history
		s.logf("create %s: %s", sc.id, s.describe(&rec))
	} else {
		if st.rec.TimingKey() != rec.TimingKey() {
			st.epoch++
			st.epochStart = s.now()
		}
		s.logf("upsert %s: %s", sc.id, s.describe(&rec))
	}
	s.setState(sc, st)
}

// recreated checks what creating sc again under its id did to the runs
// the deleted schedule left not started (no launcher holds any here):
// ENQUEUED, or SKIPPED by a launcher or by a plan. One for a time after
// now is gone, record and task (a manual run's task under its key stays),
// for the new schedule to plan afresh; one due and ENQUEUED is SKIPPED.
func (s *sim) recreated(sc *simSched) {
	now := s.now()
	for k, r := range s.runs {
		if r.sid != sc.id || r.status != model.RunEnqueued && r.status != model.RunSkipped {
			continue
		}
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, k)
		if r.runAt.After(now) {
			task := s.rdb.Exists(s.ctx, "asynq:{chronos}:t:"+k).Val()
			if s.manual[k] {
				task = 0
			}
			if !errors.Is(err, queue.ErrNotFound) || task != 0 {
				s.fail("%s run %s of the deleted %s, ahead of its re-creation, was not removed (record: %v, task: %d)", r.status, k, sc.id, err, task)
			}
			delete(s.runs, k)
			if r.task {
				s.enqueued--
			}
			s.stats["removed on re-create"]++
			continue
		}
		if r.status == model.RunSkipped {
			continue
		}
		s.noErr(err, "read run")
		if r.lost && r.overlap == model.OverlapAllow && (got.Status == model.RunFailed && strings.Contains(got.Error, "RUN_TIMEOUT") ||
			got.Status == model.RunSkipped && strings.Contains(got.Error, "(overlap_policy skip)")) {
			// Lost under "allow" (not refreshed: nothing ends it), then
			// planned again by a timing change under skip/queue, it ended
			// before: SKIPPED behind a run in flight, or failed at the
			// deadline of the run in flight it became.
			r.status = got.Status
			continue
		}
		if got.Status != model.RunSkipped || got.Error != "schedule deleted before the run started" {
			s.fail("run %s of the deleted %s, due at its re-creation, is %s (%q), not SKIPPED", k, sc.id, got.Status, got.Error)
		}
		r.status = got.Status
		s.stats["skipped on re-create"]++
	}
}

// setState records sc's new state, reading what the store keeps (anchor,
// rs) from its hash.
func (s *sim) setState(sc *simSched, st simState) {
	s.seq++
	if st.exists {
		h, err := s.rdb.HGetAll(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id)).Result()
		s.noErr(err, "read schedule hash")
		st.rec, err = s.store.GetSchedule(s.ctx, sc.id)
		s.noErr(err, "load schedule")
		st.sched, err = st.rec.Compile()
		s.noErr(err, "compile")
		st.began = st.rec.Anchor
		if rs, ok := parseMillis(h["rs"]); ok && rs.After(st.began) {
			st.began = rs
		}
		st.paused = h["paused"] != ""
	}
	if st.epoch != sc.cur.epoch {
		sc.verified = st.epochStart
	}
	sc.cur = st
	sc.hist = append(sc.hist, struct {
		seq int
		st  simState
	}{s.seq, st})
}

func parseMillis(v string) (time.Time, bool) {
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || v == "" {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

// operate applies a random operation to sc. The runs created so far are
// checked first, against the state they were created in.
func (s *sim) operate(sc *simSched) {
	s.check()
	s.ticked[queue.ShardOf(sc.id, simShards)] = false
	sc.expect = time.Time{}
	if !sc.cur.exists {
		s.create(sc)
		return
	}
	switch x := s.r.Float64(); {
	case x < 0.05:
		// A manual run started with the key one of its next runs will
		// have: that run is recorded SKIPPED, never enqueued.
		at := sc.cur.sched.Next(s.now().Add(time.Duration(s.r.IntN(60)) * time.Second))
		if at.IsZero() {
			return
		}
		key := model.IdempotencyKey(sc.id, at)
		_, started, err := s.store.StartManualRun(s.ctx, queue.ManualRun{WorkflowID: "wf", Version: "1", UserID: "u",
			ScheduledFor: at, IdempotencyKey: key})
		s.noErr(err, "manual run")
		s.logf("manual run with the key of %s at %s: started %v", sc.id, at.Format("15:04:05"), started)
		if started {
			s.manual[key] = true
			s.enqueued++
			s.stats["manual"]++
		}
	case x < 0.45:
		rec := *sc.cur.rec
		rec.NextRunAt, rec.Paused = nil, false
		var what []string
		for len(what) == 0 {
			if s.r.Float64() < 0.4 {
				s.randTiming(&rec)
				what = append(what, "timing")
			}
			if s.r.Float64() < 0.3 {
				s.randJitter(&rec)
				what = append(what, "jitter")
			}
			if !sc.stable && s.r.Float64() < 0.4 {
				s.randPolicies(&rec)
				what = append(what, "policy")
			}
			if s.r.Float64() < 0.15 {
				rec.Version = model.Version(fmt.Sprint(1 + s.r.IntN(3)))
				what = append(what, "version")
			}
		}
		s.logf("change %s %v", sc.id, what)
		s.upsert(sc, rec)
	case x < 0.5:
		rec := *sc.cur.rec
		rec.NextRunAt, rec.Paused = nil, false
		s.upsert(sc, rec) // the same body: changes nothing
	case x < 0.7:
		_, err := s.store.SetPaused(s.ctx, sc.id, true)
		s.noErr(err, "pause")
		s.logf("pause %s", sc.id)
		s.setState(sc, sc.cur)
	case x < 0.9:
		_, err := s.store.SetPaused(s.ctx, sc.id, false)
		s.noErr(err, "resume")
		st := sc.cur
		if st.paused {
			st.epoch++
			st.epochStart = s.now()
		}
		s.logf("resume %s", sc.id)
		s.setState(sc, st)
	default:
		s.noErr(s.store.DeleteSchedule(s.ctx, sc.id), "delete")
		s.logf("delete %s", sc.id)
		st := sc.cur
		st.exists, st.paused = false, false
		s.setState(sc, st)
	}
}

// launch is a launcher: it reports random statuses for runs whose fire
// time has come. A run of a schedule paused, deleted or no longer planning
// it is SKIPPED as unplanned, as the real launcher does; some runs are
// never reported again (lost), which RUN_TIMEOUT has to clean up.
func (s *sim) launch() {
	keys := make([]string, 0, len(s.runs))
	for k, r := range s.runs {
		if !r.lost && (r.status == model.RunEnqueued || r.status == model.RunStarted) && !r.fireAt.After(s.now()) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := s.runs[k]
		var u queue.StatusUpdate
		x := s.r.Float64()
		if r.status == model.RunStarted {
			switch {
			case x < 0.3:
				u.Status = model.RunSuccess
			case x < 0.4:
				u.Status = model.RunFailed
			case x < 0.43:
				r.lost = true
			}
		} else {
			sc := s.sched(r.sid)
			switch {
			case x < 0.3:
			case !sc.cur.exists || sc.cur.paused || !sc.cur.sched.Next(r.runAt.Add(-time.Second)).Equal(r.runAt):
				u = queue.StatusUpdate{Status: model.RunSkipped, Release: queue.ReleaseUnplanned, Error: "no longer planned"}
			case x < 0.6:
				u.Status = model.RunStarted
			case x < 0.75:
				u.Status = model.RunSuccess
			case x < 0.83:
				u.Status = model.RunFailed
			case x < 0.88:
				u.Status, u.Error = model.RunSkipped, "missed at launch"
			case x < 0.95:
				r.lost = true
			case x < 0.98:
				s.noErr(s.store.RecordFailedAttempt(s.ctx, &queue.TaskPayload{IdempotencyKey: k, ScheduleID: r.sid}, s.now().Add(time.Second), "sim"), "failed attempt")
				r.attempts++
				s.logf("launcher: failed attempt of run %s of %s", r.runAt.Format("15:04:05"), r.sid)
			}
		}
		if u.Status == "" {
			continue
		}
		u.From = r.status
		if sc := s.sched(r.sid); sc.heldBehind == k && sc.cur.exists && !sc.cur.paused && u.Status.Terminal() &&
			(u.Status != model.RunSkipped || u.Release == queue.ReleaseUnplanned) {
			// It ran (or was no longer planned): the run held behind it
			// starts at the next tick, whatever the catch-up policy.
			s.release(sc)
		}
		got, err := s.store.UpdateRunStatus(s.ctx, k, u)
		if errors.Is(err, queue.ErrConflict) {
			s.refresh(r)
			continue
		}
		s.noErr(err, "report status")
		s.logf("launcher: %s run %s of %s -> %s", r.status, r.runAt.Format("15:04:05"), r.sid, got.Status)
		r.status = got.Status
	}
}

// release notes that sc's held run waited for the run in flight, which
// ran: it starts at the next tick whatever the catch-up policy, if it was
// due (its act time, next less the jitter, come) when released. A next
// time set while held (a timing change, a resume) and not due yet is
// planned as any run: an outage after the release makes it late
// (unhold.lua).
func (s *sim) release(sc *simSched) {
	jitter := time.Duration(sc.cur.rec.JitterMs) * time.Millisecond
	if !sc.heldNext.Add(-jitter).After(s.now()) {
		sc.expect, sc.expectHist = sc.heldNext, len(sc.hist)
	}
}

func (s *sim) sched(id string) *simSched {
	for _, sc := range s.scheds {
		if sc.id == id {
			return sc
		}
	}
	s.fail("no schedule %s", id)
	return nil
}

// refresh rereads a run's status: a final status never changes.
func (s *sim) refresh(r *simRun) {
	got, err := s.store.GetScheduleRun(s.ctx, r.sid, r.key)
	s.noErr(err, "read run")
	if r.status.Terminal() && got.Status != r.status {
		s.fail("run %s of %s went from final %s to %s", r.runAt.Format(time.RFC3339), r.sid, r.status, got.Status)
	}
	if !got.RunAt.Equal(r.runAt) || !got.FireAt.Equal(r.fireAt) || !got.CreatedAt.Equal(r.created) {
		s.fail("run %s of %s was rewritten: %+v", r.runAt.Format(time.RFC3339), r.sid, got)
	}
	if r.status != got.Status {
		s.logf("run %s of %s: %s -> %s (%s)", r.runAt.Format("15:04:05"), r.sid, r.status, got.Status, got.Error)
	}
	r.status = got.Status
}

// refreshOpen rereads, in one round trip, the status of every run in
// flight that may still change.
func (s *sim) refreshOpen() {
	var open []*simRun
	for _, r := range s.runs {
		if isOpen(r.status) && (!r.lost || r.overlap != model.OverlapAllow) {
			open = append(open, r)
		}
	}
	cmds := make([]*redis.SliceCmd, len(open))
	_, err := s.rdb.Pipelined(s.ctx, func(p redis.Pipeliner) error {
		for i, r := range open {
			cmds[i] = p.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:run:%s", queue.ShardOf(r.sid, simShards), r.key), "st", "err")
		}
		return nil
	})
	s.noErr(err, "read runs in flight")
	for i, r := range open {
		st, _ := cmds[i].Val()[0].(string)
		if st == "" {
			s.fail("run %s of %s in flight lost its record", r.runAt.Format(time.RFC3339), r.sid)
		}
		if model.RunStatus(st) != r.status {
			e, _ := cmds[i].Val()[1].(string)
			if sc := s.sched(r.sid); (r.status == model.RunStarted || r.attempts > 0) && strings.Contains(e, "RUN_TIMEOUT") &&
				sc.heldBehind == r.key && sc.cur.exists && !sc.cur.paused {
				// it ran: the run held behind it starts in the same tick
				s.release(sc)
			}
			s.logf("run %s of %s: %s -> %s (%s)", r.runAt.Format("15:04:05"), r.sid, r.status, st, e)
			if strings.Contains(e, "RUN_TIMEOUT") {
				s.stats["RUN_TIMEOUT"]++
			}
			r.status = model.RunStatus(st)
		}
	}
}

func isOpen(st model.RunStatus) bool { return st == model.RunEnqueued || st == model.RunStarted }

// check finds the runs created since the last check and checks them, then
// the runs in flight and the fire times the schedules have passed.
func (s *sim) check() {
	s.t.Helper()
	s.refreshOpen()
	for _, sc := range s.scheds {
		s.collect(sc)
	}
	for _, sc := range s.scheds {
		s.checkOpen(sc)
		s.checkPassed(sc)
	}
}

func historyKey(id string) string {
	return fmt.Sprintf("chronos:{s%02d}:runs:%s", queue.ShardOf(id, simShards), id)
}

// collectShard collects the runs of shard's schedules, just after a tick
// of it: notMissed orders runs and ticks by seq.
func (s *sim) collectShard(shard int) {
	for _, sc := range s.scheds {
		if queue.ShardOf(sc.id, simShards) == shard {
			s.collect(sc)
		}
	}
}

// collect reads sc's run history for keys not seen before.
func (s *sim) collect(sc *simSched) {
	hk := historyKey(sc.id)
	n, err := s.rdb.ZCard(s.ctx, hk).Result()
	s.noErr(err, "zcard")
	if int(n) == len(sc.known) {
		return
	}
	keys, err := s.rdb.ZRange(s.ctx, hk, 0, -1).Result()
	s.noErr(err, "zrange")
	var fresh []*model.Run
	for _, k := range keys {
		if sc.known[k] {
			continue
		}
		sc.known[k] = true
		got, err := s.store.GetScheduleRun(s.ctx, sc.id, k)
		s.noErr(err, "read new run")
		if old := s.runs[k]; old != nil {
			// Creating a schedule again removed or ended the deleted one's
			// runs that had not started: none becomes the new one's. One
			// that ran (jitter fired it before its time, and before the
			// re-creation) is the run of its key: planned again, it keeps
			// its record (not of the new definition's making: unchecked).
			if old.status == model.RunEnqueued || old.status == model.RunSkipped {
				s.fail("run %s of the deleted %s (%s) is in the new schedule's history", k, sc.id, old.status)
			}
			s.logf("%s planned again run %s of the deleted one (%s)", sc.id, got.RunAt.Format("15:04:05"), got.Status)
			s.stats["ran before re-creation, planned again"]++
			continue
		}
		fresh = append(fresh, got)
	}
	slices.SortFunc(fresh, func(a, b *model.Run) int { return a.RunAt.Compare(b.RunAt) })
	for _, got := range fresh {
		s.checkNewRun(sc, got)
	}
}

// checkNewRun checks a run just created by a commit.
func (s *sim) checkNewRun(sc *simSched, got *model.Run) {
	s.t.Helper()
	st := sc.cur
	now := s.now()
	at := got.RunAt.UTC()
	desc := fmt.Sprintf("run %s (fire %s, %s %q) of %s", at.Format(time.RFC3339), got.FireAt.UTC().Format(time.RFC3339Nano), got.Status, got.Error, sc.id)
	r := &simRun{key: got.IdempotencyKey, sid: sc.id, gen: st.gen, epoch: st.epoch, runAt: at, fireAt: got.FireAt.UTC(), created: got.CreatedAt.UTC(),
		seq: s.seq, status: got.Status, inflightSince: now}
	s.runs[r.key] = r
	s.created[s.step][sc.id]++
	s.logf("new %s", desc)
	if got.ScheduleID != sc.id || got.IdempotencyKey != model.IdempotencyKey(sc.id, at) {
		s.fail("%s: key or schedule id does not match: %+v", desc, got)
	}
	if !r.created.Equal(now) {
		s.fail("%s: created at %s, not now: a record that appeared from nowhere", desc, r.created)
	}
	// Never while paused, never after delete.
	if !st.exists || st.paused {
		s.fail("%s: created while the schedule is deleted or paused", desc)
	}
	r.overlap = st.rec.OverlapPolicy
	// run_at is a fire time of the definition in force (inside its
	// window), after the moment its timing took effect.
	if !st.sched.Next(at.Add(-time.Second)).Equal(at) || at.Truncate(time.Second) != at {
		s.fail("%s: not a fire time of %s", desc, s.describe(st.rec))
	}
	if !at.After(st.epochStart) {
		s.fail("%s: at or before %s, when its timing took effect (created, changed or resumed)", desc, st.epochStart.Format(time.RFC3339Nano))
	}
	// Jitter: the deterministic fire time, or, for a run found missed
	// (jittered fire time more than MISFIRE_GRACE ago), now (spread: within
	// the spread window after now).
	jitter := time.Duration(st.rec.JitterMs) * time.Millisecond
	exp := jittered(st.rec, r.key, at, jitter, st.began)
	if jitter > 0 && exp != at.Add(model.JitterOffset(r.key, jitter)) {
		// clamped: only to when the schedule began, or to its window
		ok := exp.Equal(st.began) || (st.rec.StartAt != nil && exp.Equal(*st.rec.StartAt)) || (st.rec.EndAt != nil && exp.Equal(*st.rec.EndAt))
		if !ok {
			s.fail("%s: jittered fire time %s is neither run_at+offset nor a clamp", desc, exp)
		}
	}
	// (end_at wins over the start of the schedule: a run of a schedule
	// lagging past its end_at fires at end_at, or now if missed.)
	if (exp.Before(st.began) && (st.rec.EndAt == nil || !exp.Equal(*st.rec.EndAt))) ||
		(st.rec.StartAt != nil && exp.Before(*st.rec.StartAt)) || (st.rec.EndAt != nil && exp.After(*st.rec.EndAt)) {
		s.fail("%s: jittered fire time %s outside began %s / window", desc, exp, st.began)
	}
	if r.fireAt.Equal(exp) {
		s.stats["on time"]++
	} else {
		s.stats["caught up"]++
		// (Without jitter the planner judges a run missed by its run_at
		// alone, even one before the schedule began (plan.go's fireAt),
		// while jittered clamps its fire time to then.)
		judged := exp
		if jitter == 0 {
			judged = at
		}
		missed := judged.Before(now.Add(-s.cfg.MisfireGrace))
		spread := st.rec.CatchupPolicy == model.CatchupSpread && !r.fireAt.Before(now) && !r.fireAt.After(now.Add(s.cfg.SpreadWindow))
		if !missed || !(r.fireAt.Equal(now) || spread) {
			s.fail("%s: fire_at is not the jittered fire time %s, and the run is not a missed one fired now (missed %v)",
				desc, exp.Format(time.RFC3339Nano), missed)
		}
	}
	switch got.Status {
	case model.RunEnqueued:
		s.enqueued++
		r.task = true
		state, err := s.rdb.HGet(s.ctx, "asynq:{chronos}:t:"+r.key, "state").Result()
		if err != nil || state == "archived" || state == "completed" {
			s.fail("%s: no live asynq task (%q, %v)", desc, state, err)
		}
		if r.overlap == model.OverlapQueue {
			if sc.queueEpoch == st.epoch && !at.After(sc.queueLast) {
				s.fail("%s: a queue schedule enqueued it after its run at %s", desc, sc.queueLast.Format(time.RFC3339))
			}
			sc.queueEpoch, sc.queueLast = st.epoch, at
		}
	case model.RunSkipped:
		s.stats["skipped (overlap)"]++
		// Only the overlap policy skips a run at planning (no manual
		// runs here): the run it names must be in flight.
		if strings.Contains(got.Error, "taken by a manual run") {
			if !s.manual[r.key] {
				s.fail("%s: SKIPPED for a manual run that was never started", desc)
			}
			s.stats["skipped (taken)"]++
			break
		}
		var k string
		if _, err := fmt.Sscanf(got.Error, "skipped: run %s is still in flight", &k); err != nil || st.rec.OverlapPolicy != model.OverlapSkip {
			s.fail("%s: SKIPPED at planning without an in-flight run", desc)
		}
		if o := s.runs[k]; o == nil || !isOpen(o.status) || o.sid != sc.id {
			s.fail("%s: skipped for run %s which is not in flight: %+v", desc, k, o)
		}
	default:
		s.fail("%s: created with status %s", desc, got.Status)
	}
}

// checkOpen: a skip or queue schedule never has two runs in flight, and no
// run of it stays in flight past RUN_TIMEOUT after a tick; a held schedule
// waits for a run still in flight (nothing wedged).
func (s *sim) checkOpen(sc *simSched) {
	if !sc.cur.exists {
		return
	}
	var open []*simRun
	for _, r := range s.runs {
		if r.sid == sc.id && r.gen == sc.cur.gen && isOpen(r.status) && r.overlap != model.OverlapAllow {
			open = append(open, r)
		}
	}
	if len(open) > 1 {
		var d []string
		for _, r := range open {
			d = append(d, fmt.Sprintf("%s %s (%s)", r.runAt.Format(time.RFC3339), r.status, r.overlap))
		}
		s.fail("schedule %s has %d skip/queue runs in flight: %v", sc.id, len(open), d)
	}
	h, err := s.rdb.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "held", "inflight", "next").Result()
	s.noErr(err, "hmget")
	sc.heldBehind, sc.heldNext = "", time.Time{}
	if h[0] != nil {
		k, _ := h[1].(string)
		sc.heldBehind = k
		sc.heldNext, _ = parseMillis(fmt.Sprint(h[2]))
		if o := s.runs[k]; o == nil || !isOpen(o.status) {
			s.fail("schedule %s is held behind run %s, which is not in flight: %+v", sc.id, k, o)
		}
	}
}

// checkDue runs after the replicas ticked: no schedule of a ticked shard
// is left due, and no skip/queue run is in flight past its RUN_TIMEOUT.
func (s *sim) checkDue(ticked map[int]bool) {
	now := s.now()
	for sh := range simShards {
		if !ticked[sh] {
			continue
		}
		ids, err := s.rdb.ZRangeByScore(s.ctx, fmt.Sprintf("chronos:{s%02d}:due", sh), &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprint(now.UnixMilli())}).Result()
		s.noErr(err, "due")
		if len(ids) > 0 {
			s.fail("shard %d ticked at now still has due schedules %v", sh, ids)
		}
	}
	for _, sc := range s.scheds {
		if !sc.cur.exists || !ticked[queue.ShardOf(sc.id, simShards)] {
			continue
		}
		// (A held next time not due yet, after a timing change while held,
		// is planned at its own time.)
		if !sc.expect.IsZero() && !jittered(sc.cur.rec, model.IdempotencyKey(sc.id, sc.expect), sc.expect,
			time.Duration(sc.cur.rec.JitterMs)*time.Millisecond, sc.cur.began).After(now) {
			s.stats["release checked"]++
			// (A manual run's record in the schedule's shard stands for
			// a run whose key it took: README, POST /run-launcher/start.)
			if r := s.runs[model.IdempotencyKey(sc.id, sc.expect)]; (r == nil || r.sid != sc.id) && !s.manual[model.IdempotencyKey(sc.id, sc.expect)] {
				s.fail("queue schedule %s: its run at %s, held behind a run that ran, did not start when released", sc.id, sc.expect.Format(time.RFC3339))
			} else if r != nil && r.sid == sc.id && r.created.Equal(now) && len(sc.hist) == sc.expectHist {
				// (Only right after the release: a later tick may hold a
				// time that came due since.)
				s.checkDrained(sc)
			}
		}
		sc.expect = time.Time{}
		for _, r := range s.runs {
			if r.sid == sc.id && r.gen == sc.cur.gen && isOpen(r.status) && r.overlap != model.OverlapAllow &&
				!maxTime(r.fireAt, r.inflightSince).Add(s.cfg.RunTimeout).After(now) {
				s.fail("run %s of %s (%s since %s) is in flight past RUN_TIMEOUT", r.runAt.Format(time.RFC3339), sc.id, r.status, r.inflightSince)
			}
		}
	}
}

// checkDrained runs after a tick released sc's held run: under "queue"
// with catch-up none or latest, no backlog is left behind it. The runs
// due behind a released run are missed (model.MissedBefore): none drops
// them, so the schedule is not held at a time already due; latest keeps
// the last, so the time after the one it holds is not due. (Before issue
// 26's finding 5, each waited a tick behind the one before, and a
// per-second schedule never caught up.)
func (s *sim) checkDrained(sc *simSched) {
	rec := sc.cur.rec
	if rec.OverlapPolicy != model.OverlapQueue || rec.CatchupPolicy.Keeps() == model.KeepAllMissed {
		return
	}
	h, err := s.rdb.HMGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "held", "next").Result()
	s.noErr(err, "hmget")
	if h[0] == nil {
		return // not held: nothing is left due (checkDue)
	}
	next, ok := parseMillis(fmt.Sprint(h[1]))
	if !ok {
		return
	}
	s.stats["drain checked"]++
	jitter := time.Duration(rec.JitterMs) * time.Millisecond
	due := func(t time.Time) bool {
		return !t.IsZero() && !jittered(rec, model.IdempotencyKey(sc.id, t), t, jitter, sc.cur.began).After(s.now())
	}
	switch {
	case rec.CatchupPolicy == model.CatchupNone && due(next):
		s.fail("queue schedule %s (none): released its run at %s, then held its run at %s, due behind it, instead of dropping it",
			sc.id, sc.expect.Format(time.RFC3339), next.Format(time.RFC3339))
	case rec.CatchupPolicy == model.CatchupLatest && due(sc.cur.sched.Next(next)):
		s.fail("queue schedule %s (latest): released its run at %s, then held its run at %s, not the last one due behind it",
			sc.id, sc.expect.Format(time.RFC3339), next.Format(time.RFC3339))
	}
}

// checkPassed: every fire time of the current epoch that the schedule has
// moved past (its stored next time) has a run, unless the run was
// legitimately dropped: it was missed (no tick found it on time) or waited
// behind a queue run. A stable (allow + fire_immediately) schedule drops
// none.
func (s *sim) checkPassed(sc *simSched) {
	st := sc.cur
	if !st.exists || st.paused {
		return
	}
	v, err := s.rdb.HGet(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", queue.ShardOf(sc.id, simShards), sc.id), "next").Result()
	if errors.Is(err, redis.Nil) {
		v = ""
	} else {
		s.noErr(err, "hget next")
	}
	next, ok := parseMillis(v)
	if !ok {
		// retired: every fire time is passed
		next = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	for t := st.sched.Next(sc.verified.Add(-time.Nanosecond)); !t.IsZero() && t.Before(next) && !t.After(s.now().Add(24*time.Hour)); t = st.sched.Next(t) {
		if !t.After(st.epochStart) {
			continue
		}
		if r := s.runs[model.IdempotencyKey(sc.id, t)]; (r != nil && r.sid == sc.id) || s.manual[model.IdempotencyKey(sc.id, t)] {
			continue // (a manual run's record in the schedule's shard stands for it)
		}
		if sc.stable {
			s.fail("stable (allow, fire_immediately) schedule %s dropped its run at %s (next is %s)", sc.id, t.Format(time.RFC3339), v)
		}
		if why := s.notMissed(sc, t); why != "" {
			s.fail("schedule %s dropped its run at %s (next %s), which was not missed: %s", sc.id, t.Format(time.RFC3339), v, why)
		}
		s.logf("%s dropped %s (missed)", sc.id, t.Format("15:04:05"))
		s.stats["dropped as missed"]++
	}
	if ok {
		sc.verified = next
	} else {
		sc.verified = s.now().Add(24 * time.Hour)
	}
}

// notMissed returns why the run of sc at t, of its current epoch, was not
// missed: a tick of its shard came between its act time and its jittered
// fire time plus MISFIRE_GRACE while its definition was that tick's ("" if
// none). Ticks when the schedule was queue (held runs are released or
// follow their catch-up policy) or made MAX_CATCHUP_PER_TICK runs prove
// nothing.
func (s *sim) notMissed(sc *simSched, t time.Time) string {
	sh := queue.ShardOf(sc.id, simShards)
	for _, tk := range s.ticks[sh] {
		var st *simState
		for i := range sc.hist {
			if sc.hist[i].seq < tk.seq {
				st = &sc.hist[i].st
			}
		}
		if st == nil || !st.exists || st.paused || st.epoch != sc.cur.epoch {
			continue
		}
		if st.rec.OverlapPolicy == model.OverlapQueue || tk.limited[sc.id] {
			continue
		}
		jitter := time.Duration(st.rec.JitterMs) * time.Millisecond
		fire := t // as plan.go's fireAt: no clamp without jitter
		if jitter > 0 {
			fire = jittered(st.rec, model.IdempotencyKey(sc.id, t), t, jitter, st.began)
		}
		act := fire
		if st.rec.OverlapPolicy == model.OverlapAllow {
			act = t.Add(-simLookahead - jitter)
		}
		if tk.at.Before(act) || tk.at.After(fire.Add(s.cfg.MisfireGrace)) {
			continue
		}
		// A skip schedule plans its runs in run_at order, each at its
		// jittered fire time: a run jittered early waits behind an earlier
		// one jittered late (plan.go: "it waits its turn"), so a tick
		// before that one is due proves nothing. (A record of that run
		// made in an earlier epoch is not this timing's planning: by the
		// schedule deleted before, it ran early; by the timing before a
		// change or a resume (seed 3845). The new timing plans that time
		// again at its own turn. Nor is one created after the tick, in
		// the same step or later. Epochs count across re-creations.)
		blocked := false
		if st.rec.OverlapPolicy == model.OverlapSkip && jitter > 0 {
			for u := st.sched.Next(maxTime(st.epochStart, t.Add(-2*jitter-time.Second))); !u.IsZero() && u.Before(t); u = st.sched.Next(u) {
				k := model.IdempotencyKey(sc.id, u)
				if r := s.runs[k]; (r == nil || r.epoch != st.epoch || r.seq > tk.seq) && jittered(st.rec, k, u, jitter, st.began).After(tk.at) {
					blocked = true
					break
				}
			}
		}
		if !blocked {
			return fmt.Sprintf("the tick at %s (seq %d) found it due and on time (act %s, fire %s) as %s; %d runs created in step %d",
				tk.at.Format(time.RFC3339Nano), tk.seq, act.Format(time.RFC3339), fire.Format(time.RFC3339), s.describe(st.rec), s.created[tk.step][sc.id], tk.step)
		}
	}
	return ""
}
