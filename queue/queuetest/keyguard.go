package queuetest

import (
	"strings"
	"sync"

	"github.com/chronos-sched/chronos/queue/asynqwire"
	"github.com/chronos-sched/chronos/queue/scriptrewrite"
)

// KeyGuard is a go-redis hook that makes every chronos script (a script
// that carries the queue package's Lua prelude, or asynqwire's
// ScriptPrelude: the run queue's scripts) fail when it reads or writes a
// key it was not given in KEYS. Redis Cluster routes a script
// by its KEYS alone and refuses only keys of another slot, so a key built
// inside Lua from a shard-tagged prefix works there today and breaks as
// soon as that prefix or tag changes; on one Redis nothing refuses it.
// The guard makes the rule "every key in KEYS" fail a test instead.
//
// It rewrites the scripts its client sends (EVAL, EVALSHA, SCRIPT LOAD,
// one by one or pipelined) to shadow redis.call and redis.pcall with a
// check of each command's key arguments against KEYS. A command it does
// not know fails the script too, so a new command is a deliberate
// addition to keyGuardLua. Scripts of other code (asynq's own, the
// declarative library's) are left alone.
//
// Client, Universal and Sentinel.Client add it; a test that makes its own
// client adds it with AddHook(queuetest.NewKeyGuard()).
type KeyGuard = scriptrewrite.Hook

// guardedDigests maps the sha1 of each script as written to its sha1 as
// guarded, for every KeyGuard: the rewrite is the same in each, so a
// client that has not sent a script itself still sends EVALSHA of the
// script another client loaded guarded, as the store's own code would.
var guardedDigests sync.Map

// NewKeyGuard returns a KeyGuard hook.
func NewKeyGuard() *KeyGuard { return &KeyGuard{Rewrite: guard, Digests: &guardedDigests} }

// chronosPrelude opens the Lua prelude of every chronos script
// (queue.luaPrelude).
const chronosPrelude = "-- Generated from queue/schema.go by loadScript."

// guard is the rewrite: a chronos script gets the guard after its flags
// line; other scripts are sent as they are.
func guard(src string) (string, bool) {
	if !strings.Contains(src, chronosPrelude) && !strings.Contains(src, asynqwire.ScriptPrelude) {
		return "", false
	}
	return Guarded(src), true
}

// Guarded returns script src with the key guard put before its body,
// after a "#!lua" flags line, which Redis reads only first.
func Guarded(src string) string {
	if strings.HasPrefix(src, "#!") {
		line, body, _ := strings.Cut(src, "\n")
		return line + "\n" + keyGuardLua + body
	}
	return keyGuardLua + src
}

// keyGuardLua shadows the global redis with a table whose call and pcall
// check every key argument against KEYS first. Commands are listed by
// where their keys are: the first argument, every argument, or none.
const keyGuardLua = `local redis = (function(real)
  local declared = {}
  for _, k in ipairs(KEYS) do declared[k] = true end
  local first = {}
  for c in string.gmatch('GET SET SETNX INCR INCRBY DECR EXPIRE EXPIREAT PEXPIRE PERSIST TTL PTTL TYPE ' ..
    'HGET HSET HSETNX HMGET HMSET HDEL HGETALL HEXISTS HINCRBY HLEN HKEYS HVALS ' ..
    'SADD SREM SCARD SMEMBERS SISMEMBER ' ..
    'ZADD ZREM ZCARD ZSCORE ZRANK ZINCRBY ZRANGE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ' ..
    'ZCOUNT ZREMRANGEBYRANK ZREMRANGEBYSCORE ' ..
    'LPUSH RPUSH LPOP RPOP LREM LLEN LRANGE LINDEX', '%S+') do first[c] = true end
  local all = {DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true, RPOPLPUSH = true}
  local none = {PUBLISH = true}
  local function check(cmd, ...)
    local c = string.upper(cmd)
    local n = select('#', ...)
    if first[c] then
      n = math.min(n, 1)
    elseif not all[c] then
      if none[c] then return end
      error('chronos keyguard: command ' .. c .. ' is unknown to the guard (queuetest/keyguard.go)')
    end
    for i = 1, n do
      local k = tostring((select(i, ...)))
      if not declared[k] then
        error('chronos keyguard: ' .. c .. ' of key ' .. k .. ', which is not in KEYS')
      end
    end
  end
  return setmetatable({
    call = function(cmd, ...) check(cmd, ...) return real.call(cmd, ...) end,
    pcall = function(cmd, ...) check(cmd, ...) return real.pcall(cmd, ...) end,
  }, {__index = real})
end)(redis)
`
