-- Record a replica as alive with a value (a scheduler: the number of
-- shards it holds; a launcher: its host clock's skew), forget replicas
-- silent since the cutoff, and list the live ones.
-- KEYS[1] -> replica zset (id -> last heartbeat ms)
-- KEYS[2] -> replica hash (id -> value)
-- ARGV[1] -> replica id
-- ARGV[2] -> now, ms
-- ARGV[3] -> this replica's value
-- ARGV[4] -> cutoff, ms: replicas last seen before it are gone
-- Output: flat array of [id, value] per live replica
local replica, now, value, cutoff = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff)) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
end
redis.call('ZADD', KEYS[1], now, replica)
redis.call('HSET', KEYS[2], replica, value)
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or '0'
end
return out
