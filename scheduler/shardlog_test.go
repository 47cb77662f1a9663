package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// lockedBuffer is a log sink written by the scheduler's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A replica starting alone takes every shard in one round and says so in
// one log line, not one per shard.
func TestShardChangesAreLoggedOnceARound(t *testing.T) {
	t.Parallel()
	rdb := queuetest.StartRedis(t).Universal(t)
	store, err := queue.NewStore(context.Background(), rdb, queue.NewSimClock(start), &queue.Config{Shards: 8})
	require.NoError(t, err)
	var logs lockedBuffer
	s, err := New(store, nil, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })

	var lines []map[string]any
	require.Eventually(t, func() bool {
		lines = lines[:0]
		for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), "shard") {
				lines = append(lines, m)
			}
		}
		return len(lines) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, lines, 1, "%v", lines)
	require.Equal(t, "shards acquired", lines[0]["msg"])
	require.Equal(t, []any{0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}, lines[0]["shards"])
	require.EqualValues(t, 8, lines[0]["held"])
}
