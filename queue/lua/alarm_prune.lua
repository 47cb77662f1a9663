-- Drop from an owner's active set the ids whose alarm is no longer
-- active: ended before the run lifecycle kept the set, or deleted. Run by
-- a create that found the owner at the limit, which read the set and
-- passes the alarms to look at in KEYS; each is checked here. Bounded by
-- the limit.
-- KEYS[1] -> the owner's active set
-- KEYS[i+1] -> schedule hash of ARGV[i]
-- ARGV[i] -> an id the caller read in the set
-- Output: the number of ids dropped
local dropped = 0
for i, m in ipairs(ARGV) do
  local h = redis.call('HMGET', KEYS[i + 1], afStatus, sfCreated)
  if not h[2] or (h[1] and h[1] ~= alarmActive) then
    dropped = dropped + redis.call('SREM', KEYS[1], m)
  end
end
return dropped
