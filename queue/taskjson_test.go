package queue

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chronos-sched/chronos/model"
)

func TestEncodeTaskPayloadMatchesJSON(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 123456789, time.UTC)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []TaskPayload{
		{},
		{IdempotencyKey: "k1", ScheduleID: "s1", RunAt: at, FireAt: at.Add(time.Second), WorkflowID: "wf", Version: "3", UserID: "u", Source: model.SourceSchedule},
		{IdempotencyKey: "k2", RunAt: at.In(paris), FireAt: at, Source: model.SourceManual, ShardOf: "s9", Target: model.TargetWake, MaxAttempts: 4},
		{IdempotencyKey: "k3", ScheduleID: "a<b>&c", RunAt: at, FireAt: at},
		{IdempotencyKey: "k4", WorkflowID: "é\u2028\x01\"\\", RunAt: at, FireAt: at},
		{IdempotencyKey: "k5", RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{IdempotencyKey: "k6", MaxAttempts: -1, RunAt: at.In(time.FixedZone("odd", 5*3600+1234))},
	} {
		want, wantErr := json.Marshal(&p)
		got, gotErr := encodeTaskPayload(&p)
		if string(got) != string(want) || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("encodeTaskPayload(%+v)\n got %s, %v\nwant %s, %v", p, got, gotErr, want, wantErr)
		}
	}
}

func FuzzEncodeTaskPayload(f *testing.F) {
	f.Add("k", "s", "wf", "1", "u", "schedule", "", "", 0, int64(1774744200123456789), 3600)
	f.Add("k<", "s\"", "w\\f", "", "\u00e9", "manual", "s1", "wake", 3, int64(-62135596800000000), -7200)
	f.Fuzz(func(t *testing.T, key, sched, wf, ver, user, src, shardOf, target string, maxAttempts int, ns int64, offset int) {
		at := time.Unix(0, ns).In(time.FixedZone("z", offset%(36*3600)))
		p := TaskPayload{IdempotencyKey: key, ScheduleID: sched, RunAt: at, FireAt: at.Add(time.Minute), WorkflowID: wf,
			Version: ver, UserID: user, Source: model.RunSource(src), ShardOf: shardOf, Target: model.Target(target), MaxAttempts: maxAttempts}
		want, wantErr := json.Marshal(&p)
		got, gotErr := encodeTaskPayload(&p)
		if string(got) != string(want) || (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("got %s, %v; want %s, %v", got, gotErr, want, wantErr)
		}
	})
}
