package declarative

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

var errInjected = errors.New("injected persistence failure")

// failingTx fails the failAt-th MULTI/EXEC pipeline, counting from 1.
type failingTx struct {
	failAt int64
	n      atomic.Int64
}

func (h *failingTx) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failingTx) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *failingTx) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			if h.n.Add(1) == h.failAt {
				return errInjected
			}
		}
		return next(ctx, cmds)
	}
}
