-- Shared by the scripts that end in-flight runs (loadScript puts it, after
-- unhold.lua, before them): status.lua, expire_inflight.lua.
--
-- release(skey, id, due_key, inflight_key, ran, now, bfq_key, sched_key, h)
-- frees a schedule of its run in flight; now is the caller's clock
-- reading, ms. bfq_key is the schedule's chain of queue backfill runs
-- (backfillQueueKey), sched_key its shard queue's asynq scheduled set.
-- h is the schedule's fields read once by the caller
-- (alarm_lifecycle.lua), or nil: release then reads what it needs.
--
-- A schedule not paused whose chain holds a run starts that run first
-- (start_queued): it becomes the run in flight, and the schedule stays
-- as it is otherwise (a held run of its own stays held, behind the
-- chain). Else, what becomes of the schedule:
--
--   held | paused | the run in flight ran | then
--   -----+--------+-----------------------+--------------------------------
--   yes  | no     | yes                   | due at its act time (next less
--        |        |                       | jitter); released (rel) if that
--        |        |                       | has come: it starts now, however
--        |        |                       | late, whatever its catch-up policy
--   yes  | no     | no                    | due at its act time, planned as
--        |        |                       | any run: missed if late past
--        |        |                       | MISFIRE_GRACE (catch-up policy)
--   yes  | yes    | either                | hold cleared; resume plans it
--   no   | either | either                | in-flight run cleared
--
-- ran(st, unplanned, att, launching) says whether the run leaving flight
-- ran; model.EndedRun.Ran is the same table in Go, and
-- TestLuaRanMatchesModel holds the two together.
--
--   st, its status as it leaves flight | ran
--   -----------------------------------+--------------------------------
--   nil (record trimmed or expired)    | no
--   SKIPPED, late at launch            | no: the held run was missed too
--   SKIPPED, unplanned (paused,        | yes: the held run waited for it
--     timing changed; status.lua's     |
--     ARGV[8])                         |
--   ENQUEUED (RUN_TIMEOUT, or task     | only if a launcher was retrying
--     archived: abandoned)             | its executor call (att > 0) or
--                                      | holds its task (launching)
--   STARTED, SUCCESS, FAILED           | yes
local function ran(st, unplanned, att, launching)
  if not st then
    return false
  elseif st == stSkipped then
    return unplanned
  elseif st == stEnqueued then
    return att > 0 or launching
  end
  return true
end

-- release returns true when the schedule is due at once: it was held and its
-- act time has come, released or missed. The caller tells the shard's
-- scheduler (chanReleased), so a backlog of held runs drains as fast as
-- its runs end, not one run per tick.
-- start_queued starts the first run of the chain at bfq_key whose task
-- still waits parked (one settled by a pause, or whose task is gone, is
-- dropped from the chain): its task is due at the later of now and the
-- time the backfill's rate gave it, its run becomes the schedule's run in
-- flight with the chain's run timeout. It returns whether it started
-- one. A backfill's records and parked tasks were written by one script,
-- so the chain is in Redis: a process dying anywhere loses no link.
local function start_queued(skey, id, inflight_key, now, bfq_key, sched_key, h)
  for _ = 1, 100 do
    local head = redis.call('ZRANGE', bfq_key, 0, 0, 'WITHSCORES')
    if #head == 0 then
      return false
    end
    local key, earliest = head[1], tonumber(head[2])
    redis.call('ZREM', bfq_key, key)
    local score = redis.call('ZSCORE', sched_key, key)
    if score and tonumber(score) >= taskParked then
      local at = math.max(tonumber(now), earliest)
      redis.call('ZADD', sched_key, math.floor(at / 1000), key)
      redis.call('HSET', skey, sfInflight, key)
      -- backfill.lua sets the timeout with the chain; an hour (RUN_TIMEOUT's
      -- default) only if the field were gone.
      local timeout
      if h then
        h[sfInflight] = key
        timeout = h[sfBackfillTimeout]
      else
        timeout = redis.call('HGET', skey, sfBackfillTimeout)
      end
      timeout = tonumber(timeout or '3600000')
      redis.call('ZADD', inflight_key, at + timeout, id)
      return true
    end
  end
  return false
end

local function release(skey, id, due_key, inflight_key, ran, now, bfq_key, sched_key, h)
  local s
  if h then
    s = {h[sfHeld], h[sfPaused]}
    h[sfInflight] = false
  else
    s = redis.call('HMGET', skey, sfHeld, sfPaused)
  end
  redis.call('HDEL', skey, sfInflight)
  redis.call('ZREM', inflight_key, id)
  if s[2] then
    redis.call('DEL', bfq_key) -- pausing settled the chain's runs
  elseif start_queued(skey, id, inflight_key, now, bfq_key, sched_key, h) then
    return false
  end
  if s[1] and not s[2] then
    local act = unhold(skey, ran, now, h)
    if act then
      redis.call('ZADD', due_key, act, id)
      return act <= tonumber(now)
    end
  elseif s[1] then
    -- Not held, the field is absent: deleting it would be a command for
    -- nothing.
    redis.call('HDEL', skey, sfHeld)
    if h then
      h[sfHeld] = false
    end
  end
  return false
end
