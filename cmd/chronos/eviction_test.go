package main

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/queuetest"
)

// An evicting Redis deletes schedules and runs without an error (issue 26
// finding 6): every process refuses to start on one, unless told to run
// anyway, when it logs an error.
func TestEvictingRedisIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	r := queuetest.StartRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	for _, cmd := range []string{"api", "scheduler", "launcher", "all"} {
		// Bounded: a process that starts would otherwise run for ever.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := execute(ctx, []string{cmd, "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--insecure"},
			&Env{Stdout: io.Discard, Stderr: io.Discard})
		cancel()
		require.ErrorContains(t, err, "maxmemory-policy is allkeys-lru", cmd)
		require.ErrorContains(t, err, "ALLOW_EVICTION", cmd)
	}

	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, []string{"api", "--redis-url", r.URL, "--http-addr", "127.0.0.1:0", "--allow-eviction", "--insecure"},
			&Env{Stdout: io.Discard, Stderr: &logs, Ready: ready})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("chronos api --allow-eviction exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("chronos api --allow-eviction did not start")
	}
	cancel()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), "level=ERROR")
	require.Contains(t, logs.String(), "maxmemory-policy is allkeys-lru")
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
