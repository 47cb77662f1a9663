package queue

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func loadScript(name string) *redis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("queue: missing embedded script " + name)
	}
	return redis.NewScript(string(src))
}

// Each script's contract (KEYS, ARGV, output) heads its file in lua/.
var (
	upsertScript         = loadScript("upsert")
	pauseScript          = loadScript("pause")
	deleteScript         = loadScript("delete")
	readDueScript        = loadScript("read_due")
	commitScript         = loadScript("commit")
	statusScript         = loadScript("status")
	expireInflightScript = loadScript("expire_inflight")
	manualRunScript      = loadScript("manual_run")
	heartbeatScript      = loadScript("heartbeat")
)
