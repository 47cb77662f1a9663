package scheduler

import (
	"fmt"
	"os"
	"time"

	"github.com/chronos-sched/chronos/queue"
)

// advance moves the clock: mostly a few seconds, sometimes minutes, now and
// then a long jump (an outage of every replica, as far as the plan goes).
func (s *sim) advance() {
	var d time.Duration
	switch x := s.r.Float64(); {
	case x < 0.7:
		d = time.Duration(1+s.r.IntN(5)) * time.Second
	case x < 0.9:
		d = time.Duration(5+s.r.IntN(25)) * time.Second
	case x < 0.98:
		d = time.Duration(30+s.r.IntN(270)) * time.Second
	default:
		d = time.Duration(5+s.r.IntN(35)) * time.Minute
	}
	if s.r.IntN(4) == 0 { // off the second boundary
		d += time.Duration(s.r.IntN(1000)) * time.Millisecond
	}
	s.clock.Advance(d)
	s.logf("clock +%s", d)
}

// tickReplicas ticks every shard with each replica that is up, in a random
// interleaving; sometimes a replica plans a shard, the other ticks it (and
// maybe a schedule changes) before the first commits: that plan is stale.
func (s *sim) tickReplicas() {
	for i := range s.reps {
		if !s.now().Before(s.down[i]) && s.r.Float64() < 0.01 {
			var d time.Duration
			if s.r.IntN(3) == 0 {
				d = time.Duration(10+s.r.IntN(110)) * time.Minute
			} else {
				d = time.Duration(5+s.r.IntN(120)) * time.Second
			}
			s.down[i] = s.now().Add(d)
			s.logf("replica %d down for %s", i, d)
		}
	}
	type job struct{ rep, shard int }
	var jobs []job
	for i := range s.reps {
		if s.now().Before(s.down[i]) {
			continue
		}
		for sh := range simShards {
			jobs = append(jobs, job{i, sh})
		}
	}
	s.r.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	s.ticked = map[int]bool{}
	for _, j := range jobs {
		if s.r.Float64() < 0.1 {
			s.staleTick(j.rep, j.shard)
		} else {
			s.seq++
			s.noErr(s.reps[j.rep].TickShard(s.ctx, j.shard), "tick")
			s.ticks[j.shard] = append(s.ticks[j.shard], s.tickRecord(j.shard))
			s.logf("replica %d ticked shard %d (seq %d)", j.rep, j.shard, s.seq)
			s.collectShard(j.shard)
			s.debugState(j.shard)
			s.ticked[j.shard] = true
		}
	}
	s.check()
	s.checkDue(s.ticked)
}

// debugState traces the stored state of schedule SIM_DEBUG (an id) after
// each tick of its shard.
func (s *sim) debugState(shard int) {
	id := os.Getenv("SIM_DEBUG")
	if id == "" || queue.ShardOf(id, simShards) != shard {
		return
	}
	h, err := s.rdb.HGetAll(s.ctx, fmt.Sprintf("chronos:{s%02d}:sched:%s", shard, id)).Result()
	s.noErr(err, "debug")
	for _, f := range []string{"w", "v", "u", "t", "tk", "cr"} {
		delete(h, f)
	}
	s.logf("  %s: %v", id, h)
}

// tickRecord records a full tick of shard, just made.
func (s *sim) tickRecord(shard int) simTick {
	tk := simTick{seq: s.seq, step: s.step, at: s.now(), limited: map[string]bool{}}
	for _, sc := range s.scheds {
		if queue.ShardOf(sc.id, simShards) != shard {
			continue
		}
		score, err := s.rdb.ZScore(s.ctx, fmt.Sprintf("chronos:{s%02d}:due", shard), sc.id).Result()
		if err == nil && int64(score) == s.now().UnixMilli()+1 {
			tk.limited[sc.id] = true
		}
	}
	return tk
}

// staleTick: replica rep reads and plans shard; the other replica ticks it,
// or a schedule of the shard is changed; then rep commits its plans.
func (s *sim) staleTick(rep, shard int) {
	a := s.reps[rep]
	now := s.now()
	due, err := s.store.ReadDue(s.ctx, shard, now, a.cfg.PageSize)
	s.noErr(err, "read due")
	var plans []queue.Plan
	for _, d := range due {
		p, _, err := a.planOne(d, now)
		s.noErr(err, "plan")
		plans = append(plans, p)
	}
	s.logf("replica %d planned shard %d (%d due)", rep, shard, len(due))
	if s.r.IntN(2) == 0 {
		s.seq++
		s.noErr(s.reps[1-rep].TickShard(s.ctx, shard), "tick")
		s.ticks[shard] = append(s.ticks[shard], s.tickRecord(shard))
		s.logf("replica %d ticked shard %d", 1-rep, shard)
		s.ticked[shard] = true
		s.check()
	}
	if s.r.IntN(2) == 0 {
		var ids []*simSched
		for _, sc := range s.scheds {
			if queue.ShardOf(sc.id, simShards) == shard {
				ids = append(ids, sc)
			}
		}
		if len(ids) > 0 {
			s.operate(ids[s.r.IntN(len(ids))])
			s.check()
		}
	}
	s.seq++ // runs the commit creates come after the ticks before it
	applied, err := s.store.Commit(s.ctx, shard, now, plans)
	s.noErr(err, "commit")
	s.logf("replica %d committed shard %d: %v", rep, shard, applied)
	for _, ok := range applied {
		s.stats[fmt.Sprintf("stale commit applied=%v", ok)]++
	}
	s.check()
}
