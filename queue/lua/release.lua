-- Shared by the scripts that end in-flight runs (loadScript puts it before
-- them). release frees a schedule of its in-flight run; a schedule held
-- behind that run ("queue") is due again at its act time, its next fire
-- time less its jitter (jitter is the whole act lead of a held schedule:
-- the lookahead is only for "allow"), unless it is paused. When the run
-- in flight ran (ended other than SKIPPED), the held run waited for it,
-- not for a scheduler: it is marked released (rel) and starts however
-- late, whatever the catch-up policy (the commit of its plan clears the
-- mark). After a run that never ran because it was late (SKIPPED: missed
-- at launch) the held run was missed too, and the catch-up policy applies
-- to it; after one SKIPPED because its schedule no longer plans it (paused,
-- timing changed) the held run waited for it (status.lua's ARGV[8]).
local function release(skey, id, due_key, inflight_key, ran)
  local s = redis.call('HMGET', skey, 'held', 'next', 'paused', 'j')
  redis.call('HDEL', skey, 'inflight', 'held')
  redis.call('ZREM', inflight_key, id)
  if s[1] and s[2] and not s[3] then
    if ran then
      redis.call('HSET', skey, 'rel', '1')
    end
    redis.call('ZADD', due_key, tonumber(s[2]) - tonumber(s[4] or '0'), id)
  end
end
