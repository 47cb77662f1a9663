-- Count a failed executor attempt of a run not started yet, and when its
-- retry is due, so that the launcher retrying it knows it is a retry (late
-- by its backoff, not missed) and how late it is. A run gone or past
-- ENQUEUED is left alone. The attempt of an alarm's run is a failed
-- delivery: the alarm counts it too (alarm_lifecycle.lua).
-- KEYS[1] -> run hash
-- KEYS[2] -> the run's schedule hash; absent for a manual run
-- ARGV[1] -> now, ms
-- ARGV[2] -> when the retry is due, ms
-- ARGV[3] -> why the attempt failed, shown with the run until it ends
-- Output: attempts counted so far, or attemptNotEnqueued
local now, retryAt, why = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', KEYS[1], rfStatus) ~= stEnqueued then
  return attemptNotEnqueued
end
redis.call('HSET', KEYS[1], rfUpdated, now, rfRetryAt, retryAt, rfLastErr, why)
if KEYS[2] then
  alarm_attempt_failed(KEYS[2], why)
end
return redis.call('HINCRBY', KEYS[1], rfAttempts, 1)
