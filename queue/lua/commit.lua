-- Commit a page of plans atomically: run records, asynq tasks and the
-- schedules' advance, all or nothing. Each plan applies only if the
-- schedule's next time, in-flight run and definition version are still
-- what the plan was computed from (an upsert's new timing may share the
-- old next time but not later ones) and it is neither paused nor held, so
-- two replicas that planned the same page write it once. Tasks are
-- written in asynq's own layout (as its enqueue and schedule scripts do);
-- a task whose id (the idempotency key) exists is left alone.
-- KEYS[1] -> due zset
-- KEYS[2] -> in-flight zset
-- KEYS[3] -> asynq:{<queue>}:pending
-- KEYS[4] -> asynq:{<queue>}:scheduled
-- KEYS[5] -> asynq:{<queue>}:archived
-- KEYS[6] -> asynq:{<queue>}:completed
-- ARGV[1] -> shard key prefix ("chronos:{sNN}:")
-- ARGV[2] -> now, ms
-- ARGV[3] -> run history kept per schedule
-- ARGV[4] -> asynq task key prefix ("asynq:{<queue>}:t:")
-- ARGV[5] -> now, unix ns (asynq's pending_since)
-- ARGV[6] -> manual mark prefix ("chronos:{<queue>}:manual:")
-- ARGV[7] -> number of plans (ARGV[commitHeaderArgs]), then per plan
--   commitPlanArgs: id, expected next, expected inflight, expected ver,
--   new next ("" = retired), new score, new inflight key ("" =
--   unchanged), its deadline ms, hold (flagSet = hold until the
--   in-flight run ends), number of runs,
--   then per run commitRunArgs: key, run_at ms, fire_at ms, status,
--   error, asynq message ("" for a SKIPPED run), process_at unix s ("0"
--   = now)
-- Output: per plan, commitStale, else commitApplied and per run
-- runWritten, runKept (not written as planned: its record existed,
-- planned before, or its key is taken, see below) or runCut (not
-- applied: the plan was cut short). The names are schema.go's.
local pfx, now, keep, tpfx, nowNS = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local final = {[stSuccess] = true, [stFailed] = true, [stSkipped] = true}
-- taken: a manual run was started with this run's key (POST
-- /run-launcher/start; it leaves a mark for as long as its record lives),
-- or a live asynq task has the key. That run is the one the key names:
-- this one is recorded SKIPPED, never enqueued (its task would be the
-- manual run's, or run it again). (When the manual run's record is in
-- this shard it is found as existing, with another sid: nothing is
-- written, and it is never this schedule's in-flight run.)
-- A plan's would-be in-flight run is asked twice (once to choose it,
-- once to write it): the answer is kept.
local mpfx = ARGV[6]
local takenSeen = {}
local function taken(key)
  local v = takenSeen[key]
  if v == nil then
    v = redis.call('EXISTS', mpfx .. key) == 1 or task_live(tpfx .. key) or false
    takenSeen[key] = v
  end
  return v
end
local takenErr = 'skipped: its idempotency key is taken by a manual run started with it'
local trimScan = 20
local i = commitHeaderArgs + 1
local out = {}
for p = 1, tonumber(ARGV[commitHeaderArgs]) do
  local id, expNext, expInfl, expVer = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local newNext, newScore, newInfl, deadline = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local hold, nRuns = ARGV[i + 8], tonumber(ARGV[i + 9])
  i = i + commitPlanArgs
  local skey = pfx .. segSched .. id
  local cur = redis.call('HMGET', skey, sfNext, sfInflight, sfPaused, sfHeld, sfVer, sfReleased)
  if cur[5] == expVer and (cur[1] or '') == expNext and (cur[2] or '') == expInfl and not cur[3] and not cur[4] then
    if cur[6] then
      redis.call('HDEL', skey, sfReleased)
    end
    local hkey = pfx .. segRuns .. id
    -- A run planned again (after a resume, or a delete and re-create)
    -- keeps its record. If the plan makes such a run the in-flight one
    -- and it has ended (or makes one whose key is taken, see taken),
    -- nothing would release the schedule, and the
    -- plan's later decisions (runs SKIPPED or held behind it) were made
    -- for a run that is not in flight: the plan applies up to that run,
    -- and the schedule is due again at the next time (next tick), to be
    -- planned with nothing in flight.
    local apply, cutNext = nRuns, nil
    if newInfl ~= '' then
      for r = 1, nRuns do
        local j = i + (r - 1) * commitRunArgs
        if ARGV[j] == newInfl then
          local rec = redis.call('HMGET', pfx .. segRun .. newInfl, rfStatus, rfSchedule)
          local st, sid = rec[1], rec[2]
          if final[st] or (st and sid ~= id) or (not st and taken(newInfl)) then
            newInfl = ''
            if r < nRuns then
              apply, cutNext = r, ARGV[j + commitRunArgs + 1] -- the next run's run_at
            elseif hold == flagSet then
              cutNext = newNext
            end
          end
          break
        end
      end
    end
    local made = {commitApplied}
    for r = 1, nRuns do
      local key, st, err = ARGV[i], ARGV[i + 3], ARGV[i + 4]
      local rkey = pfx .. segRun .. key
      local mark = runKept
      if r > apply then
        mark = runCut
      elseif redis.call('EXISTS', rkey) == 1 then
        if redis.call('HGET', rkey, rfSchedule) == id then
          -- Planned again: after a resume, or by a schedule created
          -- again while a launcher held the deleted one's run (upsert.lua
          -- removes the others). The run is this schedule's, in its
          -- history and kept with it.
          redis.call('ZADD', hkey, 'NX', ARGV[i + 1], key)
          redis.call('PERSIST', rkey)
          -- Enqueued before, SKIPPED by this plan (overlap_policy skip,
          -- a run in flight): not started.
          -- (One a launcher has taken already is left as it is.)
          if st == stSkipped and redis.call('HGET', rkey, rfStatus) == stEnqueued and
            redis.call('HGET', tpfx .. key, 'state') ~= 'active' then
            redis.call('HSET', rkey, rfStatus, stSkipped, rfError, err, rfUpdated, now)
          end
        end
      else
        if st == stEnqueued and taken(key) then
          st, err = stSkipped, takenErr
        else
          mark = runWritten
        end
        local f = {rfSchedule, id, rfRunAt, ARGV[i + 1], rfFireAt, ARGV[i + 2], rfStatus, st, rfCreated, now, rfUpdated, now, rfSource, srcSchedule}
        if err ~= '' then
          f[#f + 1] = rfError
          f[#f + 1] = err
        end
        if st == stEnqueued then
          f[#f + 1] = rfEnqueued
          f[#f + 1] = now
          enqueue_task(tpfx .. key, key, ARGV[i + 5], ARGV[i + 6], nowNS, KEYS[3], KEYS[4], KEYS[5], KEYS[6])
        end
        redis.call('HSET', rkey, unpack(f))
        redis.call('ZADD', hkey, ARGV[i + 1], key)
      end
      made[#made + 1] = mark
      i = i + commitRunArgs
    end
    local inflight = cur[2] or ''
    if newInfl ~= '' then
      inflight = newInfl
      redis.call('HSET', skey, sfInflight, newInfl)
      redis.call('ZADD', KEYS[2], deadline, id)
    end
    -- Trim the oldest runs beyond the history kept, except the one in
    -- flight and those ENQUEUED whose tasks wait in asynq: their launcher
    -- must be able to record them. (STARTED runs are trimmed: an executor
    -- that never reports would keep them for ever; so are ENQUEUED ones
    -- whose tasks are gone, deleted or archived: no launcher comes.) A
    -- commit removes more runs than it adds, stepping over up to trimScan
    -- runs it keeps (when every launcher is down, all of the oldest are
    -- kept: a commit then looks at trimScan of them, no more).
    local n = redis.call('ZCARD', hkey)
    if n > keep then
      local want = math.max(trimScan, nRuns + 1)
      local removed, kept = 0, 0
      for _, k in ipairs(redis.call('ZRANGE', hkey, 0, math.min(n - keep, want + trimScan) - 1)) do
        if removed == want or kept == trimScan then
          break
        end
        local rkey = pfx .. segRun .. k
        if k ~= inflight and (redis.call('HGET', rkey, rfStatus) ~= stEnqueued or not task_live(tpfx .. k)) then
          redis.call('DEL', rkey)
          redis.call('ZREM', hkey, k)
          removed = removed + 1
        else
          kept = kept + 1
        end
      end
    end
    if cutNext then
      -- The run at cutNext was found due by this plan: planned again at
      -- the next tick, it is released (rel), not judged missed anew.
      redis.call('HSET', skey, sfNext, cutNext, sfReleased, flagSet)
      redis.call('ZADD', KEYS[1], tonumber(now) + 1, id)
    else
      if newNext == '' then
        redis.call('HDEL', skey, sfNext)
      else
        redis.call('HSET', skey, sfNext, newNext)
      end
      if hold == flagSet then
        redis.call('HSET', skey, sfHeld, flagSet)
        redis.call('ZADD', KEYS[1], '+inf', id)
      else
        redis.call('ZADD', KEYS[1], newScore, id)
      end
    end
    out[#out + 1] = table.concat(made)
  else
    if not cur[5] then
      redis.call('ZREM', KEYS[1], id)
    end
    i = i + commitRunArgs * nRuns
    out[#out + 1] = commitStale
  end
end
return out
