-- Create a page of a schedule's backfill runs (POST /schedules/:id/backfill,
-- a resume's replay) atomically, each only if absent: as commit.lua's
-- write_run, a run whose record exists is left alone (it ran, or is
-- planned, or an earlier backfill made it), and one whose key is taken
-- (run_record.lua's run_key_taken: a manual run's mark, a live task) is
-- not written. A run older than the oldest record of a full history
-- (trimmed records may have been its own) is not written either. So two
-- backfills of one range, at once or one after the other, write each run
-- once. The schedule must still have the definition version the times
-- were computed from, and not be paused. In dry-run mode it decides each
-- run the same way and writes nothing: the dry run's answer is this
-- script's, never a second copy of its rules.
-- Under overlap_policy skip a run it would write starts only when no run
-- of the schedule is in flight (sfInflight): the first becomes the
-- schedule's run in flight, with a deadline in the in-flight zset, so the
-- scripts that end runs release the schedule (status.lua,
-- expire_inflight.lua) as they release its own runs, and the rest are
-- recorded SKIPPED, reason overlap, naming the run in flight: in a
-- backfill every run of the range is due at once.
-- Under overlap_policy queue the first run it writes starts as under
-- skip when no run is in flight; every other one is written with its
-- task parked (taskParked) and chained behind the run in flight
-- (KEYS[8], in the order written, after the runs chained before): the
-- release of each run in flight starts the next (release.lua).
-- KEYS[1] -> schedule hash
-- KEYS[2] -> run history zset of the schedule
-- KEYS[3] -> asynq:{<queue>}:pending
-- KEYS[4] -> asynq:{<queue>}:scheduled
-- KEYS[5] -> asynq:{<queue>}:archived
-- KEYS[6] -> asynq:{<queue>}:completed
-- KEYS[7] -> in-flight zset of the shard
-- KEYS[8] -> the schedule's queue backfill chain (backfillQueueKey)
-- KEYS[9] -> the shard's runs-made counter (runsMadeKey), incremented
--   once when the call writes a run: a scheduler's fast path watches it
-- then per run (backfillRunKeys): its run hash, its asynq task hash, its
--   manual mark (chronos:{sNN}:manual:<key>)
-- ARGV[1] -> schedule id
-- ARGV[2] -> the definition version the times were computed from
-- ARGV[3] -> now, ms
-- ARGV[4] -> now, unix ns (asynq's pending_since)
-- ARGV[5] -> run history kept per schedule
-- ARGV[6] -> flagSet: dry run, write nothing; "" to write
-- ARGV[7] -> flagSet: overlap_policy skip; "" for allow
-- ARGV[8] -> under skip, the deadline of the run put in flight, ms
-- ARGV[9] -> under skip, the reason of a run skipped (model.ReasonOverlap)
-- ARGV[10] -> flagSet: overlap_policy queue; "" otherwise
-- ARGV[11] -> under queue, the run timeout of a chained run, ms
-- then per run (backfillRunArgs): idempotency key, run_at ms, fire_at ms,
--   asynq message, process_at unix s ("0" = now); a dry run reads only
--   the key and run_at
-- Output: backfillNotFound, backfillStale or backfillPaused; else a
-- table: a string of one mark per run, runWritten (written, or in a dry
-- run would be), runKept (its record exists), runTaken,
-- runBeforeHistory, runOverlapped (recorded SKIPPED, or in a dry run
-- would be) or runQueued (written and chained, or in a dry run would
-- be); then per run its record's status and source ("" and
-- "" when it had none). The history is trimmed by commit.lua.
-- The body is a function: its locals do not add to the prelude's at the
-- top level, which Lua bounds (200), and miniredis's Lua sooner.
local function backfill()
  local id, ver, now, nowNS, keep, dry = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6] == flagSet
  local skip, deadline, skipWhy, queue, timeout = ARGV[7] == flagSet, ARGV[8], ARGV[9], ARGV[10] == flagSet, ARGV[11]
  local s = redis.call('HMGET', KEYS[1], sfVer, sfPaused, sfTarget, sfInflight)
  if not s[1] or s[3] == targetWake then
    return backfillNotFound
  end
  if s[1] ~= ver then
    return backfillStale
  end
  if s[2] then
    return backfillPaused
  end
  -- The history is full when it holds the records kept: a time before its
  -- oldest may have run, its record trimmed since.
  local horizon = nil
  if redis.call('ZCARD', KEYS[2]) >= keep then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    horizon = tonumber(oldest[2])
  end
  -- Under skip, the run in flight that the runs to write are skipped
  -- for; under queue, the one they wait behind.
  local blocker = (skip or queue) and s[4] or nil
  -- Under queue, the earliest start of the chain's last run: a run
  -- chained now starts after it.
  local last = nil
  if queue then
    local tail = redis.call('ZRANGE', KEYS[8], -1, -1, 'WITHSCORES')
    last = tonumber(tail[2] or '0')
  end
  local marks, out, made = {}, {''}, false
  local nruns = (#ARGV - backfillHeaderArgs) / backfillRunArgs
  for r = 0, nruns - 1 do
    local a = backfillHeaderArgs + r * backfillRunArgs
    local k = backfillHeaderKeys + r * backfillRunKeys
    local key, at, fire, msg, processAt = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
    local rkey, tkey, mkey = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
    local mark = runWritten
    local rec = redis.call('HMGET', rkey, rfStatus, rfSource)
    if rec[1] then
      mark = runKept
    elseif horizon and tonumber(at) < horizon then
      mark = runBeforeHistory
    elseif run_key_taken(mkey, tkey) then
      mark = runTaken
    elseif blocker and queue then
      mark = runQueued
      if not dry then
        local earliest = math.max(tonumber(fire), last + 1)
        last = earliest
        run_create(rkey, id, at, earliest, stEnqueued, now, srcBackfill, nil)
        made = true
        enqueue_task(tkey, key, msg, taskParked, nowNS, KEYS[3], KEYS[4], KEYS[5], KEYS[6])
        redis.call('ZADD', KEYS[2], at, key)
        redis.call('ZADD', KEYS[8], earliest, key)
        redis.call('HSET', KEYS[1], sfBackfillTimeout, timeout)
      end
    elseif blocker then
      mark = runOverlapped
      if not dry then
        made = true
        run_create(rkey, id, at, fire, stSkipped, now, srcBackfill,
          'skipped: run ' .. blocker .. ' is still in flight (backfill overlap_policy skip)', nil, skipWhy)
        redis.call('ZADD', KEYS[2], at, key)
      end
    else
      if not dry then
        run_create(rkey, id, at, fire, stEnqueued, now, srcBackfill, nil)
        made = true
        enqueue_task(tkey, key, msg, processAt, nowNS, KEYS[3], KEYS[4], KEYS[5], KEYS[6])
        redis.call('ZADD', KEYS[2], at, key)
        if skip or queue then
          redis.call('HSET', KEYS[1], sfInflight, key)
          redis.call('ZADD', KEYS[7], deadline, id)
        end
      end
      if skip or queue then
        blocker = key
      end
    end
    marks[#marks + 1] = mark
    out[#out + 1] = rec[1] or ''
    out[#out + 1] = rec[2] or ''
  end
  out[1] = table.concat(marks)
  if made then
    redis.call('INCR', KEYS[9])
  end
  return out
end

return backfill()
