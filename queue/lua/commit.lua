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
-- ARGV[6] -> manual mark prefix ("chronos:{sNN}:manual:")
-- ARGV[7] -> number of plans (ARGV[commitHeaderArgs]), then per plan
--   commitPlanArgs: id, expected next, expected inflight, expected ver,
--   new next ("" = retired), new score, new inflight key ("" =
--   unchanged), its deadline ms, hold (flagSet = hold until the
--   in-flight run ends), why a retired alarm fails ("" = not an error:
--   alarm_lifecycle.lua's alarm_retire), number of runs,
--   then per run commitRunArgs: key, run_at ms, fire_at ms, status,
--   error, asynq message ("" for a SKIPPED run), process_at unix s ("0"
--   = now), reason of a SKIPPED run (model.RunReason; "" = none)
-- Output: per plan, commitStale, else commitApplied and per run
-- runWritten, runKept (not written as planned: its record existed,
-- planned before), runTaken (recorded SKIPPED, reasonManualKeyTaken:
-- its key is taken, see below) or runCut (not applied: the plan was cut
-- short). The names are schema.go's.
local pfx, now, keep, tpfx, nowNS, mpfx = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local due_key, inflight_key = KEYS[1], KEYS[2]
local takenErr = 'skipped: its idempotency key is taken by a manual run started with it'
local trimScan = 20

-- read_plan reads the plan whose arguments start at ARGV[i], and returns
-- it and where the next plan starts.
local function read_plan(i)
  local p = {
    id = ARGV[i], expNext = ARGV[i + 1], expInfl = ARGV[i + 2], expVer = ARGV[i + 3],
    newNext = ARGV[i + 4], newScore = ARGV[i + 5], newInfl = ARGV[i + 6], deadline = ARGV[i + 7],
    hold = ARGV[i + 8] == flagSet, retire = ARGV[i + 9], runs = {},
  }
  i = i + commitPlanArgs
  for r = 1, tonumber(ARGV[i - 1]) do
    p.runs[r] = {key = ARGV[i], at = ARGV[i + 1], fire = ARGV[i + 2], st = ARGV[i + 3], err = ARGV[i + 4],
      msg = ARGV[i + 5], processAt = ARGV[i + 6], rsn = ARGV[i + 7]}
    i = i + commitRunArgs
  end
  return p, i
end

-- taken says whether a run's key is taken (run_record.lua): that run is
-- the one the key names, and this one is recorded SKIPPED, never enqueued
-- (its task would be the manual run's, or run it again). When the manual
-- run's record is in this shard it is found as existing, with another
-- sid: nothing is written, and it is never this schedule's in-flight run.
-- A plan's would-be in-flight run is asked twice (once to choose it, once
-- to write it): the answer is kept.
local takenSeen = {}
local function taken(key)
  local v = takenSeen[key]
  if v == nil then
    v = run_key_taken(mpfx .. key, tpfx .. key)
    takenSeen[key] = v
  end
  return v
end

-- choose_inflight checks the run the plan puts in flight. A run planned
-- again (after a resume, or a delete and re-create) keeps its record. If
-- the plan makes such a run the in-flight one and it has ended (or makes
-- one whose key is taken), nothing would release the schedule, and the
-- plan's later decisions (runs SKIPPED or held behind it) were made for a
-- run that is not in flight: the plan applies up to that run, and the
-- schedule is due again at the next time (next tick), to be planned with
-- nothing in flight. It returns how many runs apply and, when the plan is
-- cut short, the next time to plan from; p.newInfl is cleared if the run
-- cannot be in flight.
local function choose_inflight(p)
  if p.newInfl == '' then
    return #p.runs, nil
  end
  for r, run in ipairs(p.runs) do
    if run.key == p.newInfl then
      local rec = redis.call('HMGET', pfx .. segRun .. run.key, rfStatus, rfSchedule)
      local st, sid = rec[1], rec[2]
      if run_is_final(st) or (st and sid ~= p.id) or (not st and taken(run.key)) then
        p.newInfl = ''
        if r < #p.runs then
          return r, p.runs[r + 1].at
        elseif p.hold then
          return #p.runs, p.newNext
        end
      end
      break
    end
  end
  return #p.runs, nil
end

-- write_run writes one run of an applied plan and returns its mark. A
-- new run costs one EXISTS for its record and its key's manual mark
-- together (neither is there for almost every run) and one read of its
-- task's state, which decides both whether the key is taken and how the
-- task is written.
local function write_run(p, run, hkey)
  local rkey, tkey = pfx .. segRun .. run.key, tpfx .. run.key
  local found = redis.call('EXISTS', rkey, mpfx .. run.key)
  if found > 0 and redis.call('EXISTS', rkey) == 1 then
    if redis.call('HGET', rkey, rfSchedule) == p.id then
      -- Planned again: after a resume, or by a schedule created again
      -- while a launcher held the deleted one's run (upsert.lua removes
      -- the others). The run is this schedule's, in its history and kept
      -- with it.
      redis.call('ZADD', hkey, 'NX', run.at, run.key)
      redis.call('PERSIST', rkey)
      -- Enqueued before, SKIPPED by this plan (overlap_policy skip, a run
      -- in flight): not started. One a launcher has taken already is
      -- left as it is. (A catch-up's record of dropped runs has a key of
      -- its own: it never meets a run planned before.)
      if run.st == stSkipped and redis.call('HGET', rkey, rfStatus) == stEnqueued and
        not run_launching(stEnqueued, tkey) then
        run_end(rkey, stSkipped, run.err, now, run.rsn)
      end
    end
    return runKept
  end
  local st, err, mark, rsn = run.st, run.err, runWritten, run.rsn
  local noTask = false -- known: no task has this id
  if st == stEnqueued then
    local t = takenSeen[run.key]
    if t == nil then
      -- taken(run.key), from what is known: found counts the mark.
      local live, state = false, false -- state: false when no task (Redis's nil)
      if found == 0 then
        live, state = task_live(tkey)
      end
      t = found > 0 or live or false
      takenSeen[run.key], noTask = t, not t and not state
    end
    if t then
      st, err, mark, rsn = stSkipped, takenErr, runTaken, reasonManualKeyTaken
    end
  end
  run_create(rkey, p.id, run.at, run.fire, st, now, srcSchedule, err, nil, rsn)
  if noTask then
    enqueue_new_task(tkey, run.key, run.msg, run.processAt, nowNS, KEYS[3], KEYS[4])
  elseif st == stEnqueued then
    enqueue_task(tkey, run.key, run.msg, run.processAt, nowNS, KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  end
  redis.call('ZADD', hkey, run.at, run.key)
  return mark
end

-- trim_history trims the oldest runs beyond the history kept, except the
-- one in flight and those ENQUEUED whose tasks wait in asynq: their
-- launcher must be able to record them. STARTED runs are trimmed: an
-- executor that never reports would keep them for ever; so are ENQUEUED
-- ones whose tasks are gone, deleted or archived: no launcher comes. A
-- commit removes more runs than it adds (added), stepping over up to
-- trimScan runs it keeps: when every launcher is down, all of the oldest
-- are kept, and a commit looks at trimScan of them, no more.
local function trim_history(hkey, inflight, added)
  local n = redis.call('ZCARD', hkey)
  if n <= keep then
    return
  end
  local want = math.max(trimScan, added + 1)
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

-- advance moves the schedule on: to cutNext, released, when the plan was
-- cut short; else to its new next time (none: retired), held or due at
-- its new score.
local function advance(skey, p, cutNext)
  if cutNext then
    -- The run at cutNext was found due by this plan: planned again at
    -- the next tick, it is released (rel), not judged missed anew.
    redis.call('HSET', skey, sfNext, cutNext, sfReleased, flagSet)
    redis.call('ZADD', due_key, tonumber(now) + 1, p.id)
    return
  end
  if p.newNext == '' then
    redis.call('HDEL', skey, sfNext)
    if p.retire ~= '' then
      alarm_retire(skey, p.retire)
    end
  else
    redis.call('HSET', skey, sfNext, p.newNext)
  end
  if p.hold then
    redis.call('HSET', skey, sfHeld, flagSet)
    redis.call('ZADD', due_key, '+inf', p.id)
  else
    redis.call('ZADD', due_key, p.newScore, p.id)
  end
end

-- commit_plan applies one plan if the schedule is as the plan expects,
-- and returns its answer.
local function commit_plan(p)
  local skey = pfx .. segSched .. p.id
  local cur = redis.call('HMGET', skey, sfNext, sfInflight, sfPaused, sfHeld, sfVer, sfReleased)
  if cur[5] ~= p.expVer or (cur[1] or '') ~= p.expNext or (cur[2] or '') ~= p.expInfl or cur[3] or cur[4] then
    if not cur[5] then
      redis.call('ZREM', due_key, p.id) -- the schedule is gone
    end
    return commitStale
  end
  if cur[6] then
    redis.call('HDEL', skey, sfReleased)
  end
  local hkey = pfx .. segRuns .. p.id
  local apply, cutNext = choose_inflight(p)
  local made = {commitApplied}
  for r, run in ipairs(p.runs) do
    if r > apply then
      made[#made + 1] = runCut
    else
      made[#made + 1] = write_run(p, run, hkey)
    end
  end
  local inflight = cur[2] or ''
  if p.newInfl ~= '' then
    inflight = p.newInfl
    redis.call('HSET', skey, sfInflight, p.newInfl)
    redis.call('ZADD', inflight_key, p.deadline, p.id)
  end
  trim_history(hkey, inflight, #p.runs)
  advance(skey, p, cutNext)
  return table.concat(made)
end

local out = {}
local i = commitHeaderArgs + 1
for _ = 1, tonumber(ARGV[commitHeaderArgs]) do
  local p
  p, i = read_plan(i)
  out[#out + 1] = commit_plan(p)
end
return out
