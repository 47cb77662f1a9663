package asynqwire_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

// A forward's transaction removes the ids it read by rank, not by name:
// the due ones are the set's first. With due tasks of several seconds
// (more than a batch) and tasks of later seconds in the same set, each
// due task moves once, in the order of its time (the earliest is taken
// first, at the pending list's end), and every later one stays, with its
// score.
func TestForwardRemovesByRankExactlyTheDueIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := &beforeExec{change: func(int) {}}
	rdb, q, hook, c := casQueue(t, ":scheduled", func(int) {})
	exec.addTo(t, rdb)
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	var due, later []string
	for i := range asynqwire.ForwardBatch + 3 {
		id := fmt.Sprintf("due-%04d", i)
		// Ids and seconds in opposite orders: rank follows the score.
		enqueue(t, c, []asynq.Option{asynq.ProcessAt(at.Add(-time.Duration(i%4) * time.Second))}, id)
		due = append(due, id)
	}
	for i := range 5 {
		id := fmt.Sprintf("a-later-%d", i)
		enqueue(t, c, []asynq.Option{asynq.ProcessAt(at.Add(time.Duration(i+1) * time.Second))}, id)
		later = append(later, id)
	}

	moved, err := q.Forward(ctx, at)
	require.NoError(t, err)
	require.Equal(t, len(due), moved)
	require.Equal(t, 2, exec.count(), "a full batch, then the rest")
	require.Empty(t, hook.Calls(), "no transaction aborted")

	pending := rdb.LRange(ctx, q.Keys().Pending(), 0, -1).Val()
	require.ElementsMatch(t, due, pending)
	slices.Reverse(pending) // taken from the end
	score := func(id string) int {
		var i int
		_, err := fmt.Sscanf(id, "due-%d", &i)
		require.NoError(t, err)
		return -(i % 4)
	}
	require.True(t, slices.IsSortedFunc(pending, func(a, b string) int { return score(a) - score(b) }),
		"the earliest second is taken first")
	rest := rdb.ZRangeWithScores(ctx, q.Keys().Scheduled(), 0, -1).Val()
	require.Len(t, rest, len(later))
	for i, z := range rest {
		require.Equal(t, later[i], z.Member)
		require.Equal(t, float64(at.Unix()+int64(i+1)), z.Score)
	}
	requireStates(t, rdb, q, map[string]asynq.TaskState{due[0]: asynq.TaskStatePending,
		due[len(due)-1]: asynq.TaskStatePending, later[0]: asynq.TaskStateScheduled})
}
