-- Pause or resume an owner's active alarm (a disabled cron job), as
-- pause.lua does for a registrar's schedule: paused, it is planned no
-- more and a launcher skips its runs already queued; resumed, it goes on
-- at its next fire time after now, the paused time not caught up. An
-- alarm that is no longer active is left as it is: a cancelled alarm is
-- paused for good.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- ARGV[1] -> alarm id
-- ARGV[2] -> the caller's DID
-- ARGV[3] -> flagSet pause, "0" resume
-- ARGV[4] -> on resume: next fire time in ms after now ("" = none)
-- ARGV[5] -> on resume: act score
-- ARGV[6] -> on resume: the definition version ARGV[4] was computed from
-- ARGV[7] -> now, ms
-- Output: pauseNotFound (no such alarm, or another owner's), pauseStale
-- (the definition changed since: read it again), pauseSame (already in
-- that state, or no longer active) or pauseChanged
local id, owner, pause, nextAt, score, ver, now = ARGV[1], ARGV[2], ARGV[3] == flagSet, ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local h = redis.call('HMGET', KEYS[1], sfTarget, sfOwner, afStatus, sfCreated, sfPaused, sfHeld, sfVer)
if not h[4] or h[1] ~= targetWake or h[2] ~= owner then
  return pauseNotFound
end
if h[3] and h[3] ~= alarmActive then
  return pauseSame
end
if pause then
  if h[5] then return pauseSame end
  redis.call('HSET', KEYS[1], sfPaused, flagSet, sfUpdated, now)
  redis.call('ZADD', KEYS[2], '+inf', id)
  return pauseChanged
end
if not h[5] then return pauseSame end
if (h[7] or '') ~= ver then return pauseStale end
redis.call('HDEL', KEYS[1], sfPaused, sfReleased)
redis.call('HSET', KEYS[1], sfResumed, now, sfUpdated, now)
if nextAt == '' then
  redis.call('HDEL', KEYS[1], sfNext)
else
  redis.call('HSET', KEYS[1], sfNext, nextAt)
end
if h[6] or nextAt == '' then
  redis.call('ZADD', KEYS[2], '+inf', id)
else
  redis.call('ZADD', KEYS[2], score, id)
end
return pauseChanged
