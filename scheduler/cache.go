package scheduler

import (
	"sync"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// compileCache keeps decoded, compiled schedules by their stored
// definition, so a schedule firing every second is not re-parsed every
// second. It is bounded; when full it starts over, which is cheap and keeps
// memory flat however many schedules there are.
type compileCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*compiled
}

type compiled struct {
	rec   *model.ScheduleRecord
	sched model.Schedule
}

func newCompileCache(max int) *compileCache {
	return &compileCache{max: max, m: make(map[string]*compiled)}
}

// get returns the compiled schedule of a due schedule's definition, keyed
// by its canonical form def.
func (c *compileCache) get(def string, hash map[string]string) (*compiled, error) {
	c.mu.Lock()
	v, ok := c.m[def]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	// Schedules with equal definitions share an entry, so the record's ID
	// is left empty: planning takes the id from the due member.
	rec, err := queue.DecodeDef("", hash)
	if err != nil {
		return nil, err
	}
	sched, err := rec.Compile()
	if err != nil {
		return nil, err
	}
	v = &compiled{rec: rec, sched: sched}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[def] = v
	c.mu.Unlock()
	return v, nil
}
