package queue_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// TestStoreOnSentinelAndCluster runs this package's tests again, in this
// same test binary, on a Sentinel set and on a Redis Cluster
// (CHRONOS_TEST_TOPOLOGY), both at once, so that make test, which CI
// runs, holds the store to every Redis chronos supports. Each test starts
// its own servers and mostly waits for them, so the runs go 8 tests at a
// time. make test-topologies runs the scheduler and launcher suites too.
func TestStoreOnSentinelAndCluster(t *testing.T) {
	if v := os.Getenv(queuetest.TopologyEnv); v != "" {
		t.Skipf("%s=%s: this is one of the runs it starts, or one chosen by hand", queuetest.TopologyEnv, v)
	}
	if testing.Short() {
		t.Skip("starts the package's tests twice more; runs without -short")
	}
	t.Parallel()
	for _, topo := range []string{queuetest.TopologySentinel, queuetest.TopologyCluster} {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.parallel=8", "-test.timeout=10m",
				"-test.skip=^TestStoreOnSentinelAndCluster$")
			cmd.Env = append(os.Environ(), queuetest.TopologyEnv+"="+topo)
			out, err := cmd.CombinedOutput()
			passed, skipped, failed := 0, 0, []string{}
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				switch {
				case strings.HasPrefix(line, "--- PASS"):
					passed++
				case strings.HasPrefix(line, "--- SKIP"):
					skipped++
				case strings.HasPrefix(line, "--- FAIL"):
					failed = append(failed, line)
				}
			}
			if err != nil {
				t.Fatalf("%s=%s: %v; failed: %v\n%s", queuetest.TopologyEnv, topo, err, failed, notPassing(out, 300))
			}
			require.Empty(t, failed)
			require.Positive(t, passed)
			t.Logf("%s: %d tests and subtests passed, %d skipped, in %s", topo, passed, skipped, time.Since(began).Round(time.Millisecond))
		})
	}
}

// notPassing returns the last n lines of out that are not the progress
// or the passes of -test.v: the failures and what they logged.
func notPassing(out []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "=== ") || strings.HasPrefix(trimmed, "--- PASS") ||
			strings.HasPrefix(trimmed, "--- SKIP") || strings.HasPrefix(trimmed, "redis: ") {
			continue
		}
		lines = append(lines, l)
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
