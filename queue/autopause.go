package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chronos-sched/chronos/model"
)

// decodePauseState reads the auto-pause and pause fields of a schedule
// hash into rec: the failure streak, the last FAILED run's error, and
// while paused why, the note and since when.
func decodePauseState(rec *model.ScheduleRecord, h map[string]string) {
	// Most schedules have no streak: Atoi("") would allocate its error
	// for each of their runs a launcher reads.
	rec.ConsecutiveFailures = 0
	if v := h[sfFailStreak]; v != "" {
		rec.ConsecutiveFailures, _ = strconv.Atoi(v)
	}
	rec.LastError = h[sfFailErr]
	if !rec.Paused {
		return
	}
	rec.PausedReason = model.PausedReason(h[sfPausedWhy])
	rec.PausedNote = h[sfPausedNote]
	if t, ok := parseMS(h[sfPausedAt]); ok {
		rec.PausedAt = &t
	}
}

// autoPausedKey counts the schedules of shard s that auto-pause paused.
func autoPausedKey(s int) string { return shardPrefix(s) + segAutoPaused }

// AutoPaused says that a run's end paused its schedule
// (pause_after_failures): the script that recorded the FAILED run paused
// it in the same step.
type AutoPaused struct {
	ScheduleID string
	// Failures is the streak of FAILED runs that paused it.
	Failures int
	// Error is the last FAILED run's error.
	Error string
}

// logAutoPaused logs that the end of run key paused its schedule.
func (s *Store) logAutoPaused(ctx context.Context, key string, a AutoPaused) {
	if s.cfg.Logger == nil {
		return
	}
	s.cfg.Logger.WarnContext(ctx, "schedule paused after consecutive failed runs (pause_after_failures)",
		"schedule_id", a.ScheduleID, "failures", a.Failures, "idempotency_key", key, "last_error", a.Error)
}

// AutoPausedCollector reports chronos_schedules_auto_paused_total: how
// many times schedules paused themselves after consecutive FAILED runs.
// The count is kept in Redis by the script that pauses (one counter per
// shard, summed at scrape time), so it is never lost with a process and
// every process's /metrics shows the same total.
func (s *Store) AutoPausedCollector() prometheus.Collector {
	return &autoPausedCollector{s: s, desc: prometheus.NewDesc("chronos_schedules_auto_paused_total",
		"Times a schedule paused itself after pause_after_failures consecutive FAILED runs.", nil, nil)}
}

type autoPausedCollector struct {
	s    *Store
	desc *prometheus.Desc
}

func (c *autoPausedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *autoPausedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var total float64
	err := bounded(ctx, func(ctx context.Context) error {
		// One GET per shard, not an MGET: each counter is in its
		// shard's slot.
		cmds := make([]*redis.StringCmd, c.s.cfg.Shards)
		_, err := c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.Get(ctx, autoPausedKey(i))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for _, cmd := range cmds {
			n, _ := strconv.ParseFloat(cmd.Val(), 64)
			total += n
		}
		return nil
	})
	if err != nil {
		return // Redis down or stalled: report nothing rather than zero
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, total)
}

// noteAutoPaused logs that the end of run key (in shard sh) paused its
// schedule after streak FAILED runs.
func (s *Store) noteAutoPaused(ctx context.Context, sh int, key string, streak int) {
	if s.cfg.Logger == nil {
		return
	}
	a := AutoPaused{Failures: streak}
	if v, err := s.rdb.HMGet(ctx, runKey(sh, key), rfSchedule, rfError).Result(); err == nil && len(v) == 2 {
		a.ScheduleID, _ = v[0].(string)
		a.Error, _ = v[1].(string)
	}
	s.logAutoPaused(ctx, key, a)
}

// stringsOf reads a Lua array of strings.
func stringsOf(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if str, ok := x.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// PauseChange is a pause or a resume (ChangePause).
type PauseChange struct {
	// Paused pauses; false resumes.
	Paused bool
	// Note, on a pause, is kept and shown as paused_note until the resume.
	Note string
	// Replay, on a resume, enqueues the runs planned between paused_at
	// and now as a backfill does (catchup replay), bounded by its
	// MaxRuns and spread by its Rate; nil resumes at the next fire time
	// after now (catchup skip). A replay whose runs were not all enqueued
	// (the process died) is finished by the next resume with Replay.
	Replay *Backfill
}

// replayRange is the paused time of rec to replay on a resume at now,
// as sfReplay holds it ("from:to" ms), checked against maxRuns.
func replayRange(rec *model.ScheduleRecord, now time.Time, maxRuns int) (string, error) {
	if rec.PausedAt == nil {
		return "", fmt.Errorf("schedule %s was paused before chronos recorded when: resume with catchup skip, then backfill the range: %w",
			rec.ID, ErrConflict)
	}
	// The paused time is (paused_at, now]: a fire time at paused_at was
	// due as it paused, and resuming plans after now.
	from, to := rec.PausedAt.Add(time.Millisecond), now.Add(time.Millisecond)
	if _, err := BackfillTimes(rec, from, to, maxRuns); err != nil {
		return "", &model.FieldError{Field: "catchup", Message: fmt.Sprintf(
			"the paused time, since %s, plans more than %d runs, the most a replay may enqueue (BACKFILL_MAX_RUNS): "+
				"resume with catchup skip, then backfill the paused time in ranges",
			rec.PausedAt.UTC().Format(time.RFC3339), maxRuns)}
	}
	return strconv.FormatInt(ms(from), 10) + ":" + strconv.FormatInt(ms(to), 10), nil
}

// replay enqueues the runs of the replay a resume recorded (sfReplay),
// if any is pending, and then forgets it. Its backfill creates nothing
// twice, so a replay run again after a crash, or by two callers at once,
// enqueues each run once.
func (s *Store) replay(ctx context.Context, id string, b Backfill) (*BackfillResult, error) {
	skey := scheduleKey(s.shard(id), id)
	pending, err := s.rdb.HGet(ctx, skey, sfReplay).Result()
	if errors.Is(err, redis.Nil) {
		return &BackfillResult{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the replay of schedule %s: %w", id, err)
	}
	fromS, toS, _ := strings.Cut(pending, ":")
	from, ok1 := parseMS(fromS)
	to, ok2 := parseMS(toS)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("schedule %s: stored replay %q does not read", id, pending)
	}
	b.ScheduleID, b.From, b.To, b.DryRun = id, from, to, false
	b.MaxRuns = max(b.MaxRuns, 1)
	res, err := s.RunBackfill(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("replay of schedule %s: %w", id, err)
	}
	// Forget it only if it is still this one.
	if err := forgetReplayScript.Run(ctx, s.rdb, []string{skey}, pending).Err(); err != nil {
		return nil, fmt.Errorf("forget the replay of schedule %s: %w", id, err)
	}
	return res, nil
}
