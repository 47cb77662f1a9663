package model

import (
	"encoding/json"
	"fmt"
	"time"
)

// TargetWake delivers an agent's wake to the operator's WAKE_URL: the
// target of an alarm.
const TargetWake Target = "wake"

// AlarmStatus is where an alarm is in its lifecycle.
type AlarmStatus string

const (
	// AlarmActive is scheduled and waiting to fire: the initial status.
	AlarmActive AlarmStatus = "active"
	// AlarmFired is a once alarm whose wake was delivered; kept for audit.
	AlarmFired AlarmStatus = "fired"
	// AlarmCancelled was cancelled by its owner (DELETE /v1/alarms/{id}).
	AlarmCancelled AlarmStatus = "cancelled"
	// AlarmFailed is a once alarm whose delivery failed max_failures
	// times, or an alarm whose expression yields no further time.
	AlarmFailed AlarmStatus = "failed"
)

// Terminal reports whether the alarm fires no more.
func (s AlarmStatus) Terminal() bool { return s != AlarmActive }

// ParseAlarmStatus validates a status name (the ?status= filter).
func ParseAlarmStatus(s string) (AlarmStatus, error) {
	switch st := AlarmStatus(s); st {
	case AlarmActive, AlarmFired, AlarmCancelled, AlarmFailed:
		return st, nil
	}
	return "", &FieldError{"status", fmt.Sprintf("unknown status %q (want active, fired, cancelled or failed)", s)}
}

// Alarm is what an agent's alarm adds to its schedule record (whose
// Owner is the agent's DID, UserID the user in that DID and Target
// TargetWake). Payload and WakeMessage are kept byte for byte as posted.
type Alarm struct {
	Label          string
	ConversationID string
	WakeMessage    string
	Payload        json.RawMessage
	Status         AlarmStatus
	IdempotencyKey string
	MaxFailures    int
	FailureCount   int
	LastError      string
	LastFiredAt    *time.Time
}

// MaxAlarmFailures bounds max_failures: each failed delivery is a retry
// with backoff, and past 25 the backoff's cap makes the alarm a day late.
const MaxAlarmFailures = 25
