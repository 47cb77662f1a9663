package queue

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds the requests sent in one pipeline.
const maxBatch = 256

// batcher sends the commands of concurrent callers together in one
// pipeline: while one pipeline is in flight the next requests gather, so
// many API requests working at once cost Redis and this process one
// round trip (one read and one write on each side) per batch instead of
// one per request. There is no timer: a request that finds nothing in
// flight goes at once.
type batcher struct {
	rdb     redis.UniversalClient
	mu      sync.Mutex
	pending []*batchReq
	running bool // a flush goroutine is serving pending
}

type batchReq struct {
	ctx   context.Context
	queue func(redis.Pipeliner)
	sent  bool // its commands went out (set before done closes)
	done  chan struct{}
}

// do adds the request's commands (queue must only add commands to the
// pipeline) and waits until they have been answered, or ctx ends. On nil
// the caller reads its commands' results and errors; on an error it must
// not touch them (they may still be sent if ctx ended while their batch
// was being built, as with any request a client gives up on).
func (b *batcher) do(ctx context.Context, queue func(redis.Pipeliner)) error {
	r := &batchReq{ctx: ctx, queue: queue, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if !b.running {
		b.running = true
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		if !r.sent { // ctx ended before its batch was built
			return ctx.Err()
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends what is pending, batch after batch, and exits when nothing
// is. The pipeline is not tied to any caller's context: one caller giving
// up must not fail the others' commands.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		batch := b.pending[:min(len(b.pending), maxBatch)]
		b.pending = b.pending[len(batch):]
		if len(batch) == 0 {
			b.pending, b.running = nil, false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		pipe := b.rdb.Pipeline()
		for _, r := range batch {
			if r.sent = r.ctx.Err() == nil; r.sent { // its caller has not given up
				r.queue(pipe)
			}
		}
		_, _ = pipe.Exec(context.Background()) // each command carries its own error
		for _, r := range batch {
			close(r.done)
		}
	}
}

// runScript runs a script through the batcher; when Redis does not have
// it (restarted, or SCRIPT FLUSH) it is run directly, which loads it.
func (b *batcher) runScript(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.runScriptWith(ctx, nil, sc, keys, args...)
}

// runScriptWith is runScript with the commands of also (nil: none) sent
// in the same batch, after the script; their results are the caller's to
// read when the script's error is not the batch's.
func (b *batcher) runScriptWith(ctx context.Context, also func(redis.Pipeliner), sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	if err := b.do(ctx, func(p redis.Pipeliner) {
		cmd = sc.EvalSha(ctx, p, keys, args...)
		if also != nil {
			also(p)
		}
	}); err != nil {
		failed := redis.NewCmd(ctx) // not cmd: the batch may still write that
		failed.SetErr(err)
		return failed
	}
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		return sc.Run(ctx, b.rdb, keys, args...)
	}
	return cmd
}
