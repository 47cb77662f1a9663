package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"
)

// IdempotencyKey is hex(sha256(scheduleID + ":" + epoch_seconds(runAt))).
//
// runAt is the planned fire time before jitter; sub-second parts are
// ignored (epoch seconds round toward negative infinity). The key is the
// asynq TaskID, the run record's key and what executors receive to
// deduplicate.
func IdempotencyKey(scheduleID string, runAt time.Time) string {
	sum := sha256.Sum256([]byte(scheduleID + ":" + strconv.FormatInt(runAt.Unix(), 10)))
	return hex.EncodeToString(sum[:])
}

// ManualRunKey is the idempotency key of a manual run that names none:
// hex(sha256("manual" NUL workflowID NUL version NUL epoch_seconds)).
// Identifiers cannot hold NUL, so no two (workflow, version) pairs share
// keys, whatever colons they hold, and no schedule's key (whose input has
// no NUL) is one of them.
func ManualRunKey(workflowID string, version Version, scheduledFor time.Time) string {
	sum := sha256.Sum256([]byte("manual\x00" + workflowID + "\x00" + string(version) + "\x00" +
		strconv.FormatInt(scheduledFor.Unix(), 10)))
	return hex.EncodeToString(sum[:])
}

// JitterOffset is a deterministic offset in [-max, +max] derived from an
// idempotency key, so a retried tick computes the same fire time.
//
// The offset is a whole number of milliseconds, drawn uniformly from the
// first 8 bytes of sha256(key); any string is a valid key. max <= 0, or
// less than a millisecond, gives 0.
func JitterOffset(key string, max time.Duration) time.Duration {
	maxMs := int64(max / time.Millisecond)
	if maxMs <= 0 {
		return 0
	}
	sum := sha256.Sum256([]byte(key))
	span := uint64(2*maxMs + 1) // fits: maxMs <= MaxInt64/1e6
	return time.Duration(int64(binary.BigEndian.Uint64(sum[:8])%span)-maxMs) * time.Millisecond
}
