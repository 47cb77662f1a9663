-- Shared by the scripts that end in-flight runs (loadScript puts it, after
-- unhold.lua, before them). release frees a schedule of its in-flight run;
-- a schedule held behind that run ("queue") is due again at its act time,
-- its next fire time less its jitter (jitter is the whole act lead of a
-- held schedule: the lookahead is only for "allow"), unless it is paused.
-- When the run in flight ran, the held run waited for it, not for a
-- scheduler: it is marked released (rel) and starts however late, whatever
-- the catch-up policy (the commit of its plan clears the mark). When it
-- did not, the held run was missed too, and the catch-up policy applies
-- to it.

-- ran tells release whether a run leaving flight with status st ran.
-- SKIPPED because it was late (missed at launch): no; SKIPPED because its
-- schedule no longer plans it (paused, timing changed: unplanned, see
-- status.lua's ARGV[8]): the held run waited for it, so yes. Still
-- ENQUEUED (RUN_TIMEOUT): only if a launcher was retrying its executor
-- call (att failed attempts), not if no launcher took it (expire_inflight
-- also counts one a launcher holds, its first call in progress). A record gone
-- (trimmed, expired): no. Any other status: yes.
local function ran(st, unplanned, att)
  if not st then
    return false
  elseif st == stSkipped then
    return unplanned
  elseif st == stEnqueued then
    return att > 0
  end
  return true
end

-- release(skey, id, due_key, inflight_key, ran, now): now is the
-- caller's clock reading, ms.
local function release(skey, id, due_key, inflight_key, ran, now)
  local s = redis.call('HMGET', skey, sfHeld, sfPaused)
  redis.call('HDEL', skey, sfInflight)
  redis.call('ZREM', inflight_key, id)
  if s[1] and not s[2] then
    local act = unhold(skey, ran, now)
    if act then
      redis.call('ZADD', due_key, act, id)
    end
  else
    redis.call('HDEL', skey, sfHeld)
  end
end
