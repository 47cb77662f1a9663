-- Shared by the scripts that end in-flight runs (loadScript puts it, after
-- unhold.lua, before them): status.lua, expire_inflight.lua.
--
-- release(skey, id, due_key, inflight_key, ran, now) frees a schedule of
-- its run in flight; now is the caller's clock reading, ms. What becomes
-- of the schedule:
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
local function release(skey, id, due_key, inflight_key, ran, now)
  local s = redis.call('HMGET', skey, sfHeld, sfPaused)
  redis.call('HDEL', skey, sfInflight)
  redis.call('ZREM', inflight_key, id)
  if s[1] and not s[2] then
    local act = unhold(skey, ran, now)
    if act then
      redis.call('ZADD', due_key, act, id)
      return act <= tonumber(now)
    end
  else
    redis.call('HDEL', skey, sfHeld)
  end
  return false
end
