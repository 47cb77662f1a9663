-- Take up to ARGV[3] run tasks off asynq's pending list for a launcher,
-- as asynq's own dequeue script does one at a time: each moves to the
-- active list with a lease (the lease set scored by its expiry), so an
-- asynq server recovers it if this launcher dies holding it. Nothing is
-- taken from a paused queue.
-- KEYS[1] -> asynq:{<queue>}:pending
-- KEYS[2] -> asynq:{<queue>}:paused
-- KEYS[3] -> asynq:{<queue>}:active
-- KEYS[4] -> asynq:{<queue>}:lease
-- ARGV[1] -> lease expiry, unix s
-- ARGV[2] -> asynq task key prefix ("asynq:{<queue>}:t:")
-- ARGV[3] -> most tasks to take
-- Output: {id1, msg1, id2, msg2, ...}
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {}
end
local out = {}
for _ = 1, tonumber(ARGV[3]) do
  local id = redis.call('RPOPLPUSH', KEYS[1], KEYS[3])
  if not id then
    break
  end
  local key = ARGV[2] .. id
  redis.call('HSET', key, 'state', 'active')
  redis.call('HDEL', key, 'pending_since')
  redis.call('ZADD', KEYS[4], ARGV[1], id)
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', key, 'msg') or ''
end
return out
