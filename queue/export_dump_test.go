package queue

import "context"

// RunRecordDump is appendRunDump's payload of a new run record, for the
// external tests of the RESTOREd records.
func RunRecordDump(sid string, at, fire int64, st string, now int64, err, rsn string) []byte {
	var h hashDump
	return appendRunDump(nil, &h, sid, at, fire, st, now, err, rsn)
}

// RunRecordHSETArgs are the fields and values commitFast's HSET writes
// for the same record.
func RunRecordHSETArgs(sid string, at, fire int64, st string, now int64, err, rsn string) []any {
	args := []any{rfSchedule, sid, rfRunAt, at, rfFireAt, fire, rfStatus, st, rfCreated, now, rfUpdated, now, rfSource, srcSchedule}
	if err != "" {
		args = append(args, rfError, err)
	}
	if rsn != "" {
		args = append(args, rfReason, rsn)
	}
	if st == stEnqueued {
		args = append(args, rfEnqueued, now)
	}
	return args
}

// RestoreBuildsRecords is restoreBuildsRecords, NewStore's probe.
var RestoreBuildsRecords = func(ctx context.Context, s *Store) bool { return restoreBuildsRecords(ctx, s.rdb) }

// RestoresRecords says whether TickDue's fast path RESTOREs run records.
// It probes the server if no fast commit has yet.
func (s *Store) RestoresRecords() bool { return s.restoresRecords(context.Background()) }
