-- Create or update a schedule, compare-and-set on its definition and next
-- fire time, so a concurrent upsert or scheduler commit is never overwritten.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- ARGV[1] -> schedule id
-- ARGV[2] -> definition the caller read ("" = must not exist yet)
-- ARGV[3] -> next fire time (ms) the caller read ("" = none)
-- ARGV[4] -> new definition (JSON)
-- ARGV[5] -> new next fire time in ms ("" = no future time)
-- ARGV[6] -> new act score for the due zset
-- Output: 1 written, 0 changed under the caller (re-read and retry)
local cur = redis.call('HMGET', KEYS[1], 'def', 'next', 'paused', 'held')
if (cur[1] or '') ~= ARGV[2] or (cur[2] or '') ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], 'def', ARGV[4])
if ARGV[5] == '' then
  redis.call('HDEL', KEYS[1], 'next')
else
  redis.call('HSET', KEYS[1], 'next', ARGV[5])
end
if cur[3] or cur[4] or ARGV[5] == '' then
  redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
end
return 1
