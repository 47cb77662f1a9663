-- Shared by the scripts that end in-flight runs, and by upsert.lua for
-- unhold (loadScript puts it before them). release frees a schedule of its in-flight run; a schedule held
-- behind that run ("queue") is due again at its act time, its next fire
-- time less its jitter (jitter is the whole act lead of a held schedule:
-- the lookahead is only for "allow"), unless it is paused. When the run
-- in flight ran, the held run waited for it, not for a scheduler: it is
-- marked released (rel) and starts however late, whatever the catch-up
-- policy (the commit of its plan clears the mark). When it did not, the
-- held run was missed too, and the catch-up policy applies to it.

-- ran tells release whether a run leaving flight with status st ran.
-- SKIPPED because it was late (missed at launch): no; SKIPPED because its
-- schedule no longer plans it (paused, timing changed: unplanned, see
-- status.lua's ARGV[8]): the held run waited for it, so yes. Still
-- ENQUEUED (RUN_TIMEOUT): only if a launcher was retrying its executor
-- call (att failed attempts), not if no launcher took it. A record gone
-- (trimmed, expired): no. Any other status: yes.
local function ran(st, unplanned, att)
  if not st then
    return false
  elseif st == 'SKIPPED' then
    return unplanned
  elseif st == 'ENQUEUED' then
    return att > 0
  end
  return true
end

-- unhold ends a schedule's hold and returns its next act time (nil
-- without a next time). When waited (the run held behind ran, or the
-- schedule stopped waiting) and that time is already due at now (ms),
-- it is marked released. Only a time already due waited: one set while
-- held (timing change, resume) and not due yet is planned as any run, so
-- a scheduler outage after this makes it late, not released.
local function unhold(skey, waited, now)
  local s = redis.call('HMGET', skey, 'next', 'j')
  redis.call('HDEL', skey, 'held')
  if not s[1] then
    return nil
  end
  local act = tonumber(s[1]) - tonumber(s[2] or '0')
  if waited and act <= tonumber(now) then
    redis.call('HSET', skey, 'rel', '1')
  end
  return act
end

-- release(skey, id, due_key, inflight_key, ran, now): now is the
-- caller's clock reading, ms.
local function release(skey, id, due_key, inflight_key, ran, now)
  local s = redis.call('HMGET', skey, 'held', 'paused')
  redis.call('HDEL', skey, 'inflight')
  redis.call('ZREM', inflight_key, id)
  if s[1] and not s[2] then
    local act = unhold(skey, ran, now)
    if act then
      redis.call('ZADD', due_key, act, id)
    end
  else
    redis.call('HDEL', skey, 'held')
  end
end
