package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// steadyResult: n schedules firing every period for `periods` periods,
// through one scheduler with the default lookahead and launchers calling
// an in-process no-op HTTP executor.
type steadyResult struct {
	n, periods   int
	period       time.Duration
	launchers    int
	launcherConc int
	first        time.Time // first measured boundary
	expected     int       // n × periods
	schedOK      int       // schedules with exactly one run at each measured boundary
	runs, tasks  int64     // all run records, all asynq tasks: equal when exactly once
	matched      int       // measured runs whose task was seen being enqueued
	ahead        int       // ... enqueued before their planned time
	late         durStats  // max(0, enqueue - planned) over measured runs
	runnable     durStats  // pending in asynq - planned: the figure comparable to the peer's drift
	started      int       // measured runs that reached the executor
	start        durStats  // executor arrival - planned
	cpuPerMin    float64   // scheduler CPU seconds per minute
	rssKB, hwmKB int64     // scheduler
	launcherCPU  float64   // CPU seconds per minute of all launchers
	calls, conns int64     // executor calls and TCP connections they came on
}

// steadySpec is the cron expression of a period: `* * * * *` for a minute.
func steadySpec(period time.Duration) (string, error) {
	switch {
	case period == time.Minute:
		return "* * * * *", nil
	case period < time.Minute && period >= time.Second && time.Minute%period == 0 && period%time.Second == 0:
		return fmt.Sprintf("*/%d * * * * *", int(period/time.Second)), nil
	}
	return "", fmt.Errorf("steady period must be 1m or divide a minute in whole seconds, got %s", period)
}

func (b *bench) steady(ctx context.Context) (*steadyResult, error) {
	e := b.e
	cfg := b.cfg
	res := &steadyResult{n: cfg.steadyN, periods: cfg.steadyPeriods, period: cfg.steadyPeriod,
		launchers: cfg.steadyLaunchers, launcherConc: cfg.steadyLauncherConc}
	spec, err := steadySpec(res.period)
	if err != nil {
		return nil, err
	}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	store, err := e.newStore(ctx, lookaheadDefault, 0)
	if err != nil {
		return nil, err
	}
	if err := store.PutWorkflow(ctx, workflowID, version, []byte(`{"steps":[]}`)); err != nil {
		return nil, err
	}

	// Enqueue times: the first HSET of each asynq task hash, seen through
	// keyspace notifications (Redis runs them inside the enqueue script).
	enq, stopWatch, err := watchTaskHashes(ctx, e.rdb, e.runQueues())
	if err != nil {
		return nil, err
	}
	defer stopWatch()

	ex, err := startNoopExecutor()
	if err != nil {
		return nil, err
	}
	defer ex.close()

	tmpl, err := cronRecord(spec)
	if err != nil {
		return nil, err
	}
	reg, err := register(ctx, store, res.n, tmpl)
	if err != nil {
		return nil, err
	}
	b.reg.observe(res.n, reg)

	sched, err := e.startChronos(ctx, "scheduler", nil)
	if err != nil {
		return nil, err
	}
	procs := []*proc{sched}
	defer func() { stopAll(procs) }()
	var launchers []*proc
	for range res.launchers {
		l, err := e.startChronos(ctx, "launcher", map[string]string{
			"EXECUTOR": "http", "EXECUTOR_URL": ex.url, "LAUNCHER_CONCURRENCY": strconv.Itoa(res.launcherConc),
		})
		if err != nil {
			return nil, err
		}
		launchers = append(launchers, l)
		procs = append(procs, l)
	}

	lead := min(res.period/12, 5*time.Second)
	res.first = time.Now().Add(lead).Truncate(res.period).Add(res.period)
	res.expected = res.n * res.periods
	// The measured runs: planned at each boundary of the window.
	var boundaries []time.Time
	for k := range res.periods {
		boundaries = append(boundaries, res.first.Add(time.Duration(k)*res.period))
	}
	e.logf("steady: %d schedules on %q, measuring %d periods from %s", res.n, spec, res.periods, res.first.Format("15:04:05"))
	// CPU window: exactly `periods` periods, covering the work done at each
	// measured boundary (which enqueues the next period's runs ahead).
	t0 := res.first.Add(-res.period / 30)
	if err := sleepUntil(ctx, t0); err != nil {
		return nil, err
	}
	s0, _ := readProcStat(sched.pid())
	l0 := cpuOf(launchers)
	t1 := t0.Add(time.Duration(res.periods) * res.period)
	if err := sleepUntil(ctx, t1); err != nil {
		return nil, err
	}
	s1, _ := readProcStat(sched.pid())
	minutes := t1.Sub(t0).Minutes()
	res.cpuPerMin = (s1.cpu - s0.cpu).Seconds() / minutes
	res.launcherCPU = (cpuOf(launchers) - l0).Seconds() / minutes
	res.rssKB, res.hwmKB = s1.rssKB, s1.hwmKB

	// Let the launchers finish the last boundary's runs (bounded).
	deadline := time.Now().Add(30 * time.Second)
	for ex.countAt(boundaries) < res.expected && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	stopAll(procs)
	stopWatch()

	var schedOK, runsTotal atomic.Int64
	keys := make([][]string, res.n)
	err = forEach(ctx, res.n, 64, func(ctx context.Context, i int) error {
		id := scheduleID(i)
		rs, err := store.ListRuns(ctx, id, 1000)
		if err != nil {
			return err
		}
		runsTotal.Add(int64(len(rs)))
		at := map[int64]int{}
		for _, r := range rs {
			at[r.RunAt.Unix()]++
		}
		ok := true
		for _, bd := range boundaries {
			keys[i] = append(keys[i], model.IdempotencyKey(id, bd))
			if at[bd.Unix()] != 1 {
				ok = false
			}
		}
		if ok {
			schedOK.Add(1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify steady runs: %w", err)
	}
	res.schedOK, res.runs = int(schedOK.Load()), runsTotal.Load()
	c, err := e.countRuns(ctx)
	if err != nil {
		return nil, err
	}
	res.tasks = c.total()

	// A run enqueued ahead became runnable when it was forwarded to the
	// pending list, the second write of its task hash; one enqueued late,
	// when it was enqueued (pending at once).
	var late, start, runnable []time.Duration
	for i := range keys {
		for k, key := range keys[i] {
			planned := boundaries[k]
			if t, ok := enq.get(key, 0); ok {
				res.matched++
				if t.Before(planned) {
					res.ahead++
					if f, ok := enq.get(key, 1); ok {
						runnable = append(runnable, f.Sub(planned))
					}
				} else {
					runnable = append(runnable, t.Sub(planned))
				}
				late = append(late, max(t.Sub(planned), 0))
			}
			if d, ok := ex.get(key); ok {
				res.started++
				start = append(start, d)
			}
		}
	}
	res.late, res.start, res.runnable = percentiles(late), percentiles(start), percentiles(runnable)
	res.calls, res.conns = ex.calls.Load(), ex.conns.Load()
	return res, nil
}

// selfCPU is this process's CPU time (user + sys).
func selfCPU() time.Duration {
	st, _ := readProcStat(os.Getpid())
	return st.cpu
}

func cpuOf(ps []*proc) time.Duration {
	var d time.Duration
	for _, p := range ps {
		st, _ := readProcStat(p.pid())
		d += st.cpu
	}
	return d
}

// timeMap keeps, per key, when it was seen the first two times.
type timeMap struct {
	mu sync.Mutex
	m  map[string][]time.Time
}

func (t *timeMap) seen(k string, v time.Time) {
	t.mu.Lock()
	if len(t.m[k]) < 2 {
		t.m[k] = append(t.m[k], v)
	}
	t.mu.Unlock()
}

// get returns when k was seen the i-th time (from 0).
func (t *timeMap) get(k string, i int) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.m[k]; i < len(v) {
		return v[i], true
	}
	return time.Time{}, false
}

// watchTaskHashes records when each task hash of queue q is first and
// second written (enqueued; then forwarded to pending if it was enqueued
// ahead, else dequeued), through keyevent notifications for hash commands,
// which Redis sends as each script ends. stop restores the
// notification setting.
func watchTaskHashes(ctx context.Context, rdb *redis.Client, qs []string) (*timeMap, func(), error) {
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "Eh").Err(); err != nil {
		return nil, nil, fmt.Errorf("enable keyspace notifications: %w", err)
	}
	ps := rdb.Subscribe(ctx, "__keyevent@0__:hset")
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, nil, fmt.Errorf("subscribe to hset events: %w", err)
	}
	tm := &timeMap{m: map[string][]time.Time{}}
	prefixes := make([]string, len(qs))
	for i, q := range qs {
		prefixes[i] = asynqwire.Keys{Queue: q}.TaskPrefix()
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := ps.ReceiveMessage(wctx)
			if err != nil {
				return
			}
			for _, prefix := range prefixes {
				if id, ok := strings.CutPrefix(msg.Payload, prefix); ok {
					tm.seen(id, time.Now())
					break
				}
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			ps.Close()
			<-done
			_ = rdb.ConfigSet(context.WithoutCancel(ctx), "notify-keyspace-events", "").Err()
		})
	}
	return tm, stop, nil
}

// noopExecutor is chronos's HTTP executor contract answered at once with
// SUCCESS, recording when each run arrived relative to its planned time.
type noopExecutor struct {
	url   string
	srv   *http.Server
	delay sync.Map // idempotency key -> arrival
	calls atomic.Int64
	conns atomic.Int64 // TCP connections the launchers opened
}

type arrivalRec struct {
	delay   time.Duration // arrival - planned
	planned int64         // planned time, Unix seconds
}

func startNoopExecutor() (*noopExecutor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ex := &noopExecutor{url: "http://" + ln.Addr().String() + "/run"}
	ex.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var req struct {
			Meta struct {
				IdempotencyKey string    `json:"idempotency_key"`
				ScheduledFor   time.Time `json:"scheduled_for"`
			} `json:"meta"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ex.calls.Add(1)
		ex.delay.LoadOrStore(req.Meta.IdempotencyKey, arrivalRec{now.Sub(req.Meta.ScheduledFor), req.Meta.ScheduledFor.Unix()})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"SUCCESS"}`))
	})}
	ex.srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			ex.conns.Add(1)
		}
	}
	go func() { _ = ex.srv.Serve(ln) }()
	return ex, nil
}

func (ex *noopExecutor) get(key string) (time.Duration, bool) {
	v, ok := ex.delay.Load(key)
	if !ok {
		return 0, false
	}
	return v.(arrivalRec).delay, true
}

// countAt counts runs received whose planned time is one of ts.
func (ex *noopExecutor) countAt(ts []time.Time) int {
	want := map[int64]bool{}
	for _, t := range ts {
		want[t.Unix()] = true
	}
	n := 0
	ex.delay.Range(func(_, v any) bool {
		if want[v.(arrivalRec).planned] {
			n++
		}
		return true
	})
	return n
}

func (ex *noopExecutor) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ex.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = ex.srv.Close()
	}
}
