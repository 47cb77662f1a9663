-- Shared by the scripts that write runs (loadScript puts it before them).
-- enqueue_task writes an asynq task in asynq's own layout, unless a task
-- with its id (the run's idempotency key) exists: pending now when
-- process_at is "0", else scheduled at process_at (unix s). A task asynq
-- is done with (archived or completed) does not count: the caller writes
-- a new run record under this key (the old one expired), so the old task
-- is removed and the run enqueued again, rather than recorded and never
-- run. The layout is pinned byte for byte by TestAsynqWireMatchesClient.
-- task_live says whether a task exists that asynq is not done with (and
-- returns its state).
local function task_live(tkey)
  local state = redis.call('HGET', tkey, 'state')
  return state and state ~= 'archived' and state ~= 'completed', state
end

-- enqueue_new_task writes the task as enqueue_task does, for a caller
-- that knows no task with its id exists (task_live said so).
local function enqueue_new_task(tkey, id, msg, process_at, now_ns, pending_key, scheduled_key)
  if process_at == '0' then
    redis.call('HSET', tkey, 'msg', msg, 'state', 'pending', 'pending_since', now_ns)
    redis.call('LPUSH', pending_key, id)
  else
    redis.call('HSET', tkey, 'msg', msg, 'state', 'scheduled')
    redis.call('ZADD', scheduled_key, process_at, id)
  end
end

local function enqueue_task(tkey, id, msg, process_at, now_ns, pending_key, scheduled_key, archived_key, completed_key)
  local live, state = task_live(tkey)
  if live then
    return
  elseif state then
    redis.call('ZREM', archived_key, id)
    redis.call('ZREM', completed_key, id)
    redis.call('DEL', tkey)
  end
  enqueue_new_task(tkey, id, msg, process_at, now_ns, pending_key, scheduled_key)
end
