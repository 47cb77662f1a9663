-- Read a page of due schedules with the state a plan is computed from.
-- KEYS[1] -> due zset
-- ARGV[1] -> act time upper bound, ms
-- ARGV[2] -> page size
-- ARGV[3] -> schedule key prefix ("chronos:{sNN}:sched:")
-- Output: flat array of [id, def, next, inflight] per due schedule
-- (def "" when the hash is gone: the caller removes the stray member)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[3] .. id, 'def', 'next', 'inflight')
  out[#out + 1] = id
  out[#out + 1] = v[1] or ''
  out[#out + 1] = v[2] or ''
  out[#out + 1] = v[3] or ''
end
return out
