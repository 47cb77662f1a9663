-- Claim a request sent with an Idempotency-Key header, or find the answer
-- of the first one. One script decides, so two requests racing with the
-- same key never both run.
-- KEYS[1] -> the request hash (requestKey)
-- ARGV[1] -> digest of this request's body
-- ARGV[2] -> how long a claim lasts unanswered, ms: a process that died
--            answering does not block the key for long
-- Output: {} when this request claimed the key, else the hash as field,
-- value pairs (qfBody, and qfStatus and qfResponse once answered)
local digest, claimMs = ARGV[1], ARGV[2]
local h = redis.call('HGETALL', KEYS[1])
if #h > 0 then
  return h
end
redis.call('HSET', KEYS[1], qfBody, digest)
redis.call('PEXPIRE', KEYS[1], claimMs)
return {}
