-- Create a manual run and its asynq task atomically, unless the key exists
-- or is taken (run_record.lua's run_key_taken: a live task holds it, a
-- schedule's run committed since the caller looked), and mark the key
-- taken for as long as the record lives.
-- KEYS[1] -> run hash
-- KEYS[2] -> asynq:{<queue>}:pending
-- KEYS[3] -> asynq:{<queue>}:scheduled
-- KEYS[4] -> asynq:{<queue>}:archived
-- KEYS[5] -> asynq:{<queue>}:completed
-- KEYS[6] -> the key's manual mark (chronos:{sNN}:manual:<key>)
-- KEYS[7] -> the run's asynq task hash (asynq:{<queue>}:t:<key>)
-- KEYS[8] -> the shard's runs-made counter (runsMadeKey), incremented
--            with the run: a scheduler's fast path watches it
-- ARGV[1] -> idempotency key
-- ARGV[2] -> scheduled_for, ms
-- ARGV[3] -> now, ms
-- ARGV[4] -> record TTL, seconds (retention past scheduled_for, at most
--            maxRecordTTL)
-- ARGV[5] -> unused (was the task key prefix; the task is KEYS[7])
-- ARGV[6] -> now, unix ns
-- ARGV[7] -> asynq message
-- ARGV[8] -> process_at unix s ("0" = now)
-- ARGV[9] -> this call's nonce, kept in the record (req): this call's
--            script run again by the client after a lost reply finds the
--            run it created
-- Output: manualCreated, manualExists, or manualKeyHeld (a live task,
-- another run's, holds the key)
local key, scheduledFor, now, ttl, _, nowNS, msg, processAt, nonce =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], rfRequest) == nonce then
    return manualCreated
  end
  return manualExists
end
if run_key_taken(KEYS[6], KEYS[7]) then
  return manualKeyHeld
end
run_create(KEYS[1], '', scheduledFor, scheduledFor, stEnqueued, now, srcManual, nil, nonce)
-- Both expire together: Redis's clock stands still while a script runs.
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('SET', KEYS[6], flagSet, 'EX', ttl)
enqueue_task(KEYS[7], key, msg, processAt, nowNS, KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('INCR', KEYS[8])
return manualCreated
