-- Record a run's status. A terminal status (SUCCESS, FAILED, SKIPPED) is
-- final: later reports do not change it. When the run was its schedule's
-- in-flight run, the schedule is released (and resumed if it was held);
-- an alarm's state follows its run's end (alarm_lifecycle.lua); if the
-- release makes the schedule due at once, its id is published on the
-- shard's channel (ARGV[1]).
-- Every key comes in KEYS. The schedule's and its owner's keys depend on
-- what the run and the schedule hold, so the caller names what it knows
-- (ARGV[11], ARGV[12]); when a final status finds otherwise, the script
-- writes nothing and answers statusRetry with what it found, and the
-- caller calls again with those keys.
-- KEYS[1] -> run hash
-- KEYS[2] -> due zset
-- KEYS[3] -> in-flight zset
-- KEYS[4] -> the schedule hash of ARGV[11] (KEYS[1] again when none)
-- KEYS[5] -> the active set of ARGV[12], the schedule's owner (an alarm's)
-- KEYS[6] -> the shard's auto-pause counter (autopause.lua)
-- KEYS[7] -> the queue backfill chain of ARGV[11] (release.lua; KEYS[1]
--            again when none)
-- KEYS[8] -> asynq:{<queue>}:scheduled of the shard's queue
-- ARGV[1] -> the shard's released channel (chronos:{sNN}:released)
-- ARGV[2] -> idempotency key
-- ARGV[3] -> new status
-- ARGV[4] -> run id ("" = keep)
-- ARGV[5] -> error ("" = keep)
-- ARGV[6] -> now, ms
-- ARGV[7] -> only from this status ("" = any non-terminal one)
-- ARGV[8] -> how to release a run held behind it (queue.ReleaseRule,
--            release.lua's ran): "" by the new status; releaseUnplanned:
--            a SKIPPED run that was not late but is no longer planned
--            (paused, deleted, timing changed), which the held run waited
--            for; releaseAbandoned: a FAILED run whose task was archived
--            before any launcher tried it, judged by its status before
--            (ENQUEUED: only if a launcher tried the executor)
-- ARGV[9] -> flagSet: the run fails because its last executor call
--            failed, which an alarm counts as a failed delivery
--            (alarm_lifecycle.lua); "" otherwise
-- ARGV[10] -> reason of a SKIPPED or FAILED run (model.RunReason; "" =
--            none)
-- ARGV[11] -> the run's schedule id as the caller knows it ("" = none)
-- ARGV[12] -> that schedule's owner as the caller read it ("" = none)
-- Output: {statusNotFound, ''}; {statusUnchanged, current} (final, or not
-- ARGV[7]); {statusChanged, new}, and a third element, the streak of
-- FAILED runs, when the run's end paused its schedule (autopause.lua);
-- {statusRetry, schedule id, owner}: ARGV[11] or ARGV[12] was not what
-- the run and its schedule hold, nothing written
local channel, key, status, execID, errText, now, from, rule, failedCall, rsn, sid, owner =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9] == flagSet, ARGV[10],
  ARGV[11], ARGV[12]
-- The run's fields, and the schedule's that any library here reads, are
-- each read once: h holds the fields of the schedule's hash that
-- alarm_lifecycle.lua, autopause.lua, release.lua and unhold.lua read,
-- and they take the values (h) instead of reading the hash again each,
-- keeping h as they write.
local r = redis.call('HMGET', KEYS[1], rfStatus, rfSchedule, rfError)
local st = r[1]
if not st then
  return {statusNotFound, ''}
end
if run_is_final(st) or (from ~= '' and st ~= from) then
  return {statusUnchanged, st}
end
-- Only a final status touches the schedule's keys: only then must the
-- caller have named them right.
local id = r[2] or ''
local h = nil
if run_is_final(status) then
  if id ~= sid then
    return {statusRetry, id, ''}
  end
  if id ~= '' then
    -- Read in two steps: the fields every end needs, then only those
    -- its case needs (the run in flight released, an alarm's state, a
    -- failure's streak). Every field HMGET names costs Redis a walk of
    -- the hash, the whole of it for a field the hash lacks, and a Lua
    -- value; a SUCCESS of a run not in flight, most runs of "allow"
    -- schedules, reads 4 where it read 13. h loads a field no step read
    -- when a library asks for it (status_fields), so a library that
    -- reads one more field stays right.
    local v = redis.call('HMGET', KEYS[4], sfTarget, sfOwner, sfFailStreak, sfInflight)
    h = setmetatable({KEYS[4], [sfTarget] = v[1], [sfOwner] = v[2], [sfFailStreak] = v[3], [sfInflight] = v[4]},
      status_fields)
    local more = {}
    if v[4] == key then
      more = {sfHeld, sfPaused, sfNext, sfJitter, sfBackfillTimeout}
    end
    if v[1] == targetWake then
      more[#more + 1] = sfKind
      more[#more + 1] = afStatus
    end
    if status == stFailed then
      more[#more + 1] = sfVer
      more[#more + 1] = sfPauseAfter
      if v[4] ~= key then
        more[#more + 1] = sfPaused
      end
    end
    if #more > 0 then
      local x = redis.call('HMGET', KEYS[4], unpack(more))
      for i, f in ipairs(more) do
        rawset(h, f, x[i])
      end
    end
    local differs, o = alarm_owner_differs(KEYS[4], owner, h)
    if differs then
      return {statusRetry, id, o}
    end
  end
end
local w = {rfStatus, status, rfUpdated, now}
if execID ~= '' then
  w[#w + 1] = rfRunID
  w[#w + 1] = execID
end
local run_err = r[3] or ''
if errText ~= '' then
  w[#w + 1] = rfError
  w[#w + 1] = errText
  run_err = errText
end
if rsn ~= '' then
  w[#w + 1] = rfReason
  w[#w + 1] = rsn
end
redis.call('HSET', KEYS[1], unpack(w))
local paused = nil
if h then
  local skey = KEYS[4]
  alarm_run_ended(skey, status, run_err, now, failedCall, KEYS[5], h)
  paused = autopause_run_ended(skey, KEYS[2], KEYS[6], id, status, run_err, now, h)
  if h[sfInflight] == key then
    local did
    if rule == releaseAbandoned then
      did = ran(st, false, run_attempts(KEYS[1]), false)
    else
      did = ran(status, rule == releaseUnplanned, 0, false)
    end
    if release(skey, id, KEYS[2], KEYS[3], did, now, KEYS[7], KEYS[8], h) then
      -- Due at once: the scheduler holding the shard plans it now, not
      -- at its next tick (Store.WatchReleased).
      redis.call('PUBLISH', channel, id)
    end
  end
end
if paused then
  return {statusChanged, status, paused}
end
return {statusChanged, status}
