package queue

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Script flags. Every script opens with a "#!lua" line (Redis 7 and
// later): a script that declares flags and does not allow OOM is refused
// as a whole, before it runs, when Redis is at maxmemory. A script
// without that line would be refused only if its first write were, and
// a script that starts with an HDEL or a DEL (which free memory) would
// write past maxmemory. Read-only scripts declare no-writes, so they run
// on a full Redis.
const (
	shebangWrites   = "#!lua"
	shebangReadOnly = "#!lua flags=no-writes"
	// shebangFrees is for a script that only deletes: it runs on a full
	// Redis, where deleting is how room is made.
	shebangFrees = "#!lua flags=allow-oom"
)

// flagsProbe is a script that declares flags and writes nothing.
const flagsProbe = shebangReadOnly + "\nreturn 1"

// adaptScriptFlags makes rdb's scripts run on a server that rejects the
// "#!lua" line: miniredis (chronos dev, unit tests) and Redis before 7.
// There a hook on the client cuts the line off every script it sends, so
// the scripts run as they would without flags, and a full Redis may take
// a script's writes after its first (only Redis 7 refuses them as a
// whole). It returns whether the server understands flags. A client
// adapted already is left as it is.
func adaptScriptFlags(ctx context.Context, rdb redis.UniversalClient) (bool, error) {
	if _, ok := adapted.Load(rdb); ok {
		return false, nil
	}
	err := rdb.Eval(ctx, flagsProbe, nil).Err()
	switch {
	case err == nil:
		return true, nil
	case !strings.Contains(err.Error(), "Error compiling script"):
		return false, fmt.Errorf("probe Lua script flags: %w", err)
	}
	if _, loaded := adapted.LoadOrStore(rdb, true); !loaded {
		rdb.AddHook(&stripFlags{})
	}
	return false, nil
}

// adapted holds the clients that carry a stripFlags hook, so a client
// shared by several stores gets one.
var adapted sync.Map

// stripFlags is the go-redis hook of adaptScriptFlags. It removes a
// leading "#!" line from EVAL, EVAL_RO and SCRIPT LOAD, and sends
// EVALSHA and EVALSHA_RO the digest of the script as cut, which go-redis
// computed from the script as written.
type stripFlags struct {
	digests sync.Map // sha1 of the script as written -> sha1 as sent
}

func (h *stripFlags) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stripFlags) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rewrite(cmd)
		return next(ctx, cmd)
	}
}

func (h *stripFlags) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.rewrite(cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite changes cmd's arguments in place.
func (h *stripFlags) rewrite(cmd redis.Cmder) {
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
				if cut, ok := h.digests.Load(strings.ToLower(sha)); ok {
					args[1] = cut
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
	if !ok || !strings.HasPrefix(s, "#!") {
		return
	}
	_, body, _ := strings.Cut(s, "\n")
	args[src] = body
	h.digests.Store(digest(s), digest(body))
}

// digest is a script's SHA1 as EVALSHA takes it.
func digest(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
