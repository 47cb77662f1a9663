package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/robfig/cron/v3"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// The peer is asynq's own Scheduler, run in child processes of this
// program (so each replica's RSS is its own): CHRONOS_BENCH_CHILD=peer
// makes main run peerChild instead of the harness.
const (
	childEnv   = "CHRONOS_BENCH_CHILD"
	peerQueue  = "peer"
	peerTaskTy = "peer:tick"
)

type peerResult struct {
	n, replicas int
	spec        string
	boundary    time.Time
	sameBound   bool // every replica fired at the same boundary
	// enq is the arrival curve of all replicas' tasks in asynq's pending
	// list relative to the boundary, measured like chronos's bursts.
	enq curve
	// post is enqueue time (PostEnqueueFunc) - boundary in replica 0.
	post       childDone
	rssRegKB   int64 // RSS after registering the entries (max over replicas)
	hwmKB      int64 // peak RSS (max over replicas)
	tasks      int64 // tasks in the peer queue after the boundary
	dupEntries int   // entries enqueued more than once at the boundary
	extra      int64 // tasks beyond one per entry
	errors     int64 // failed enqueues
}

// firesPerSec is N over the time from the boundary to the last enqueue.
func (r *peerResult) firesPerSec() float64 {
	if r.replicas != 1 || !r.enq.complete || r.enq.last <= 0 {
		return 0
	}
	return float64(r.n) / r.enq.last.Seconds()
}

type childMsg struct {
	Event    string `json:"event"`
	RSSKB    int64  `json:"rss_kb,omitempty"`
	Boundary int64  `json:"boundary,omitempty"`
	Error    string `json:"error,omitempty"`
	childDone
}

type childDone struct {
	Enqueued int64 `json:"enqueued,omitempty"`
	Errors   int64 `json:"errors,omitempty"`
	FirstMS  int64 `json:"first_ms,omitempty"`
	P50MS    int64 `json:"p50_ms,omitempty"`
	P99MS    int64 `json:"p99_ms,omitempty"`
	LastMS   int64 `json:"last_ms,omitempty"`
	HWMKB    int64 `json:"hwm_kb,omitempty"`
}

// peer runs `replicas` asynq.Scheduler processes with the same n entries on
// spec and measures the first boundary they all fire at.
func (b *bench) peer(ctx context.Context, n, replicas int, spec string) (*peerResult, error) {
	e := b.e
	res := &peerResult{n: n, replicas: replicas, spec: spec}
	if err := e.flush(ctx); err != nil {
		return nil, err
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("peer spec %q: %w", spec, err)
	}
	// A second per 1,000 entries more: on a loaded hour asynq's Scheduler
	// enqueues about 1,000 a second, and it stops waiting once all are in.
	wait := b.cfg.peerWait + time.Duration(n/1000)*time.Second
	children := make([]*proc, replicas)
	defer func() { stopAll(children) }()
	for i := range children {
		children[i], err = e.spawn("asynq-scheduler", e.self, nil, map[string]string{
			childEnv:       "peer",
			"PEER_REDIS":   e.redisAddr,
			"PEER_N":       strconv.Itoa(n),
			"PEER_QUEUE":   peerQueue,
			"PEER_SPEC":    spec,
			"PEER_WAIT_MS": strconv.FormatInt(wait.Milliseconds(), 10),
		}, true)
		if err != nil {
			return nil, err
		}
	}
	regTimeout := 30*time.Second + time.Duration(n/2000)*time.Second
	for _, c := range children {
		m, err := readChild(ctx, c, "registered", regTimeout)
		if err != nil {
			return nil, err
		}
		res.rssRegKB = max(res.rssRegKB, m.RSSKB)
	}
	// Start all replicas at one instant, a little into a second, and not
	// in the last moments before a boundary.
	start := time.Now().Truncate(time.Second).Add(1300 * time.Millisecond)
	if next := sched.Next(start); next.Sub(start) < 2*time.Second {
		start = next.Add(300 * time.Millisecond)
	}
	e.logf("peer %d×%d: entries registered; starting at %s, firing at %s", n, replicas,
		start.Format("15:04:05.000"), sched.Next(start).Format("15:04:05"))
	for _, c := range children {
		if _, err := fmt.Fprintf(c.stdin, "start %d\n", start.UnixNano()); err != nil {
			return nil, fmt.Errorf("start peer child: %w", err)
		}
	}
	res.sameBound = true
	for i, c := range children {
		m, err := readChild(ctx, c, "started", time.Until(start)+10*time.Second)
		if err != nil {
			return nil, err
		}
		bd := time.Unix(0, m.Boundary)
		if i == 0 {
			res.boundary = bd
		} else if !bd.Equal(res.boundary) {
			res.sameBound = false
		}
	}
	if err := sleepUntil(ctx, res.boundary.Add(-time.Second)); err != nil {
		return nil, err
	}
	total := int64(n * replicas)
	samples := pollCount(ctx, func(ctx context.Context) (int64, error) {
		return e.rdb.LLen(ctx, asynqwire.Keys{Queue: peerQueue}.Pending()).Result()
	}, total, 2*time.Millisecond, res.boundary.Add(wait))
	res.enq = arrival(samples, res.boundary, total)
	for i, c := range children {
		m, err := readChild(ctx, c, "done", time.Until(res.boundary.Add(wait))+10*time.Second)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			res.post = m.childDone
		}
		res.hwmKB = max(res.hwmKB, m.HWMKB)
		res.errors += m.Errors
	}
	stopAll(children)
	e.logf("peer %d×%d: last enqueue at boundary%+.3fs", n, replicas, res.enq.last.Seconds())

	// Count tasks per entry.
	ins := asynq.NewInspectorFromRedisClient(e.rdb)
	perEntry := make([]int, n)
	for page := 1; ; page++ {
		tasks, err := ins.ListPendingTasks(peerQueue, asynq.PageSize(10000), asynq.Page(page))
		if err != nil {
			return nil, fmt.Errorf("list peer tasks: %w", err)
		}
		for _, t := range tasks {
			var p struct {
				Entry int `json:"entry"`
			}
			if json.Unmarshal(t.Payload, &p) == nil && p.Entry >= 0 && p.Entry < n {
				perEntry[p.Entry]++
			}
			res.tasks++
		}
		if len(tasks) < 10000 {
			break
		}
	}
	for _, c := range perEntry {
		if c > 1 {
			res.dupEntries++
			res.extra += int64(c - 1)
		}
	}
	return res, nil
}

// readChild reads the child's stdout until the event arrives.
func readChild(ctx context.Context, c *proc, event string, timeout time.Duration) (childMsg, error) {
	type result struct {
		m   childMsg
		err error
	}
	ch := make(chan result, 1)
	go func() {
		for {
			line, err := c.stdout.ReadString('\n')
			if err != nil {
				ch <- result{err: fmt.Errorf("peer child: %w (waiting for %q)\n%s", err, event, c.logTail(10))}
				return
			}
			var m childMsg
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			if m.Event == "error" {
				ch <- result{err: fmt.Errorf("peer child: %s", m.Error)}
				return
			}
			if m.Event == event {
				ch <- result{m: m}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-time.After(timeout):
		c.stop(time.Second)
		return childMsg{}, fmt.Errorf("peer child: no %q within %s\n%s", event, timeout, c.logTail(10))
	case <-ctx.Done():
		c.stop(time.Second)
		return childMsg{}, ctx.Err()
	}
}

// peerChild is one asynq.Scheduler replica: it registers PEER_N entries on
// PEER_SPEC, starts at the instant the parent sends ("start <unixnano>"),
// reports the first boundary's enqueue times and its RSS, and exits
// without Shutdown (which clears each entry's history, one Redis call per
// entry).
func peerChild() int {
	out := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		_ = out.Encode(childMsg{Event: "error", Error: err.Error()})
		return 1
	}
	n, err := strconv.Atoi(os.Getenv("PEER_N"))
	if err != nil {
		return fail(fmt.Errorf("PEER_N: %w", err))
	}
	waitMS, _ := strconv.Atoi(os.Getenv("PEER_WAIT_MS"))
	spec, q := os.Getenv("PEER_SPEC"), os.Getenv("PEER_QUEUE")
	parsed, err := cron.ParseStandard(spec)
	if err != nil {
		return fail(err)
	}
	times := make([]int64, n)
	var done, errs atomic.Int64
	s := asynq.NewScheduler(asynq.RedisClientOpt{Addr: os.Getenv("PEER_REDIS")}, &asynq.SchedulerOpts{
		LogLevel: asynq.ErrorLevel,
		PostEnqueueFunc: func(_ *asynq.TaskInfo, err error) {
			now := time.Now().UnixNano()
			if err != nil {
				errs.Add(1)
				return
			}
			if i := done.Add(1) - 1; i < int64(n) {
				times[i] = now
			}
		},
	})
	for i := range n {
		id := scheduleID(i)
		key := sha256.Sum256([]byte(id))
		payload := fmt.Sprintf(`{"entry":%d,"schedule_id":%q,"idempotency_key":%q,"workflow_id":"wf","version":"1","user_id":"bench","source":"schedule"}`,
			i, id, hex.EncodeToString(key[:]))
		if _, err := s.Register(spec, asynq.NewTask(peerTaskTy, []byte(payload)), asynq.Queue(q)); err != nil {
			return fail(err)
		}
	}
	st, _ := readProcStat(os.Getpid())
	_ = out.Encode(childMsg{Event: "registered", RSSKB: st.rssKB})

	var startNS int64
	if _, err := fmt.Fscanf(os.Stdin, "start %d\n", &startNS); err != nil {
		return fail(fmt.Errorf("read start instant: %w", err))
	}
	start := time.Unix(0, startNS)
	time.Sleep(time.Until(start))
	if err := s.Start(); err != nil {
		return fail(err)
	}
	boundary := parsed.Next(start)
	_ = out.Encode(childMsg{Event: "started", Boundary: boundary.UnixNano()})

	deadline := boundary.Add(time.Duration(waitMS) * time.Millisecond)
	for done.Load()+errs.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := min(done.Load(), int64(n))
	ds := make([]time.Duration, got)
	for i := range got {
		ds[i] = time.Duration(times[i] - boundary.UnixNano())
	}
	p := percentiles(ds)
	st, _ = readProcStat(os.Getpid())
	_ = out.Encode(childMsg{Event: "done", childDone: childDone{
		Enqueued: got, Errors: errs.Load(),
		FirstMS: p.min.Milliseconds(), P50MS: p.p50.Milliseconds(), P99MS: p.p99.Milliseconds(), LastMS: p.max.Milliseconds(),
		HWMKB: st.hwmKB,
	}})
	return 0
}
