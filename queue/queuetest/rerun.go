package queuetest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RerunParallel is the -test.parallel of the runs RunOnTopologies starts:
// their tests mostly wait for Redis and for the processes they start, and
// each holds one lent set at a time (shared.go), so this many sets of
// each topology are started.
const RerunParallel = 6

// RunOnTopologies runs the calling package's tests again, in this same
// test binary, on each of topologies (CHRONOS_TEST_TOPOLOGY:
// TopologySentinel, TopologyCluster), all at once, so that make test,
// which CI runs, holds the package to the Redis deployments chronos
// supports. Call it from a top-level test of its own (it skips that test
// in the runs it starts, and is skipped in them itself). It skips under
// -short.
func RunOnTopologies(t *testing.T, topologies ...string) {
	t.Helper()
	if v := os.Getenv(TopologyEnv); v != "" {
		t.Skipf("%s=%s: this is one of the runs it starts, or one chosen by hand", TopologyEnv, v)
	}
	if testing.Short() {
		t.Skip("starts the package's tests twice more; runs without -short")
	}
	self := t.Name()
	for _, topo := range topologies {
		t.Run(topo, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.parallel="+strconv.Itoa(RerunParallel),
				"-test.timeout=10m", "-test.skip=^"+self+"$")
			cmd.Env = append(os.Environ(), TopologyEnv+"="+topo)
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
				t.Fatalf("%s=%s: %v; failed: %v\n%s", TopologyEnv, topo, err, failed, notPassing(out, 300))
			}
			if len(failed) > 0 {
				t.Fatalf("%s=%s: failed: %v\n%s", TopologyEnv, topo, failed, notPassing(out, 300))
			}
			if passed == 0 {
				t.Fatalf("%s=%s: no test passed\n%s", TopologyEnv, topo, notPassing(out, 300))
			}
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
