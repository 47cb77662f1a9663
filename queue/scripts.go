package queue

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// loadScript returns the script lua/<name>.lua with the shared
// functions it uses (lua/<lib>.lua) put before it: Redis scripts cannot
// call one another, so code two of them need is written once and joined
// in here.
func loadScript(name string, libs ...string) *redis.Script {
	var src []byte
	for _, f := range append(libs, name) {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic("queue: missing embedded script " + f)
		}
		src = append(append(src, b...), '\n')
	}
	return redis.NewScript(string(src))
}

// Each script's contract (KEYS, ARGV, output) heads its file in lua/.
var (
	upsertScript         = loadScript("upsert", "unhold")
	pauseScript          = loadScript("pause")
	deleteScript         = loadScript("delete")
	readDueScript        = loadScript("read_due")
	commitScript         = loadScript("commit", "enqueue_task")
	statusScript         = loadScript("status", "unhold", "release")
	expireInflightScript = loadScript("expire_inflight", "unhold", "release")
	manualRunScript      = loadScript("manual_run", "enqueue_task")
	heartbeatScript      = loadScript("heartbeat")
	attemptScript        = loadScript("attempt")
	forwardScript        = loadScript("forward")
	takeTasksScript      = loadScript("take_tasks")
	finishTaskScript     = loadScript("finish_task")
)
