-- Record the status of a run a launcher started (status.lua) and finish
-- its task as done (asynqwire's finish_task.lua) in one call: a
-- launched run's two writes, which were two script calls, each with its
-- own reads and replies. Both or neither: a launcher that dies before
-- the call leaves the task held and the run as it was, which asynq's
-- recovery and the run's status then decide as before.
-- When the status script answers statusRetry (it wrote nothing: the
-- caller named the wrong schedule or owner), the task is not finished
-- either; the caller calls again with the keys it was answered.
-- KEYS[1..8] -> status.lua's KEYS
-- KEYS[9..16] -> finish_task.lua's KEYS (asynqwire.Task.FinishCall)
-- ARGV[1..12] -> status.lua's ARGV
-- ARGV[13..17] -> finish_task.lua's ARGV
-- Output: {finished, status.lua's output...}: finished is finish_task's
-- output (1 finished, 0 the task was no longer held), statusDoneNotFinished
-- when it was not called
local res = status_main({unpack(KEYS, 1, 8)}, {unpack(ARGV, 1, 12)})
if res[1] == statusRetry then
  return {statusDoneNotFinished, unpack(res)}
end
return {finish_task_main({unpack(KEYS, 9, 16)}, {unpack(ARGV, 13, 17)}), unpack(res)}
