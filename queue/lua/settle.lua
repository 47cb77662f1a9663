-- Shared by pause.lua and delete.lua (loadScript puts it, after
-- run_record.lua, before them).
--
-- settle_runs(hkey, sid, runs, pending, scheduled, now, why, rsn)
-- settles the runs in schedule sid's history (hkey) that no launcher has
-- touched: ENQUEUED, no failed executor attempt, their task still
-- waiting in asynq (pending or scheduled), so no launcher holds one or
-- has called an executor for it. runs holds each member's run and task
-- keys, from the caller's KEYS (run_history_keys, run_record.lua);
-- pending and scheduled are the queue's lists; now is ms.
--
--   run_at    | then
--   ----------+---------------------------------------------------------
--   after now | removed: record, task and history entry. The time can be
--             | planned afresh: a record left there would be taken for
--             | the run of a resumed or re-created schedule at that time
--             | (commit.lua's "planned again") and never run
--   due       | recorded SKIPPED with why and reason rsn; its task
--             | finds it ended
--
-- Runs a launcher holds, retries or has ended are left to it: its own
-- check skips them when their schedule is paused or gone. A manual
-- run's record under one of the keys (another sid) is not the
-- schedule's, nor its task. It returns the settled keys as a set, and
-- how many it recorded SKIPPED.
local function settle_runs(hkey, sid, runs, pending, scheduled, now, why, rsn)
  local settled, skipped = {}, 0
  for _, k in ipairs(redis.call('ZRANGE', hkey, 0, -1)) do
    local rkey, tkey = runs[k].run, runs[k].task
    local r = redis.call('HMGET', rkey, rfStatus, rfSchedule, rfRunAt, rfAttempts)
    local state = redis.call('HGET', tkey, taskState)
    if r[1] == stEnqueued and r[2] == sid and tonumber(r[4] or '0') == 0 and
      (state == taskPending or state == taskScheduled) then
      settled[k] = true
      if tonumber(r[3] or '0') > tonumber(now) then
        if state == taskPending then
          redis.call('LREM', pending, 0, k)
        else
          redis.call('ZREM', scheduled, k)
        end
        redis.call('DEL', tkey, rkey)
        redis.call('ZREM', hkey, k)
      else
        run_end(rkey, stSkipped, why, now, rsn)
        skipped = skipped + 1
        -- A queue backfill's parked task would never be taken to find
        -- its run ended: it goes with the run's chain.
        if state == taskScheduled and tonumber(redis.call('ZSCORE', scheduled, k) or '0') >= taskParked then
          redis.call('ZREM', scheduled, k)
          redis.call('DEL', tkey)
        end
      end
    end
  end
  return settled, skipped
end
