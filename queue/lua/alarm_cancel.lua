-- Cancel an owner's alarm: active becomes cancelled, and the alarm is
-- paused, so no scheduler plans it (commit.lua applies no plan of a
-- paused schedule) and a launcher skips its runs already queued. An alarm
-- already terminal is left as it is.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> the owner's active set
-- ARGV[1] -> alarm id
-- ARGV[2] -> the caller's DID
-- ARGV[3] -> now, ms
-- Output: alarmCancelDone, alarmCancelSame (terminal already) or
-- alarmCancelNotFound (no such alarm, or another owner's)
local id, owner, now = ARGV[1], ARGV[2], ARGV[3]
local h = redis.call('HMGET', KEYS[1], sfTarget, sfOwner, afStatus, sfCreated)
if not h[4] or h[1] ~= targetWake or h[2] ~= owner then
  return alarmCancelNotFound
end
if h[3] and h[3] ~= alarmActive then
  return alarmCancelSame
end
redis.call('HSET', KEYS[1], afStatus, alarmCancelled, sfPaused, flagSet, sfUpdated, now)
redis.call('ZADD', KEYS[2], '+inf', id)
redis.call('SREM', KEYS[3], id)
return alarmCancelDone
