-- Shared by the scripts that create, end or ask about run records
-- (loadScript puts it before them; run_key_taken and run_launching need
-- enqueue_task.lua's task_live before it, where they are called). The
-- fields are schema.go's.

local run_final_statuses = {[stSuccess] = true, [stFailed] = true, [stSkipped] = true}

-- run_is_final says whether status st is final: later reports do not
-- change it.
local function run_is_final(st)
  return run_final_statuses[st] == true
end

-- run_create writes the record of a new run at rkey: schedule id sid
-- ('' for a manual run), run_at and fire_at ms, status st, the caller's
-- now (ms), source src, and the optional error err, request nonce req and
-- reason rsn (model.RunReason, a SKIPPED run's). An ENQUEUED run is
-- enqueued now.
local function run_create(rkey, sid, at, fire, st, now, src, err, req, rsn)
  local f = {rfSchedule, sid, rfRunAt, at, rfFireAt, fire, rfStatus, st, rfCreated, now, rfUpdated, now, rfSource, src}
  if err and err ~= '' then
    f[#f + 1] = rfError
    f[#f + 1] = err
  end
  if rsn and rsn ~= '' then
    f[#f + 1] = rfReason
    f[#f + 1] = rsn
  end
  if st == stEnqueued then
    f[#f + 1] = rfEnqueued
    f[#f + 1] = now
  end
  if req then
    f[#f + 1] = rfRequest
    f[#f + 1] = req
  end
  redis.call('HSET', rkey, unpack(f))
end

-- run_end records that the run at rkey ended with status st (final),
-- error err and reason rsn (model.RunReason; '' = none), at now (ms).
local function run_end(rkey, st, err, now, rsn)
  redis.call('HSET', rkey, rfStatus, st, rfError, err, rfUpdated, now)
  if rsn and rsn ~= '' then
    redis.call('HSET', rkey, rfReason, rsn)
  end
end

-- run_attempts is how many executor attempts of the run at rkey failed
-- before it started (attempt.lua counts them).
local function run_attempts(rkey)
  return tonumber(redis.call('HGET', rkey, rfAttempts) or '0')
end

-- run_key_taken says whether an idempotency key is taken by another run:
-- a manual run was started with it (POST /run-launcher/start leaves the
-- mark at mark_key for as long as its record lives), or a live asynq task
-- (task_key) has it.
local function run_key_taken(mark_key, task_key)
  return redis.call('EXISTS', mark_key) == 1 or task_live(task_key) or false
end

-- run_launching says whether a run in status st is being started: still
-- ENQUEUED, its task (task_key) active, so a launcher holds it, its first
-- executor call in progress.
local function run_launching(st, task_key)
  return st == stEnqueued and redis.call('HGET', task_key, taskState) == taskActive
end

-- run_history_keys checks that the run history at hkey holds exactly the
-- n members the caller read, in order (ARGV[first_arg] on), and returns a
-- table of each member's keys as the caller passed them in KEYS: stride
-- keys per member from KEYS[first_key] on, in the same order (its run
-- hash, its task hash, then what the script needs). A key read from a
-- history cannot be a script's KEYS before it is read, so the caller
-- reads the history first; nil says it changed since, and the script
-- answers so before writing anything.
local function run_history_keys(hkey, first_arg, n, first_key, stride)
  local cur = redis.call('ZRANGE', hkey, 0, -1)
  if #cur ~= n then
    return nil
  end
  local out = {}
  for i, k in ipairs(cur) do
    if ARGV[first_arg + i - 1] ~= k then
      return nil
    end
    local b = first_key + (i - 1) * stride
    out[k] = {run = KEYS[b], task = KEYS[b + 1], mark = KEYS[b + 2]}
  end
  return out
end
