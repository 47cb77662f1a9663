package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// The policy chaos test: the built binary as 1 api, 3 schedulers and 2
// launchers on one real Redis, like TestChaosExactlyOncePerPlannedRun, but
// with the schedules that test leaves out: overlap_policy skip and queue
// (their runs end when the executor reports through POST /runs/:key/status
// after a random delay, or never: RUN_TIMEOUT ends those), jitter on
// per-second and slower schedules, every catch-up policy (with one outage
// of every scheduler longer than MISFIRE_GRACE_MS, so runs are missed),
// schedules in zones with odd DST rules, and pauses, resumes and timing
// changes through the API while schedulers are killed and frozen.
//
// It audits from Redis, the API and the executor's own log, one function
// of policy_audit_test.go per invariant (the executor service is in
// policy_executor_test.go):
//   - one run record and one asynq task per idempotency key; a task for
//     every record that was enqueued, none for one that was not;
//   - no run reaches the executor before its fire time, nor before its
//     jittered planned time; a SKIPPED run never reaches it;
//   - skip and queue schedules never have two runs in flight (executor
//     call to final status), and a run recorded SKIPPED for overlap names
//     a run of its schedule that was in flight when it was planned;
//   - after the chaos, every skip and queue schedule keeps producing runs,
//     and no run stays in flight past RUN_TIMEOUT;
//   - a paused schedule reaches the executor with no run, and keeps no
//     run queued ahead that no launcher could hold (the pause removed
//     it); after a timing change, only fire times of the new timing do;
//   - stable schedules (never paused nor changed): fire_immediately and
//     spread have a record for every fire time; none and latest drop only
//     fire times of the outage, none never enqueues a missed run and latest
//     at most one per outage.
const (
	policyChaosDefault = 45 * time.Second
	policyRunTimeout   = 6 * time.Second
	policyMisfireGrace = 5 * time.Second
	policyOutage       = 9 * time.Second
	policySpreadWindow = time.Minute
	// policyTol absorbs the difference between the clocks of the processes
	// (each reads Redis TIME and corrects its own) and the test's.
	policyTol = 30 * time.Millisecond
	// policyInFlight is how long after a pause or a timing change a run a
	// launcher checked just before it may still reach the executor (the
	// check and the call are not atomic; generous for a loaded CI host).
	policyInFlight = time.Second
	// policyEndLag is how long before its end is written a run's end may
	// be stamped: a launcher stamps the ends it gathered, then sends them,
	// and a plan that reads the schedule in between still finds the run in
	// flight. On an idle host that is a round trip; on a loaded one the
	// launcher can stall between the two (112 ms seen at a load of 13).
	policyEndLag = 500 * time.Millisecond
)

// policySchedulerEnv's RUN_HISTORY keeps every record the test makes: the
// audit reads them all (a skip names its blocker, spread leaves a record
// per fire time), and on a loaded host the test's waits bring its
// per-second schedules to about 100 runs, the default, past which
// commits trim the oldest. One run under load failed with a skip naming
// a run that had no record, which such a trim may leave.
var policySchedulerEnv = map[string]string{
	"TICK_MS": "200", "LEASE_TTL": "2s", "LOOKAHEAD_MS": "1000", "RUN_HISTORY": "10000",
	"RUN_TIMEOUT": policyRunTimeout.String(), "MISFIRE_GRACE_MS": strconv.Itoa(int(policyMisfireGrace / time.Millisecond)),
}

// policySchedule is one schedule of the test and what happened to it.
type policySchedule struct {
	id, overlap, catchup, zone string
	crons                      [2]string // the timings it alternates between
	jitters                    [2]int64
	mutable                    bool
	shard                      int
	created                    time.Time

	mu     sync.Mutex
	cur    int  // index into crons/jitters in force
	paused bool // as last set
	events []policyEvent
}

type policyEvent struct {
	kind        string // pause, resume, upsert
	begin, done time.Time
	cron        string
	jitter      int64
	final       bool // the pause of every schedule after the chaos
}

func (s *policySchedule) body(i int) string {
	return fmt.Sprintf(`{"schedule_id":%q,"workflow_id":"chaos","version":1,"user_id":"policy-test","cron_expr":%q,"timezone":%q,"jitter_ms":%d,"overlap_policy":%q,"catchup_policy":%q}`,
		s.id, s.crons[i], s.zone, s.jitters[i], s.overlap, s.catchup)
}

func policyChaosDuration(t *testing.T) time.Duration {
	s := os.Getenv("CHRONOS_POLICY_CHAOS_SECONDS")
	if s == "" {
		return policyChaosDefault
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	require.True(t, n >= 20 && n <= 600, "CHRONOS_POLICY_CHAOS_SECONDS=%d: want 20 to 600", n)
	return time.Duration(n) * time.Second
}

// policySchedules returns the schedules of the test (not registered yet).
func policySchedules() []*policySchedule {
	var out []*policySchedule
	catchups := []string{"fire_immediately", "none", "latest", "spread"}
	add := func(prefix, overlap string, n int, crons [][2]string, jitters [][2]int64, zones []string) {
		for i := range n {
			out = append(out, &policySchedule{
				id: fmt.Sprintf("%s-%02d-%s", prefix, i, catchups[i%4]), overlap: overlap, catchup: catchups[i%4],
				zone: zones[i%len(zones)], crons: crons[(i/4)%len(crons)], jitters: jitters[(i/8)%len(jitters)],
				mutable: (i/4)%2 == 1,
			})
		}
	}
	utc := []string{"UTC"}
	add("pa", "allow", 32,
		[][2]string{{"* * * * * *", "*/2 * * * * *"}, {"*/5 * * * * *", "*/3 * * * * *"}},
		[][2]int64{{300, 800}, {2000, 300}, {800, 2000}, {0, 1200}}, utc)
	add("ps", "skip", 32,
		[][2]string{{"* * * * * *", "*/3 * * * * *"}, {"*/2 * * * * *", "*/5 * * * * *"}},
		[][2]int64{{0, 300}, {300, 1200}, {1200, 0}, {2000, 300}}, utc)
	add("pq", "queue", 24,
		[][2]string{{"*/5 * * * * *", "*/4 * * * * *"}, {"*/3 * * * * *", "*/5 * * * * *"}},
		[][2]int64{{0, 300}, {300, 2000}, {2000, 0}}, utc)
	dst := []string{"Australia/Lord_Howe", "America/Havana", "America/Santiago", "Atlantic/Azores", "Pacific/Chatham", "Asia/Kathmandu"}
	add("pds", "skip", 12, [][2]string{{"*/4 * * * * *", "*/2 * * * * *"}}, [][2]int64{{500, 0}}, dst)
	add("pdq", "queue", 12, [][2]string{{"*/4 * * * * *", "*/6 * * * * *"}}, [][2]int64{{0, 500}}, dst)
	return out
}

func TestChaosPoliciesJitterPausesUpserts(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-process chaos test takes minutes; it runs without -short")
	}
	// Most of its minutes are waits (the chaos's own span, asynq's lease
	// recovery): it runs beside the package's other tests (TestMain).
	t.Parallel()
	dur := policyChaosDuration(t)
	began := time.Now()
	c := newChaosCluster(t)
	exec := newPolicyExecutor(t, func() string { return c.api })

	api := c.start("api", "api", nil)
	c.api = "http://" + api.addr
	lenv := map[string]string{"EXECUTOR": "http", "EXECUTOR_URL": exec.srv.URL + "/runs", "LAUNCHER_CONCURRENCY": "20"}
	launchers := make([]*chaosSlot, chaosLaunchers)
	for i := range launchers {
		launchers[i] = &chaosSlot{name: fmt.Sprintf("launcher-%d", i)}
		launchers[i].p = c.start(launchers[i].name+".0", "launcher", lenv)
	}
	scheds := make([]*chaosSlot, chaosSchedulers)
	for i := range scheds {
		scheds[i] = &chaosSlot{name: fmt.Sprintf("scheduler-%d", i)}
		scheds[i].p = c.start(scheds[i].name+".0", "scheduler", policySchedulerEnv)
	}
	code, body := c.call(http.MethodPut, "/workflows/chaos/versions/1", `{"nodes":[{"id":"tick"}]}`)
	require.Equal(t, http.StatusOK, code, body)

	schedules := policySchedules()
	byID := map[string]*policySchedule{}
	for _, s := range schedules {
		code, body := c.call(http.MethodPost, "/schedules/upsert", s.body(0))
		require.Equal(t, http.StatusOK, code, body)
		code, body = c.call(http.MethodGet, "/schedules/"+s.id+"?runs=0", "")
		require.Equal(t, http.StatusOK, code, body)
		var got struct {
			CreatedAt time.Time `json:"created_at"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		s.created = got.CreatedAt
		s.shard = shardOf(s.id)
		byID[s.id] = s
	}
	t.Logf("%d schedules registered after %s", len(schedules), time.Since(began).Round(time.Millisecond))

	// Mutations through the API, concurrently with the process chaos.
	seed := uint64(time.Now().UnixNano())
	t.Logf("policy chaos seed %d", seed)
	var mutable []*policySchedule
	for _, s := range schedules {
		if s.mutable {
			mutable = append(mutable, s)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mutErrs []string
	var mutMu sync.Mutex
	var mutWG sync.WaitGroup
	mutWG.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 7))
		resumeAt := map[*policySchedule]time.Time{}
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		fail := func(f string, a ...any) {
			mutMu.Lock()
			mutErrs = append(mutErrs, fmt.Sprintf(f, a...))
			mutMu.Unlock()
		}
		setPaused := func(s *policySchedule, paused bool) {
			ev := policyEvent{kind: map[bool]string{true: "pause", false: "resume"}[paused], begin: time.Now()}
			code, body, err := c.callErr(http.MethodPost, "/schedules/pause", fmt.Sprintf(`{"schedule_id":%q,"paused":%t}`, s.id, paused))
			ev.done = time.Now()
			if err != nil || code != http.StatusOK {
				fail("pause %s %t: %d %s %v", s.id, paused, code, body, err)
				return
			}
			s.mu.Lock()
			s.paused = paused
			s.events = append(s.events, ev)
			s.mu.Unlock()
		}
		for {
			select {
			case <-ctx.Done():
				for s := range resumeAt {
					setPaused(s, false)
				}
				return
			case <-tick.C:
			}
			for s, at := range resumeAt {
				if time.Now().After(at) {
					setPaused(s, false)
					delete(resumeAt, s)
				}
			}
			s := mutable[rng.IntN(len(mutable))]
			if _, ok := resumeAt[s]; ok {
				continue
			}
			if rng.IntN(2) == 0 {
				setPaused(s, true)
				resumeAt[s] = time.Now().Add(time.Second + time.Duration(rng.Int64N(int64(4*time.Second))))
				continue
			}
			s.mu.Lock()
			next := 1 - s.cur
			s.mu.Unlock()
			ev := policyEvent{kind: "upsert", begin: time.Now(), cron: s.crons[next], jitter: s.jitters[next]}
			code, body, err := c.callErr(http.MethodPost, "/schedules/upsert", s.body(next))
			ev.done = time.Now()
			if err != nil || code != http.StatusOK {
				fail("upsert %s: %d %s %v", s.id, code, body, err)
				continue
			}
			s.mu.Lock()
			s.cur = next
			s.events = append(s.events, ev)
			s.mu.Unlock()
		}
	})

	// Process chaos, with one outage of every scheduler.
	outStart, outEnd := c.policyChaos(scheds, launchers[0], lenv, dur)
	cancel()
	mutWG.Wait()
	require.Empty(t, mutErrs, "API calls of the mutations failed")
	tEnd := time.Now()
	t.Logf("chaos over after %s; outage %s to %s", dur, outStart.Format(time.TimeOnly+".000"), outEnd.Format(time.TimeOnly+".000"))

	// No wedge: every skip/queue schedule reaches the executor again after
	// the chaos, and no run stays in flight past RUN_TIMEOUT. Spread
	// catch-ups of the outage may hold a schedule for a minute.
	var watched []*policySchedule
	for _, s := range schedules {
		if s.overlap != "allow" {
			watched = append(watched, s)
		}
	}
	maxInflight := time.Duration(0)
	c.waitFor(policySpreadWindow+2*policyRunTimeout+20*time.Second, "every skip/queue schedule launching runs after the chaos", func() (bool, string) {
		calls, _ := exec.snapshot()
		fresh := map[string]bool{}
		for _, call := range calls {
			if call.at.After(tEnd.Add(time.Second)) {
				fresh[call.sid] = true
			}
		}
		age := c.checkInflightAges(watched)
		maxInflight = max(maxInflight, age)
		var stuck []string
		for _, s := range watched {
			if !fresh[s.id] {
				stuck = append(stuck, s.id)
			}
		}
		return len(stuck) == 0, fmt.Sprintf("%d schedules without a launch since T_end+1s: %v", len(stuck), stuck[:min(5, len(stuck))])
	})
	t.Logf("every skip/queue schedule launched again %s after T_end; oldest in-flight run seen %s", time.Since(tEnd).Round(time.Millisecond), maxInflight.Round(time.Millisecond))

	// Quiesce: pause every schedule, with the schedulers still running so
	// that runs in flight end (reported, or failed by RUN_TIMEOUT).
	pauseAll := time.Now()
	for _, s := range schedules {
		ev := policyEvent{kind: "pause", final: true, begin: time.Now()}
		code, body := c.call(http.MethodPost, "/schedules/pause", fmt.Sprintf(`{"schedule_id":%q,"paused":true}`, s.id))
		require.Equal(t, http.StatusOK, code, body)
		ev.done = time.Now()
		s.mu.Lock()
		s.events = append(s.events, ev)
		s.mu.Unlock()
	}
	pausedAll := time.Now()
	var records map[string]string
	c.waitFor(policySpreadWindow+2*policyRunTimeout+20*time.Second, "every run record final", func() (bool, string) {
		c.checkInflightAges(watched)
		records = c.scanRunRecords()
		runs := c.readRuns(records)
		var open []string
		for k, r := range runs {
			if !model.RunStatus(r.st).Terminal() {
				open = append(open, k[:8]+"="+r.sid+"/"+r.st)
			}
		}
		return len(open) == 0, fmt.Sprintf("%d of %d runs not final (e.g. %v)", len(open), len(records), open[:min(4, len(open))])
	})
	for _, s := range scheds {
		c.stop(s.p)
	}
	records = c.scanRunRecords()
	runs := c.readRuns(records)
	calls, bad := exec.snapshot()
	require.Empty(t, bad, "executor requests whose body disagrees with their key")
	for _, call := range calls {
		require.False(t, call.at.After(pausedAll.Add(policyInFlight)),
			"run %s of %s (at %s) reached the executor at %s, after every schedule was paused (%s)",
			call.key[:8], call.sid, call.runAt.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), pausedAll.Format(time.TimeOnly+".000"))
	}
	c.auditPolicies(schedules, byID, runs, records, calls, tEnd, pauseAll, outStart, outEnd)
	t.Logf("policy chaos test took %s", time.Since(began).Round(time.Second))
}

func shardOf(id string) int { return queue.ShardOf(id, chaosShards) }

// checkInflightAges fails the test when a skip/queue schedule's in-flight
// run is older than RUN_TIMEOUT plus slack (a tick, a lease takeover), and
// returns the oldest age seen.
func (c *chaosCluster) checkInflightAges(ss []*policySchedule) time.Duration {
	t := c.t
	cmds := make([]*redis.StringCmd, len(ss))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for i, s := range ss {
			cmds[i] = p.HGet(c.ctx, shardKey(s.shard, "sched:"+s.id), "inflight")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		require.NoError(t, err)
	}
	now := time.Now()
	oldest := time.Duration(0)
	for i, s := range ss {
		key := cmds[i].Val()
		if key == "" {
			continue
		}
		m, err := c.rdb.HGetAll(c.ctx, shardKey(s.shard, "run:"+key)).Result()
		require.NoError(t, err)
		st := model.RunStatus(m["st"])
		if st.Terminal() || st == "" {
			continue // ended between the two reads (or being released)
		}
		fire, _ := msField(m, "fire")
		cr, _ := msField(m, "cr")
		since := fire
		if cr.After(since) {
			since = cr
		}
		age := now.Sub(since)
		oldest = max(oldest, age)
		// RUN_TIMEOUT, plus a shard takeover after the last frozen
		// scheduler (LEASE_TTL 2s) and ticks late on a loaded host.
		require.Less(t, age, policyRunTimeout+policyMisfireGrace,
			"schedule %s: run %s (%s, fire %s, created %s) in flight for %s, past RUN_TIMEOUT %s: %v",
			s.id, key[:8], st, fire.Format(time.TimeOnly+".000"), cr.Format(time.TimeOnly+".000"), age, policyRunTimeout, m)
	}
	return oldest
}

// policyChaos kills and freezes schedulers every 2-4 s, keeping one
// running, except for one outage of them all (SIGSTOP of every scheduler,
// policyOutage long) at 40% of dur; at dur/6 it kills and restarts
// launcher. It returns the outage's bounds.
func (c *chaosCluster) policyChaos(slots []*chaosSlot, launcher *chaosSlot, lenv map[string]string, dur time.Duration) (outStart, outEnd time.Time) {
	t := c.t
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>3))
	t.Logf("process chaos seed %d", seed)
	start := time.Now()
	end := start.Add(dur)
	between := func() time.Duration { return 2*time.Second + time.Duration(rng.Int64N(int64(2*time.Second))) }
	nextAction := start.Add(between())
	killLauncherAt := start.Add(dur / 6)
	outageAt := start.Add(dur * 2 / 5)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	at := func() string { return time.Since(start).Round(100 * time.Millisecond).String() }
	for now := range tick.C {
		inOutage := !outStart.IsZero() && outEnd.IsZero()
		if inOutage && now.Sub(outStart) >= policyOutage {
			for _, s := range slots {
				if s.paused {
					c.signal(s, syscall.SIGCONT)
					s.paused = false
				}
			}
			outEnd = time.Now()
			t.Logf("chaos %7s: outage over, SIGCONT every scheduler", at())
			nextAction = now.Add(between())
			continue
		}
		if inOutage {
			continue
		}
		for _, s := range slots {
			if s.paused && !now.Before(s.resumeAt) {
				c.signal(s, syscall.SIGCONT)
				s.paused = false
				t.Logf("chaos %7s: SIGCONT %s", at(), s.p.name)
			}
		}
		if !now.Before(end) {
			break
		}
		if !killLauncherAt.IsZero() && !now.Before(killLauncherAt) {
			killLauncherAt = time.Time{}
			old := launcher.p
			c.kill(old)
			launcher.gen++
			launcher.p = c.start(fmt.Sprintf("%s.%d", launcher.name, launcher.gen), "launcher", lenv)
			t.Logf("chaos %7s: SIGKILL %s, restarted as %s", at(), old.name, launcher.p.name)
		}
		if outStart.IsZero() && !now.Before(outageAt) {
			for _, s := range slots {
				if !s.paused {
					c.signal(s, syscall.SIGSTOP)
					s.paused = true
				}
			}
			outStart = time.Now()
			t.Logf("chaos %7s: outage: SIGSTOP every scheduler for %s", at(), policyOutage)
			continue
		}
		if now.Before(nextAction) {
			continue
		}
		nextAction = now.Add(between())
		if outStart.IsZero() && now.After(outageAt.Add(-4*time.Second)) {
			// Every replica is up when the outage begins, so that the
			// runs it makes late are those of its own window.
			continue
		}
		var running []*chaosSlot
		for _, s := range slots {
			if !s.paused {
				running = append(running, s)
			}
		}
		s := slots[rng.IntN(len(slots))]
		kill := rng.IntN(2) == 0
		switch {
		case s.paused:
			kill = true
		case len(running) < 2:
			continue
		}
		if kill {
			old := s.p
			c.kill(old)
			s.paused = false
			s.gen++
			s.p = c.start(fmt.Sprintf("%s.%d", s.name, s.gen), "scheduler", policySchedulerEnv)
			t.Logf("chaos %7s: SIGKILL %s, restarted as %s", at(), old.name, s.p.name)
		} else {
			pause := 3*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
			c.signal(s, syscall.SIGSTOP)
			s.paused, s.resumeAt = true, time.Now().Add(pause)
			t.Logf("chaos %7s: SIGSTOP %s for %s", at(), s.p.name, pause.Round(100*time.Millisecond))
		}
	}
	for _, s := range slots {
		if s.paused {
			c.signal(s, syscall.SIGCONT)
			s.paused = false
		}
	}
	return outStart, outEnd
}
