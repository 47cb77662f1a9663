-- Fail in-flight runs that reported no final status before their deadline,
-- releasing their schedules, so a lost run never wedges a "skip" or "queue"
-- schedule.
-- KEYS[1] -> due zset
-- KEYS[2] -> in-flight zset
-- ARGV[1] -> shard key prefix ("chronos:{sNN}:")
-- ARGV[2] -> now, ms
-- ARGV[3] -> at most this many schedules
-- ARGV[4] -> error to record
-- ARGV[5] -> asynq task key prefix ("asynq:{<queue>}:t:")
-- ARGV[6] -> reason to record (model.ReasonRunTimeout)
-- Output: {idempotency keys marked FAILED, ids of the schedules that
-- paused themselves (autopause.lua)}
local pfx, now, limit, errText, tpfx, rsn = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local out, paused = {}, {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)) do
  local skey = pfx .. segSched .. id
  local inflight = redis.call('HGET', skey, sfInflight)
  if inflight then
    local rkey = pfx .. segRun .. inflight
    local st = redis.call('HGET', rkey, rfStatus)
    if st == stEnqueued or st == stStarted then
      run_end(rkey, stFailed, errText, now, rsn)
      alarm_run_ended(skey, stFailed, errText, now, false)
      if autopause_run_ended(skey, KEYS[1], id, stFailed, errText, now) then
        paused[#paused + 1] = id
      end
      out[#out + 1] = inflight
    end
    -- One a launcher holds (run_launching) was being started, as one
    -- retried is.
    local launching = run_launching(st, tpfx .. inflight)
    release(skey, id, KEYS[1], KEYS[2], ran(st, false, run_attempts(rkey), launching), now)
  else
    redis.call('ZREM', KEYS[2], id) -- a stale member: nothing in flight
  end
end
return {out, paused}
