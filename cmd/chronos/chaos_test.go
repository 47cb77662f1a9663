package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The chaos test: the built binary as 1 api, 3 schedulers and 2 launchers on
// one real Redis, a few hundred schedules firing every second (half of
// them dropping missed runs) and a few hundred agents' alarms (once, and
// every second; alarm_chaos_test.go) while the schedulers are killed with
// SIGKILL and frozen with SIGSTOP, and one launcher is killed with runs in
// hand. It audits exactly one run record and one asynq task per planned
// run or alarm fire time, none missing, at-least-once execution, and one
// signed wake per fire time at the receiver, which deduplicates on the
// Idempotency-Key; from Redis, the API and the receiver (never from logs).
const (
	// chaosDurationDefault is how long the chaos lasts; the environment
	// variable CHRONOS_CHAOS_SECONDS overrides it.
	chaosDurationDefault = 60 * time.Second
	chaosSchedules       = 300
	chaosSchedulers      = 3
	chaosLaunchers       = 2
	// chaosShards is SHARDS of every process (the default, spelled out
	// because the audit reads the shard keys).
	chaosShards = 16
	chaosQueue  = "chronos"
	// chaosSettle bounds the wait, after the chaos, for every planned run to
	// be recorded and executed. The runs a killed launcher held come back
	// only when the launchers' recovery, once a minute as asynq's
	// recoverer, finds their lease more than 30 s expired (leases last 30
	// s): up to two minutes after the
	// kill, which comes early in the chaos.
	chaosSettle = 150 * time.Second
	// chaosExecutorDelay is how long the executor takes to answer, so that
	// a launcher killed at any moment holds runs in flight.
	chaosExecutorDelay = 50 * time.Millisecond
	// processReady bounds a process's start, up to a healthy /healthz.
	processReady = 30 * time.Second
)

// Keys of queue/doc.go's layout that the audit reads directly: on
// purpose, not through queue.Store, so that a bug in the store's readers
// cannot hide a lost or duplicated run from the audit.
var (
	runKeyRE = regexp.MustCompile(`^chronos:\{s(\d+)\}:run:([0-9a-f]{64})$`)
	// taskKeyRE reads a run task's key in a shard's run queue
	// (queue.ShardQueue): asynq:{sNN}chronos}:t:<key>.
	taskKeyRE = regexp.MustCompile(`^asynq:\{s\d+\}` + chaosQueue + `\}:t:(.+)$`)
)

func shardKey(sh int, rest string) string { return fmt.Sprintf("chronos:{s%02d}:%s", sh, rest) }

func chaosDuration(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("CHRONOS_CHAOS_SECONDS")
	if s == "" {
		return chaosDurationDefault
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "CHRONOS_CHAOS_SECONDS=%q", s)
	// The audit reads each schedule's runs in one page of at most 1000
	// (RUN_HISTORY and the API's limit): keep well inside it.
	require.True(t, n > 0 && n <= 600, "CHRONOS_CHAOS_SECONDS=%d: want 1 to 600", n)
	return time.Duration(n) * time.Second
}

func TestChaosExactlyOncePerPlannedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-process chaos test takes minutes; it runs without -short")
	}
	// Most of its minutes are waits (the chaos's own span, asynq's lease
	// recovery): it runs beside the package's other tests (TestMain).
	t.Parallel()
	dur := chaosDuration(t)
	began := time.Now()
	c := newChaosCluster(t)

	// Processes: the API, the launchers, then the schedulers. The API
	// verifies tokens: the alarms' owners are their tokens' subjects.
	api := c.start("api", "api", map[string]string{"AUTH_JWT_SECRET": testSecret})
	c.token = mintToken(t, testSecret, "chaos-test", auth.ScopeAdmin)
	launchers := make([]*chaosSlot, chaosLaunchers)
	for i := range launchers {
		launchers[i] = &chaosSlot{name: fmt.Sprintf("launcher-%d", i)}
		launchers[i].p = c.start(launchers[i].name+".0", "launcher", c.launcherEnvOf(launchers[i].name))
	}
	scheds := make([]*chaosSlot, chaosSchedulers)
	for i := range scheds {
		scheds[i] = &chaosSlot{name: fmt.Sprintf("scheduler-%d", i)}
		scheds[i].p = c.start(scheds[i].name+".0", "scheduler", schedulerEnv)
	}
	t.Logf("%d processes up after %s", 1+chaosLaunchers+chaosSchedulers, time.Since(began).Round(time.Millisecond))

	// A workflow version, then the schedules, each firing every second.
	c.api = "http://" + api.addr
	code, body := c.call(http.MethodPut, "/workflows/chaos/versions/1", `{"nodes":[{"id":"tick"}]}`)
	require.Equal(t, http.StatusOK, code, body)
	schedules := c.register(chaosSchedules)
	t.Logf("%d schedules registered after %s", len(schedules), time.Since(began).Round(time.Millisecond))
	alarms := c.createAlarms(dur)
	t.Logf("%d once and %d cron alarms of %d owners created after %s",
		len(alarms.once), len(alarms.cron), chaosOwners, time.Since(began).Round(time.Millisecond))

	// Chaos: SIGKILL + restart or SIGSTOP for 3-6 s (longer than LEASE_TTL),
	// a scheduler every 2-4 s, while at least one keeps running; and early
	// on, SIGKILL + restart of a launcher, while the receiver holds a wake
	// it is delivering.
	kills, pauses := c.chaos(scheds, launchers[0], dur)
	tEnd := time.Now()
	t.Logf("chaos over after %s: %d kills, %d pauses; T_end = %s", dur, kills, pauses, tEnd.UTC().Format(time.RFC3339Nano))

	// Every planned run up to T_end gets its record and is executed (a
	// wake delivered), while the schedulers keep going. The cron alarms
	// are counted as schedules: they fire every second too.
	recurring := append(slices.Clone(schedules), alarms.cronSchedules()...)
	planned := len(alarms.once)
	for _, s := range recurring {
		planned += len(s.plannedUpTo(tEnd))
	}
	settle := time.Now()
	c.waitFor(chaosSettle, "every planned run up to T_end recorded and SUCCESS", func() (bool, string) {
		missing, unfinished := c.progress(recurring, tEnd)
		unfinished += c.onceProgress(alarms)
		return missing == 0 && unfinished == 0,
			fmt.Sprintf("%d of %d planned runs have no record, %d are not SUCCESS yet", missing, planned, unfinished)
	})
	t.Logf("all %d planned runs up to T_end recorded and executed %s after T_end", planned, time.Since(settle).Round(time.Millisecond))

	// Quiesce: stop the schedulers the way an operator does (SIGTERM: the
	// tick in progress finishes, leases are released), so that no record or
	// task appears during the audit; then let the launchers finish the runs
	// enqueued ahead.
	for _, s := range scheds {
		c.stop(s.p)
	}
	var records map[string]string // idempotency key -> run record key
	c.waitFor(chaosSettle, "every run record SUCCESS", func() (bool, string) {
		records = c.scanRunRecords()
		notDone := c.notSucceeded(records)
		return len(notDone) == 0, fmt.Sprintf("%d of %d run records not SUCCESS (e.g. %v)", len(notDone), len(records), notDone[:min(3, len(notDone))])
	})

	c.auditTasks(records)
	schedRecords, alarmRecords := c.splitRecords(records, schedules, alarms)
	c.audit(schedules, tEnd, schedRecords)
	deliveries, dupKeys, maxCalls := c.auditAlarms(alarms, tEnd, alarmRecords)
	t.Logf("alarms: %d run records, each one wake at the receiver; %d deliveries, %d wakes delivered more than once "+
		"(at least once is the contract; the receiver deduplicated them), at most %d times",
		len(alarmRecords), deliveries, dupKeys, maxCalls)
	t.Logf("chaos test took %s", time.Since(began).Round(time.Second))
}

// schedulerEnv makes schedulers work continuously: short ticks and leases,
// a short lookahead, and enough history and task retention for the test.
var schedulerEnv = map[string]string{
	"TICK_MS": "200", "LEASE_TTL": "2s", "LOOKAHEAD_MS": "1000",
}

// chaosCluster is the processes, the Redis and the executor of one test.
type chaosCluster struct {
	t     *testing.T
	ctx   context.Context
	bin   string
	dir   string
	redis *queuetest.Redis
	// rdb reaches every key whatever the topology: on a Cluster a
	// cluster client, which routes each command to its slot's master.
	rdb    redis.UniversalClient
	exec   *recordingExecutor
	wake   *wakeRecorder // WAKE_URL of the launchers (alarm_chaos_test.go)
	client *http.Client
	api    string
	token  string // the bearer token of call, if the API verifies tokens
	// heldWake is the key of the wake whose delivery chaos cut by killing
	// its launcher.
	heldWake string

	mu    sync.Mutex
	procs []*chaosProc // every process ever started, for the log tails
}

// chaosProc is one started process.
type chaosProc struct {
	name string
	addr string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been reaped
	err  error         // its Wait error, once done is closed
}

// chaosSlot is a replica across restarts.
type chaosSlot struct {
	name     string
	gen      int
	p        *chaosProc
	paused   bool
	resumeAt time.Time
}

func newChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	return newChaosClusterOn(t, nil)
}

// newChaosClusterOn is newChaosCluster on r, or on the Redis StartRedis
// starts when r is nil.
func newChaosClusterOn(t *testing.T, r *queuetest.Redis) *chaosCluster {
	t.Helper()
	c := &chaosCluster{t: t, ctx: context.Background(), dir: t.TempDir()}
	start := time.Now()
	bin, err := queuetest.BuildChronos(context.Background(), c.dir)
	require.NoError(t, err)
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	c.bin = bin
	if r == nil {
		r = queuetest.StartRedis(t)
	}
	c.redis = r
	c.rdb = c.redis.Universal(t)
	c.exec = newRecordingExecutor(t)
	c.wake = newWakeRecorder(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c.client = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	t.Cleanup(func() {
		c.mu.Lock()
		procs := slices.Clone(c.procs)
		c.mu.Unlock()
		for _, p := range procs {
			c.kill(p)
		}
		if t.Failed() {
			for _, p := range procs {
				t.Logf("--- last lines of %s (%s) ---\n%s", p.name, p.log, tailFile(p.log, 25))
			}
		}
	})
	return c
}

// start runs "chronos <sub>" with the common settings and extra, and
// waits for its /healthz.
func (c *chaosCluster) start(name, sub string, extra map[string]string) *chaosProc {
	c.t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		p, err := c.startOnce(name, sub, extra)
		if err == nil {
			return p
		}
		// A process that exits before it is healthy is started again a
		// few times; one that keeps failing fails the test below.
		lastErr = err
		c.t.Logf("%s did not start (attempt %d): %v", name, attempt+1, err)
	}
	c.t.Fatalf("%s did not start: %v", name, lastErr)
	return nil
}

func (c *chaosCluster) startOnce(name, sub string, extra map[string]string) (*chaosProc, error) {
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "TMPDIR": os.Getenv("TMPDIR"),
		// Port 0: the process logs the address it listens on (a free
		// port chosen here could be taken before the process binds it).
		"REDIS_URL": c.redis.URL, "HTTP_ADDR": "127.0.0.1:0",
		"LOG_FORMAT": "json", "SHARDS": strconv.Itoa(chaosShards), "QUEUE": chaosQueue,
		"RUN_HISTORY": "1000", "TASK_RETENTION": "1h",
		"INSECURE": "true", "RATE_LIMIT": "0", // the chaos is not about access
	}
	for k, v := range extra {
		env[k] = v
	}
	p := &chaosProc{name: name, done: make(chan struct{})}
	c.mu.Lock()
	p.log = filepath.Join(c.dir, fmt.Sprintf("%02d-%s.log", len(c.procs), name))
	c.mu.Unlock()
	logf, err := os.Create(p.log)
	require.NoError(c.t, err)
	p.cmd = exec.Command(c.bin, sub)
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = queuetest.ProcAttrDiesWithTest() // also when -timeout ends the binary before any cleanup
	require.NoError(c.t, p.cmd.Start(), "start %s", name)
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()

	deadline := time.Now().Add(processReady)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.addr == "" { // it logs its address once it listens
			b, _ := os.ReadFile(p.log)
			p.addr = loggedHTTPAddr(string(b))
		}
		if p.addr != "" {
			if resp, err := c.client.Get("http://" + p.addr + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return p, nil
				}
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("exited (%v): %s", p.err, tailFile(p.log, 5))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			c.kill(p)
			return nil, fmt.Errorf("no healthy /healthz within %s: %s", processReady, tailFile(p.log, 5))
		}
	}
}

// kill ends p with SIGKILL (a stopped process dies too) and reaps it.
func (c *chaosCluster) kill(p *chaosProc) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop ends p with SIGTERM and requires a clean exit.
func (c *chaosCluster) stop(p *chaosProc) {
	c.t.Helper()
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		require.NoError(c.t, p.err, "%s exit after SIGTERM", p.name)
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s did not exit within 30s of SIGTERM", p.name)
	}
}

// signal sends sig to a scheduler slot's process.
func (c *chaosCluster) signal(s *chaosSlot, sig syscall.Signal) {
	c.t.Helper()
	require.NoError(c.t, s.p.cmd.Process.Signal(sig), "%s %s", sig, s.p.name)
}

// launcherEnv makes launchers call the recording executor, and deliver
// alarms' wakes to the wake recorder.
func (c *chaosCluster) launcherEnv() map[string]string {
	return map[string]string{"EXECUTOR": "http", "EXECUTOR_URL": c.exec.srv.URL + "/runs", "LAUNCHER_CONCURRENCY": "20",
		"WAKE_URL": c.wake.srv.URL + "/wake", "WAKE_SECRET": chaosWakeSecret}
}

// launcherEnvOf is launcherEnv for the launchers of slot: their wakes
// come to a path of their own, so the receiver knows whose delivery it
// holds.
func (c *chaosCluster) launcherEnvOf(slot string) map[string]string {
	env := c.launcherEnv()
	env["WAKE_URL"] = c.wake.srv.URL + wakePath(slot)
	return env
}

// chaos kills and pauses schedulers until dur has passed, then resumes any
// paused one; a twelfth of the way in, it kills and restarts launcher,
// while the wake receiver holds one of its deliveries unanswered (its key
// is left in c.heldWake). It returns the number of scheduler kills and
// pauses.
func (c *chaosCluster) chaos(slots []*chaosSlot, launcher *chaosSlot, dur time.Duration) (kills, pauses int) {
	t := c.t
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("chaos seed %d", seed)
	start := time.Now()
	end := start.Add(dur)
	between := func() time.Duration { return 2*time.Second + time.Duration(rng.Int64N(int64(2*time.Second))) }
	nextAction := start.Add(between())
	killLauncherAt := start.Add(dur / 12)
	caught, release := c.wake.holdNext(wakePath(launcher.name))
	defer release()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	at := func() string { return time.Since(start).Round(100 * time.Millisecond).String() }

	for now := range tick.C {
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
			// Wakes fire every second: one reaches the receiver at once,
			// unless the chaos began before the first cron alarm's time.
			select {
			case c.heldWake = <-caught:
			case <-time.After(10 * time.Second):
				t.Fatalf("no wake of %s reached the receiver within 10s", launcher.p.name)
			}
			var active int64
			for _, k := range c.scanKeys("asynq:{s*}" + chaosQueue + "}:active") {
				n, err := c.rdb.LLen(c.ctx, k).Result()
				require.NoError(t, err)
				active += n
			}
			old := launcher.p
			c.kill(old)
			release() // the wake's connection died with the launcher
			launcher.gen++
			launcher.p = c.start(fmt.Sprintf("%s.%d", launcher.name, launcher.gen), "launcher", c.launcherEnvOf(launcher.name))
			t.Logf("chaos %7s: SIGKILL %s (%d runs in flight across launchers; its wake %s held unanswered), restarted as %s",
				at(), old.name, active, c.heldWake, launcher.p.name)
		}
		if now.Before(nextAction) {
			continue
		}
		nextAction = now.Add(between())

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
			kill = true // a frozen replica dies without ever waking up
		case len(running) < 2:
			// s is the only one running: it must not stop, even briefly.
			t.Logf("chaos %7s: %s is the only scheduler running; leaving it alone", at(), s.p.name)
			continue
		}
		if kill {
			old := s.p
			c.kill(old)
			s.paused = false
			s.gen++
			s.p = c.start(fmt.Sprintf("%s.%d", s.name, s.gen), "scheduler", schedulerEnv)
			kills++
			t.Logf("chaos %7s: SIGKILL %s, restarted as %s", at(), old.name, s.p.name)
		} else {
			pause := 3*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
			c.signal(s, syscall.SIGSTOP)
			s.paused, s.resumeAt = true, time.Now().Add(pause)
			pauses++
			t.Logf("chaos %7s: SIGSTOP %s for %s", at(), s.p.name, pause.Round(100*time.Millisecond))
		}
	}
	for _, s := range slots {
		if s.paused {
			c.signal(s, syscall.SIGCONT)
			s.paused = false
			t.Logf("chaos %7s: SIGCONT %s (chaos over)", at(), s.p.name)
		}
	}
	return kills, pauses
}

// waitFor polls cond every 500 ms until it holds, failing after timeout
// with cond's last explanation; it logs progress every 5 s.
func (c *chaosCluster) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not %s within %s: %s", what, timeout, why)
		}
		if time.Since(lastLog) > 5*time.Second {
			c.t.Logf("waiting for %s: %s", what, why)
			lastLog = time.Now()
		}
		<-tick.C
	}
}

// call makes one API request and returns the status and body.
func (c *chaosCluster) call(method, path, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.api+path, strings.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	require.NoError(c.t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(b)
}

// chaosSchedule is a registered schedule and when it was created.
type chaosSchedule struct {
	id      string
	shard   int
	created time.Time
}

// plannedUpTo returns the schedule's planned runs up to end: every whole
// second t with created < t <= end.
func (s chaosSchedule) plannedUpTo(end time.Time) []time.Time {
	var out []time.Time
	for at := s.created.Truncate(time.Second).Add(time.Second); !at.After(end); at = at.Add(time.Second) {
		out = append(out, at.UTC())
	}
	return out
}

// register upserts n schedules firing every second, half of them with
// catchup_policy none, and reads back each one's created_at.
func (c *chaosCluster) register(n int) []chaosSchedule {
	t := c.t
	out := make([]chaosSchedule, n)
	for i := range out {
		id := fmt.Sprintf("chaos-%03d", i)
		// Half the schedules drop missed runs: a replica's death must
		// never make a run "missed" (MISFIRE_GRACE_MS exceeds a shard
		// takeover), so these too must fire every planned run.
		catchup := [2]string{"fire_immediately", "none"}[i%2]
		code, body := c.call(http.MethodPost, "/schedules/upsert", fmt.Sprintf(
			`{"schedule_id":%q,"workflow_id":"chaos","version":1,"user_id":"chaos-test","cron_expr":"* * * * * *","timezone":"UTC","overlap_policy":"allow","catchup_policy":%q}`, id, catchup))
		require.Equal(t, http.StatusOK, code, body)
		var up struct {
			ScheduleID string     `json:"schedule_id"`
			NextRunAt  *time.Time `json:"next_run_at"`
			Created    bool       `json:"created"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &up), body)
		require.True(t, up.Created, "schedule %s already existed: %s", id, body)
		require.Equal(t, id, up.ScheduleID)

		code, body = c.call(http.MethodGet, "/schedules/"+id+"?runs=0", "")
		require.Equal(t, http.StatusOK, code, body)
		var got struct {
			CreatedAt time.Time `json:"created_at"`
			CronExpr  string    `json:"cron_expr"`
			State     string    `json:"state"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got), body)
		require.False(t, got.CreatedAt.IsZero(), "created_at of %s: %s", id, body)
		require.Equal(t, "active", got.State, body)
		require.NotNil(t, up.NextRunAt, body)
		out[i] = chaosSchedule{id: id, shard: queue.ShardOf(id, chaosShards), created: got.CreatedAt}
	}
	return out
}

// progress counts, over the planned runs up to end, those without a run
// record and those not yet SUCCESS, from Redis. A run that ended any
// other way fails the test at once.
func (c *chaosCluster) progress(schedules []chaosSchedule, end time.Time) (missing, unfinished int) {
	t := c.t
	t.Helper()
	hist := make([]*redis.ZSliceCmd, len(schedules))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for i, s := range schedules {
			lo := s.created.Truncate(time.Second).Add(time.Second).UnixMilli()
			hist[i] = p.ZRangeByScoreWithScores(c.ctx, shardKey(s.shard, "runs:"+s.id),
				&redis.ZRangeBy{Min: strconv.FormatInt(lo, 10), Max: strconv.FormatInt(end.UnixMilli(), 10)})
		}
		return nil
	})
	require.NoError(t, err)
	type ref struct {
		sched chaosSchedule
		key   string
		cmd   *redis.StringCmd
	}
	var refs []ref
	for i, s := range schedules {
		zs := hist[i].Val()
		missing += len(s.plannedUpTo(end)) - len(zs)
		for _, z := range zs {
			refs = append(refs, ref{sched: s, key: z.Member.(string)})
		}
	}
	_, err = c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for i := range refs {
			refs[i].cmd = p.HGet(c.ctx, shardKey(refs[i].sched.shard, "run:"+refs[i].key), "st")
		}
		return nil
	})
	require.NoError(t, err)
	for _, r := range refs {
		switch st := model.RunStatus(r.cmd.Val()); {
		case st == model.RunSuccess:
		case st.Terminal():
			all, _ := c.rdb.HGetAll(c.ctx, shardKey(r.sched.shard, "run:"+r.key)).Result()
			t.Fatalf("run %s of %s ended %s, not SUCCESS: %v", r.key, r.sched.id, st, all)
		default:
			unfinished++
		}
	}
	return missing, unfinished
}

// scanKeys returns every key matching pattern. On a Cluster SCAN walks
// one node, so it walks every master; a master that is failing over
// answers with an error, and the walk waits for it like any other read.
func (c *chaosCluster) scanKeys(pattern string) []string {
	c.t.Helper()
	scan := func(ctx context.Context, rdb redis.Cmdable) ([]string, error) {
		var out []string
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		return out, iter.Err()
	}
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok {
		out, err := scan(c.ctx, c.rdb)
		require.NoError(c.t, err)
		return out
	}
	var (
		mu  sync.Mutex
		out []string
	)
	err := cc.ForEachMaster(c.ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := scan(ctx, m)
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	})
	require.NoError(c.t, err)
	return out
}

// scanRunRecords returns every run record in Redis by idempotency key,
// requiring that no key has records in two shards.
func (c *chaosCluster) scanRunRecords() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, k := range c.scanKeys("chronos:{s*}:run:*") {
		m := runKeyRE.FindStringSubmatch(k)
		require.NotNil(c.t, m, "unexpected run record key %q", k)
		prev, dup := out[m[2]]
		require.False(c.t, dup, "run %s has two records: %s and %s", m[2], prev, k)
		out[m[2]] = k
	}
	return out
}

// notSucceeded returns the keys of records whose status is not SUCCESS.
func (c *chaosCluster) notSucceeded(records map[string]string) []string {
	c.t.Helper()
	keys := make([]string, 0, len(records))
	cmds := make([]*redis.StringCmd, 0, len(records))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for key, rk := range records {
			keys = append(keys, key)
			cmds = append(cmds, p.HGet(c.ctx, rk, "st"))
		}
		return nil
	})
	require.NoError(c.t, err)
	var out []string
	for i, cmd := range cmds {
		if st := model.RunStatus(cmd.Val()); st != model.RunSuccess {
			if st.Terminal() {
				all, _ := c.rdb.HGetAll(c.ctx, records[keys[i]]).Result()
				c.t.Fatalf("run %s ended %s, not SUCCESS: %v", keys[i], st, all)
			}
			out = append(out, keys[i]+"="+string(st))
		}
	}
	return out
}

// apiRun is a run as GET /schedules/:id/runs shows it.
type apiRun struct {
	IdempotencyKey string     `json:"idempotency_key"`
	ScheduleID     string     `json:"schedule_id"`
	RunAt          time.Time  `json:"run_at"`
	FireAt         time.Time  `json:"fire_at"`
	Status         string     `json:"status"`
	EnqueuedAt     *time.Time `json:"enqueued_at"`
	Source         string     `json:"source"`
}

// audit checks, with every scheduler stopped and every run executed:
//   - per schedule (API): the runs up to T_end are exactly its planned
//     runs, each keyed model.IdempotencyKey(id, run_at) and SUCCESS; the
//     runs after T_end (enqueued ahead, or while the audit waited) are the
//     consecutive seconds up to the schedule's stored next fire time, so
//     nothing was skipped or invented there either;
//   - records, the schedules' run records in Redis, are exactly the runs
//     the API listed;
//   - each run's asynq task (TaskID = key) carries the run;
//   - the executor received every run at least once, and nothing else.
func (c *chaosCluster) audit(schedules []chaosSchedule, tEnd time.Time, records map[string]string) {
	t := c.t
	t.Helper()
	var (
		listed   = map[string]apiRun{}
		auditedT int // runs up to T_end
		late1s   int // runs enqueued more than 1 s after their run_at
		late5s   int // ... more than the misfire grace after it
		caughtUp int // runs found late and fired by the catch-up policy
		maxLate  time.Duration
	)
	for _, s := range schedules {
		// The runs whose time has come, then those queued ahead.
		var res struct {
			Runs []apiRun `json:"runs"`
		}
		for _, q := range []string{"", "&upcoming=true"} {
			code, body := c.call(http.MethodGet, "/schedules/"+s.id+"/runs?limit=1000"+q, "")
			require.Equal(t, http.StatusOK, code, body)
			var page struct {
				Runs []apiRun `json:"runs"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &page))
			require.Less(t, len(page.Runs), 1000, "schedule %s has 1000 runs or more: the listing may be cut", s.id)
			res.Runs = append(res.Runs, page.Runs...)
		}

		var upTo, after []time.Time
		for _, r := range res.Runs {
			require.Equal(t, s.id, r.ScheduleID, "run %s", r.IdempotencyKey)
			require.Equal(t, model.IdempotencyKey(s.id, r.RunAt), r.IdempotencyKey, "key of run %s at %s", s.id, r.RunAt)
			require.Equal(t, string(model.RunSuccess), r.Status, "run %s of %s at %s", r.IdempotencyKey, s.id, r.RunAt)
			require.Equal(t, string(model.SourceSchedule), r.Source)
			_, dup := listed[r.IdempotencyKey]
			require.False(t, dup, "run %s listed twice", r.IdempotencyKey)
			listed[r.IdempotencyKey] = r
			if r.RunAt.After(tEnd) {
				after = append(after, r.RunAt.UTC())
			} else {
				upTo = append(upTo, r.RunAt.UTC())
			}
			if !r.FireAt.Equal(r.RunAt) {
				caughtUp++ // no jitter: only catch-up moves fire_at
			}
			if r.EnqueuedAt != nil {
				late := r.EnqueuedAt.Sub(r.RunAt)
				maxLate = max(maxLate, late)
				if late > time.Second {
					late1s++
				}
				if late > 5*time.Second {
					late5s++
				}
			}
		}
		slices.SortFunc(upTo, time.Time.Compare)
		slices.SortFunc(after, time.Time.Compare)
		want := s.plannedUpTo(tEnd)
		if !slices.Equal(want, upTo) {
			t.Fatalf("schedule %s (created %s): runs up to T_end differ from the planned seconds:\nmissing: %v\nextra: %v",
				s.id, s.created.Format(time.RFC3339Nano), timeDiff(want, upTo), timeDiff(upTo, want))
		}
		auditedT += len(upTo)

		nextMS, err := c.rdb.HGet(c.ctx, shardKey(s.shard, "sched:"+s.id), "next").Int64()
		require.NoError(t, err, "next of %s", s.id)
		next := time.UnixMilli(nextMS).UTC()
		var wantAfter []time.Time
		for at := tEnd.Truncate(time.Second).Add(time.Second); at.Before(next); at = at.Add(time.Second) {
			wantAfter = append(wantAfter, at.UTC())
		}
		if !slices.Equal(wantAfter, after) {
			t.Fatalf("schedule %s: runs after T_end (%s) up to its next fire time %s are not consecutive:\nmissing: %v\nextra: %v",
				s.id, tEnd.Format(time.RFC3339Nano), next, timeDiff(wantAfter, after), timeDiff(after, wantAfter))
		}
	}

	// Run records in Redis: exactly the listed runs.
	require.Equal(t, len(listed), len(records), "run records in Redis vs runs listed by the API")
	for key := range records {
		_, ok := listed[key]
		require.True(t, ok, "run record %s belongs to no schedule's run list", records[key])
	}

	// asynq: each run's task carries it (auditTasks counts them).
	for key, r := range listed {
		info := queuetest.RequireTask(t, c.rdb, chaosQueue, key)
		p, err := queue.DecodeTaskPayload(info.Payload)
		require.NoError(t, err)
		require.Equal(t, key, p.IdempotencyKey)
		require.Equal(t, r.ScheduleID, p.ScheduleID)
		require.True(t, r.RunAt.Equal(p.RunAt), "task %s run_at %s, record %s", key, p.RunAt, r.RunAt)
	}

	// The executor: every run at least once, nothing foreign, and each
	// request's body agreed with its Idempotency-Key header.
	calls, bad := c.exec.snapshot()
	require.Empty(t, bad, "executor requests whose body disagrees with their Idempotency-Key")
	dups, deliveries, maxCalls := 0, 0, 0
	for key := range listed {
		n := calls[key]
		require.Positive(t, n, "run %s of %s (at %s) was never delivered to the executor", key, listed[key].ScheduleID, listed[key].RunAt)
		deliveries += n
		maxCalls = max(maxCalls, n)
		if n > 1 {
			dups++
		}
	}
	for key := range calls {
		_, ok := listed[key]
		require.True(t, ok, "the executor received %s, which no schedule planned", key)
	}

	t.Logf("audited %d schedules: %d planned runs up to T_end, %d run records in all (%d after T_end)",
		len(schedules), auditedT, len(records), len(records)-auditedT)
	t.Logf("executor: %d deliveries; %d runs delivered more than once (at least once is the contract), at most %d times",
		deliveries, dups, maxCalls)
	t.Logf("enqueue lateness (not gated): %d runs enqueued over 1s after their run_at, %d over the 5s misfire grace "+
		"(%d fired by catch-up), max %s", late1s, late5s, caughtUp, maxLate.Round(time.Millisecond))
}

// auditTasks checks that the asynq tasks are exactly one per run record
// (TaskID = key), and nothing else.
func (c *chaosCluster) auditTasks(records map[string]string) {
	t := c.t
	t.Helper()
	tasks := map[string]bool{}
	for _, k := range c.scanKeys("asynq:{*}:t:*") {
		m := taskKeyRE.FindStringSubmatch(k)
		require.NotNil(t, m, "unexpected asynq task key %q", k)
		require.False(t, tasks[m[1]], "asynq task %s in two queues", m[1])
		_, ok := records[m[1]]
		require.True(t, ok, "asynq task %s has no run record (a task with a foreign id)", m[1])
		tasks[m[1]] = true
	}
	require.Len(t, tasks, len(records), "asynq tasks vs run records")
	t.Logf("%d run records, %d asynq tasks", len(records), len(tasks))
}

// timeDiff returns the times of a that are not in b.
func timeDiff(a, b []time.Time) []string {
	in := map[int64]bool{}
	for _, x := range b {
		in[x.UnixMilli()] = true
	}
	var out []string
	for _, x := range a {
		if !in[x.UnixMilli()] {
			out = append(out, x.Format(time.RFC3339))
		}
	}
	return out
}

// recordingExecutor is the executor service the launchers call: it counts
// deliveries per Idempotency-Key and answers SUCCESS.
type recordingExecutor struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	bad   []string
}

func newRecordingExecutor(t *testing.T) *recordingExecutor {
	t.Helper()
	e := &recordingExecutor{calls: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *recordingExecutor) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	var req struct {
		DAG  json.RawMessage `json:"dag"`
		Meta struct {
			ScheduleID     string    `json:"schedule_id"`
			ScheduledFor   time.Time `json:"scheduled_for"`
			IdempotencyKey string    `json:"idempotency_key"`
		} `json:"meta"`
	}
	err := json.NewDecoder(r.Body).Decode(&req)
	e.mu.Lock()
	switch {
	case err != nil:
		e.bad = append(e.bad, fmt.Sprintf("%s: body: %v", key, err))
	case key == "" || req.Meta.IdempotencyKey != key ||
		model.IdempotencyKey(req.Meta.ScheduleID, req.Meta.ScheduledFor) != key ||
		!bytes.Contains(req.DAG, []byte(`"tick"`)):
		e.bad = append(e.bad, fmt.Sprintf("header %s, meta %+v, dag %s", key, req.Meta, req.DAG))
	}
	e.calls[key]++
	e.mu.Unlock()
	// Real time must pass: the executor's latency keeps runs in flight
	// while the chaos goes on.
	<-time.After(chaosExecutorDelay)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"run_id":"exec-%s","status":"SUCCESS"}`, key[:min(12, len(key))])
}

func (e *recordingExecutor) snapshot() (map[string]int, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	calls := make(map[string]int, len(e.calls))
	for k, v := range e.calls {
		calls[k] = v
	}
	return calls, slices.Clone(e.bad)
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
