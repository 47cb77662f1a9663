package main

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The failover test: the chaos test's processes (1 api, 2 schedulers, 2
// launchers) and schedules firing every second, on a Sentinel set or a
// Redis Cluster (CHRONOS_TEST_TOPOLOGY), whose primary (or the master
// serving the most schedules) is killed under load and replaced by its
// replica. Replication is asynchronous: the writes the replica had not
// received when the primary died are lost, and the processes, which saw
// them acknowledged, act on from the older state. The audit requires what
// must still hold — every planned run recorded, executed, SUCCESS, once
// per key in Redis and asynq: 0 lost — and reports what the failover
// cost: runs executed twice, runs recorded late, run records that
// vanished and came back, and the window without a master.
//
//	CHRONOS_TEST_TOPOLOGY=sentinel go test -run '^TestChaosFailover$' -v ./cmd/chronos/
//	CHRONOS_TEST_TOPOLOGY=cluster go test -run '^TestChaosFailover$' -v ./cmd/chronos/
//
// (make test-failover runs both.) CHRONOS_FAILOVER_KILLS (default 1, at
// most 3) is how many primaries die one after another, each after the
// previous one's replacement has a replica in sync again.
// CHRONOS_FAILOVER_LAG_MS (default 1000) freezes the replica (SIGSTOP)
// that long before the kill. The kernel keeps the replication stream in
// the frozen replica's socket buffer, so this delays the replica rather
// than cutting its link: measured, it lost no acknowledged write.
// CHRONOS_FAILOVER_CUT_MS (Sentinel only) cuts the link instead: the
// replica replicates through a proxy, which closes the link that long
// before the kill, so every write of those milliseconds is lost.
// CHRONOS_FAILOVER_WAIT_REPLICAS sets the schedulers' REDIS_WAIT_REPLICAS.
const (
	failoverSchedules = 200
	// failoverLoad is how many seconds of runs (executor deliveries at
	// failoverSchedules a second) pass before the first kill and after
	// each failover.
	failoverLoad = 10
)

// failoverEnv is the schedulers' setting for the failover test: the
// chaos test's, and a misfire grace longer than a failover, so that no
// run of a catch-up "none" schedule is dropped as missed because Redis
// had no master for a few seconds (the chaos test's grace covers a shard
// takeover, not that).
var failoverEnv = map[string]string{
	"TICK_MS": "200", "LEASE_TTL": "2s", "LOOKAHEAD_MS": "1000", "MISFIRE_GRACE_MS": "60000",
}

func TestChaosFailover(t *testing.T) {
	topo := queuetest.Topology(t)
	if topo == queuetest.TopologyStandalone {
		t.Skipf("kills a Redis master: run with %s=sentinel or cluster (make test-failover)", queuetest.TopologyEnv)
	}
	if testing.Short() {
		t.Skip("the failover test takes minutes; it runs without -short")
	}
	kills := 1
	if s := os.Getenv("CHRONOS_FAILOVER_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.True(t, n >= 1 && n <= 3, "CHRONOS_FAILOVER_KILLS=%d: want 1 to 3", n)
		kills = n
	}
	lag := time.Second
	if s := os.Getenv("CHRONOS_FAILOVER_LAG_MS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.True(t, n >= 0 && n <= 10000, "CHRONOS_FAILOVER_LAG_MS=%d: want 0 to 10000", n)
		lag = time.Duration(n) * time.Millisecond
	}
	var cut time.Duration
	if s := os.Getenv("CHRONOS_FAILOVER_CUT_MS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.True(t, n >= 0 && n <= 10000, "CHRONOS_FAILOVER_CUT_MS=%d: want 0 to 10000", n)
		require.True(t, n == 0 || topo == queuetest.TopologySentinel, "CHRONOS_FAILOVER_CUT_MS: Sentinel only (a cluster replica dials its master's own address)")
		cut = time.Duration(n) * time.Millisecond
		require.True(t, n == 0 || kills == 1, "CHRONOS_FAILOVER_CUT_MS: one kill only (a restarted primary replicates around the proxy)")
	}
	schedEnv := maps.Clone(failoverEnv)
	if s := os.Getenv("CHRONOS_FAILOVER_WAIT_REPLICAS"); s != "" {
		schedEnv["REDIS_WAIT_REPLICAS"] = s
	}
	if topo == queuetest.TopologyCluster && os.Getenv(queuetest.ClusterReplicasEnv) == "" {
		// A killed master needs a replica to promote.
		t.Setenv(queuetest.ClusterReplicasEnv, "1")
	}
	began := time.Now()
	var (
		r    *queuetest.Redis
		link *queuetest.Proxy
	)
	if cut > 0 {
		var s *queuetest.Sentinel
		s, link = queuetest.StartSentinelLinked(t)
		r = s.Server()
		lag = 0
		t.Logf("%s: %d kills, each with the replication link cut %s before; REDIS_WAIT_REPLICAS=%q", topo, kills, cut, schedEnv["REDIS_WAIT_REPLICAS"])
	} else {
		t.Logf("%s: %d kills, each with the replica %s behind; REDIS_WAIT_REPLICAS=%q", topo, kills, lag, schedEnv["REDIS_WAIT_REPLICAS"])
	}
	c := newChaosClusterOn(t, r)
	timed := newTimedExecutor(t, c.exec)
	api := c.start("api", "api", map[string]string{"AUTH_JWT_SECRET": testSecret})
	c.token = mintToken(t, testSecret, "chaos-test", auth.ScopeAdmin)
	var procs []*chaosProc
	for i := range 2 {
		env := c.launcherEnvOf(fmt.Sprintf("launcher-%d", i))
		env["EXECUTOR_URL"] = timed.srv.URL + "/runs"
		procs = append(procs, c.start(fmt.Sprintf("launcher-%d", i), "launcher", env))
	}
	var scheds []*chaosProc
	for i := range 2 {
		scheds = append(scheds, c.start(fmt.Sprintf("scheduler-%d", i), "scheduler", schedEnv))
	}
	c.api = "http://" + api.addr
	code, body := c.call(http.MethodPut, "/workflows/chaos/versions/1", `{"nodes":[{"id":"tick"}]}`)
	require.Equal(t, http.StatusOK, code, body)
	schedules := c.register(failoverSchedules)
	t.Logf("%s: %d processes, %d schedules firing every second, after %s",
		topo, 1+len(procs)+len(scheds), len(schedules), time.Since(began).Round(time.Millisecond))

	// Under load, kill the master; wait for its replica to take over and
	// the runs to flow again.
	c.waitDeliveries(timed, failoverLoad*failoverSchedules)
	var fos []failover
	for i := range kills {
		if i > 0 {
			c.waitReplicated(topo)
		}
		if link != nil {
			link.Cut(true) // the fault: the link is down from here to the kill
			<-time.After(cut)
		}
		fo := c.killMaster(topo, lag)
		if link != nil {
			fo.cut = cut
		}
		fos = append(fos, fo)
		t.Logf("failover %d: killed %s at %s, %s took over after %s", i+1, fo.killed,
			fo.at.UTC().Format("15:04:05.000"), fo.promoted, fo.window.Round(time.Millisecond))
		c.waitDeliveries(timed, failoverLoad*failoverSchedules)
	}
	tEnd := time.Now()

	// The chaos test's wait and audit: every planned run up to T_end
	// recorded and SUCCESS, exactly one record and one task per key, the
	// runs after T_end consecutive, every run executed.
	planned := 0
	for _, s := range schedules {
		planned += len(s.plannedUpTo(tEnd))
	}
	c.waitFor(chaosSettle, "every planned run up to T_end recorded and SUCCESS", func() (bool, string) {
		missing, unfinished := c.progress(schedules, tEnd)
		return missing == 0 && unfinished == 0,
			fmt.Sprintf("%d of %d planned runs have no record, %d are not SUCCESS yet", missing, planned, unfinished)
	})
	for _, p := range scheds {
		c.stop(p)
	}
	var records map[string]string
	c.waitFor(chaosSettle, "every run record SUCCESS", func() (bool, string) {
		records = c.scanRunRecords()
		notDone := c.notSucceeded(records)
		return len(notDone) == 0, fmt.Sprintf("%d of %d run records not SUCCESS (e.g. %v)", len(notDone), len(records), notDone[:min(3, len(notDone))])
	})
	c.auditTasks(records)
	c.audit(schedules, tEnd, records)
	c.reportFailover(topo, fos, timed, records, planned)
	t.Logf("failover test took %s", time.Since(began).Round(time.Second))
}

// failover is one master killed and replaced.
type failover struct {
	at               time.Time     // the kill
	window           time.Duration // kill to the replica serving as master, as the topology reports it
	killed, promoted string
	cut              time.Duration // how long the replication link was down before the kill
}

// killMaster kills the primary (Sentinel) or the master serving the
// shard of the first schedule (Cluster) and waits for the failover. With
// lag, the replica is frozen (SIGSTOP) that long first and let go at the
// kill.
func (c *chaosCluster) killMaster(topo string, lag time.Duration) failover {
	c.t.Helper()
	var (
		fo       failover
		master   *queuetest.Node
		replicas []*queuetest.Node
	)
	switch topo {
	case queuetest.TopologySentinel:
		s := c.redis.Sentinel()
		master = s.Primary(c.t)
		for _, n := range s.Redis {
			if n != master {
				replicas = append(replicas, n)
			}
		}
	case queuetest.TopologyCluster:
		cl := c.redis.Cluster()
		master = cl.MasterOf(c.t, shardKey(0, "due"))
		replicas = cl.ReplicasOf(c.t, master)
	}
	require.NotEmpty(c.t, replicas, "replicas of %s", master.Addr)
	if lag > 0 {
		for _, r := range replicas {
			r.Pause(c.t, true)
		}
		<-time.After(lag) // the fault: replication stands still this long
	}
	fo.killed, fo.at = master.Addr, time.Now()
	master.Kill()
	for _, r := range replicas {
		if lag > 0 {
			r.Pause(c.t, false)
		}
	}
	var promoted *queuetest.Node
	switch topo {
	case queuetest.TopologySentinel:
		promoted = c.redis.Sentinel().WaitFailover(c.t, master, 5*queuetest.SentinelDownAfter+20*time.Second)
	case queuetest.TopologyCluster:
		promoted = c.redis.Cluster().WaitPromoted(c.t, master, replicas, 5*queuetest.ClusterNodeTimeout+10*time.Second)
	}
	fo.promoted, fo.window = promoted.Addr, time.Since(fo.at)
	return fo
}

// waitReplicated brings the killed masters back (as replicas) and waits
// until every master has a replica in sync, so another can be killed.
func (c *chaosCluster) waitReplicated(topo string) {
	c.t.Helper()
	switch topo {
	case queuetest.TopologySentinel:
		s := c.redis.Sentinel()
		for _, n := range s.Redis {
			if !n.Alive() {
				n.Restart(c.t)
			}
		}
		primary := s.Primary(c.t)
		c.waitFor(60*time.Second, "the restarted primary in sync as a replica", func() (bool, string) {
			rdb := redis.NewClient(&redis.Options{Addr: primary.Addr})
			defer rdb.Close()
			info, err := rdb.Info(c.ctx, "replication").Result()
			return err == nil && strings.Contains(info, "role:master") && strings.Contains(info, "state=online"), "no replica online"
		})
	case queuetest.TopologyCluster:
		cl := c.redis.Cluster()
		for _, n := range cl.Nodes {
			if !n.Alive() {
				n.Restart(c.t)
			}
		}
		cl.WaitOK(c.t, 60*time.Second)
	}
}

// waitDeliveries waits until the executor has received n more runs.
func (c *chaosCluster) waitDeliveries(e *timedExecutor, n int) {
	c.t.Helper()
	from := e.count()
	c.waitFor(chaosSettle, fmt.Sprintf("%d more runs delivered", n), func() (bool, string) {
		got := e.count() - from
		return got >= n, fmt.Sprintf("%d of %d", got, n)
	})
}

// reportFailover logs what the failovers cost, from the run records and
// the executor's clock, and requires that no planned run was lost (the
// audit already did: here it is counted for the report).
func (c *chaosCluster) reportFailover(topo string, fos []failover, e *timedExecutor, records map[string]string, planned int) {
	t := c.t
	t.Helper()
	keys := make([]string, 0, len(records))
	cmds := make([]*redis.SliceCmd, 0, len(records))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for key, rk := range records {
			keys = append(keys, key)
			cmds = append(cmds, p.HMGet(c.ctx, rk, "at", "cr"))
		}
		return nil
	})
	require.NoError(t, err)
	first, calls, times := e.snapshot()

	var (
		twice, reborn, late1s, late5s int
		maxLate                       time.Duration
	)
	for i, key := range keys {
		vals := cmds[i].Val()
		at, err1 := strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
		cr, err2 := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
		require.NoError(t, err1, "run %s: at %v", key, vals[0])
		require.NoError(t, err2, "run %s: cr %v", key, vals[1])
		if calls[key] > 1 {
			twice++
		}
		// A record created after its run was first executed was lost with
		// the old master and created again from the older state.
		if f, ok := first[key]; ok && cr > f.UnixMilli() {
			reborn++
		}
		late := time.Duration(cr-at) * time.Millisecond
		maxLate = max(maxLate, late)
		if late > time.Second {
			late1s++
		}
		if late > 5*time.Second {
			late5s++
		}
	}
	// The longest the executor went without a delivery, from each kill.
	slices.SortFunc(times, time.Time.Compare)
	for i := range fos {
		var gap time.Duration
		for j := 1; j < len(times); j++ {
			if times[j].After(fos[i].at) && times[j-1].Before(fos[i].at.Add(fos[i].window+30*time.Second)) {
				gap = max(gap, times[j].Sub(times[j-1]))
			}
		}
		fault := "replica frozen before the kill"
		if fos[i].cut > 0 {
			fault = fmt.Sprintf("replication link cut %s before the kill", fos[i].cut)
		}
		t.Logf("FAILOVER %s #%d: %s; master down to replica serving %s; longest pause in deliveries %s",
			topo, i+1, fault, fos[i].window.Round(time.Millisecond), gap.Round(time.Millisecond))
	}
	t.Logf("FAILOVER %s: %d planned runs up to T_end, 0 lost; %d run records; %d runs executed more than once; "+
		"%d records vanished and came back (created again after their run was executed); %d recorded over 1s late, %d over 5s, max %s",
		topo, planned, len(records), twice, reborn, late1s, late5s, maxLate.Round(time.Millisecond))
}

// timedExecutor sits in front of the recording executor and notes when
// each run was first delivered, and every delivery's time.
type timedExecutor struct {
	srv   *httptest.Server
	mu    sync.Mutex
	first map[string]time.Time
	calls map[string]int
	times []time.Time
}

func newTimedExecutor(t *testing.T, inner *recordingExecutor) *timedExecutor {
	t.Helper()
	e := &timedExecutor{first: map[string]time.Time{}, calls: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now, key := time.Now(), r.Header.Get("Idempotency-Key")
		e.mu.Lock()
		if _, ok := e.first[key]; !ok {
			e.first[key] = now
		}
		e.calls[key]++
		e.times = append(e.times, now)
		e.mu.Unlock()
		inner.serve(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *timedExecutor) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.times)
}

func (e *timedExecutor) snapshot() (first map[string]time.Time, calls map[string]int, times []time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	first = make(map[string]time.Time, len(e.first))
	for k, v := range e.first {
		first[k] = v
	}
	calls = make(map[string]int, len(e.calls))
	for k, v := range e.calls {
		calls[k] = v
	}
	return first, calls, slices.Clone(e.times)
}
