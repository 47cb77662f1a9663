package queue

import (
	"bytes"
	"embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/queue/asynqwire"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// loadScript returns the script lua/<name>.lua with the shared
// functions it uses (lua/<lib>.lua) put before it: Redis scripts cannot
// call one another, so code two of them need is written once and joined
// in here (see joinScript). The script may write, so a full Redis refuses
// it whole (see shebangWrites).
func loadScript(name string, libs ...string) *redis.Script {
	return flaggedScript(shebangWrites, name, libs)
}

// loadFreeingScript is loadScript for a script that only deletes: Redis
// runs it when full.
func loadFreeingScript(name string, libs ...string) *redis.Script {
	return flaggedScript(shebangFrees, name, libs)
}

// flaggedScript joins the script with its flags line first, where Redis
// reads it (joinScript keeps it there), and records it in scripts.
func flaggedScript(shebang, name string, libs []string) *redis.Script {
	read := func(f string) []byte {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic("queue: missing embedded script " + f)
		}
		return b
	}
	var lib [][]byte
	for _, f := range libs {
		if src, ok := foreignLibs[f]; ok {
			lib = append(lib, []byte(src))
			continue
		}
		if main, ok := strings.CutSuffix(f, mainSuffix); ok {
			lib = append(lib, asFunction(main, read(main)))
			continue
		}
		lib = append(lib, read(f))
	}
	src := joinScript(append([]byte(shebang+"\n"), read(name)...), lib...)
	sc := redis.NewScript(src)
	scripts[name] = loaded{sc, src, shebang != shebangReadOnly, shebang != shebangWrites}
	return sc
}

// scripts holds every script loaded, by name: the tests run each one
// against a full Redis.
var scripts = map[string]loaded{}

// loaded is a script and whether it may write.
type loaded struct {
	script       *redis.Script
	src          string
	writes       bool
	runsWhenFull bool
}

// joinScript puts the prelude (the names of schema.go the script and its
// libraries use, scriptPrelude), then the
// libraries, before the script main. A shebang line of main
// (#!lua flags=...), which Redis reads only as a script's first line,
// stays first.
func joinScript(main []byte, libs ...[]byte) string {
	var b strings.Builder
	if bytes.HasPrefix(main, []byte("#!")) {
		line, rest, _ := bytes.Cut(main, []byte("\n"))
		b.Write(line)
		b.WriteByte('\n')
		main = rest
	}
	var code strings.Builder
	for _, l := range append(libs, main) {
		code.Write(l)
		code.WriteByte('\n')
	}
	b.WriteString(scriptPrelude(code.String()))
	b.WriteString(code.String())
	return b.String()
}

// mainSuffix names, among a script's libraries, another script to be
// called as a function: "status_main" puts status.lua before the script
// as the function status_main(KEYS, ARGV), so that one script call does
// the work of two (status_done.lua).
const mainSuffix = "_main"

// asFunction wraps the script src as the local function name_main of
// KEYS and ARGV, which shadow the globals inside it: the caller passes
// the part of its own KEYS and ARGV that script takes.
func asFunction(name string, src []byte) []byte {
	return []byte("local function " + name + mainSuffix + "(KEYS, ARGV)\n" + string(src) + "\nend\n")
}

// foreignLibs are the Lua libraries of other packages that loadScript
// puts before a script when it names them: enqueue_task writes an asynq
// task in asynq's layout (asynqwire.EnqueueLua).
var foreignLibs = map[string]string{
	"enqueue_task":     asynqwire.EnqueueLua,
	"finish_task_main": string(asFunction("finish_task", []byte(asynqwire.FinishLua))),
}

// Each script's contract (KEYS, ARGV, output) heads its file in lua/.
var (
	upsertScript         = loadScript("upsert", "unhold", "run_record")
	pauseScript          = loadScript("pause", "unhold", "release", "run_record", "settle")
	deleteScript         = loadScript("delete", "run_record", "settle")
	commitScript         = loadScript("commit", "enqueue_task", "run_record", "alarm_lifecycle")
	trimHistoryScript    = loadScript("trim_history", "enqueue_task")
	statusScript         = loadScript("status", "unhold", "release", "run_record", "alarm_lifecycle", "autopause")
	statusDoneScript     = loadScript("status_done", "unhold", "release", "run_record", "alarm_lifecycle", "autopause", "status_main", "finish_task_main")
	statusDoneManyScript = loadScript("status_done_many", "unhold", "release", "run_record", "alarm_lifecycle", "autopause", "status_main")
	expireInflightScript = loadScript("expire_inflight", "unhold", "release", "run_record", "alarm_lifecycle", "autopause")
	manualRunScript      = loadScript("manual_run", "enqueue_task", "run_record")
	backfillScript       = loadScript("backfill", "enqueue_task", "run_record")
	forgetReplayScript   = loadScript("forget_replay")
	heartbeatScript      = loadScript("heartbeat")
	attemptScript        = loadScript("attempt", "alarm_lifecycle")
	putWorkflowScript    = loadScript("put_workflow")
	deleteWorkflowScript = loadFreeingScript("delete_workflow")
	requestClaimScript   = loadScript("request_claim")
	requestAnswerScript  = loadScript("request_answer")
	alarmCreateScript    = loadScript("alarm_create")
	alarmPruneScript     = loadScript("alarm_prune")
	alarmCancelScript    = loadScript("alarm_cancel")
)

// luaPrelude declares luaNames as Lua locals: every name, the prelude
// of a script that uses them all. loadScript declares only the names a
// script uses (scriptPrelude).
var luaPrelude = prelude(func(string) bool { return true })

// preludeHeader opens every prelude: queuetest.KeyGuard knows chronos's
// scripts by it.
const preludeHeader = "-- Generated from queue/schema.go by loadScript.\n"

// prelude declares the luaNames that use says a script uses.
func prelude(use func(name string) bool) string {
	var b strings.Builder
	b.WriteString(preludeHeader)
	for _, n := range luaNames {
		if !use(n.name) {
			continue
		}
		switch v := n.value.(type) {
		case string:
			fmt.Fprintf(&b, "local %s = '%s'\n", n.name, v)
		case int:
			fmt.Fprintf(&b, "local %s = %d\n", n.name, v)
		default:
			panic(fmt.Sprintf("queue: Lua constant %s has type %T", n.name, v))
		}
	}
	return b.String()
}

// luaIdent matches a Lua name.
var luaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// scriptPrelude declares the luaNames that code (a script with its
// libraries) names. Lua bounds a function's locals (200, and miniredis's
// Lua its registers sooner), and the top level of a script is one
// function: declaring every constant of schema.go there left a script
// little room for its own.
func scriptPrelude(code string) string {
	used := map[string]bool{}
	for _, id := range luaIdent.FindAllString(code, -1) {
		used[id] = true
	}
	return prelude(func(name string) bool { return used[name] })
}
