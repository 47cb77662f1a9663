package queuetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ScriptHook is a go-redis hook that records the script calls (EVALSHA,
// EVAL) its client sends one by one, and can fail one as if the process
// died before sending it: for tests of work split over several calls.
// Pipelined calls pass through unseen.
type ScriptHook struct {
	// Match picks the calls the hook looks at by their keys; nil picks
	// every script call.
	Match func(keys []string) bool
	// Fail, when not nil, is asked before the n-th picked call (from 1)
	// is sent; an error it returns fails that call without sending it.
	Fail func(n int) error

	mu    sync.Mutex
	calls [][]any
}

// CommitKeys picks the scheduler's commit calls: a shard's due set,
// in-flight set and run queue's pending list first.
func CommitKeys(keys []string) bool {
	return len(keys) >= 6 && strings.HasSuffix(keys[0], "}:due") && strings.HasSuffix(keys[1], "}:inflight") &&
		strings.HasSuffix(keys[2], ":pending")
}

// Calls returns the arguments (ARGV) of each picked call Redis ran (a
// NOSCRIPT answer, which the client follows with EVAL, is not a call).
func (h *ScriptHook) Calls() [][]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]any(nil), h.calls...)
}

func (h *ScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *ScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *ScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if n := cmd.Name(); (n != "evalsha" && n != "eval") || len(args) < 3 {
			return next(ctx, cmd)
		}
		nk, err := strconv.Atoi(fmt.Sprint(args[2]))
		if err != nil || len(args) < 3+nk {
			return next(ctx, cmd)
		}
		keys := make([]string, nk)
		for i := range keys {
			keys[i] = fmt.Sprint(args[3+i])
		}
		if h.Match != nil && !h.Match(keys) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		n := len(h.calls) + 1
		h.mu.Unlock()
		if h.Fail != nil {
			if err := h.Fail(n); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err = next(ctx, cmd)
		if !redis.HasErrorPrefix(err, "NOSCRIPT") {
			h.mu.Lock()
			h.calls = append(h.calls, args[3+nk:])
			h.mu.Unlock()
		}
		return err
	}
}
