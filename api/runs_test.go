package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api"
	"github.com/chronos-sched/chronos/model"
)

func manual(extra ...any) map[string]any {
	body := map[string]any{
		"workflow_id":   "wf-1",
		"version":       "7",
		"user_id":       "u-1",
		"scheduled_for": "2026-01-01T12:00:00Z",
	}
	for i := 0; i < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(body, extra[i].(string))
		} else {
			body[extra[i].(string)] = extra[i+1]
		}
	}
	return body
}

// Default keys of different workflows never collide, whatever colons
// their identifiers hold, nor with a schedule's keys.
func TestManualRunKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	keys := map[string]string{
		"a:b c":         model.ManualRunKey("a:b", "c", at),
		"a b:c":         model.ManualRunKey("a", "b:c", at),
		"schedule":      model.IdempotencyKey("manual:a:b:c", at),
		"old default":   model.IdempotencyKey("manual:a:b", at),
		"other instant": model.ManualRunKey("a:b", "c", at.Add(time.Second)),
	}
	seen := map[string]string{}
	for name, k := range keys {
		require.NotContains(t, seen, k, "%s and %s share a key", name, seen[k])
		seen[k] = name
	}

	b := setup(t)
	for _, wf := range [][2]string{{"a:b", "c"}, {"a", "b:c"}} {
		res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start",
			manual("workflow_id", wf[0], "version", wf[1]))
		require.True(t, res.Started, "workflow %s version %s", wf[0], wf[1])
	}
}

func TestManualStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sum := sha256.Sum256([]byte("manual\x00wf-1\x007\x00" + strconv.FormatInt(at.Unix(), 10)))
	wantKey := hex.EncodeToString(sum[:])
	require.Equal(t, wantKey, model.ManualRunKey("wf-1", "7", at))

	res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual())
	require.True(t, res.Started)
	require.Equal(t, wantKey, res.Run.IdempotencyKey)
	require.Equal(t, model.RunEnqueued, res.Run.Status)
	require.Equal(t, model.SourceManual, res.Run.Source)
	require.Equal(t, at, res.Run.RunAt)
	require.Empty(t, res.Run.ScheduleID)
	require.Equal(t, t0, res.Run.CreatedAt)

	// The same trigger again, even a number version, is the same run.
	b.clock.Advance(time.Minute)
	again := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("version", 7))
	require.False(t, again.Started)
	require.Equal(t, res.Run, again.Run)

	got := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+wantKey, nil)
	require.Equal(t, *res.Run, got)

	// An explicit key wins.
	res = ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", "deploy-42"))
	require.True(t, res.Started)
	require.Equal(t, "deploy-42", res.Run.IdempotencyKey)
	res = ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", "deploy-42", "scheduled_for", "2026-02-01T00:00:00Z"))
	require.False(t, res.Started)
	require.Equal(t, at, res.Run.RunAt)
}

func TestManualStartValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.keys(t)
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"NotObject", `[]`, "body: must be a JSON object"},
		{"WorkflowMissing", manual("workflow_id", nil), "workflow_id: is required"},
		{"WorkflowType", manual("workflow_id", 1), "workflow_id: must be a string"},
		{"WorkflowBrace", manual("workflow_id", "a}"), "workflow_id: must not contain '}'"},
		{"VersionMissing", manual("version", nil), "version: is required"},
		{"VersionType", manual("version", map[string]any{}), "version: must be a string or a number"},
		{"UserMissing", manual("user_id", nil), "user_id: is required"},
		{"ScheduledForMissing", manual("scheduled_for", nil), "scheduled_for: is required"},
		{"ScheduledForFormat", manual("scheduled_for", "2026-01-01 12:00"), `scheduled_for: invalid RFC 3339 time "2026-01-01 12:00"`},
		{"ScheduledForType", manual("scheduled_for", 1767268800), "scheduled_for: must be an RFC 3339 time string"},
		{"KeySpace", manual("idempotency_key", "a b"), "idempotency_key: must not contain whitespace"},
		{"KeyType", manual("idempotency_key", true), "idempotency_key: must be a string"},
		{"KeyEmpty", manual("idempotency_key", ""), "idempotency_key: is empty: omit it to have one generated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, b.do(t, http.MethodPost, "/run-launcher/start", tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
			require.ElementsMatch(t, before, b.keys(t), "a rejected start wrote to Redis")
		})
	}
}

func TestRunStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("ScheduledRun", func(t *testing.T) {
		upsert(t, b, schedule("s1"))
		key := b.commitRun(t, "s1")
		path := "/runs/" + key + "/status"

		run := ok[model.Run](t, b, http.StatusOK, http.MethodPost, path, map[string]any{"status": "STARTED", "run_id": "exec-1"})
		require.Equal(t, model.RunStarted, run.Status)
		require.Equal(t, "exec-1", run.RunID)

		b.clock.Advance(time.Minute)
		run = ok[model.Run](t, b, http.StatusOK, http.MethodPost, path, map[string]any{"status": "FAILED", "error": "boom"})
		require.Equal(t, model.RunFailed, run.Status)
		require.Equal(t, "boom", run.Error)
		require.Equal(t, "exec-1", run.RunID)
		updated := run.UpdatedAt

		// The same final status again: 200, nothing changes.
		b.clock.Advance(time.Minute)
		run = ok[model.Run](t, b, http.StatusOK, http.MethodPost, path, map[string]any{"status": "FAILED", "error": "other"})
		require.Equal(t, "boom", run.Error)
		require.Equal(t, updated, run.UpdatedAt)

		// A different status after a final one: 409.
		requireError(t, b.do(t, http.MethodPost, path, map[string]any{"status": "SUCCESS"}), http.StatusConflict, api.CodeConflict, "run "+key+" is already FAILED")
		requireError(t, b.do(t, http.MethodPost, path, map[string]any{"status": "STARTED"}), http.StatusConflict, api.CodeConflict, "")

		got := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+key, nil)
		require.Equal(t, model.RunFailed, got.Status)
		d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/s1", nil)
		require.Equal(t, model.RunFailed, d.RecentRuns[0].Status)
	})

	t.Run("ManualRun", func(t *testing.T) {
		res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual())
		path := "/runs/" + res.Run.IdempotencyKey + "/status"
		run := ok[model.Run](t, b, http.StatusOK, http.MethodPost, path, map[string]any{"status": "SUCCESS"})
		require.Equal(t, model.RunSuccess, run.Status)
		ok[model.Run](t, b, http.StatusOK, http.MethodPost, path, map[string]any{"status": "SUCCESS"})
		requireError(t, b.do(t, http.MethodPost, path, map[string]any{"status": "FAILED"}), http.StatusConflict, api.CodeConflict, "")
	})

	t.Run("LongErrorIsCut", func(t *testing.T) {
		res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", "long"))
		msg := strings.Repeat("é", model.MaxRunErrorLen) // 2 bytes each
		run := ok[model.Run](t, b, http.StatusOK, http.MethodPost, "/runs/"+res.Run.IdempotencyKey+"/status",
			map[string]any{"status": "FAILED", "error": msg})
		require.Len(t, run.Error, model.MaxRunErrorLen)
		require.True(t, strings.HasPrefix(msg, run.Error))
	})

	t.Run("Errors", func(t *testing.T) {
		res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", "fresh"))
		path := "/runs/fresh/status"
		for _, tc := range []struct {
			body any
			want string
		}{
			{map[string]any{}, "status: is required"},
			{map[string]any{"status": "DONE"}, `status: unknown status "DONE" (want STARTED, SUCCESS or FAILED)`},
			{map[string]any{"status": "SKIPPED"}, `status: unknown status "SKIPPED"`},
			{map[string]any{"status": "success"}, `status: unknown status "success"`},
			{map[string]any{"status": 1}, "status: must be a string"},
			{map[string]any{"status": "STARTED", "run_id": 5}, "run_id: must be a string"},
			{map[string]any{"status": "STARTED", "run_id": strings.Repeat("r", 201)}, "run_id: longer than 200 bytes"},
			{map[string]any{"status": "STARTED", "error": []string{}}, "error: must be a string"},
			{"nope", "body: must be a JSON object"},
		} {
			requireError(t, b.do(t, http.MethodPost, path, tc.body), http.StatusBadRequest, api.CodeInvalidArgument, tc.want)
		}
		got := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/fresh", nil)
		require.Equal(t, *res.Run, got, "a rejected report changed the run")

		requireError(t, b.do(t, http.MethodPost, "/runs/nope/status", map[string]any{"status": "SUCCESS"}), http.StatusNotFound, api.CodeNotFound, "run nope: not found")
		requireError(t, b.do(t, http.MethodGet, "/runs/nope", nil), http.StatusNotFound, api.CodeNotFound, "run nope: not found")
		requireError(t, b.do(t, http.MethodGet, "/runs/"+strings.Repeat("k", 201), nil), http.StatusBadRequest, api.CodeInvalidArgument, "idempotency_key: longer than 200 bytes")
	})
}

// TestManualKeyCannotTakeOverAScheduledRun (issue 26 finding 4): a
// schedule's keys are sha256(schedule_id:epoch), so anyone who can list
// schedules can compute its next run's key. A manual run started with
// that key, another workflow and another user, used to be recorded under
// it, and the scheduled run was then recorded SKIPPED. Keys of that form
// are refused, and the scheduled run goes ahead as planned.
func TestManualKeyCannotTakeOverAScheduledRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	upsert(t, b, schedule("victim"))
	d := ok[detail](t, b, http.StatusOK, http.MethodGet, "/schedules/victim", nil)
	require.NotNil(t, d.NextRunAt)
	key := model.IdempotencyKey("victim", *d.NextRunAt)
	before := b.keys(t)

	for _, k := range []string{key, strings.Repeat("0", 64), model.ManualRunKey("wf-1", "7", d.NextRunAt.Add(time.Second))} {
		body := manual("idempotency_key", k, "workflow_id", "evil", "user_id", "mallory", "scheduled_for", d.NextRunAt.Format(time.RFC3339))
		requireError(t, b.do(t, http.MethodPost, "/run-launcher/start", body), http.StatusBadRequest, api.CodeInvalidArgument,
			"idempotency_key: 64 lowercase hex digits is the form of the keys chronos derives")
	}
	require.ElementsMatch(t, before, b.keys(t), "a refused start writes nothing")

	got := b.commitRun(t, "victim")
	require.Equal(t, key, got)
	run := ok[model.Run](t, b, http.StatusOK, http.MethodGet, "/runs/"+key, nil)
	require.Equal(t, model.RunEnqueued, run.Status)
	require.Equal(t, "victim", run.ScheduleID)

	// Other keys stay the caller's to choose, and so does repeating the
	// key chronos gave a manual run (upper-case hex is not a derived key).
	res := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual())
	again := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", res.Run.IdempotencyKey))
	require.False(t, again.Started)
	require.Equal(t, res.Run.IdempotencyKey, again.Run.IdempotencyKey)
	upper := ok[api.ManualStartResponse](t, b, http.StatusOK, http.MethodPost, "/run-launcher/start", manual("idempotency_key", strings.ToUpper(key)))
	require.True(t, upper.Started)
}
