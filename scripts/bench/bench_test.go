package main

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// These tests run the harness's scenarios at tiny sizes against a real
// redis-server each, and check the correctness columns only (exactly once,
// no duplicates, every run launched); timings are reported, never tested.

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "peer": // the asynq.Scheduler child processes
		os.Exit(peerChild())
	case "echo": // the API's baseline
		os.Exit(echoChild())
	}
	os.Exit(m.Run())
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func chronosBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "chronos-bench-test-")
		if buildErr == nil {
			builtBin, buildErr = queuetest.BuildChronos(context.Background(), buildDir)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

func setup(t *testing.T, args ...string) *bench {
	t.Helper()
	return setupWith(t, chronosBinary(t), args...)
}

// setupWith is setup with the chronos binary bin.
func setupWith(t *testing.T, bin string, args ...string) *bench {
	t.Helper()
	cfg, err := parseFlags(append([]string{"-quick", "-tick-ms", "250", "-settle", "3s"}, args...))
	require.NoError(t, err)
	r := queuetest.StartRedis(t)
	self, err := os.Executable()
	require.NoError(t, err)
	e := &env{redisAddr: r.Addr, rdb: r.Client(t), bin: bin, self: self, dir: t.TempDir(),
		shards: cfg.shards, tickMS: cfg.tickMS, logf: t.Logf, procs: map[*proc]struct{}{}}
	t.Cleanup(e.close)
	return &bench{e: e, cfg: cfg, res: results{durations: map[string]time.Duration{}, loads: map[string]string{}}}
}

func TestScenarios(t *testing.T) {
	t.Cleanup(func() {
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
	})
	ctx := context.Background()

	t.Run("burst fires every schedule exactly once with 1 and 2 schedulers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, k := range []int{1, 2} {
			r, err := b.burst(ctx, burstOpts{n: 1000, replicas: k, settle: b.cfg.settle, verify: true})
			require.NoError(t, err)
			require.True(t, r.enq.complete, "all %d enqueued with %d schedulers", r.n, k)
			require.Equal(t, r.n, r.runsOK, "schedules with their one run")
			require.Zero(t, r.runsBad)
			require.Equal(t, int64(r.n), r.tasks, "asynq tasks")
			require.Equal(t, r.n, r.matched, "runs with a task")
			require.True(t, r.exactlyOnce())
		}
	})

	t.Run("three chronos replicas duplicate nothing; three asynq.Scheduler replicas duplicate every fire", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n = 500
		r, err := b.burst(ctx, burstOpts{n: n, replicas: 3, settle: b.cfg.settle, verify: true})
		require.NoError(t, err)
		require.True(t, r.exactlyOnce())
		require.Equal(t, int64(n), r.tasks)

		// A period far longer than one round of enqueues: with "@every 2s"
		// a loaded machine let a replica reach its next fire before the
		// parent stopped it, counting a second boundary as duplicates.
		p, err := b.peer(ctx, n, 3, "@every 10s")
		require.NoError(t, err)
		require.True(t, p.sameBound)
		require.Equal(t, int64(3*n), p.tasks)
		require.Equal(t, n, p.dupEntries)
		require.Equal(t, int64(2*n), p.extra)
	})

	t.Run("steady: one run per schedule per period, one task per run", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "-steady-n", "300", "-steady-period", "4s", "-steady-minutes", "2")
		s, err := b.steady(ctx)
		require.NoError(t, err)
		require.Equal(t, s.n, s.schedOK)
		require.Equal(t, s.runs, s.tasks, "run records and asynq tasks")
		require.Equal(t, s.expected, s.matched, "measured runs seen enqueued")
		require.Equal(t, s.expected, s.started, "measured runs reached the executor")
		require.Equal(t, s.expected, s.runnable.n, "measured runs seen becoming runnable")
	})

	t.Run("launch: every pre-filled run ends SUCCESS, each round after a drain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s, err := b.launchRounds(ctx, 500, 1, 2, 8)
		require.NoError(t, err)
		require.Len(t, s.rounds, 2)
		for _, l := range s.rounds {
			require.Equal(t, int64(500), l.finished)
			require.Equal(t, 500, l.success)
			require.Positive(t, l.drain, "drained by an asynq server before the launch")
		}
		require.Contains(t, s.rounds, s.median())
	})

	t.Run("footprint writes the runs it measures", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "-idle", "1s")
		f, err := b.footprint(ctx, 500)
		require.NoError(t, err)
		require.Equal(t, int64(500*f.runs), f.written)
		require.Positive(t, f.perSched)
		require.Greater(t, f.perSchedRuns, f.perSched)
	})

	t.Run("api creates every schedule, Go loop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "-api-load", "go", "-api-n", "300", "-api-clients", "8")
		a, err := b.api(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(300), a.ok, "first error: %s", a.firstErr)
		require.Zero(t, a.errors)
		require.Equal(t, 300, a.created)
		require.True(t, apiStoredAll(a))
	})

	t.Run("api creates every schedule, wrk", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("wrk"); err != nil {
			t.Skip("wrk is not installed (apt-get install wrk; .ci/run installs it)")
		}
		b := setup(t, "-api-load", "wrk", "-api-duration", "1s", "-api-clients", "8")
		a, err := b.api(ctx)
		require.NoError(t, err)
		require.Zero(t, a.errors, a.firstErr)
		require.Positive(t, a.ok)
		require.True(t, apiStoredAll(a), "%d upserts answered, %d schedules stored", a.ok, a.created)
	})

	t.Run("limit drains what it enqueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "-limit-n", "500", "-limit-clients", "8")
		l, err := b.limit(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(500), l.drained)
		require.Positive(t, l.best)
		require.Positive(t, l.drain)
	})
}
