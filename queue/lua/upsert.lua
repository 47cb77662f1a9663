-- Create or update a schedule's definition in one round trip. The caller
-- computed the next fire time as if the timing were new; the script keeps
-- the stored next time (and anchor) when the timing key is unchanged, so a
-- concurrent scheduler commit is never undone. A body equal to the stored
-- one changes nothing, not even updated_at.
-- KEYS[1] -> schedule hash
-- KEYS[2] -> due zset
-- KEYS[3] -> run history zset
-- KEYS[4] -> the shard's version counter
-- KEYS[5] -> asynq:{<queue>}:pending
-- KEYS[6] -> asynq:{<queue>}:scheduled
-- KEYS[7] -> asynq:{<queue>}:retry
-- KEYS[8] -> asynq:{<queue>}:archived
-- KEYS[9] -> asynq:{<queue>}:completed
--            (KEYS[5] to KEYS[9] come only with a history, m > 0: only
--            settling one touches them, and four keys fewer to send and
--            check is less work on both sides for every other upsert)
-- KEYS[7+3i], KEYS[8+3i], KEYS[9+3i] (i from 1) -> the run hash, asynq
--            task hash and manual mark of the i-th history member the
--            caller read (the last m arguments): a new schedule settles
--            the runs a deleted one of its id left
-- ARGV[1] -> schedule id
-- ARGV[2] -> now, ms (created_at / updated_at)
-- ARGV[3] -> anchor, ms (used when the timing is new)
-- ARGV[4] -> next fire time in ms if the timing is new ("" = none)
-- ARGV[5] -> timing key (equal keys, equal fire times)
-- ARGV[6] -> ms subtracted from next for the act score (jitter + lookahead)
-- ARGV[7] -> the act score of ARGV[4] (next less the lead, ms; "" =
--            none), for a new schedule: computed by the caller, so the
--            script neither converts numbers nor formats the score
-- ARGV[8], ARGV[9] -> unused (were the task and mark key prefixes: every
--            key now comes in KEYS)
-- ARGV[10] -> (ARGV[upsertHeaderArgs]) the definition fields the new body
--             leaves out, their names joined by spaces: one argument,
--             split only when the schedule exists (a new one has nothing
--             to delete), not one argument each
-- ARGV[11..] -> the new definition's field, value pairs, then the m
--            history members the caller read, m = (#KEYS - 9) / 3 (0
--            when there are 4 keys)
-- Output: {upsertCreated, settled} for a new schedule, whose hash is
-- exactly the timing key, updated_at, the definition's pairs, ver,
-- created_at, anchor and next fire time (if any) the caller sent or can
-- tell, so it builds the record itself instead of reading the hash back;
-- settled is how many runs of a deleted schedule of this id it recorded
-- SKIPPED (reasonDeleted). {upsertUpdated, settled, the hash as field,
-- value pairs} for a changed one; {upsertUnchanged, 0, the hash} when the
-- body equals the stored one; {upsertIsAlarm} when the id is an agent's
-- alarm, which only its owner changes (through /v1/alarms); or
-- {upsertStale} when the id is new and its history is not what the caller
-- read, nothing written: read it and call again.
--
-- One path serves new and existing schedules. A new one costs four
-- commands (one EXISTS of its hash and history, INCR, one HSET, ZADD):
-- what the path would read back of a hash that did not exist is known
-- (nothing to delete, no jitter to compare, no hold, no pause), so every
-- such read is behind `exists`, and the fields are written in one HSET.
-- Each command saved is a few µs of Redis per upsert (issue 28).
local id, now, anchor, nextAt, timingHash, lead, act =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local omitted = ARGV[upsertHeaderArgs]
local first = upsertHeaderArgs + 1
local m = 0
if #KEYS > 4 then
  m = (#KEYS - 9) / 3
end
local last = #ARGV - m -- the definition's pairs end here
-- One EXISTS of the hash and the history tells most calls apart: none
-- (a new id without a history, which needs no history check), or both
-- (a schedule with runs). Only one of the two takes a second EXISTS.
local exists, runs = nil, nil
if m == 0 then
  local n = redis.call('EXISTS', KEYS[1], KEYS[3])
  if n == 0 then
    exists, runs = false, {}
  elseif n == 2 then
    exists = true
  end
end
if exists == nil then
  exists = redis.call('EXISTS', KEYS[1]) == 1
end
if exists and redis.call('HGET', KEYS[1], sfTarget) == targetWake then
  return {upsertIsAlarm}
end
if exists then
  local same = true
  for i = first, last, 2 do
    if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then
      same = false
      break
    end
  end
  if same then
    for f in string.gmatch(omitted, '%S+') do
      if redis.call('HEXISTS', KEYS[1], f) == 1 then
        same = false
        break
      end
    end
  end
  if same then
    return {upsertUnchanged, 0, redis.call('HGETALL', KEYS[1])}
  end
elseif not runs then
  runs = run_history_keys(KEYS[3], last + 1, m, 10, 3)
  if not runs then
    return {upsertStale}
  end
end
local timing, jitter, old = true, nil, 0
if exists then
  timing = redis.call('HGET', KEYS[1], sfTiming) ~= timingHash
  jitter = redis.call('HGET', KEYS[1], sfJitter)
  old = tonumber(redis.call('HGET', KEYS[1], sfVer) or '0')
end
-- Versions come from a counter of the shard, not the hash, so a schedule
-- deleted and created again under its id never repeats a version that
-- a plan in flight was computed from. (The max covers hashes versioned
-- before the counter existed.)
local ver = redis.call('INCR', KEYS[4])
if ver <= old then
  ver = old + 1
  redis.call('SET', KEYS[4], ver)
end
-- What goes: the fields the new body leaves out, and with a new timing a
-- released run of the old one and a next time there no longer is. What
-- is written, in one HSET (the two sets of fields are disjoint). In a
-- block: its locals are freed for what follows (a script has few).
do
  local del = {}
  if exists then
    for f in string.gmatch(omitted, '%S+') do
      del[#del + 1] = f
    end
    if timing then
      del[#del + 1] = sfReleased
      if nextAt == '' then
        del[#del + 1] = sfNext
      end
    end
  end
  if #del > 0 then
    redis.call('HDEL', KEYS[1], unpack(del))
  end
  if not exists and nextAt ~= '' then
    -- A new schedule with a next time, the common case: the same fields
    -- as below, the definition's last, without building a table of them.
    redis.call('HSET', KEYS[1], sfTiming, timingHash, sfUpdated, now, sfVer, ver, sfCreated, now,
      sfAnchor, anchor, sfNext, nextAt, unpack(ARGV, first, last))
  else
    local f = {sfTiming, timingHash, sfUpdated, now}
    for i = first, last do
      f[#f + 1] = ARGV[i]
    end
    local tail = {sfVer, ver}
    if not exists then
      tail[#tail + 1] = sfCreated
      tail[#tail + 1] = now
    end
    if timing then
      tail[#tail + 1] = sfAnchor
      tail[#tail + 1] = anchor
      if nextAt ~= '' then
        tail[#tail + 1] = sfNext
        tail[#tail + 1] = nextAt
      end
    end
    for _, v in ipairs(tail) do
      f[#f + 1] = v
    end
    redis.call('HSET', KEYS[1], unpack(f))
  end
end
local settled = 0 -- runs of a deleted schedule of this id recorded SKIPPED (reasonDeleted)
if not exists and m > 0 then
  -- A schedule deleted earlier under this id left its history to expire
  -- with its runs' records: the new one starts its own (the old records
  -- stay readable by key until they expire). Its runs that have not
  -- started (ENQUEUED, or SKIPPED: by a launcher, as its schedule was
  -- deleted) are not the new schedule's, which plans its own times by its
  -- own definition and policy: one for a time after now (enqueued ahead)
  -- is removed with its asynq task, so the new schedule can plan that time
  -- afresh (a record left there would be taken for the new run's); one
  -- due and ENQUEUED is recorded SKIPPED, as a launcher taking it would
  -- have (its task finds it ended). One a launcher holds (task active) is
  -- left to that launcher. A SKIPPED run whose key a manual run took
  -- (commit.lua's taken: the mark lives with that run) shares its key
  -- with that run's task, which stays.
  local lists = {scheduled = KEYS[6], retry = KEYS[7], archived = KEYS[8], completed = KEYS[9]}
  for _, k in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    local rkey, tkey, mkey = runs[k].run, runs[k].task, runs[k].mark
    local r = redis.call('HMGET', rkey, rfStatus, rfRunAt)
    local state = redis.call('HGET', tkey, taskState)
    if (r[1] == stEnqueued or r[1] == stSkipped) and state ~= taskActive then
      if tonumber(r[2] or '0') > tonumber(now) then
        if state and (r[1] == stEnqueued or redis.call('EXISTS', mkey) == 0) then
          if state == taskPending then
            redis.call('LREM', KEYS[5], 0, k) -- moved ahead from the dashboard
          elseif lists[state] then
            redis.call('ZREM', lists[state], k)
          end
          redis.call('DEL', tkey)
        end
        redis.call('DEL', rkey)
      elseif r[1] == stEnqueued then
        run_end(rkey, stSkipped, 'schedule deleted before the run started', now, reasonDeleted)
        settled = settled + 1
      end
    end
  end
  redis.call('DEL', KEYS[3])
end
if not exists then
  -- Neither paused nor held: a new hash has neither.
  if act ~= '' then
    redis.call('ZADD', KEYS[2], act, id)
  else
    redis.call('ZADD', KEYS[2], '+inf', id)
  end
  return {upsertCreated, settled}
end
-- A new jitter may move the next runs' fire times to before now; rs
-- (also set on resume) keeps them from being judged missed for it.
if redis.call('HGET', KEYS[1], sfJitter) ~= jitter then
  redis.call('HSET', KEYS[1], sfResumed, now)
end
-- A schedule held behind its run in flight ("queue") and changed to
-- another overlap policy waits no longer: a next time already due waited
-- for that run, so it is due now however late (rel; under "skip" it is
-- recorded SKIPPED while that run is in flight); one not due yet (a new
-- timing, or a resume) comes at its own time.
if redis.call('HGET', KEYS[1], sfHeld) and redis.call('HGET', KEYS[1], sfOverlap) ~= overlapQueue then
  unhold(KEYS[1], true, now) -- unhold.lua
end
local s = redis.call('HMGET', KEYS[1], sfNext, sfPaused, sfHeld)
if s[1] and not s[2] and not s[3] then
  redis.call('ZADD', KEYS[2], tonumber(s[1]) - tonumber(lead), id)
else
  redis.call('ZADD', KEYS[2], '+inf', id)
end
return {upsertUpdated, settled, redis.call('HGETALL', KEYS[1])}
