-- Shared by the scripts that end in-flight runs (loadScript puts it before
-- them). release frees a schedule of its in-flight run; a schedule held
-- behind that run ("queue") is due again at its act time, its next fire
-- time less its jitter (jitter is the whole act lead of a held schedule:
-- the lookahead is only for "allow"), unless it is paused.
local function release(skey, id, due_key, inflight_key)
  local s = redis.call('HMGET', skey, 'held', 'next', 'paused', 'j')
  redis.call('HDEL', skey, 'inflight', 'held')
  redis.call('ZREM', inflight_key, id)
  if s[1] and s[2] and not s[3] then
    redis.call('ZADD', due_key, tonumber(s[2]) - tonumber(s[4] or '0'), id)
  end
end
