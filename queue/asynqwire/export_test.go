package asynqwire

import "github.com/redis/go-redis/v9"

// Scripts are the package's scripts, for the external tests.
var Scripts = map[string]*redis.Script{"forward": forwardScript, "take_tasks": takeTasksScript, "finish_task": finishTaskScript,
	"trim_archive": trimArchiveScript}
