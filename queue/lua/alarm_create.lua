-- Create an agent's alarm: its schedule hash and due entry, as upsert.lua
-- writes a new schedule, and its place in its owner's index. The same
-- script decides the owner's idempotency key and active-alarm limit, so
-- concurrent creates with one key make one alarm and cannot pass the
-- limit together. Every key is in the owner's shard (the id is drawn
-- into it), so the script touches one Redis Cluster slot.
-- Every key comes in KEYS: the alarm the owner's idempotency key names
-- is read by the caller first (ARGV[8]) and checked again here, and the
-- active set's leftovers are pruned by the caller (alarm_prune.lua) when
-- this script answers that the owner is at the limit.
-- KEYS[1] -> schedule hash of the new id
-- KEYS[2] -> due zset
-- KEYS[3] -> the shard's version counter
-- KEYS[4] -> the owner's alarms zset (id -> created at, ms)
-- KEYS[5] -> the owner's idempotency hash (key -> id)
-- KEYS[6] -> the owner's active set
-- KEYS[7] -> schedule hash of ARGV[8] (KEYS[1] again when none)
-- ARGV[1] -> alarm id
-- ARGV[2] -> now, ms (created_at)
-- ARGV[3] -> next fire time, ms ("" = none)
-- ARGV[4] -> act score of the next fire time
-- ARGV[5] -> timing key
-- ARGV[6] -> the owner's idempotency key ("" = none)
-- ARGV[7] -> the most active alarms the owner may have
-- ARGV[8] -> the id the caller read under ARGV[6] in KEYS[5] ("" = none)
-- ARGV[9..] -> the definition's field, value pairs, after the
--              alarmCreateHeaderArgs fixed arguments
-- Output: {alarmCreateNew, id}, {alarmCreateDeduped, the existing id},
-- {alarmCreateIDTaken, id} (a schedule has the id: draw another),
-- {alarmCreateTooMany, the owner's active count} or {alarmCreateStale,
-- the id the key names now} (not ARGV[8]: call again with it); nothing
-- is written but for alarmCreateNew
local id, now, nextAt, score, timingHash, key, limit, read =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]

-- A key names the alarm it created for as long as that alarm exists,
-- whatever its status: as the specification's unique index does.
local prev = nil
if key ~= '' then
  prev = redis.call('HGET', KEYS[5], key)
  if (prev or '') ~= read then
    return {alarmCreateStale, prev or ''}
  end
  if prev and redis.call('EXISTS', KEYS[7]) == 1 then
    return {alarmCreateDeduped, prev}
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {alarmCreateIDTaken, id}
end

-- The active set gains an id on create and loses it on cancel and when
-- the run lifecycle ends the alarm (fired, failed: alarm_lifecycle.lua).
-- At the limit, the caller drops the ids no longer active that are left
-- over (alarm_prune.lua) and asks again.
local n = redis.call('SCARD', KEYS[6])
if n >= limit then
  return {alarmCreateTooMany, n}
end

if prev then
  redis.call('HDEL', KEYS[5], key) -- its alarm is gone
end
local ver = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], sfTiming, timingHash, sfVer, ver, afStatus, alarmActive, unpack(ARGV, alarmCreateHeaderArgs + 1))
if nextAt == '' then
  redis.call('ZADD', KEYS[2], '+inf', id)
else
  redis.call('HSET', KEYS[1], sfNext, nextAt)
  redis.call('ZADD', KEYS[2], score, id)
end
redis.call('ZADD', KEYS[4], now, id)
if key ~= '' then
  redis.call('HSET', KEYS[5], key, id)
end
redis.call('SADD', KEYS[6], id)
return {alarmCreateNew, id}
