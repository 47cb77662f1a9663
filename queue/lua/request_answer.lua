-- Record the answer of a request that claimed its Idempotency-Key
-- (request_claim.lua), or give the claim up so a retry runs again.
-- KEYS[1] -> the request hash (requestKey)
-- ARGV[1] -> digest of the request's body: only its own claim is touched
-- ARGV[2] -> HTTP status; "" gives the claim up
-- ARGV[3] -> response body
-- ARGV[4] -> how long the answer is kept, ms
-- Output: requestAnswered when written (or given up), requestNotClaimed when
-- the claim was no longer this request's
if redis.call('HGET', KEYS[1], qfBody) ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], qfStatus) == 1 then
  return requestNotClaimed
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
  return requestAnswered
end
redis.call('HSET', KEYS[1], qfStatus, ARGV[2], qfResponse, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return requestAnswered
