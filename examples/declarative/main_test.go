package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// Multi-process tests: the built example program, several copies on one
// Redis, a fast clock (one fake minute per real second) so minutes pass
// quickly, and kill -9. They assert on the run records in Redis.

const speed = 60 // fake seconds per real second

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// build compiles the example program once per test binary.
func build(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "declarative-example")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "declarative")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// cluster is a Redis, a fake clock shared by the processes, and the
// flags every process gets.
type cluster struct {
	redis  *queuetest.Redis
	rdb    *redis.Client
	start  time.Time // fake time at origin
	origin time.Time // real time
	ns     string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	// Built before the fake clock starts: at 60 fake seconds a real one,
	// a build slowed by a loaded machine would otherwise carry the clock
	// past the minute a test waits for.
	build(t)
	r := queuetest.StartRedis(t)
	return &cluster{
		redis: r, rdb: r.Client(t), ns: "mp",
		start:  time.Date(2026, 1, 5, 10, 0, 10, 0, time.UTC),
		origin: time.Now(),
	}
}

// now is the processes' fake time.
func (c *cluster) now() time.Time {
	return c.start.Add(time.Since(c.origin) * speed)
}

// proc is one running copy of the program.
type proc struct {
	cmd *exec.Cmd
}

// spawn starts a copy and waits for it to be initialized.
func (c *cluster) spawn(t *testing.T, extra ...string) *proc {
	t.Helper()
	args := append([]string{
		"-redis", c.redis.URL, "-namespace", c.ns, "-lease-ttl", "30s",
		"-test-clock-start", c.start.Format(time.RFC3339), "-test-clock-origin-ms", strconv.FormatInt(c.origin.UnixMilli(), 10),
		"-test-clock-speed", strconv.Itoa(speed),
	}, extra...)
	cmd := exec.Command(build(t), args...)
	cmd.Stderr = &logWriter{t: t}
	cmd.SysProcAttr = queuetest.ProcAttrDiesWithTest()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("the example program did not become ready")
	}
	return &proc{cmd: cmd}
}

// logWriter routes a process's logs to t.Log.
type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// record is one run record.
type record struct {
	task   string
	minute time.Time
	pid    int
	at     time.Time
}

func (c *cluster) records(t *testing.T) []record {
	t.Helper()
	lines, err := c.rdb.LRange(context.Background(), c.ns+":runs", 0, -1).Result()
	require.NoError(t, err)
	out := make([]record, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		require.Len(t, f, 4, l)
		m, err := time.Parse(time.RFC3339, f[1])
		require.NoError(t, err)
		pid, err := strconv.Atoi(f[2])
		require.NoError(t, err)
		at, err := time.Parse(time.RFC3339Nano, f[3])
		require.NoError(t, err)
		out = append(out, record{f[0], m, pid, at})
	}
	return out
}

func TestMultiProcess_TwoProcessesRunEachTaskOncePerMinute(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.spawn(t, "-tasks", "20")
	b := c.spawn(t, "-tasks", "20")
	first := c.now().Truncate(time.Minute).Add(time.Minute) // both run from here
	last := first.Add(5 * time.Minute)
	require.Eventually(t, func() bool { return c.now().After(last.Add(30 * time.Second)) }, 30*time.Second, 10*time.Millisecond)
	for _, p := range []*proc{a, b} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, p.cmd.Wait())
	}
	seen := map[string]int{}
	pids := map[int]int{}
	for _, r := range c.records(t) {
		key := r.task + " " + r.minute.Format(time.RFC3339)
		seen[key]++
		require.Equal(t, 1, seen[key], "%s ran twice", key)
		pids[r.pid]++
	}
	for m := first; !m.After(last); m = m.Add(time.Minute) {
		for i := range 20 {
			require.Equal(t, 1, seen[fmt.Sprintf("task-%d %s", i, m.Format(time.RFC3339))], "task-%d at %s", i, m)
		}
	}
	t.Logf("runs per process: %v", pids)
}

// waitRecord waits for a run record of task by pid (any pid when 0) and
// returns it.
func (c *cluster) waitRecord(t *testing.T, task string, pid int) record {
	t.Helper()
	var found record
	require.Eventually(t, func() bool {
		for _, r := range c.records(t) {
			if r.task == task && (pid == 0 || r.pid == pid) {
				found = r
				return true
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "no run of %s by pid %d", task, pid)
	return found
}

// requireRestartedWithinR2 checks that the orphaned task restarted no
// later than one minute after the first minute boundary at which the
// dead process's lease (30s) had lapsed.
func requireRestartedWithinR2(t *testing.T, killed time.Time, restarted record) {
	t.Helper()
	eligible := killed.Add(30 * time.Second).Truncate(time.Minute).Add(time.Minute)
	require.True(t, restarted.at.After(killed), "restart at %s, kill at %s", restarted.at, killed)
	require.False(t, restarted.at.After(eligible.Add(time.Minute)), "restart at %s, later than a minute after %s (kill at %s)", restarted.at, eligible, killed)
	t.Logf("killed at %s (fake), restarted at %s: %s later", killed.Format(time.TimeOnly), restarted.at.Format(time.TimeOnly), restarted.at.Sub(killed))
}

func TestMultiProcess_KillMidCallback_OtherProcessRestartsOrphan(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// An hourly task due three real seconds from now, time enough for A
	// to start on a loaded machine (a first start in another minute would
	// wait for the next hour): B, started after A took the run, must
	// watch A's lease to notice its death.
	c.start, c.origin = time.Date(2026, 1, 5, 10, 57, 0, 0, time.UTC), time.Now()
	a := c.spawn(t, "-tasks", "3", "-block-task", "victim", "-cron", "0 * * * *")
	c.waitRecord(t, "victim", a.cmd.Process.Pid)
	b := c.spawn(t, "-tasks", "3", "-block-task", "victim", "-cron", "0 * * * *")
	require.NoError(t, a.cmd.Process.Kill()) // SIGKILL, mid-callback
	killed := c.now()
	_ = a.cmd.Wait()
	requireRestartedWithinR2(t, killed, c.waitRecord(t, "victim", b.cmd.Process.Pid))
}

func TestMultiProcess_KillMidCallback_RestartedProcessRestartsOrphan(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.spawn(t, "-tasks", "3", "-block-task", "victim")
	c.waitRecord(t, "victim", a.cmd.Process.Pid)
	require.NoError(t, a.cmd.Process.Kill())
	killed := c.now()
	_ = a.cmd.Wait()
	a2 := c.spawn(t, "-tasks", "3", "-block-task", "victim")
	requireRestartedWithinR2(t, killed, c.waitRecord(t, "victim", a2.cmd.Process.Pid))
}
