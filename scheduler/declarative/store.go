package declarative

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys. Every key of a namespace shares the hash tag {namespace}, so the
// batch scripts touch one Redis Cluster slot.
func metaKey(ns string) string       { return "{" + ns + "}:meta" }
func taskKey(ns, name string) string { return "{" + ns + "}:task:" + name }

// batchSize bounds the tasks one script call or pipeline carries, so Redis
// never blocks long on one call.
const batchSize = 1000

// Claim result codes, returned per task by claimScript.
const (
	claimMissing = 0 // the task's record is gone
	claimRun     = 1 // a cron occurrence: run it
	claimPreempt = 2 // a cron occurrence that cancelled a pending retry: run it
	claimRetry   = 3 // the pending retry is due: run it
	claimOrphan  = 4 // the previous holder's lease lapsed mid-run: run it again
	claimBusy    = 5 // another run holds the lease; value: when it lapses
	claimCovered = 6 // nothing to do; value: servedUntil
)

// Claim kinds, sent per task to claimScript.
const (
	kindCron   = "c" // value: the occurrence to start
	kindRetry  = "r" // value: the pendingRetryUntil being acted on
	kindOrphan = "o" // restart only an orphaned run
)

// claimScript decides, atomically for each task, whether this process
// starts its callback now, and takes the task's lease if so. Deciding in
// Redis is what lets every process sharing the namespace agree: an
// occurrence is started once (servedUntil), and a task runs serially (the
// lease).
//
// KEYS[i]  -> the i-th task's hash
// ARGV[1]  -> now (ms); ARGV[2] -> the lease's end (ms); ARGV[3] -> holder
// ARGV[4]  -> the current minute (ms), written to servedUntil by a cron run
// ARGV[3+2i], ARGV[4+2i] -> the i-th task's kind and value
// Output: a flat list, two integers per task: a claim code and a value.
var claimScript = redis.NewScript(`
local now, leaseEnd, holder, minute = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local out = {}
for i, key in ipairs(KEYS) do
  local kind, val = ARGV[3 + 2 * i], tonumber(ARGV[4 + 2 * i])
  local f = redis.call('HMGET', key, 'name', 'servedUntil', 'pendingRetryUntil', 'leaseHolder', 'leaseUntil')
  local code, res = 0, 0
  if f[1] then
    local served = tonumber(f[2]) or -1
    local retry = tonumber(f[3]) or -1
    local lu = tonumber(f[5]) or 0
    if f[4] and lu > now then
      code, res = 5, lu
    else
      local orphan = f[4] ~= false
      if orphan then
        code = 4
      elseif kind == 'c' and served < val then
        code = (retry >= 0) and 2 or 1
      elseif kind == 'r' and retry == val and now >= retry then
        code = 3
      else
        code, res = 6, served
      end
      if code ~= 6 then
        if code ~= 3 and served < minute then
          redis.call('HSET', key, 'servedUntil', minute)
        end
        redis.call('HDEL', key, 'pendingRetryUntil')
        redis.call('HSET', key, 'lastAttemptAt', now, 'leaseHolder', holder, 'leaseUntil', leaseEnd)
        res = math.max(served, minute)
        if code == 3 then res = served end
      end
    end
  end
  out[2 * i - 1] = code
  out[2 * i] = res
end
return out
`)

// finishScript records the end of runs this process holds the lease of,
// and releases the lease.
//
// KEYS[i] -> the i-th task's hash
// ARGV[1] -> holder; ARGV[2] -> now (ms)
// ARGV[2+i] -> the i-th run's outcome: "" for success, else pendingRetryUntil (ms)
// Output: per task, 1 when recorded, 0 when the lease was no longer ours
// (the run was taken over as an orphan) and nothing was written.
var finishScript = redis.NewScript(`
local holder, now = ARGV[1], ARGV[2]
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'leaseHolder') == holder then
    redis.call('HDEL', key, 'leaseHolder', 'leaseUntil')
    local retry = ARGV[2 + i]
    if retry == '' then
      redis.call('HSET', key, 'lastSuccessAt', now)
      redis.call('HDEL', key, 'pendingRetryUntil')
    else
      redis.call('HSET', key, 'lastFailureAt', now, 'pendingRetryUntil', retry)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`)

// renewScript extends the leases this process still holds.
//
// KEYS[i] -> the i-th task's hash
// ARGV[1] -> holder; ARGV[2] -> the lease's new end (ms)
// Output: the number of leases no longer held.
var renewScript = redis.NewScript(`
local lost = 0
for _, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'leaseHolder') == ARGV[1] then
    redis.call('HSET', key, 'leaseUntil', ARGV[2])
  else
    lost = lost + 1
  end
end
return lost
`)

// claimReq is one task's request to claimScript.
type claimReq struct {
	t    *task
	kind string
	val  int64
}

// claim runs claimScript over reqs (at most batchSize) and returns the
// codes and values.
func (s *Scheduler) claim(ctx context.Context, reqs []claimReq, now, minute time.Time) ([]int64, error) {
	keys := make([]string, len(reqs))
	args := make([]any, 0, 4+2*len(reqs))
	args = append(args, now.UnixMilli(), now.Add(s.leaseTTL).UnixMilli(), s.instance, minute.UnixMilli())
	for i, r := range reqs {
		keys[i] = r.t.key
		args = append(args, r.kind, r.val)
	}
	v, err := claimScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("claim %d tasks: %w", len(reqs), err)
	}
	if len(v) != 2*len(reqs) {
		return nil, fmt.Errorf("claim %d tasks: script returned %d values", len(reqs), len(v))
	}
	return v, nil
}

// loadStates reads the persisted state of names, pipelined in batches. A
// nil entry means the task has none.
func (s *Scheduler) loadStates(ctx context.Context, names []string) ([]*taskState, error) {
	out := make([]*taskState, len(names))
	for lo := 0; lo < len(names); lo += s.batch {
		hi := min(lo+s.batch, len(names))
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, hi-lo)
		for i := lo; i < hi; i++ {
			cmds[i-lo] = pipe.HGetAll(ctx, taskKey(s.ns, names[i]))
		}
		_, err := pipe.Exec(ctx)
		for i, c := range cmds {
			name := names[lo+i]
			h, cerr := c.Result()
			if cerr != nil {
				if isWrongType(cerr) {
					return nil, fmt.Errorf("load task %q: %w", name, &TaskInvalidStructureError{Value: cerr.Error(), Message: fmt.Sprintf("Invalid task state structure: key %q is not a hash", taskKey(s.ns, name))})
				}
				return nil, fmt.Errorf("load task %q: %w", name, cerr)
			}
			if len(h) == 0 {
				continue
			}
			st, derr := decodeState(name, h)
			if derr != nil {
				return nil, fmt.Errorf("load task %q: %w", name, derr)
			}
			out[lo+i] = st
		}
		if err != nil {
			return nil, fmt.Errorf("load task states: %w", err)
		}
	}
	return out, nil
}

// isWrongType reports Redis's WRONGTYPE error.
func isWrongType(err error) bool {
	return err != nil && len(err.Error()) >= 9 && err.Error()[:9] == "WRONGTYPE"
}

// write is one task's configuration change at Initialize, with what it
// replaces so a failure can restore it.
type write struct {
	key    string
	fields map[string]any
	prev   map[string]string // the previous values of fields; absent means the field did not exist
	isNew  bool
}

// applyWrites writes the overrides atomically: each batch is a MULTI/EXEC
// transaction, and when a batch fails the batches already applied are
// restored to their previous values, so either every override is in Redis
// or none is.
func (s *Scheduler) applyWrites(ctx context.Context, ws []write) error {
	for lo := 0; lo < len(ws); lo += s.batch {
		hi := min(lo+s.batch, len(ws))
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, w := range ws[lo:hi] {
				p.HSet(ctx, w.key, w.fields)
			}
			return nil
		})
		if err != nil {
			if rerr := s.restore(context.WithoutCancel(ctx), ws[:lo]); rerr != nil {
				return fmt.Errorf("apply overrides: %w (and restoring the previous state failed: %v)", err, rerr)
			}
			return fmt.Errorf("apply overrides: %w", err)
		}
	}
	return nil
}

// restore puts back the state ws replaced.
func (s *Scheduler) restore(ctx context.Context, ws []write) error {
	for lo := 0; lo < len(ws); lo += s.batch {
		hi := min(lo+s.batch, len(ws))
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, w := range ws[lo:hi] {
				if w.isNew {
					p.Del(ctx, w.key)
					continue
				}
				for f := range w.fields {
					if v, ok := w.prev[f]; ok {
						p.HSet(ctx, w.key, f, v)
					} else {
						p.HDel(ctx, w.key, f)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ms formats t as Unix milliseconds for a hash field.
func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
