-- Take up to ARGV[2] run tasks off asynq's pending list for a launcher,
-- as asynq's own dequeue script does one at a time: each moves to the
-- active list with a lease (the lease set scored by its expiry), so it is
-- recovered (recover_tasks.lua) if this launcher dies holding it. Nothing is
-- taken from a paused queue.
-- Every key comes in KEYS: the caller reads the ids at the list's right
-- end first (where asynq pops) and names them with their task keys. The
-- script takes only those, from the one at the list's end now: the ones
-- before it were taken by someone else since the read. When the list's
-- end is none of them (a task put back at the end, say), it takes
-- nothing and answers -1, and the caller reads again.
-- KEYS[1] -> asynq:{<queue>}:pending
-- KEYS[2] -> asynq:{<queue>}:paused
-- KEYS[3] -> asynq:{<queue>}:active
-- KEYS[4] -> asynq:{<queue>}:lease
-- KEYS[4+i] -> asynq:{<queue>}:t:<ARGV[2+i]>
-- ARGV[1] -> lease expiry, unix s
-- ARGV[2] -> most tasks to take
-- ARGV[3...] -> the ids read at the list's end, the last one first
-- Output: {skipped, id1, msg1, id2, msg2, ...}: skipped counts the ids
-- read that others took first; {'-1'} when the list's end is none of
-- them; {'0'} when the queue is paused or empty
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'0'}
end
local tail = redis.call('LINDEX', KEYS[1], -1)
if not tail then
  return {'0'}
end
local first
for i = 3, #ARGV do
  if ARGV[i] == tail then
    first = i
    break
  end
end
if not first then
  return {'-1'}
end
local out = {tostring(first - 3)}
local left = tonumber(ARGV[2])
local leases = {}
for i = first, #ARGV do
  if left == 0 then
    break
  end
  -- The list's end was ARGV[first] above; after that, the task popped is
  -- checked instead of reading the end first (one command, not two): one
  -- that is not the next id read goes back where it was, and the take
  -- ends there.
  local got = redis.call('RPOPLPUSH', KEYS[1], KEYS[3])
  if got ~= ARGV[i] then
    if got then
      redis.call('RPUSH', KEYS[1], redis.call('LPOP', KEYS[3]))
    end
    break
  end
  local key = KEYS[i + 2]
  redis.call('HSET', key, 'state', 'active')
  redis.call('HDEL', key, 'pending_since')
  leases[#leases + 1] = ARGV[1]
  leases[#leases + 1] = ARGV[i]
  out[#out + 1] = ARGV[i]
  out[#out + 1] = redis.call('HGET', key, 'msg') or ''
  left = left - 1
end
if #leases > 0 then
  redis.call('ZADD', KEYS[4], unpack(leases))
end
return out
