-- Create or update a schedule's definition, compare-and-set on its
-- definition version and next fire time, so a concurrent upsert or
-- scheduler commit is never overwritten.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- ARGV[1] -> schedule id
-- ARGV[2] -> definition version the caller read ("" = must not exist yet)
-- ARGV[3] -> next fire time (ms) the caller read ("" = none)
-- ARGV[4] -> new next fire time in ms ("" = no future time)
-- ARGV[5] -> new act score for the due zset
-- ARGV[6] -> n, the number of definition fields to delete, then their names
-- ARGV[7+n..] -> the new definition's field, value pairs
-- Output: 1 written, 0 changed under the caller (re-read and retry)
local cur = redis.call('HMGET', KEYS[1], 'ver', 'next', 'paused', 'held')
if (cur[1] or '') ~= ARGV[2] or (cur[2] or '') ~= ARGV[3] then
  return 0
end
local n = tonumber(ARGV[6])
if n > 0 then
  redis.call('HDEL', KEYS[1], unpack(ARGV, 7, 6 + n))
end
redis.call('HSET', KEYS[1], unpack(ARGV, 7 + n))
redis.call('HINCRBY', KEYS[1], 'ver', 1)
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], 'next')
else
  redis.call('HSET', KEYS[1], 'next', ARGV[4])
end
if cur[3] or cur[4] or ARGV[4] == '' then
  redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
end
return 1
