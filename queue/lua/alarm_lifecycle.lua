-- Shared by the scripts that end runs or count their failed attempts
-- (loadScript puts it before them): status.lua, expire_inflight.lua,
-- attempt.lua and commit.lua. An alarm is a schedule of target wake; its
-- state (afStatus, afFailures, afLastErr, afLastFired) follows its runs
-- here, in the script that changes the run, so the two never disagree.
-- A cancelled alarm is never changed.
--
--   the run                        | once alarm          | cron / every alarm
--   -------------------------------+---------------------+--------------------
--   a delivery failed, retried     | failure_count + 1, last_error (both kinds)
--   SUCCESS                        | fired, last_fired   | last_fired
--   FAILED, its last delivery      | failure_count + 1,  | failure_count + 1,
--     failed                       | failed, last_error  | last_error; active
--   FAILED otherwise (RUN_TIMEOUT, | failed, last_error  | last_error; active
--     abandoned, no WAKE_URL)      |                     |
--   SKIPPED                        | failed, last_error  | unchanged
--
-- A cron or every alarm that fails a fire time skips to its next one: the
-- scheduler has planned it already. One retired by the scheduler (no fire
-- time left, a definition that no longer compiles) is failed, with why.

-- The functions that read the schedule's hash take h, the fields a
-- caller read once for all of them (status.lua: field -> value, false
-- when absent, as HMGET answers), and keep it as they write; without h
-- they read the fields they need.

-- status_fields is the metatable of an h that holds some of the
-- schedule's fields (status.lua reads those its case needs), with the
-- schedule's key at h[1]: a field h lacks is read from the hash when a
-- library asks for it, and kept, so a library that reads a field the
-- caller did not read still gets the hash's value.
local status_fields = {__index = function(h, f)
  local v = redis.call('HGET', rawget(h, 1), f)
  rawset(h, f, v)
  return v
end}

-- alarm_of returns the kind, status and owner of the alarm at skey, or
-- nil when skey is no alarm (or gone) or a cancelled one.
local function alarm_of(skey, h)
  local a
  if h then
    -- The target first: the other fields are read only for an alarm.
    if h[sfTarget] ~= targetWake then
      return nil
    end
    a = {h[sfTarget], h[sfKind], h[afStatus], h[sfOwner]}
  else
    a = redis.call('HMGET', skey, sfTarget, sfKind, afStatus, sfOwner)
  end
  if a[1] ~= targetWake or a[3] == alarmCancelled then
    return nil
  end
  return {kind = a[2], status = a[3] or alarmActive, owner = a[4]}
end

-- alarm_end sets the alarm at skey (read as a, by alarm_of) to terminal
-- status st, with last_error err unless err is nil, and takes it out of
-- its owner's active set (active_key, from the caller's KEYS) as cancel
-- does, so the set holds only the alarms that may fire. The set is in the
-- alarm's shard; the alarm's id is skey's end, after its shard's prefix.
-- Without active_key the set keeps the id, which a create at the limit
-- prunes (alarm_prune.lua).
local function alarm_end(skey, a, st, err, active_key, h)
  redis.call('HSET', skey, afStatus, st)
  if h then
    h[afStatus] = st
  end
  if err then
    redis.call('HSET', skey, afLastErr, err)
  end
  local pfx = string.match(skey, '^[^{]*{[^}]*}:')
  if pfx and a.owner and active_key then
    redis.call('SREM', active_key, string.sub(skey, #pfx + #segSched + 1))
  end
end

-- alarm_attempt_failed counts a failed delivery of the alarm at skey that
-- will be retried; err is why it failed.
local function alarm_attempt_failed(skey, err)
  if alarm_of(skey) then
    redis.call('HINCRBY', skey, afFailures, 1)
    redis.call('HSET', skey, afLastErr, err)
  end
end

-- alarm_run_ended applies the end of one of its runs to the alarm at
-- skey: final status st, the run's error err, at now (ms). delivery_failed
-- says the run failed because its last delivery did, which counts as the
-- ones before it. active_key is the owner's active set (alarm_end); h
-- the schedule's fields, or nil.
local function alarm_run_ended(skey, st, err, now, delivery_failed, active_key, h)
  local a = alarm_of(skey, h)
  if not a then
    return
  end
  local once = a.kind == kindOnce and a.status == alarmActive
  if st == stSuccess then
    redis.call('HSET', skey, afLastFired, now)
    if once then
      alarm_end(skey, a, alarmFired, nil, active_key, h)
    end
    return
  end
  if delivery_failed then
    redis.call('HINCRBY', skey, afFailures, 1)
  end
  if once then
    alarm_end(skey, a, alarmFailed, err, active_key, h)
  elseif st == stFailed then
    redis.call('HSET', skey, afLastErr, err)
  end
end

-- alarm_retire fails the active alarm at skey, which the scheduler
-- retired: why says why it fires no more. active_key is the owner's
-- active set (alarm_end).
local function alarm_retire(skey, why, active_key)
  local a = alarm_of(skey)
  if a and a.status == alarmActive then
    alarm_end(skey, a, alarmFailed, why, active_key)
  end
end

-- alarm_owner_differs says whether the schedule at skey is an alarm whose
-- owner is not owner, the one the caller read to name the owner's active
-- set in KEYS: the caller then answers before writing anything, with the
-- owner, and is called again with that set. h: the schedule's fields, or
-- nil.
local function alarm_owner_differs(skey, owner, h)
  local a
  if h then
    a = {h[sfTarget], h[sfOwner]}
  else
    a = redis.call('HMGET', skey, sfTarget, sfOwner)
  end
  return a[1] == targetWake and (a[2] or '') ~= owner, a[2] or ''
end
