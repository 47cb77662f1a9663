package queue

import (
	"context"
	"fmt"
	"strconv"

	"github.com/chronos-sched/chronos/model"
)

// alarmPauseScript pauses and resumes an owner's alarm (alarm_pause.lua).
var alarmPauseScript = loadScript("alarm_pause")

// PauseAlarm pauses (paused true) or resumes owner's active alarm id and
// returns it: the cron tool's disabled job. A paused alarm stays active,
// is planned no more, and a launcher skips its runs already queued;
// resuming goes on at the next fire time after now, without catching up
// on the paused time. An alarm that is no longer active is returned
// unchanged. Another owner's alarm is ErrNotFound, as a missing one is.
func (s *Store) PauseAlarm(ctx context.Context, owner, id string, paused bool) (*model.ScheduleRecord, error) {
	// As SetPaused: resuming computes the next time from the definition
	// read first, and the script refuses it if the definition changed.
	for range setPausedTries {
		res, err := s.pauseAlarm(ctx, owner, id, paused)
		if err != nil {
			return nil, err
		}
		switch res {
		case pauseNotFound:
			return nil, fmt.Errorf("alarm %s: %w", id, ErrNotFound)
		case pauseStale:
			continue
		}
		return s.GetAlarm(ctx, owner, id)
	}
	return nil, fmt.Errorf("alarm %s changed %d times while it was being resumed: %w", id, setPausedTries, ErrConflict)
}

func (s *Store) pauseAlarm(ctx context.Context, owner, id string, paused bool) (int, error) {
	sh := s.shard(id)
	h, err := s.rdb.HGetAll(ctx, scheduleKey(sh, id)).Result()
	if err != nil {
		return 0, fmt.Errorf("load alarm %s: %w", id, err)
	}
	if h[sfTarget] != targetWake || h[sfOwner] != owner {
		return pauseNotFound, nil
	}
	rec, err := scheduleFromHash(id, h)
	if err != nil {
		return 0, err
	}
	nextMS, score := "", "+inf"
	if !paused {
		sched, err := rec.Compile()
		if err != nil {
			return 0, err
		}
		if t := sched.Next(s.clock.Now()); !t.IsZero() {
			nextMS = strconv.FormatInt(ms(t), 10)
			score = strconv.FormatInt(ms(t.Add(-s.ActLead(rec))), 10)
		}
	}
	res, err := alarmPauseScript.Run(ctx, s.rdb, []string{scheduleKey(sh, id), dueKey(sh)},
		id, owner, boolArg(paused), nextMS, score, h[sfVer], ms(s.clock.Now())).Int()
	if err != nil {
		return 0, fmt.Errorf("pause alarm %s: %w", id, err)
	}
	return res, nil
}
