-- Read a page of due schedules with the state a plan is computed from.
-- The caller reads the page's ids first (ZRANGEBYSCORE of the due set),
-- so every schedule hash comes in KEYS; the script answers, in one
-- snapshot, those still due.
-- KEYS[1] -> due zset
-- KEYS[i+1] -> schedule hash of ARGV[i+1]
-- ARGV[1] -> act time upper bound, ms
-- ARGV[i+1] -> the i-th id the caller read due
-- Output: per schedule still due, its id, the number n of hash fields and
-- values that follow, then those n strings (n = 0 when the hash is gone:
-- the caller removes the stray member)
local until_ms = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score and tonumber(score) <= until_ms then
    local h = redis.call('HGETALL', KEYS[i])
    out[#out + 1] = id
    out[#out + 1] = tostring(#h)
    for _, v in ipairs(h) do
      out[#out + 1] = v
    end
  end
end
return out
