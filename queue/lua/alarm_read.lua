-- Read alarms for their view: each one's hash and, for an active alarm
-- that recurs, the run time of its earliest run among its newest ones
-- not yet delivered (ENQUEUED, or STARTED): that is when it wakes next,
-- though the stored next time has moved past the runs queued ahead.
-- KEYS[2i-1] -> schedule hash of the i-th alarm
-- KEYS[2i] -> its run history zset
-- ARGV[1] -> run key prefix ("chronos:{sNN}:run:")
-- ARGV[2] -> how many of the newest runs to look at
-- Output: per alarm {the hash as field, value pairs; the run time in ms,
-- or ''}
local rpfx, newest = ARGV[1], tonumber(ARGV[2]) - 1
local out = {}
for i = 1, #KEYS, 2 do
  local h = redis.call('HGETALL', KEYS[i])
  local pending = ''
  local st = redis.call('HMGET', KEYS[i], afStatus, sfKind)
  if #h > 0 and (not st[1] or st[1] == alarmActive) and st[2] ~= kindOnce then
    local runs = redis.call('ZREVRANGE', KEYS[i + 1], 0, newest, 'WITHSCORES')
    for j = 1, #runs, 2 do
      local rs = redis.call('HGET', rpfx .. runs[j], rfStatus)
      if rs == stEnqueued or rs == stStarted then
        pending = runs[j + 1]
      end
    end
  end
  out[#out + 1] = {h, pending}
end
return out
