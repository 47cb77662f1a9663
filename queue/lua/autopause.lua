-- Shared by the scripts that end runs (loadScript puts it before them):
-- status.lua and expire_inflight.lua. A registrar's schedule counts its
-- FAILED runs in a row (sfFailStreak) and, with pause_after_failures
-- (sfPauseAfter), pauses itself when they reach it, in the script that
-- ends the run: the count, the pause and the runs never disagree, however
-- a process dies. A schedule without pause_after_failures keeps no count;
-- an alarm is left to alarm_lifecycle.lua.
--
--   the run ends | the schedule
--   -------------+----------------------------------------------------------
--   SUCCESS      | streak cleared
--   FAILED       | with pause_after_failures: streak + 1, fe = the run's
--                | error; when the streak reaches
--                | pause_after_failures and it is not paused: paused (pw
--                | pausedFailures, pn, pa = now), due never, the shard's
--                | autopaused counter + 1
--   SKIPPED      | unchanged: it did not run
--
-- A run held in flight is released by the caller after this (release.lua
-- sees it paused); runs queued ahead are skipped by their launcher
-- (paused). Resuming clears the streak (pause.lua).

-- autopause_run_ended applies the end of one of its runs (final status
-- st, error err, at now ms) to the schedule id at skey, whose shard's due
-- set is due_key and auto-pause counter counter_key. It returns the
-- streak when it paused the schedule, else nil. h: the schedule's fields
-- read once by the caller (alarm_lifecycle.lua), or nil.
local function autopause_run_ended(skey, due_key, counter_key, id, st, err, now, h)
  if st == stSuccess then
    local streak
    if h then
      streak = h[sfFailStreak]
    else
      streak = redis.call('HEXISTS', skey, sfFailStreak) == 1
    end
    if streak then
      redis.call('HDEL', skey, sfFailStreak)
      if h then
        h[sfFailStreak] = false
      end
    end
    return nil
  end
  if st ~= stFailed then
    return nil
  end
  local s
  if h then
    s = {h[sfVer], h[sfTarget], h[sfPauseAfter], h[sfPaused]}
  else
    s = redis.call('HMGET', skey, sfVer, sfTarget, sfPauseAfter, sfPaused)
  end
  local limit = tonumber(s[3] or '0')
  if not s[1] or s[2] == targetWake or limit < 1 then
    return nil
  end
  local n = redis.call('HINCRBY', skey, sfFailStreak, 1)
  redis.call('HSET', skey, sfFailErr, err)
  if h then
    h[sfFailStreak] = tostring(n)
  end
  if n < limit or s[4] then
    return nil
  end
  redis.call('HSET', skey, sfPaused, flagSet, sfPausedWhy, pausedFailures, sfPausedAt, now,
    sfPausedNote, 'paused after ' .. n .. ' consecutive FAILED runs (pause_after_failures ' .. limit .. ')')
  if h then
    -- release.lua, after this, must see the schedule paused.
    h[sfPaused] = flagSet
  end
  redis.call('ZADD', due_key, '+inf', id)
  redis.call('INCR', counter_key)
  return n
end
