-- Fail in-flight runs that reported no final status before their deadline,
-- releasing their schedules, so a lost run never wedges a "skip" or "queue"
-- schedule.
-- Every key comes in KEYS. Which run a schedule has in flight, and whose
-- alarm it is, are read by the caller first (the in-flight members due,
-- then each schedule's inflight and owner fields) and named in ARGV; the
-- script checks each again and leaves a schedule whose member, run in
-- flight or owner changed since to the next call, which reads afresh.
-- KEYS[1] -> due zset
-- KEYS[2] -> in-flight zset
-- KEYS[3] -> the shard's auto-pause counter (autopause.lua)
-- KEYS[4] -> asynq:{<queue>}:scheduled of the shard's queue
-- KEYS[5i], KEYS[5i+1], KEYS[5i+2], KEYS[5i+3], KEYS[5i+4] (i from 1) ->
--            the i-th schedule's hash, the hash of its run in flight,
--            that run's asynq task hash, the owner's active set (the
--            schedule hash again for each of these three it has not) and
--            its queue backfill chain (release.lua)
-- ARGV[1] -> now, ms
-- ARGV[2] -> error to record
-- ARGV[3] -> reason to record (model.ReasonRunTimeout)
-- ARGV[3i+1], ARGV[3i+2], ARGV[3i+3] -> the i-th schedule's id, the key
--            of its run in flight as read ("" = none) and its owner as
--            read ("" = none)
-- Output: {idempotency keys marked FAILED, ids of the schedules that
-- paused themselves (autopause.lua)}
local now, errText, rsn = ARGV[1], ARGV[2], ARGV[3]
local out, paused = {}, {}
for i = 1, (#ARGV - 3) / 3 do
  local id, read, owner = ARGV[3 * i + 1], ARGV[3 * i + 2], ARGV[3 * i + 3]
  local skey, rkey, tkey, akey, bfq = KEYS[5 * i], KEYS[5 * i + 1], KEYS[5 * i + 2], KEYS[5 * i + 3], KEYS[5 * i + 4]
  local deadline = redis.call('ZSCORE', KEYS[2], id)
  local inflight = redis.call('HGET', skey, sfInflight) or ''
  if deadline and tonumber(deadline) <= tonumber(now) and inflight == read and
      not alarm_owner_differs(skey, owner) then
    if inflight ~= '' then
      local st = redis.call('HGET', rkey, rfStatus)
      if st == stEnqueued or st == stStarted then
        run_end(rkey, stFailed, errText, now, rsn)
        alarm_run_ended(skey, stFailed, errText, now, false, akey)
        if autopause_run_ended(skey, KEYS[1], KEYS[3], id, stFailed, errText, now) then
          paused[#paused + 1] = id
        end
        out[#out + 1] = inflight
      end
      -- One a launcher holds (run_launching) was being started, as one
      -- retried is.
      local launching = run_launching(st, tkey)
      release(skey, id, KEYS[1], KEYS[2], ran(st, false, run_attempts(rkey), launching), now, bfq, KEYS[4])
    else
      redis.call('ZREM', KEYS[2], id) -- a stale member: nothing in flight
    end
  end
end
return {out, paused}
