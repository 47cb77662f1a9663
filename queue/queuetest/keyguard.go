package queuetest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// KeyGuard is a go-redis hook that makes every chronos script (a script
// that carries the queue package's Lua prelude) fail when it reads or
// writes a key it was not given in KEYS. Redis Cluster routes a script
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
// declarative library's) are left alone, and so are the chronos scripts
// KeyGuardExempt names.
//
// Client, Universal and Sentinel.Client add it; a test that makes its own
// client adds it with AddHook(queuetest.NewKeyGuard()).
type KeyGuard struct{}

// guardedDigests maps the sha1 of each script as written to its sha1 as
// guarded, for every KeyGuard: the rewrite is the same in each, so a
// client that has not sent a script itself still sends EVALSHA of the
// script another client loaded guarded, as the store's own code would.
var guardedDigests sync.Map

// NewKeyGuard returns a KeyGuard hook.
func NewKeyGuard() *KeyGuard { return &KeyGuard{} }

// KeyGuardExempt holds the first line of each chronos script the guard
// does not check yet, with the reason. A script is taken off once its
// every key comes in KEYS.
var KeyGuardExempt = map[string]string{}

// chronosPrelude opens the Lua prelude of every chronos script
// (queue.luaPrelude).
const chronosPrelude = "-- Generated from queue/schema.go by loadScript."

func (g *KeyGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *KeyGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.rewrite(cmd)
		return next(ctx, cmd)
	}
}

func (g *KeyGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			g.rewrite(cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite changes cmd's arguments in place: a chronos script gets the
// guard after its flags line, and EVALSHA the digest of the script so
// guarded (known once the client sent the script itself, which it does
// after Redis answers NOSCRIPT).
func (g *KeyGuard) rewrite(cmd redis.Cmder) {
	args := cmd.Args()
	src := 1
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
				if guarded, ok := guardedDigests.Load(strings.ToLower(sha)); ok {
					args[1] = guarded
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
	if !ok || !strings.Contains(s, chronosPrelude) {
		return
	}
	for marker := range KeyGuardExempt {
		if strings.Contains(s, "\n"+marker) {
			return
		}
	}
	guarded := Guarded(s)
	args[src] = guarded
	guardedDigests.Store(sha1hex(s), sha1hex(guarded))
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

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// keyGuardLua shadows the global redis with a table whose call and pcall
// check every key argument against KEYS first. Commands are listed by
// where their keys are: the first argument, every argument, or none.
const keyGuardLua = `local redis = (function(real)
  local declared = {}
  for _, k in ipairs(KEYS) do declared[k] = true end
  local first = {}
  for c in string.gmatch('GET SET SETNX INCR INCRBY DECR EXPIRE PEXPIRE PERSIST TTL PTTL TYPE ' ..
    'HGET HSET HSETNX HMGET HMSET HDEL HGETALL HEXISTS HINCRBY HLEN HKEYS HVALS ' ..
    'SADD SREM SCARD SMEMBERS SISMEMBER ' ..
    'ZADD ZREM ZCARD ZSCORE ZRANK ZINCRBY ZRANGE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ' ..
    'ZCOUNT ZREMRANGEBYRANK ZREMRANGEBYSCORE ' ..
    'LPUSH RPUSH LPOP RPOP LREM LLEN LRANGE LINDEX', '%S+') do first[c] = true end
  local all = {DEL = true, EXISTS = true, UNLINK = true, MGET = true, TOUCH = true}
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
