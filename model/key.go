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

// ValidateManualKey checks the idempotency key a caller chose for a
// manual run of workflowID at version planned for scheduledFor.
//
// The keys chronos derives (IdempotencyKey, ManualRunKey) are 64
// lowercase hex digits, and a schedule's are predictable: its id can be
// listed and its fire times computed. A caller who could choose one
// would take over that future scheduled run: its record would hold the
// caller's workflow and user, and the scheduler would find the key taken
// and record the planned run SKIPPED. So a chosen key must not have that
// form, unless it is the very key ManualRunKey gives this workflow,
// version and time (a client that repeats the key it was given), which
// no schedule's key can be.
func ValidateManualKey(key, workflowID string, version Version, scheduledFor time.Time) error {
	if isDerivedKeyForm(key) && key != ManualRunKey(workflowID, version, scheduledFor) {
		return &FieldError{"idempotency_key", "64 lowercase hex digits is the form of the keys chronos derives " +
			"(scheduled runs' keys): choose another key, or omit it to have one generated"}
	}
	return nil
}

// isDerivedKeyForm reports whether key has the form of a derived key.
func isDerivedKeyForm(key string) bool {
	if len(key) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(key) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
