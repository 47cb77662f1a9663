-- Delete a workflow version's DAG and its place in the versions quota.
-- It only frees memory, so it declares allow-oom: it runs on a full
-- Redis, where deleting is how room is made.
-- KEYS[1] -> the version's key (chronos:wf:{<id>}:<version>)
-- KEYS[2] -> the set of the stored versions' keys (chronos:workflows)
-- Output: the number of keys deleted (0: no such version)
redis.call('SREM', KEYS[2], KEYS[1])
return redis.call('DEL', KEYS[1])
