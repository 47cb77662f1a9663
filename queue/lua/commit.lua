-- Commit a page of plans atomically: run records, asynq tasks and the
-- schedules' advance, all or nothing. Each plan applies only if the
-- schedule's next time, in-flight run and definition version are still
-- what the plan was computed from (an upsert's new timing may share the
-- old next time but not later ones) and it is neither paused nor held, so
-- two replicas that planned the same page write it once. Tasks are
-- written in asynq's own layout (as its enqueue and schedule scripts do);
-- a task whose id (the idempotency key) exists is left alone. Every key
-- comes in KEYS; ids are read back from their keys, so none is sent twice.
-- KEYS[1] -> due zset
-- KEYS[2] -> in-flight zset
-- KEYS[3] -> asynq:{<queue>}:pending
-- KEYS[4] -> asynq:{<queue>}:scheduled
-- KEYS[5] -> asynq:{<queue>}:archived
-- KEYS[6] -> asynq:{<queue>}:completed
-- then per plan: its schedule hash, its run history zset, the owner's
--   active-alarm set when the plan retires with a reason (ARGV below),
--   then per run: the run hash, the asynq task hash, the manual mark
-- ARGV[1] -> now, ms
-- ARGV[2] -> run history kept per schedule
-- ARGV[3] -> now, unix ns (asynq's pending_since)
-- ARGV[4] -> length of a schedule key's prefix (its id follows)
-- ARGV[5] -> length of a task key's prefix (its id, the run's key, follows)
-- ARGV[6] -> number of plans (ARGV[commitHeaderArgs]), then per plan
--   commitPlanArgs: expected next, expected inflight, expected ver,
--   new next ("" = retired), new score, new inflight key ("" =
--   unchanged), its deadline ms, hold (flagSet = hold until the
--   in-flight run ends), why a retired alarm fails ("" = not an error:
--   alarm_lifecycle.lua's alarm_retire), number of runs,
--   then per run commitRunArgs: run_at ms, fire_at ms, status, error,
--   asynq message ("" for a SKIPPED run), process_at unix s ("0" = now),
--   reason of a SKIPPED run (model.RunReason; "" = none)
-- Output: per plan, commitStale, else commitApplied and per run
-- runWritten, runKept (not written as planned: its record existed,
-- planned before), runTaken (recorded SKIPPED, reasonManualKeyTaken:
-- its key is taken, see below) or runCut (not applied: the plan was cut
-- short); then one more element: the numbers of the applied plans whose
-- histories hold more runs than kept (the caller trims them:
-- trim_history.lua). The names are schema.go's.
-- The body is a function: its locals do not count against the main
-- chunk's limit of 200, which the prelude and libraries fill.
return (function()
local now, keep, nowNS = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local skeyPfx, tkeyPfx = tonumber(ARGV[4]), tonumber(ARGV[5])
local due_key, inflight_key = KEYS[1], KEYS[2]
local takenErr = 'skipped: its idempotency key is taken by a manual run started with it'

-- Each plan's arguments, read once: where its run arguments (ra) and run
-- keys (rk) start. Run r's arguments are ARGV[ra + (r-1)*commitRunArgs ..]
-- and its keys KEYS[rk + 3*(r-1) ..]: run hash, task hash, manual mark.
local plans = {}
do
  local a, k = commitHeaderArgs + 1, 7 -- after the six keys above
  for n = 1, tonumber(ARGV[commitHeaderArgs]) do
    local p = {a = a, skey = KEYS[k], hkey = KEYS[k + 1], retire = ARGV[a + 8]}
    k = k + 2
    if p.retire ~= '' then
      p.active = KEYS[k]
      k = k + 1
    end
    p.nruns = tonumber(ARGV[a + 9])
    p.ra, p.rk = a + commitPlanArgs, k
    a = p.ra + p.nruns * commitRunArgs
    k = k + 3 * p.nruns
    plans[n] = p
  end
end

-- fresh says that none of the page's runs has a record, a manual mark or
-- a task: one EXISTS over all their keys, before anything is written,
-- instead of two reads per run. No plan writes another plan's run keys,
-- so the answer holds for each run until its own write. Almost every
-- page is fresh; any other takes the careful path below for every run.
local fresh = true
do
  local batch = {}
  for _, p in ipairs(plans) do
    for i = p.rk, p.rk + 3 * p.nruns - 1 do
      batch[#batch + 1] = KEYS[i]
      if #batch == 3000 then
        if redis.call('EXISTS', unpack(batch)) > 0 then
          fresh = false
        end
        batch = {}
      end
    end
  end
  if fresh and #batch > 0 and redis.call('EXISTS', unpack(batch)) > 0 then
    fresh = false
  end
end

-- The writes every plan makes to the same keys go out once, at the end:
-- ids pushed to asynq's pending list, tasks added to its scheduled set,
-- schedules' new scores in the due set.
local pending, scheduled, due = {}, {}, {}

-- trims are the numbers of the plans whose histories hold more runs than
-- kept.
local trims = {}

-- taken says whether a run's key is taken (run_record.lua): that run is
-- the one the key names, and this one is recorded SKIPPED, never enqueued
-- (its task would be the manual run's, or run it again). When the manual
-- run's record is in this shard it is found as existing, with another
-- sid: nothing is written, and it is never this schedule's in-flight run.
-- A plan's would-be in-flight run is asked twice (once to choose it, once
-- to write it): the answer is kept.
local takenSeen = {}
local function taken(rk)
  local key = KEYS[rk]
  local v = takenSeen[key]
  if v == nil then
    v = run_key_taken(KEYS[rk + 2], KEYS[rk + 1])
    takenSeen[key] = v
  end
  return v
end

-- run_id is the idempotency key of the run whose keys start at KEYS[rk].
local function run_id(rk)
  return string.sub(KEYS[rk + 1], tkeyPfx + 1)
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
-- cannot be in flight. On a fresh page no run has a record or is taken.
local function choose_inflight(p)
  if p.newInfl == '' or fresh then
    return p.nruns, nil
  end
  for r = 1, p.nruns do
    local rk = p.rk + 3 * (r - 1)
    if run_id(rk) == p.newInfl then
      local rec = redis.call('HMGET', KEYS[rk], rfStatus, rfSchedule)
      local st, sid = rec[1], rec[2]
      if run_is_final(st) or (st and sid ~= p.id) or (not st and taken(rk)) then
        p.newInfl = ''
        if r < p.nruns then
          return r, ARGV[p.ra + r * commitRunArgs]
        elseif p.hold then
          return p.nruns, p.newNext
        end
      end
      break
    end
  end
  return p.nruns, nil
end

-- write_task writes a new task (no task has its id) as enqueue_task.lua
-- does, its id pushed to the pending list or added to the scheduled set
-- with the page's others.
local function write_task(tkey, id, msg, processAt)
  if processAt == '0' then
    redis.call('HSET', tkey, 'msg', msg, taskState, taskPending, 'pending_since', nowNS)
    pending[#pending + 1] = id
  else
    redis.call('HSET', tkey, 'msg', msg, taskState, taskScheduled)
    scheduled[#scheduled + 1] = processAt
    scheduled[#scheduled + 1] = id
  end
end

-- write_run writes the run whose arguments start at ARGV[ra] and keys at
-- KEYS[rk], of an applied plan, and returns its mark. On a fresh page a
-- run costs its record, its task and its history entry; otherwise one
-- EXISTS for its record and its key's manual mark together (neither is
-- there for almost every run) and one read of its task's state, which
-- decides both whether the key is taken and how the task is written.
local function write_run(p, ra, rk)
  local rkey, tkey, id = KEYS[rk], KEYS[rk + 1], run_id(rk)
  local at, st, err, rsn = ARGV[ra], ARGV[ra + 2], ARGV[ra + 3], ARGV[ra + 6]
  local found = 0
  if not fresh then
    found = redis.call('EXISTS', rkey, KEYS[rk + 2])
  end
  if found > 0 and redis.call('EXISTS', rkey) == 1 then
    if redis.call('HGET', rkey, rfSchedule) == p.id then
      -- Planned again: after a resume, or by a schedule created again
      -- while a launcher held the deleted one's run (upsert.lua removes
      -- the others). The run is this schedule's, in its history and kept
      -- with it.
      redis.call('ZADD', p.hkey, 'NX', at, id)
      redis.call('PERSIST', rkey)
      -- Enqueued before, SKIPPED by this plan (overlap_policy skip, a run
      -- in flight): not started. One a launcher has taken already is
      -- left as it is. A catch-up's record of dropped runs is a record
      -- only: it never ends a run planned before.
      if st == stSkipped and rsn ~= reasonCatchupDropped and redis.call('HGET', rkey, rfStatus) == stEnqueued and
        not run_launching(stEnqueued, tkey) then
        run_end(rkey, stSkipped, err, now, rsn)
      end
    end
    return runKept
  end
  local mark = runWritten
  local noTask = fresh -- known: no task has this id
  if st == stEnqueued and not fresh then
    local t = takenSeen[rkey]
    if t == nil then
      -- taken(rk), from what is known: found counts the mark.
      local live, state = false, false -- state: false when no task (Redis's nil)
      if found == 0 then
        live, state = task_live(tkey)
      end
      t = found > 0 or live or false
      takenSeen[rkey], noTask = t, not t and not state
    end
    if t then
      st, err, mark, rsn = stSkipped, takenErr, runTaken, reasonManualKeyTaken
    end
  end
  run_create(rkey, p.id, at, ARGV[ra + 1], st, now, srcSchedule, err, nil, rsn)
  if st == stEnqueued then
    if noTask then
      write_task(tkey, id, ARGV[ra + 4], ARGV[ra + 5])
    else
      enqueue_task(tkey, id, ARGV[ra + 4], ARGV[ra + 5], nowNS, KEYS[3], KEYS[4], KEYS[5], KEYS[6])
    end
  end
  redis.call('ZADD', p.hkey, at, id)
  return mark
end

-- advance moves the schedule on: to cutNext, released, when the plan was
-- cut short; else to its new next time (none: retired), held or due at
-- its new score. fields are the schedule's fields the plan sets already
-- (its run in flight), written with these in one HSET.
local function advance(p, cutNext, fields)
  local skey = p.skey
  if cutNext then
    -- The run at cutNext was found due by this plan: planned again at
    -- the next tick, it is released (rel), not judged missed anew.
    fields[#fields + 1], fields[#fields + 2] = sfNext, cutNext
    fields[#fields + 1], fields[#fields + 2] = sfReleased, flagSet
    redis.call('HSET', skey, unpack(fields))
    due[#due + 1], due[#due + 2] = tonumber(now) + 1, p.id
    return
  end
  if p.newNext == '' then
    redis.call('HDEL', skey, sfNext)
    if p.retire ~= '' then
      alarm_retire(skey, p.retire, p.active)
    end
  else
    fields[#fields + 1], fields[#fields + 2] = sfNext, p.newNext
  end
  if p.hold then
    fields[#fields + 1], fields[#fields + 2] = sfHeld, flagSet
    due[#due + 1], due[#due + 2] = '+inf', p.id
  else
    due[#due + 1], due[#due + 2] = p.newScore, p.id
  end
  if #fields > 0 then
    redis.call('HSET', skey, unpack(fields))
  end
end

-- commit_plan applies plan n, p, if the schedule is as the plan expects,
-- and returns its answer.
local function commit_plan(n, p)
  local a = p.a
  p.id = string.sub(p.skey, skeyPfx + 1)
  local cur = redis.call('HMGET', p.skey, sfNext, sfInflight, sfPaused, sfHeld, sfVer, sfReleased)
  if cur[5] ~= ARGV[a + 2] or (cur[1] or '') ~= ARGV[a] or (cur[2] or '') ~= ARGV[a + 1] or cur[3] or cur[4] then
    if not cur[5] then
      redis.call('ZREM', due_key, p.id) -- the schedule is gone
    end
    return commitStale
  end
  if cur[6] then
    redis.call('HDEL', p.skey, sfReleased)
  end
  p.newNext, p.newScore, p.newInfl, p.hold = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 7] == flagSet
  local apply, cutNext = choose_inflight(p)
  local made = {commitApplied}
  for r = 1, p.nruns do
    if r > apply then
      made[#made + 1] = runCut
    else
      made[#made + 1] = write_run(p, p.ra + (r - 1) * commitRunArgs, p.rk + 3 * (r - 1))
    end
  end
  local fields = {}
  if p.newInfl ~= '' then
    fields[1], fields[2] = sfInflight, p.newInfl
    redis.call('ZADD', inflight_key, ARGV[a + 6], p.id)
  end
  if p.nruns > 0 and redis.call('ZCARD', p.hkey) > keep then
    trims[#trims + 1] = n
  end
  advance(p, cutNext, fields)
  return table.concat(made)
end

-- push sends cmd key args... in calls of at most 1,000 arguments each
-- (Lua's unpack has a bound), step arguments at a time.
local function push(cmd, key, args, step)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

local out = {}
for n, p in ipairs(plans) do
  out[n] = commit_plan(n, p)
end
push('LPUSH', KEYS[3], pending)
push('ZADD', KEYS[4], scheduled)
push('ZADD', due_key, due)
out[#plans + 1] = trims
return out
end)()
