-- Delete a schedule. Its run records stay readable for the retention, so
-- runs in flight can still report their status.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> in-flight zset
-- KEYS[4] -> run history zset of the schedule
-- ARGV[1] -> schedule id
-- ARGV[2] -> run key prefix ("chronos:{sNN}:run:")
-- ARGV[3] -> retention of the run records, seconds
-- Output: 1 deleted, 0 not found
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
for _, k in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  redis.call('EXPIRE', ARGV[2] .. k, ARGV[3])
end
redis.call('EXPIRE', KEYS[4], ARGV[3])
return 1
