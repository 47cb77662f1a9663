-- Read a page of due schedules with the state a plan is computed from.
-- KEYS[1] -> due zset
-- ARGV[1] -> act time upper bound, ms
-- ARGV[2] -> page size
-- ARGV[3] -> schedule key prefix ("chronos:{sNN}:sched:")
-- Output: per due schedule, its id, the number n of hash fields and values
-- that follow, then those n strings (n = 0 when the hash is gone: the
-- caller removes the stray member)
local until_ms, pageSize, spfx = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', until_ms, 'LIMIT', 0, pageSize)
local out = {}
for _, id in ipairs(ids) do
  local h = redis.call('HGETALL', spfx .. id)
  out[#out + 1] = id
  out[#out + 1] = tostring(#h)
  for _, v in ipairs(h) do
    out[#out + 1] = v
  end
end
return out
