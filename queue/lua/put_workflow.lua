-- Store a workflow version's DAG within the versions quota: a new version
-- is refused once the store holds the most allowed; replacing one is not.
-- KEYS[1] -> the version's key (chronos:wf:{<id>}:<version>)
-- KEYS[2] -> the set of the stored versions' keys (chronos:workflows)
-- ARGV[1] -> the DAG
-- ARGV[2] -> the most versions stored
-- Output: the number of versions stored, negated when the put was refused
local dag, most = ARGV[1], tonumber(ARGV[2])
local n = redis.call('SCARD', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 0 and n >= most then
  return -n
end
redis.call('SET', KEYS[1], dag)
return n + redis.call('SADD', KEYS[2], KEYS[1])
