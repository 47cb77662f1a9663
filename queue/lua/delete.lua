-- Delete a schedule. Its run records stay readable for the retention, so
-- runs in flight can still report their status.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> in-flight zset
-- KEYS[4] -> run history zset of the schedule
-- KEYS[5] -> the schedule's deletion mark
-- ARGV[1] -> schedule id
-- ARGV[2] -> run key prefix ("chronos:{sNN}:run:")
-- ARGV[3] -> retention of the run records, seconds
-- ARGV[4] -> this call's nonce
-- Output: deleteDone or deleteNotFound
-- The mark (the nonce, kept a minute) tells this call's script run again
-- by the client after a lost reply that the schedule it finds gone is the
-- one it deleted. An agent's alarm is not the registrar's to delete: it
-- is not found (its owner cancels it).
local id, rpfx, retention, nonce = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('HGET', KEYS[1], sfTarget) == targetWake then
  return deleteNotFound
end
if redis.call('DEL', KEYS[1]) == 0 then
  if redis.call('GET', KEYS[5]) == nonce then
    return deleteDone
  end
  return deleteNotFound
end
redis.call('SET', KEYS[5], nonce, 'EX', 60)
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
for _, k in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  redis.call('EXPIRE', rpfx .. k, retention)
end
redis.call('EXPIRE', KEYS[4], retention)
return deleteDone
