package crontool

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
)

// fakeStore keeps alarms in memory, as the alarms store would: per-owner
// idempotency keys, next run times from the record's schedule.
type fakeStore struct {
	mu     sync.Mutex
	now    func() time.Time
	alarms []*model.ScheduleRecord
	seq    int
	// limit bounds a list, as the store's does (0: none).
	limit int
}

func (f *fakeStore) CreateAlarm(_ context.Context, rec *model.ScheduleRecord) (*model.ScheduleRecord, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.alarms {
		if a.Owner == rec.Owner && a.Alarm.IdempotencyKey == rec.Alarm.IdempotencyKey {
			return clone(a), true, nil
		}
	}
	f.seq++
	c := clone(rec)
	c.ID = fmt.Sprintf("alarm-%d", f.seq)
	now := f.now()
	c.Anchor, c.CreatedAt, c.UpdatedAt = now.Truncate(time.Second), now, now
	c.OverlapPolicy, c.CatchupPolicy = model.OverlapAllow, model.CatchupLatest
	if err := c.Validate(); err != nil {
		return nil, false, err
	}
	f.setNext(c)
	f.alarms = append(f.alarms, c)
	return clone(c), false, nil
}

func (f *fakeStore) setNext(c *model.ScheduleRecord) {
	s, err := c.Compile()
	if err != nil {
		panic(err)
	}
	c.NextRunAt = nil
	if t := s.Next(f.now()); !t.IsZero() && !c.Paused && c.Alarm.Status == model.AlarmActive {
		c.NextRunAt = &t
	}
}

func (f *fakeStore) ListAlarms(_ context.Context, owner string, status model.AlarmStatus) ([]*model.ScheduleRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*model.ScheduleRecord
	for _, a := range f.alarms {
		if a.Owner == owner && a.Alarm.Status == status {
			f.setNext(a)
			out = append([]*model.ScheduleRecord{clone(a)}, out...) // newest first
		}
	}
	if f.limit > 0 && len(out) > f.limit {
		out = out[:f.limit]
	}
	return out, nil
}

func (f *fakeStore) find(owner, id string) *model.ScheduleRecord {
	for _, a := range f.alarms {
		if a.Owner == owner && a.ID == id {
			return a
		}
	}
	return nil
}

func (f *fakeStore) CancelAlarm(_ context.Context, owner, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.find(owner, id)
	if a == nil {
		return fmt.Errorf("alarm %s not found", id)
	}
	if a.Alarm.Status == model.AlarmActive {
		a.Alarm.Status = model.AlarmCancelled
	}
	return nil
}

func (f *fakeStore) PauseAlarm(_ context.Context, owner, id string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.find(owner, id)
	if a == nil {
		return fmt.Errorf("alarm %s not found", id)
	}
	a.Paused = paused
	return nil
}

// fire marks the once alarm of job id fired, as a delivered wake does.
func (f *fakeStore) fire(owner, jobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.alarms {
		if a.Owner == owner && a.Alarm.IdempotencyKey == jobID {
			now := f.now()
			a.Alarm.Status, a.Alarm.LastFiredAt = model.AlarmFired, &now
		}
	}
}

func clone(r *model.ScheduleRecord) *model.ScheduleRecord {
	c := *r
	if r.Alarm != nil {
		al := *r.Alarm
		c.Alarm = &al
	}
	return &c
}

var (
	ownerA = auth.DID{Raw: "did:matrix:user-a:fp1", UserID: "user-a", KeyFingerprint: "fp1"}
	ownerB = auth.DID{Raw: "did:matrix:user-b:fp2", UserID: "user-b", KeyFingerprint: "fp2"}
)
