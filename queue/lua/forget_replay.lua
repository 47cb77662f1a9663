-- Forget a resume's replay (sfReplay) once its runs are enqueued, if it
-- is still the one given: a later pause and resume may have recorded
-- another.
-- KEYS[1] -> schedule hash
-- ARGV[1] -> the replay enqueued ("from:to" ms)
-- Output: replayForgotten, or replayKept
local replay = ARGV[1]
if redis.call('HGET', KEYS[1], sfReplay) == replay then
  redis.call('HDEL', KEYS[1], sfReplay)
  return replayForgotten
end
return replayKept
