-- Shared by release.lua and upsert.lua (loadScript puts it before them).
-- unhold ends a schedule's hold and returns its next act time (nil
-- without a next time). When waited (the run held behind ran, or the
-- schedule stopped waiting) and that time is already due at now (ms),
-- it is marked released. Only a time already due waited: one set while
-- held (timing change, resume) and not due yet is planned as any run, so
-- a scheduler outage after this makes it late, not released. h: the
-- schedule's fields read once by the caller (alarm_lifecycle.lua), or nil.
local function unhold(skey, waited, now, h)
  local s
  if h then
    s = {h[sfNext], h[sfJitter]}
    h[sfHeld] = false
  else
    s = redis.call('HMGET', skey, sfNext, sfJitter)
  end
  redis.call('HDEL', skey, sfHeld)
  if not s[1] then
    return nil
  end
  local act = tonumber(s[1]) - tonumber(s[2] or '0')
  if waited and act <= tonumber(now) then
    redis.call('HSET', skey, sfReleased, flagSet)
    if h then
      h[sfReleased] = flagSet
    end
  end
  return act
end
