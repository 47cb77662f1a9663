package queuetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

const orphanEnv = "QUEUETEST_ORPHAN_CHILD"

// TestRedisDiesWithTheTestBinary kills a test binary that has a Redis of
// its own running, as -timeout's panic ends one without any cleanup, and
// checks the Redis went with it: a server left behind once held a shared
// lock and ports for a quarter of an hour.
func TestRedisDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv(orphanEnv) != "" {
		r := queuetest.StartRedis(t)
		os.Stdout.WriteString("URL " + r.URL + "\n")
		time.Sleep(time.Minute) // the parent kills this binary long before
		return
	}
	if queuetest.Topology(t) != queuetest.TopologyStandalone {
		t.Skip("the child starts one redis-server; the topology runs lend theirs")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedisDiesWithTheTestBinary$", "-test.count=1")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var url string
	buf := make([]byte, 4096)
	var got strings.Builder
	require.Eventually(t, func() bool {
		n, _ := out.Read(buf)
		got.Write(buf[:n])
		for _, line := range strings.Split(got.String(), "\n") {
			if strings.HasPrefix(line, "URL ") {
				url = strings.TrimPrefix(line, "URL ")
				return true
			}
		}
		return false
	}, 30*time.Second, time.Millisecond)
	opt, err := redis.ParseURL(url)
	require.NoError(t, err)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	require.NoError(t, rdb.Ping(context.Background()).Err())

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		return rdb.Ping(context.Background()).Err() != nil
	}, 10*time.Second, 20*time.Millisecond, "the child's redis-server at %s outlived the killed test binary", url)
}
