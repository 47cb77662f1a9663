package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
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
// It audits from Redis, the API and the executor's own log:
//   - one run record and one asynq task per idempotency key; a task for
//     every record that was enqueued, none for one that was not;
//   - no run reaches the executor before its fire time, nor before its
//     jittered planned time; a SKIPPED run never reaches it;
//   - skip and queue schedules never have two runs in flight (executor
//     call to final status), and a run recorded SKIPPED for overlap names
//     a run of its schedule that was in flight when it was planned;
//   - after the chaos, every skip and queue schedule keeps producing runs,
//     and no run stays in flight past RUN_TIMEOUT;
//   - a paused schedule reaches the executor with no run; after a timing
//     change, only fire times of the new timing do;
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
)

var policySchedulerEnv = map[string]string{
	"TICK_MS": "200", "LEASE_TTL": "2s", "LOOKAHEAD_MS": "1000",
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

// policyCall is one executor call.
type policyCall struct {
	key, sid string
	runAt    time.Time
	at       time.Time
}

// policyExecutor is the executor service: allow runs end in its answer;
// skip and queue runs are answered 202 (STARTED) and reported SUCCESS or
// FAILED through the API after a random delay, or never.
type policyExecutor struct {
	srv    *httptest.Server
	api    func() string
	client *http.Client
	wg     sync.WaitGroup
	stop   chan struct{}

	mu      sync.Mutex
	calls   []policyCall
	bad     []string
	reports map[string]time.Time // key -> when a final report was answered 200
	never   map[string]bool
}

func newPolicyExecutor(t *testing.T, api func() string) *policyExecutor {
	e := &policyExecutor{api: api, reports: map[string]time.Time{}, never: map[string]bool{}, stop: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() {
		close(e.stop)
		e.srv.Close()
		e.wg.Wait()
	})
	return e
}

func keyHash(key string, salt string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(salt + key))
	return h.Sum64()
}

func (e *policyExecutor) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	key := r.Header.Get("Idempotency-Key")
	var req struct {
		Meta struct {
			ScheduleID     string    `json:"schedule_id"`
			ScheduledFor   time.Time `json:"scheduled_for"`
			IdempotencyKey string    `json:"idempotency_key"`
		} `json:"meta"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	e.mu.Lock()
	if err != nil || req.Meta.IdempotencyKey != key || model.IdempotencyKey(req.Meta.ScheduleID, req.Meta.ScheduledFor) != key {
		e.bad = append(e.bad, fmt.Sprintf("key %s meta %+v err %v", key, req.Meta, err))
	}
	e.calls = append(e.calls, policyCall{key: key, sid: req.Meta.ScheduleID, runAt: req.Meta.ScheduledFor, at: at})
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(req.Meta.ScheduleID, "pa-") {
		// Real time must pass: an overlap_policy=allow run takes a moment,
		// so that runs of the schedule overlap.
		const answerAfter = 20 * time.Millisecond
		<-time.After(answerAfter)
		fmt.Fprintf(w, `{"run_id":"x-%s","status":"SUCCESS"}`, key[:8])
		return
	}
	h := keyHash(key, "mode") % 100
	switch {
	case h < 8: // never reports: RUN_TIMEOUT must end it
		e.mu.Lock()
		e.never[key] = true
		e.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"run_id":"x-%s"}`, key[:8])
		return
	case h < 16: // ends in the answer
		fmt.Fprintf(w, `{"run_id":"x-%s","status":"SUCCESS"}`, key[:8])
		e.mu.Lock()
		if _, ok := e.reports[key]; !ok {
			e.reports[key] = time.Now()
		}
		e.mu.Unlock()
		return
	}
	status := "SUCCESS"
	if h < 26 {
		status = "FAILED"
	}
	delay := 100*time.Millisecond + time.Duration(keyHash(key, "delay")%2400)*time.Millisecond
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"run_id":"x-%s"}`, key[:8])
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-time.After(delay):
		case <-e.stop:
			return
		}
		for attempt := 0; attempt < 20; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, e.api()+"/runs/"+key+"/status",
				strings.NewReader(fmt.Sprintf(`{"status":%q,"run_id":"x-%s"}`, status, key[:8])))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict {
					e.mu.Lock()
					if _, ok := e.reports[key]; !ok {
						e.reports[key] = time.Now()
					}
					e.mu.Unlock()
					return
				}
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-e.stop:
				return
			}
		}
	}()
}

func (e *policyExecutor) snapshot() ([]policyCall, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls), slices.Clone(e.bad)
}

// callErr makes one API request without failing the test (for goroutines).
func (c *chaosCluster) callErr(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, c.api+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
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

// isFireTime says whether at is a fire time of cron in zone.
func isFireTime(t *testing.T, cron, zone string, at time.Time) bool {
	rec := &model.ScheduleRecord{Kind: model.KindCron, CronExpr: cron, Timezone: zone}
	s, err := rec.Compile()
	require.NoError(t, err)
	return s.Next(at.Add(-time.Millisecond)).Equal(at)
}

// fireTimes returns the fire times of cron in zone with after < t < before.
func fireTimes(t *testing.T, cron, zone string, after, before time.Time) []time.Time {
	rec := &model.ScheduleRecord{Kind: model.KindCron, CronExpr: cron, Timezone: zone}
	s, err := rec.Compile()
	require.NoError(t, err)
	var out []time.Time
	for at := s.Next(after); !at.IsZero() && at.Before(before); at = s.Next(at) {
		out = append(out, at.UTC())
	}
	return out
}

// policyRun is a run record as stored.
type policyRun struct {
	key, sid, st, err, src string
	at, fire, cr, up, enq  time.Time
	hasEnq                 bool
}

func msField(m map[string]string, f string) (time.Time, bool) {
	v, ok := m[f]
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

func (c *chaosCluster) readRuns(records map[string]string) map[string]*policyRun {
	cmds := map[string]*redis.MapStringStringCmd{}
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for key, rk := range records {
			cmds[key] = p.HGetAll(c.ctx, rk)
		}
		return nil
	})
	require.NoError(c.t, err)
	out := map[string]*policyRun{}
	for key, cmd := range cmds {
		m := cmd.Val()
		r := &policyRun{key: key, sid: m["sid"], st: m["st"], err: m["err"], src: m["src"]}
		r.at, _ = msField(m, "at")
		r.fire, _ = msField(m, "fire")
		r.cr, _ = msField(m, "cr")
		r.up, _ = msField(m, "up")
		r.enq, r.hasEnq = msField(m, "enq")
		out[key] = r
	}
	return out
}

func TestChaosPoliciesJitterPausesUpserts(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-process chaos test takes minutes; it runs without -short")
	}
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

// policyAudit holds what auditPolicies reads and what its checks share:
// the tasks found, each key's first executor call, and the counts logged.
type policyAudit struct {
	c                         *chaosCluster
	t                         *testing.T
	runs                      map[string]*policyRun
	calls                     []policyCall
	tEnd, pauseAll            time.Time
	outStart, outEnd          time.Time
	tasks                     map[string]bool
	first                     map[string]policyCall
	dupCalls                  int
	skippedOverlap, timedOut  int
	timedOutNeverCalled       int
	launcherSkipped, caughtUp int
	stableChecked             int
}

// scheduleAudit is one schedule's runs in run_at order, its events, and
// whether its timing ever changed or it was ever paused.
type scheduleAudit struct {
	s                    *policySchedule
	rs                   []*policyRun
	events               []policyEvent
	upserted, pausedEver bool
}

// runSpan is the time a run is in flight: from its first executor call to
// its final status.
type runSpan struct {
	r        *policyRun
	from, to time.Time
}

// auditPolicies checks the invariants listed at the top of the file.
func (c *chaosCluster) auditPolicies(schedules []*policySchedule, byID map[string]*policySchedule, runs map[string]*policyRun,
	records map[string]string, calls []policyCall, tEnd, pauseAll, outStart, outEnd time.Time) {
	t := c.t
	t.Helper()
	a := &policyAudit{c: c, t: t, runs: runs, calls: calls, tEnd: tEnd, pauseAll: pauseAll, outStart: outStart, outEnd: outEnd}
	a.tasksMatchRecords(byID)
	a.executorCallsMatchRecords()
	bySched := map[string][]*policyRun{}
	for _, r := range runs {
		bySched[r.sid] = append(bySched[r.sid], r)
	}
	for _, s := range schedules {
		sa := newScheduleAudit(s, bySched[s.id])
		a.runTimesAreFireTimes(sa)
		a.noRunFiresBeforeItsJitter(sa)
		a.pausesAndTimingChangesHold(sa)
		a.launcherSkipsAreExplained(sa)
		if s.overlap != "allow" {
			a.overlapSkipsNameARunInFlight(sa)
			spans := a.neverTwoRunsInFlight(sa)
			if s.overlap == "queue" {
				a.heldRunsStartAtOnceInOrder(sa, spans)
			}
		}
		if !sa.upserted && !sa.pausedEver {
			a.catchupFollowsThePolicy(sa)
		}
	}
	t.Logf("audited %d schedules (%d stable): %d run records, %d asynq tasks, %d executor calls (%d repeated deliveries)",
		len(schedules), a.stableChecked, len(runs), len(a.tasks), len(calls), a.dupCalls)
	t.Logf("%d runs SKIPPED for overlap, %d SKIPPED by launchers (paused/changed), %d FAILED by RUN_TIMEOUT (%d never reached the executor), %d runs recorded late (caught up) on stable schedules",
		a.skippedOverlap, a.launcherSkipped, a.timedOut, a.timedOutNeverCalled, a.caughtUp)
}

func newScheduleAudit(s *policySchedule, rs []*policyRun) *scheduleAudit {
	slices.SortFunc(rs, func(a, b *policyRun) int { return a.at.Compare(b.at) })
	s.mu.Lock()
	events := slices.Clone(s.events)
	s.mu.Unlock()
	return &scheduleAudit{s: s, rs: rs, events: events,
		upserted:   slices.ContainsFunc(events, func(e policyEvent) bool { return e.kind == "upsert" }),
		pausedEver: slices.ContainsFunc(events, func(e policyEvent) bool { return e.kind == "pause" && !e.final }),
	}
}

// tasksMatchRecords checks that there is one asynq task per enqueued run
// record of a known schedule, under the run's key, and none otherwise.
func (a *policyAudit) tasksMatchRecords(byID map[string]*policySchedule) {
	t, c, runs := a.t, a.c, a.runs
	t.Helper()
	tasks := map[string]bool{}
	for _, k := range c.scanKeys("asynq:{" + chaosQueue + "}:t:*") {
		m := taskKeyRE.FindStringSubmatch(k)
		require.NotNil(t, m, "unexpected asynq task key %q", k)
		r, ok := runs[m[1]]
		require.True(t, ok, "asynq task %s has no run record", m[1])
		require.True(t, r.hasEnq, "asynq task %s: its record (%s, %s) was never enqueued", m[1], r.sid, r.st)
		tasks[m[1]] = true
	}
	enqueued := 0
	for k, r := range runs {
		_, known := byID[r.sid]
		require.True(t, known, "run %s of unknown schedule %q", k, r.sid)
		require.Equal(t, "schedule", r.src, "run %s", k)
		require.Equal(t, model.IdempotencyKey(r.sid, r.at), k, "key of run of %s at %s", r.sid, r.at)
		if r.hasEnq {
			enqueued++
			require.True(t, tasks[k], "run %s of %s at %s was enqueued but has no asynq task", k, r.sid, r.at)
		}
	}
	require.Equal(t, enqueued, queuetest.CountTasks(t, c.rdb, chaosQueue))
	a.tasks = tasks
}

// executorCallsMatchRecords checks that the executor never receives a run
// without a record, a SKIPPED run, or a run before its fire time, and that
// every allow run is called, never FAILED, when SUCCESS.
func (a *policyAudit) executorCallsMatchRecords() {
	t, runs := a.t, a.runs
	t.Helper()
	// First call per key.
	first := map[string]policyCall{}
	for _, call := range a.calls {
		if _, ok := first[call.key]; ok {
			a.dupCalls++
			continue
		}
		first[call.key] = call
	}
	a.first = first
	for k, call := range first {
		r, ok := runs[k]
		require.True(t, ok, "executor received %s (%s at %s), which has no run record", k, call.sid, call.runAt)
		require.NotEqual(t, "SKIPPED", r.st, "run %s of %s at %s reached the executor but is SKIPPED: %s", k[:8], r.sid, r.at, r.err)
		require.False(t, call.at.Before(r.fire.Add(-policyTol)),
			"run %s of %s (run_at %s) reached the executor at %s, before its fire time %s",
			k[:8], r.sid, r.at.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), r.fire.Format(time.TimeOnly+".000"))
	}
	for k, r := range runs {
		if r.st == "SUCCESS" && strings.HasPrefix(r.sid, "pa-") {
			_, ok := first[k]
			require.True(t, ok, "allow run %s of %s at %s is SUCCESS but never reached the executor", k[:8], r.sid, r.at)
		}
		if strings.HasPrefix(r.sid, "pa-") {
			require.NotEqual(t, "FAILED", r.st, "allow run %s of %s at %s FAILED: %s", k[:8], r.sid, r.at, r.err)
		}
	}
}

// runTimesAreFireTimes checks that every run time is a fire time of a
// timing the schedule had.
func (a *policyAudit) runTimesAreFireTimes(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	for _, r := range sa.rs {
		ok := isFireTime(t, s.crons[0], s.zone, r.at) || (sa.upserted && isFireTime(t, s.crons[1], s.zone, r.at))
		require.True(t, ok, "run of %s at %s is no fire time of its timings %v", s.id, r.at, s.crons)
	}
}

// noRunFiresBeforeItsJitter checks that a run never fires before its
// jittered planned time (the clamps and catch-up only move it later), and
// that only spread moves a fire time past the enqueue. The jitter in force
// is known for stable schedules only.
func (a *policyAudit) noRunFiresBeforeItsJitter(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	if sa.upserted {
		return
	}
	j := time.Duration(s.jitters[0]) * time.Millisecond
	for _, r := range sa.rs {
		want := r.at.Add(model.JitterOffset(r.key, j))
		require.False(t, r.fire.Before(want.Truncate(time.Millisecond)),
			"run of %s at %s: fire %s before its jittered time %s (jitter %s)", s.id, r.at, r.fire, want, j)
		if r.fire.After(want.Add(time.Millisecond)) && r.hasEnq && r.fire.After(r.enq.Add(time.Second)) {
			// Only spread moves a fire time past the enqueue.
			require.Equal(t, "spread", s.catchup, "run of %s at %s fires %s, after its enqueue %s", s.id, r.at, r.fire, r.enq)
			require.False(t, r.fire.After(r.enq.Add(policySpreadWindow+time.Second)), "spread run of %s at %s fires %s, over a minute after its enqueue %s", s.id, r.at, r.fire, r.enq)
		}
	}
}

// pausesAndTimingChangesHold checks that no run reaches the executor while
// its schedule is paused, and that after a timing change only the new
// timing's fire times reach it.
func (a *policyAudit) pausesAndTimingChangesHold(sa *scheduleAudit) {
	t, s, events := a.t, sa.s, sa.events
	t.Helper()
	var sc []policyCall
	for _, call := range a.calls {
		if call.sid == s.id {
			sc = append(sc, call)
		}
	}
	// after returns the calls that reached the executor once event i
	// took effect (policyInFlight after it was done) and before the
	// next event of kind next began.
	after := func(i int, next string) (until time.Time, in []policyCall) {
		until = a.tEnd.Add(time.Hour)
		for _, later := range events[i+1:] {
			if later.kind == next {
				until = later.begin
				break
			}
		}
		for _, call := range sc {
			if call.at.After(events[i].done.Add(policyInFlight)) && call.at.Before(until) {
				in = append(in, call)
			}
		}
		return until, in
	}
	for i, ev := range events {
		switch ev.kind {
		case "pause":
			until, in := after(i, "resume")
			for _, call := range in {
				require.Fail(t, "run reached the executor while its schedule was paused",
					"run of %s at %s reached the executor at %s, while the schedule was paused (%s to %s)",
					s.id, call.runAt.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), ev.done.Format(time.TimeOnly+".000"), until.Format(time.TimeOnly+".000"))
			}
		case "upsert":
			_, in := after(i, "upsert")
			for _, call := range in {
				require.True(t, isFireTime(t, ev.cron, s.zone, call.runAt),
					"run of %s at %s reached the executor at %s, after its timing became %q (%s)",
					s.id, call.runAt.Format(time.TimeOnly), call.at.Format(time.TimeOnly+".000"), ev.cron, ev.done.Format(time.TimeOnly+".000"))
			}
		}
	}
}

// launcherSkipsAreExplained checks that every SKIPPED run was skipped for
// a reason the schedule gave: an overlap on a skip schedule, a pause, or a
// timing change.
func (a *policyAudit) launcherSkipsAreExplained(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	for _, r := range sa.rs {
		if r.st != "SKIPPED" {
			continue
		}
		switch {
		case strings.HasPrefix(r.err, "skipped: run ") && strings.Contains(r.err, "still in flight"):
			require.Equal(t, "skip", s.overlap, "run of %s at %s: %s", s.id, r.at, r.err)
		case strings.Contains(r.err, "paused"):
			require.True(t, sa.pausedEver || !r.up.Before(a.pauseAll.Add(-policyTol)), "run of %s at %s: %s (never paused)", s.id, r.at, r.err)
			a.launcherSkipped++
		case strings.Contains(r.err, "schedule changed"):
			require.True(t, sa.upserted, "run of %s at %s: %s (never changed)", s.id, r.at, r.err)
			a.launcherSkipped++
		default:
			t.Fatalf("run of %s at %s SKIPPED for an unexpected reason: %s", s.id, r.at, r.err)
		}
	}
}

// overlapSkipsNameARunInFlight checks that a run skipped for overlap names
// an earlier run of its schedule, created before it and still in flight
// when it was skipped.
func (a *policyAudit) overlapSkipsNameARunInFlight(sa *scheduleAudit) {
	t, s := a.t, sa.s
	t.Helper()
	byKey := map[string]*policyRun{}
	for _, r := range sa.rs {
		byKey[r.key] = r
	}
	for _, r := range sa.rs {
		if r.st != "SKIPPED" || !strings.HasPrefix(r.err, "skipped: run ") {
			continue
		}
		a.skippedOverlap++
		other := strings.Fields(strings.TrimPrefix(r.err, "skipped: run "))[0]
		o, ok := byKey[other]
		require.True(t, ok, "run of %s at %s skipped for %s, no run of its schedule", s.id, r.at, other)
		require.True(t, o.at.Before(r.at), "run of %s at %s skipped for a later run at %s", s.id, r.at, o.at)
		require.False(t, o.cr.After(r.cr.Add(policyTol)), "run of %s at %s skipped for %s created after it", s.id, r.at, other)
		require.False(t, o.up.Before(r.cr.Add(-policyTol)),
			"run of %s at %s SKIPPED at %s for run %s (at %s), which had ended at %s (%s: %s)",
			s.id, r.at, r.cr.Format(time.TimeOnly+".000"), other[:8], o.at.Format(time.TimeOnly), o.up.Format(time.TimeOnly+".000"), o.st, o.err)
	}
}

// neverTwoRunsInFlight checks that, on a skip or queue schedule, no run
// reaches the executor while another is in flight: from its first
// executor call to its final status. It returns the runs' spans.
func (a *policyAudit) neverTwoRunsInFlight(sa *scheduleAudit) []runSpan {
	t, s := a.t, sa.s
	t.Helper()
	var spans []runSpan
	for _, r := range sa.rs {
		if strings.Contains(r.err, "RUN_TIMEOUT") {
			a.timedOut++
		}
		call, ok := a.first[r.key]
		if !ok {
			if strings.Contains(r.err, "RUN_TIMEOUT") {
				a.timedOutNeverCalled++
			}
			continue
		}
		spans = append(spans, runSpan{r: r, from: call.at, to: r.up})
	}
	for _, x := range spans {
		for _, y := range spans {
			if x.r == y.r {
				continue
			}
			if y.from.After(x.from) && y.from.Before(x.to.Add(-policyTol)) {
				t.Fatalf("schedule %s (%s): run at %s reached the executor at %s while the run at %s was in flight (executor call %s, %s at %s: %s)",
					s.id, s.overlap, y.r.at.Format(time.TimeOnly), y.from.Format(time.TimeOnly+".000"),
					x.r.at.Format(time.TimeOnly), x.from.Format(time.TimeOnly+".000"), x.r.st, x.r.up.Format(time.TimeOnly+".000"), x.r.err)
			}
		}
	}
	return spans
}

// heldRunsStartAtOnceInOrder checks that a queue schedule's held run,
// released by the end of the run before it, starts at once whatever the
// catch-up policy (only the first run missed in the outage, nothing held,
// may be spread past its enqueue), and that runs start in run_at order.
func (a *policyAudit) heldRunsStartAtOnceInOrder(sa *scheduleAudit, spans []runSpan) {
	t, s, rs := a.t, sa.s, sa.rs
	t.Helper()
	var delayed []string
	for _, r := range rs {
		if r.hasEnq && r.fire.After(r.enq.Add(time.Second)) {
			delayed = append(delayed, fmt.Sprintf("%s fires %s after its enqueue", r.at.Format(time.TimeOnly), r.fire.Sub(r.enq).Round(time.Millisecond)))
		}
	}
	require.LessOrEqual(t, len(delayed), 1, "queue schedule %s (%s): runs released from the hold wait past their enqueue: %v", s.id, s.catchup, delayed)
	for i := 1; i < len(spans); i++ {
		// (A timing change re-anchors the schedule: with a
		// negative jitter, a run of the new timing can fire
		// before a run of the old one's later time.)
		if !sa.upserted && spans[i].from.Before(spans[i-1].from) {
			var b strings.Builder
			for _, r := range rs {
				call := a.first[r.key].at
				fmt.Fprintf(&b, "\n  run %s %s: fire %s cr %s enq %s up %s call %s %s %q", r.key[:8], r.at.Format(time.TimeOnly),
					r.fire.Format(time.TimeOnly+".000"), r.cr.Format(time.TimeOnly+".000"), r.enq.Format(time.TimeOnly+".000"),
					r.up.Format(time.TimeOnly+".000"), call.Format(time.TimeOnly+".000"), r.st, r.err)
			}
			for _, ev := range sa.events {
				fmt.Fprintf(&b, "\n  event %s %s..%s %q jitter %d", ev.kind, ev.begin.Format(time.TimeOnly+".000"), ev.done.Format(time.TimeOnly+".000"), ev.cron, ev.jitter)
			}
			t.Fatalf("queue schedule %s started its run at %s before the run at %s:%s", s.id, spans[i].r.at, spans[i-1].r.at, b.String())
		}
	}
}

// catchupFollowsThePolicy checks, on a stable schedule (its fire times
// are known), that fire_immediately and spread leave no fire time without
// a run, that none and latest drop only fire times in the outage, and that
// none records no missed run and latest at most one.
func (a *policyAudit) catchupFollowsThePolicy(sa *scheduleAudit) {
	t, c, s, rs := a.t, a.c, sa.s, sa.rs
	t.Helper()
	outStart, outEnd := a.outStart, a.outEnd
	a.stableChecked++
	j := time.Duration(s.jitters[0]) * time.Millisecond
	planned := func(r *policyRun) time.Time { return r.at.Add(model.JitterOffset(r.key, j)) }
	var late []*policyRun
	for _, r := range rs {
		if r.cr.Sub(planned(r)) > policyMisfireGrace+2*time.Second {
			late = append(late, r)
		}
	}
	a.caughtUp += len(late)
	have := map[int64]bool{}
	for _, r := range rs {
		have[r.at.UnixMilli()] = true
	}
	var upTo time.Time
	if s.overlap == "queue" {
		nextMS, err := c.rdb.HGet(c.ctx, shardKey(s.shard, "sched:"+s.id), "next").Int64()
		require.NoError(t, err)
		upTo = time.UnixMilli(nextMS).Add(-time.Second)
		upTo = minTime(upTo, a.tEnd)
	} else {
		upTo = a.tEnd
	}
	var missing []time.Time
	for _, at := range fireTimes(t, s.crons[0], s.zone, s.created, upTo) {
		if !have[at.UnixMilli()] {
			missing = append(missing, at)
		}
	}
	switch s.catchup {
	case "fire_immediately", "spread":
		require.Empty(t, missing, "schedule %s (%s, %s): fire times without a run", s.id, s.overlap, s.catchup)
	case "none", "latest":
		if s.overlap == "queue" {
			break // a held schedule drops what its wait made late, anywhere
		}
		// A skip schedule plans its runs in run_at order, each at its
		// jittered fire time: with a jitter over half the period, a run
		// jittered early waits for the run before it, jittered late,
		// and when that one is missed it is missed with it (plan.go: the
		// missed runs are a prefix from the schedule's next time). So a
		// run can be planned no earlier than the latest fire time of the
		// runs up to it: that is what must fall in the outage. A run
		// plannable shortly before the outage is missed too when its
		// shard's owner had not ticked yet (a takeover, a loaded host)
		// by the time every scheduler froze: up to MISFIRE_GRACE_MS.
		ready := map[int64]time.Time{}
		var latest time.Time
		for _, at := range fireTimes(t, s.crons[0], s.zone, s.created, upTo) {
			fire := at.Add(model.JitterOffset(model.IdempotencyKey(s.id, at), j))
			if fire.After(latest) || s.overlap == "allow" { // allow plans ahead, in order anyway
				latest = fire
			}
			ready[at.UnixMilli()] = latest
		}
		for _, at := range missing {
			fire := at.Add(model.JitterOffset(model.IdempotencyKey(s.id, at), j))
			require.True(t, !ready[at.UnixMilli()].Before(outStart.Add(-policyMisfireGrace)) && !fire.After(outEnd.Add(4*time.Second)),
				"schedule %s (%s, %s): fire time %s (jittered %s, plannable from %s) dropped outside the outage (%s to %s)",
				s.id, s.overlap, s.catchup, at.Format(time.TimeOnly), fire.Format(time.TimeOnly+".000"),
				ready[at.UnixMilli()].Format(time.TimeOnly+".000"),
				outStart.Format(time.TimeOnly+".000"), outEnd.Format(time.TimeOnly+".000"))
		}
		// A run is late by when it could be planned (ready), not by
		// its own jittered time: behind a run of its schedule jittered
		// later and not missed, it is planned with that run (SKIPPED
		// for overlap, never enqueued), not dropped.
		late = slices.DeleteFunc(late, func(r *policyRun) bool {
			from, ok := ready[r.at.UnixMilli()]
			return ok && r.cr.Sub(from) <= policyMisfireGrace+2*time.Second
		})
		if s.catchup == "none" {
			for _, r := range late {
				t.Fatalf("schedule %s (%s, none): run at %s (planned %s) was recorded at %s, missed yet not dropped",
					s.id, s.overlap, r.at.Format(time.TimeOnly), planned(r).Format(time.TimeOnly+".000"), r.cr.Format(time.TimeOnly+".000"))
			}
		} else {
			require.LessOrEqual(t, len(late), 1, "schedule %s (%s, latest): %d missed runs recorded, want at most the latest of the outage", s.id, s.overlap, len(late))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
