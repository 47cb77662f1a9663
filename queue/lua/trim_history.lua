-- Trim the oldest runs of schedules' histories beyond the history kept,
-- after commit.lua named them as holding more, except the run in
-- flight and those ENQUEUED whose tasks wait in asynq: their launcher
-- must be able to record them. STARTED runs are trimmed: an executor that
-- never reports would keep them for ever; so are ENQUEUED ones whose
-- tasks are gone, deleted or archived: no launcher comes. A schedule's
-- trim removes up to want runs, stepping over up to trimScan runs it
-- keeps: when every launcher is down, all of the oldest are kept, and a
-- trim looks at trimScan of them, no more. The caller read each history's
-- size and oldest runs first; a history whose size changed since is left
-- to the schedule's next commit.
-- KEYS -> per schedule: its schedule hash, its run history zset, then per
--   candidate: the run hash, the asynq task hash
-- ARGV[1] -> trimScan
-- ARGV[2] -> number of schedules, then per schedule: the history's size
--   as read, want, number of candidates, then the candidates' ids
--   (history members), oldest first
-- Output: runs removed
local scan = tonumber(ARGV[1])
local k, a, total = 1, 3, 0
for _ = 1, tonumber(ARGV[2]) do
  local skey, hkey = KEYS[k], KEYS[k + 1]
  local size, want, c = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  k, a = k + 2, a + 3
  if redis.call('ZCARD', hkey) == size then
    local inflight = redis.call('HGET', skey, sfInflight) or ''
    local removed, kept = 0, 0
    for i = 0, c - 1 do
      if removed == want or kept == scan then
        break
      end
      local id, rkey, tkey = ARGV[a + i], KEYS[k + 2 * i], KEYS[k + 2 * i + 1]
      if redis.call('ZSCORE', hkey, id) then
        if id ~= inflight and (redis.call('HGET', rkey, rfStatus) ~= stEnqueued or not task_live(tkey)) then
          redis.call('DEL', rkey)
          redis.call('ZREM', hkey, id)
          removed = removed + 1
        else
          kept = kept + 1
        end
      end
    end
    total = total + removed
  end
  k, a = k + 2 * c, a + c
end
return total
