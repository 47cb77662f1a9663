package queue

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// decodeTaskPayload agrees with json.Unmarshal on every payload it
// accepts, and accepts those encodeTaskPayload writes plainly.
func TestDecodeTaskPayloadMatchesJSON(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 123456789, time.UTC)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []TaskPayload{
		{IdempotencyKey: "k1", ScheduleID: "s1", RunAt: at, FireAt: at.Add(time.Second), WorkflowID: "wf", Version: "3", UserID: "u", Source: model.SourceSchedule},
		{IdempotencyKey: "k2", RunAt: at.In(paris), FireAt: at, Source: model.SourceManual, ShardOf: "s9", Target: model.TargetWake, MaxAttempts: 4},
		{IdempotencyKey: "k3", MaxAttempts: 123456789, RunAt: at.In(time.FixedZone("odd", 5*3600+1234))},
	} {
		b, err := encodeTaskPayload(&p)
		if err != nil {
			t.Fatal(err)
		}
		var got TaskPayload
		if !decodeTaskPayload(b, &got) {
			t.Errorf("decodeTaskPayload(%s) fell back to json.Unmarshal", b)
		}
		checkDecodeMatchesJSON(t, b)
	}
	for _, b := range []string{
		``, `{}`, `null`, `{"idempotency_key":"k"}`, `{"idempotency_key":"k\u0041","run_at":"2026-01-01T00:00:00Z","fire_at":"2026-01-01T00:00:00Z","workflow_id":"","version":"","user_id":"","source":""}`,
		`{"idempotency_key":"k","run_at":"2026-01-01T00:00:00Z","fire_at":"2026-01-01T00:00:00Z","workflow_id":"","version":"","user_id":"","source":"","max_attempts":0}`,
		`{"idempotency_key":"k","run_at":"2026-01-01T00:00:00Z","fire_at":"2026-01-01T00:00:00Z","workflow_id":"","version":"","user_id":"","source":"","max_attempts":1234567890}`,
		`{"idempotency_key":"k","run_at":"2026-01-01T00:00:00Z","fire_at":"2026-01-01T00:00:00Z","workflow_id":"","version":"","user_id":"","source":""} `,
		`{"idempotency_key":"k","run_at":"2026-01-01T24:00:00Z","fire_at":"2026-01-01T00:00:00Z","workflow_id":"","version":"","user_id":"","source":""}`,
	} {
		checkDecodeMatchesJSON(t, []byte(b))
	}
}

// checkDecodeMatchesJSON fails t when decodeTaskPayload accepts b and
// json.Unmarshal does not, or decodes it otherwise.
func checkDecodeMatchesJSON(t *testing.T, b []byte) {
	t.Helper()
	var got, want TaskPayload
	if !decodeTaskPayload(b, &got) {
		if !reflect.DeepEqual(got, TaskPayload{}) {
			t.Fatalf("decodeTaskPayload(%q) fell back but set %+v", b, got)
		}
		return
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("decodeTaskPayload(%q) accepted what json.Unmarshal refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeTaskPayload(%q)\n got %+v\nwant %+v", b, got, want)
	}
}

func FuzzDecodeTaskPayload(f *testing.F) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 123456789, time.UTC)
	for _, p := range []TaskPayload{
		{IdempotencyKey: "k1", ScheduleID: "s1", RunAt: at, FireAt: at, WorkflowID: "wf", Version: "3", UserID: "u", Source: model.SourceSchedule},
		{IdempotencyKey: "k2", RunAt: at.In(time.FixedZone("z", 3600)), FireAt: at, ShardOf: "s9", Target: model.TargetWake, MaxAttempts: 4},
	} {
		b, _ := encodeTaskPayload(&p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeMatchesJSON(t, b) })
}

// BenchmarkDecodeTaskPayload compares a schedule run's payload decoded
// by json.Unmarshal and by decodeTaskPayload.
func BenchmarkDecodeTaskPayload(b *testing.B) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	p := TaskPayload{IdempotencyKey: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ScheduleID: "bench-000123",
		RunAt: at, FireAt: at, WorkflowID: "wf", Version: "1", UserID: "u", Source: model.SourceSchedule}
	msg, err := encodeTaskPayload(&p)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q TaskPayload
			if err := json.Unmarshal(msg, &q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeTaskPayload", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q TaskPayload
			if !decodeTaskPayload(msg, &q) {
				b.Fatal("fell back")
			}
		}
	})
}
