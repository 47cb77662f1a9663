// Package queuetest holds test helpers shared by chronos's packages: a real
// redis-server on a free port, and assertions on run records.
package queuetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server process owned by one test.
type Redis struct {
	Addr string
	URL  string
	cmd  *exec.Cmd
}

// StartRedis starts a real redis-server on a free loopback port with
// persistence off, and stops it in t.Cleanup. A missing redis-server fails
// the test: integration tests never skip.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (install it, e.g. apt-get install -y redis-server): %v", err)
	}
	dir := t.TempDir()
	for attempt := 0; attempt < 5; attempt++ {
		port := FreePort(t)
		cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning")
		logPath := filepath.Join(dir, fmt.Sprintf("redis-%d.log", port))
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		r := &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
		r.URL = "redis://" + r.Addr
		if waitReady(r.Addr, 10*time.Second) {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_, _ = cmd.Process.Wait()
				logf.Close()
			})
			return r
		}
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		logf.Close()
		b, _ := os.ReadFile(logPath)
		t.Logf("redis-server on port %d did not come up (retrying): %s", port, lastLines(string(b), 5))
	}
	t.Fatal("could not start redis-server after 5 attempts")
	return nil
}

// Client returns a go-redis client for the server, closed in t.Cleanup.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// FreePort returns a TCP port free on 127.0.0.1 now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitReady(addr string, timeout time.Duration) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		tick := time.NewTimer(20 * time.Millisecond)
		<-tick.C
	}
	return false
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
