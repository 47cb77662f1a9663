-- Pause or resume a schedule. Resuming does not catch up on the paused time:
-- the schedule continues at its next fire time after now. Pausing settles
-- the runs no launcher has taken yet (settle.lua), in the same step: the
-- schedule never shows a run queued ahead that will not run.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> in-flight zset
-- KEYS[4] -> run history zset of the schedule
-- KEYS[5] -> asynq:{<queue>}:pending
-- KEYS[6] -> asynq:{<queue>}:scheduled
-- KEYS[7] -> the schedule's queue backfill chain (release.lua): a pause
--            settles its runs and ends it
-- KEYS[6+2i], KEYS[7+2i] -> on pause: the run hash and asynq task hash of
--            ARGV[11+i], the i-th member of the history as the caller read
--            it
-- ARGV[1] -> schedule id
-- ARGV[2] -> "1" pause, "0" resume
-- ARGV[3] -> on resume: next fire time in ms after now ("" = none)
-- ARGV[4] -> on resume: act score
-- ARGV[5] -> on resume: the definition version ARGV[3] was computed from
-- ARGV[6] -> now, ms: on resume, kept as rs (resumed at), before which no
--            run of the schedule's new next time fires (see DueSchedule)
-- ARGV[7], ARGV[8] -> unused (were the run and task key prefixes: every
--            key now comes in KEYS)
-- ARGV[9] -> on pause: the caller's note ("" = none), kept with why
--            (pausedManual) and when until the resume
-- ARGV[10] -> on resume: the paused time to replay, "from:to" ms ("" =
--            none), kept (sfReplay) until its runs are enqueued
--            (Store.Resume); resuming clears the failure streak
--            (autopause.lua)
-- ARGV[11] -> on pause: n, the number of history members the caller read
-- ARGV[12..11+n] -> those members (idempotency keys), in order
-- Output: pauseNotFound, pauseStale (the definition, or on pause the
-- history, changed since: read it again), pauseSame (already in that state) or pauseChanged; a pause
-- answers {pauseChanged, the runs it recorded SKIPPED (reasonPaused)}. An
-- agent's alarm is not the registrar's to pause: it is not found.
local id, pause, nextAt, score, ver, now, note, replay =
  ARGV[1], ARGV[2] == flagSet, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[9], ARGV[10]
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], sfTarget) == targetWake then
  return pauseNotFound
end
local st = redis.call('HMGET', KEYS[1], sfPaused, sfHeld, sfVer)
if pause then
  if st[1] then return pauseSame end
  local runs = run_history_keys(KEYS[4], 12, tonumber(ARGV[11] or '0'), 8, 2)
  if not runs then return pauseStale end
  redis.call('HSET', KEYS[1], sfPaused, flagSet, sfPausedWhy, pausedManual, sfPausedAt, now)
  if note ~= '' then
    redis.call('HSET', KEYS[1], sfPausedNote, note)
  else
    redis.call('HDEL', KEYS[1], sfPausedNote)
  end
  redis.call('ZADD', KEYS[2], '+inf', id)
  -- A run in flight that settles never ran: the schedule is freed of it
  -- as a launcher skipping it would (release.lua, paused: the hold is
  -- cleared and resume plans the next time).
  local settled, skipped = settle_runs(KEYS[4], id, runs, KEYS[5], KEYS[6], now,
    'schedule paused before the run started', reasonPaused)
  redis.call('DEL', KEYS[7])
  local infl = redis.call('HGET', KEYS[1], sfInflight)
  if infl and settled[infl] then
    release(KEYS[1], id, KEYS[2], KEYS[3], true, now, KEYS[7], KEYS[6])
  end
  return {pauseChanged, skipped}
end
if not st[1] then return pauseSame end
if (st[3] or '') ~= ver then return pauseStale end
redis.call('HDEL', KEYS[1], sfPaused, sfReleased) -- next is a new time: not one released
redis.call('HDEL', KEYS[1], sfPausedWhy, sfPausedNote, sfPausedAt, sfFailStreak)
if replay ~= '' then
  redis.call('HSET', KEYS[1], sfReplay, replay)
end
redis.call('HSET', KEYS[1], sfResumed, now)
if nextAt == '' then
  redis.call('HDEL', KEYS[1], sfNext)
else
  redis.call('HSET', KEYS[1], sfNext, nextAt)
end
if st[2] or nextAt == '' then
  redis.call('ZADD', KEYS[2], '+inf', id)
else
  redis.call('ZADD', KEYS[2], score, id)
end
return pauseChanged
