-- Record the answer of a request that claimed its Idempotency-Key
-- (request_claim.lua), or give the claim up so a retry runs again.
-- KEYS[1] -> the request hash (requestKey)
-- ARGV[1] -> digest of the request's body: only its own claim is touched
-- ARGV[2] -> HTTP status; "" gives the claim up
-- ARGV[3] -> response body
-- ARGV[4] -> how long the answer is kept, ms
-- Output: requestAnswered when written (or given up), requestNotClaimed when
-- the claim was no longer this request's
local digest, status, response, keepMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('HGET', KEYS[1], qfBody) ~= digest or redis.call('HEXISTS', KEYS[1], qfStatus) == 1 then
  return requestNotClaimed
end
if status == '' then
  redis.call('DEL', KEYS[1])
  return requestAnswered
end
redis.call('HSET', KEYS[1], qfStatus, status, qfResponse, response)
redis.call('PEXPIRE', KEYS[1], keepMs)
return requestAnswered
