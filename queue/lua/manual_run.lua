-- Create a manual run and its outbox entry, unless the key exists.
-- KEYS[1] -> run hash
-- KEYS[2] -> outbox hash
-- ARGV[1] -> idempotency key
-- ARGV[2] -> scheduled_for, ms
-- ARGV[3] -> now, ms
-- ARGV[4] -> task payload
-- ARGV[5] -> retention of the record, seconds
-- Output: 1 created, 0 already exists
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'sid', '', 'at', ARGV[2], 'fire', ARGV[2], 'st', 'ENQUEUED',
  'cr', ARGV[3], 'up', ARGV[3], 'enq', ARGV[3], 'src', 'manual')
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return 1
