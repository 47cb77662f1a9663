package asynqwire_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// countHook counts the commands a client sends, by name.
type countHook struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		h.count(c)
		return next(ctx, c)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		for _, c := range cs {
			h.count(c)
		}
		return next(ctx, cs)
	}
}

func (h *countHook) count(c redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[c.Name()]++
}

func (h *countHook) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n
	h.n = map[string]int{}
	return n
}

// A share that comes back short (another launcher took from that list's
// end since its ids were read) makes Take read that list's ids again when
// it next gives it a share, and keeps the other lists' lengths and ids:
// it read every list again (a length and idsWindow ids each) after each
// short share, which was most of a second launcher's reads. Every task is
// still taken once, by one taker or the other.
func TestTakeAfterAShortShareReadsOnlyThatList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := queuetest.StartRedis(t)
	client := func(h redis.Hook) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
		if h != nil {
			rdb.AddHook(h)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	hook := &countHook{n: map[string]int{}}
	rdbA, rdbB := client(hook), client(nil)
	const lists, each = 3, 10
	var qa, qb []*asynqwire.Queue
	for i := range lists {
		name := fmt.Sprintf("q%d", i)
		qa, qb = append(qa, asynqwire.New(rdbA, name, nil)), append(qb, asynqwire.New(rdbB, name, nil))
		k := qa[i].Keys()
		for j := range each {
			id := fmt.Sprintf("%s-%02d", name, j)
			m := asynqwire.Message{Type: "run", ID: id, Queue: name, Payload: []byte(id)}
			require.NoError(t, rdbA.HSet(ctx, k.Task(id), "msg", m.Encode(), "state", "pending").Err())
			require.NoError(t, rdbA.LPush(ctx, k.Pending(), id).Err())
		}
	}
	a := asynqwire.NewSet(rdbA, qa, nil)
	// fresh keeps the lengths read within lensMaxAge, however slow the
	// machine: what is asserted is which reads a short share causes.
	fresh := a.KeepLengthsFresh
	taken := map[string]int{}
	note := func(ts []*asynqwire.Task) {
		for _, tk := range ts {
			taken[tk.ID]++
		}
	}

	// Two takes of one: the first loads the take script (NOSCRIPT), which
	// makes the second read the lengths again.
	var ts []*asynqwire.Task
	for range 2 {
		got, err := a.Take(ctx, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		note(got)
	}
	require.Positive(t, hook.take()["llen"], "the first takes read the lists' lengths")

	// Another launcher takes 5 from the end of each list.
	for _, q := range qb {
		ts, err := q.Take(ctx, 5)
		require.NoError(t, err)
		note(ts)
	}
	for range 2 {
		fresh()
		var err error
		ts, err = a.Take(ctx, 12)
		require.NoError(t, err)
		require.NotEmpty(t, ts)
		note(ts)
		n := hook.take()
		require.Zero(t, n["llen"], "a short share does not make Take read every list's length again: %v", n)
		require.LessOrEqual(t, n["lrange"], 1, "at most the list of the short share is read again: %v", n)
	}
	for {
		fresh()
		ts, err := a.Take(ctx, 12)
		require.NoError(t, err)
		if len(ts) == 0 {
			break
		}
		note(ts)
	}
	require.Len(t, taken, lists*each, "every task taken")
	for id, n := range taken {
		require.Equal(t, 1, n, "%s taken once", id)
	}
}
