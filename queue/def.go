package queue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/chronos-sched/chronos/model"
)

// storedDef is the compact form of a schedule definition in its hash's
// "def" field: one-letter keys, times as Unix milliseconds, empty values
// left out. The id is in the key, and paused/next live in their own
// fields. Compactness matters: there is one per schedule, and a hash this
// small stays in Redis's listpack encoding.
type storedDef struct {
	Owner        string              `json:"o,omitempty"`
	Kind         model.Kind          `json:"k,omitempty"`
	Target       model.Target        `json:"t,omitempty"`
	WorkflowID   string              `json:"w,omitempty"`
	Version      model.Version       `json:"v,omitempty"`
	UserID       string              `json:"u,omitempty"`
	CronExpr     string              `json:"c,omitempty"`
	Dialect      model.Dialect       `json:"d,omitempty"`
	Timezone     string              `json:"z,omitempty"`
	EverySeconds int64               `json:"e,omitempty"`
	FireAt       *int64              `json:"f,omitempty"`
	StartAt      *int64              `json:"s,omitempty"`
	EndAt        *int64              `json:"x,omitempty"`
	JitterMs     int64               `json:"j,omitempty"`
	Overlap      model.OverlapPolicy `json:"op,omitempty"`
	Catchup      model.CatchupPolicy `json:"cp,omitempty"`
	Anchor       int64               `json:"a,omitempty"`
	CreatedAt    int64               `json:"cr,omitempty"`
	UpdatedAt    int64               `json:"up,omitempty"`
}

func msPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

func timePtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// encodeDef stores a record's definition (not Paused or NextRunAt).
func encodeDef(r *model.ScheduleRecord) (string, error) {
	b, err := json.Marshal(storedDef{
		Owner: r.Owner, Kind: r.Kind, Target: r.Target, WorkflowID: r.WorkflowID, Version: r.Version,
		UserID: r.UserID, CronExpr: r.CronExpr, Dialect: r.Dialect, Timezone: r.Timezone,
		EverySeconds: r.EverySeconds, FireAt: msPtr(r.FireAt), StartAt: msPtr(r.StartAt), EndAt: msPtr(r.EndAt),
		JitterMs: r.JitterMs, Overlap: r.OverlapPolicy, Catchup: r.CatchupPolicy,
		Anchor: ms(r.Anchor), CreatedAt: ms(r.CreatedAt), UpdatedAt: ms(r.UpdatedAt),
	})
	return string(b), err
}

// DecodeDef parses a stored definition of schedule id.
func DecodeDef(id, def string) (*model.ScheduleRecord, error) {
	var d storedDef
	if err := json.Unmarshal([]byte(def), &d); err != nil {
		return nil, fmt.Errorf("decode stored schedule %s: %w", id, err)
	}
	return &model.ScheduleRecord{
		ID: id, Owner: d.Owner, Kind: d.Kind, Target: d.Target, WorkflowID: d.WorkflowID, Version: d.Version,
		UserID: d.UserID, CronExpr: d.CronExpr, Dialect: d.Dialect, Timezone: d.Timezone,
		EverySeconds: d.EverySeconds, FireAt: timePtr(d.FireAt), StartAt: timePtr(d.StartAt), EndAt: timePtr(d.EndAt),
		JitterMs: d.JitterMs, OverlapPolicy: d.Overlap, CatchupPolicy: d.Catchup,
		Anchor: fromMS(d.Anchor), CreatedAt: fromMS(d.CreatedAt), UpdatedAt: fromMS(d.UpdatedAt),
	}, nil
}
