package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/queue/scriptrewrite"
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
		rdb.AddHook(stripFlags())
	}
	return false, nil
}

// adapted holds the clients that carry a stripFlags hook, so a client
// shared by several stores gets one.
var adapted sync.Map

// stripFlags is the go-redis hook of adaptScriptFlags. It removes a
// leading "#!" line from the scripts its client sends.
func stripFlags() redis.Hook {
	return scriptrewrite.New(func(src string) (string, bool) {
		if !strings.HasPrefix(src, "#!") {
			return "", false
		}
		_, body, _ := strings.Cut(src, "\n")
		return body, true
	})
}
