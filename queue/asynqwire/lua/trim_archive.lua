-- Trim asynq's archived set as asynq's archive script does after each
-- task it archives: tasks archived at or before ARGV[1], and all but the
-- ARGV[2] latest, are deleted with their task hashes.
-- Every key comes in KEYS: the caller reads which ids those are first
-- and names them with their task keys. The script works out the ids to
-- drop again and drops those it was given; the others (archived since
-- the read) it leaves, and says how many, for the caller to read again.
-- KEYS[1] -> asynq:{<queue>}:archived
-- KEYS[1+i] -> asynq:{<queue>}:t:<ARGV[2+i]>
-- ARGV[1] -> drop tasks scored at or before this, unix s
-- ARGV[2] -> most tasks kept
-- ARGV[3...] -> the ids read to drop
-- Output: how many ids to drop were not given (left for another call)
local given = {}
for i = 3, #ARGV do
  given[ARGV[i]] = KEYS[i - 1]
end
local left = 0
for _, drop in ipairs({
  redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE'),
  redis.call('ZRANGE', KEYS[1], 0, -tonumber(ARGV[2]) - 1),
}) do
  local gone = {}
  for _, id in ipairs(drop) do
    if given[id] then
      redis.call('DEL', given[id])
      gone[#gone + 1] = id
    else
      left = left + 1
    end
  end
  if #gone > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
  end
end
return left
