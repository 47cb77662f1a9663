// Package scriptrewrite is a go-redis hook that changes the Lua scripts a
// client sends: the queue package cuts the "#!lua" flags line for servers
// that do not read it, and queuetest's key guard puts a check before each
// chronos script. Both need the same care: a script goes out as EVAL,
// SCRIPT LOAD or EVALSHA, one by one or pipelined, and go-redis computes
// an EVALSHA's digest from the script as written, so the hook must send
// the digest of the script as rewritten instead.
package scriptrewrite

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Hook rewrites every script its client sends with Rewrite.
type Hook struct {
	// Rewrite returns the script to send in place of src, or false to
	// send src as it is.
	Rewrite func(src string) (string, bool)
	// Digests maps the sha1 of each script as written to its sha1 as
	// rewritten. Hooks with the same Rewrite may share one, so a client
	// that has not sent a script itself still finds the digest another
	// client loaded; nil gives the hook a map of its own.
	Digests *sync.Map
}

// New returns a Hook with a digest map of its own.
func New(rewrite func(src string) (string, bool)) *Hook {
	return &Hook{Rewrite: rewrite, Digests: new(sync.Map)}
}

func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rewrite(cmd)
		return next(ctx, cmd)
	}
}

func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.rewrite(cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite changes cmd's arguments in place.
func (h *Hook) rewrite(cmd redis.Cmder) {
	args := cmd.Args()
	src := 1 // the index of the script or its digest
	switch cmd.Name() {
	case "eval", "eval_ro":
	case "script":
		if len(args) < 3 || !strings.EqualFold(fmt.Sprint(args[1]), "load") {
			return
		}
		src = 2
	case "evalsha", "evalsha_ro":
		if len(args) > 1 {
			if sha, ok := args[1].(string); ok {
				if rewritten, ok := h.Digests.Load(strings.ToLower(sha)); ok {
					args[1] = rewritten
				}
			}
		}
		return
	default:
		return
	}
	if len(args) <= src {
		return
	}
	s, ok := args[src].(string)
	if !ok {
		return
	}
	out, ok := h.Rewrite(s)
	if !ok {
		return
	}
	args[src] = out
	h.Digests.Store(Digest(s), Digest(out))
}

// Digest is a script's SHA1 as EVALSHA takes it.
func Digest(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
