package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
)

// The alarms of the chaos test (chaos_test.go): agents' alarms created
// through /v1/alarms ride the same run as the registrar's schedules, so
// the same kills and freezes hit their runs, and the launcher is killed
// while the receiver holds one of its wakes unanswered. A run of its own
// would add over a minute to the suite. The audit reads Redis, the API
// and the wake receiver, never the logs.

const (
	// chaosOnceAlarms once alarms fall due over the chaos, a few each
	// second; half are set by delay_seconds and half by fire_at.
	chaosOnceAlarms = 200
	// chaosCronAlarms alarms fire every second, half written
	// "* * * * * *" and half "@every 1s".
	chaosCronAlarms = 40
	// chaosOwners spreads the alarms over shards: an owner's alarms all
	// live in its shard.
	chaosOwners     = 8
	chaosWakeSecret = "chaos-wake-secret-chaos-wake-secret!"
)

// receivedWake is what the receiver kept of a wake: the fields the audit
// compares with the alarm it was created as.
type receivedWake struct {
	AlarmID      string          `json:"alarm_id"`
	OwnerDID     string          `json:"owner_did"`
	Label        string          `json:"label"`
	Payload      json.RawMessage `json:"payload"`
	ScheduledFor time.Time       `json:"scheduled_for"`
}

// wakeRecorder is the WAKE_URL of the chaos launchers, written as an
// agent platform's receiver would be: it verifies each wake's signature
// with its own code (not the launcher's), and deduplicates on the
// Idempotency-Key header: the first delivery of a key is the wake, a
// later one is a duplicate, counted and answered 200 as the docs ask.
// Each launcher slot posts to its own path (wakePath).
type wakeRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	woken map[string]receivedWake // by key: each wake as first delivered
	calls map[string]int          // deliveries by key
	bad   []string

	// holdPath, when set, is the path whose next wake is held unanswered
	// until release is closed; its key is sent on caught.
	holdPath string
	caught   chan string
	release  chan struct{}
}

// wakePath is the path of the wake receiver for the launchers of slot.
func wakePath(slot string) string { return "/wake/" + slot }

// holdNext makes the next valid wake posted to path wait, unanswered,
// until release is called, and sends its key on caught: the test kills
// the launcher delivering it meanwhile. release may be called more than
// once.
func (w *wakeRecorder) holdNext(path string) (caught <-chan string, release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holdPath, w.caught, w.release = path, make(chan string, 1), make(chan struct{})
	rel, once := w.release, sync.Once{}
	return w.caught, func() { once.Do(func() { close(rel) }) }
}

func newWakeRecorder(t *testing.T) *wakeRecorder {
	t.Helper()
	w := &wakeRecorder{woken: map[string]receivedWake{}, calls: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

// verifyChaosWake checks a Chronos-Signature header for body as
// docs/wake.md tells a receiver to: HMAC-SHA256 of "<t>.<body>" keyed
// with the secret, in hex, and t within 5 minutes of now.
func verifyChaosWake(header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("no t in %q", header)
	}
	if age := now.Sub(time.Unix(sec, 0)); age.Abs() > 5*time.Minute {
		return fmt.Errorf("t is %s from now", age)
	}
	mac := hmac.New(sha256.New, []byte(chaosWakeSecret))
	mac.Write([]byte(ts + "." + string(body)))
	if !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) {
		return fmt.Errorf("v1 does not match the body")
	}
	return nil
}

func (w *wakeRecorder) serve(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var wake receivedWake
	var keyInBody struct {
		IdempotencyKey string `json:"idempotency_key"`
	}
	if err == nil {
		err = verifyChaosWake(r.Header.Get("Chronos-Signature"), body, time.Now())
	}
	if err == nil {
		err = json.Unmarshal(body, &wake)
	}
	if err == nil {
		err = json.Unmarshal(body, &keyInBody)
	}
	if err == nil && (key == "" || keyInBody.IdempotencyKey != key || model.IdempotencyKey(wake.AlarmID, wake.ScheduledFor) != key) {
		err = fmt.Errorf("key %q is not the body's nor its alarm's and time's", key)
	}
	w.mu.Lock()
	if err != nil {
		w.bad = append(w.bad, fmt.Sprintf("%s: %v: %s", key, err, body))
	} else if _, seen := w.woken[key]; !seen {
		w.woken[key] = wake
	}
	w.calls[key]++
	var hold chan struct{}
	if err == nil && w.holdPath != "" && r.URL.Path == w.holdPath {
		w.holdPath, hold = "", w.release
		w.caught <- key
	}
	w.mu.Unlock()
	if hold != nil {
		<-hold
	}
	// Real time must pass: the receiver's latency keeps wakes in flight
	// while the chaos goes on.
	<-time.After(chaosExecutorDelay)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
	}
}

func (w *wakeRecorder) snapshot() (woken map[string]receivedWake, calls map[string]int, bad []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	woken = make(map[string]receivedWake, len(w.woken))
	for k, v := range w.woken {
		woken[k] = v
	}
	calls = make(map[string]int, len(w.calls))
	for k, v := range w.calls {
		calls[k] = v
	}
	return woken, calls, slices.Clone(w.bad)
}

// chaosAlarm is an alarm the test created, and what its wakes must carry.
type chaosAlarm struct {
	chaosSchedule
	owner   string
	label   string
	payload string
	fireAt  time.Time // a once alarm's; zero for a cron alarm
}

// chaosAlarms are the test's alarms.
type chaosAlarms struct {
	once, cron []chaosAlarm
	tokens     map[string]string // owner DID -> its bearer token
}

// cronSchedules returns the cron alarms as the schedules progress counts.
func (as *chaosAlarms) cronSchedules() []chaosSchedule {
	out := make([]chaosSchedule, len(as.cron))
	for i, a := range as.cron {
		out[i] = a.chaosSchedule
	}
	return out
}

// createAlarms creates, through /v1/alarms with each owner's token, the
// once alarms, due from 2 s after now to dur-2 s (the chaos starts
// right after), and the per-second cron alarms. The API must verify
// tokens signed with testSecret.
func (c *chaosCluster) createAlarms(dur time.Duration) *chaosAlarms {
	t := c.t
	as := &chaosAlarms{tokens: map[string]string{}}
	owners := make([]string, chaosOwners)
	for i := range owners {
		owners[i] = fmt.Sprintf("did:matrix:chaos-user-%d:key%d", i, i)
		// Scopes grant nothing on alarms: a token of the lowest one does.
		as.tokens[owners[i]] = mintToken(t, testSecret, owners[i], auth.ScopeSchedulesRead)
	}
	create := func(a chaosAlarm, body string) chaosAlarm {
		req, err := http.NewRequest(http.MethodPost, c.api+"/v1/alarms", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+as.tokens[a.owner])
		resp, err := c.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
		var v struct {
			ID        string     `json:"id"`
			FireAt    *time.Time `json:"fire_at"`
			CreatedAt time.Time  `json:"created_at"`
		}
		require.NoError(t, json.Unmarshal(b, &v), string(b))
		a.chaosSchedule = chaosSchedule{id: v.ID, shard: queue.ShardOf(v.ID, chaosShards), created: v.CreatedAt}
		if v.FireAt != nil {
			a.fireAt = v.FireAt.UTC()
		}
		return a
	}
	spread := max(int(dur/time.Second)-4, 1)
	for i := range chaosOnceAlarms {
		a := chaosAlarm{owner: owners[i%chaosOwners], label: fmt.Sprintf("once-%d", i), payload: fmt.Sprintf(`{"i": %d, "big": 12345678901234567890}`, i)}
		delay := 2 + i%spread
		when := fmt.Sprintf(`"delay_seconds":%d`, delay)
		if i%2 == 1 {
			when = fmt.Sprintf(`"fire_at":%q`, time.Now().Add(time.Duration(delay)*time.Second).UTC().Format(time.RFC3339Nano))
		}
		as.once = append(as.once, create(a, fmt.Sprintf(`{"kind":"once",%s,"label":%q,"payload":%s}`, when, a.label, a.payload)))
	}
	for i := range chaosCronAlarms {
		a := chaosAlarm{owner: owners[i%chaosOwners], label: fmt.Sprintf("cron-%d", i), payload: "{}"}
		expr := [2]string{"* * * * * *", "@every 1s"}[i%2]
		as.cron = append(as.cron, create(a, fmt.Sprintf(`{"kind":"cron","cron_expr":%q,"label":%q}`, expr, a.label)))
	}
	return as
}

// onceProgress counts the once alarms whose run is not SUCCESS yet; a
// run that ended otherwise fails the test at once.
func (c *chaosCluster) onceProgress(as *chaosAlarms) (unfinished int) {
	cmds := make([]*redis.StringCmd, len(as.once))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for i, a := range as.once {
			cmds[i] = p.HGet(c.ctx, shardKey(a.shard, "run:"+model.IdempotencyKey(a.id, a.fireAt)), "st")
		}
		return nil
	})
	require.NoError(c.t, err)
	for i, cmd := range cmds {
		switch st := model.RunStatus(cmd.Val()); {
		case st == model.RunSuccess:
		case st.Terminal():
			a := as.once[i]
			all, _ := c.rdb.HGetAll(c.ctx, shardKey(a.shard, "run:"+model.IdempotencyKey(a.id, a.fireAt))).Result()
			c.t.Fatalf("once alarm %s's run ended %s, not SUCCESS: %v", a.id, st, all)
		default:
			unfinished++
		}
	}
	return unfinished
}

// splitRecords sorts the run records (idempotency key -> record key) into
// the schedules' and the alarms' by their schedule id, requiring that
// each belongs to one or the other.
func (c *chaosCluster) splitRecords(records map[string]string, schedules []chaosSchedule, as *chaosAlarms) (sched, alarm map[string]string) {
	t := c.t
	isSched, isAlarm := map[string]bool{}, map[string]bool{}
	for _, s := range schedules {
		isSched[s.id] = true
	}
	for _, a := range append(slices.Clone(as.once), as.cron...) {
		isAlarm[a.id] = true
	}
	keys := make([]string, 0, len(records))
	cmds := make([]*redis.StringCmd, 0, len(records))
	_, err := c.rdb.Pipelined(c.ctx, func(p redis.Pipeliner) error {
		for key, rk := range records {
			keys = append(keys, key)
			cmds = append(cmds, p.HGet(c.ctx, rk, "sid"))
		}
		return nil
	})
	require.NoError(t, err)
	sched, alarm = map[string]string{}, map[string]string{}
	for i, cmd := range cmds {
		switch sid := cmd.Val(); {
		case isSched[sid]:
			sched[keys[i]] = records[keys[i]]
		case isAlarm[sid]:
			alarm[keys[i]] = records[keys[i]]
		default:
			t.Fatalf("run %s belongs to %q, no schedule or alarm of the test", keys[i], sid)
		}
	}
	return sched, alarm
}

// alarmRuns returns the run times of an alarm's run records, from its
// runs index, requiring each record's key to be model.IdempotencyKey of
// the alarm and time and to be among records.
func (c *chaosCluster) alarmRuns(a chaosAlarm, records map[string]string) []time.Time {
	t := c.t
	zs, err := c.rdb.ZRangeWithScores(c.ctx, shardKey(a.shard, "runs:"+a.id), 0, -1).Result()
	require.NoError(t, err)
	out := make([]time.Time, 0, len(zs))
	for _, z := range zs {
		at := time.UnixMilli(int64(z.Score)).UTC()
		key := z.Member.(string)
		require.Equal(t, model.IdempotencyKey(a.id, at), key, "alarm %s's run at %s", a.id, at)
		require.Contains(t, records, key, "alarm %s's run at %s has no record", a.id, at)
		out = append(out, at)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// auditAlarms checks, with every scheduler stopped and every run record
// SUCCESS (records are the alarms' own):
//   - each once alarm has one run, at its fire time, which was due by
//     T_end; and its wake was received;
//   - each cron alarm's runs up to T_end are exactly its planned seconds,
//     and those after T_end the consecutive seconds up to its stored next
//     fire time;
//   - the receiver, deduplicating on Idempotency-Key, took exactly one
//     wake per run record, and no other: one wake per fire time; each
//     carried its alarm's owner, label and payload byte for byte;
//   - the wake held unanswered while its launcher was killed was
//     delivered again, and still recorded once;
//   - each run has its asynq task, carrying the alarm and the time;
//   - the API lists each owner's alarms as they must end: the once ones
//     fired, the cron ones active, none with a failed delivery.
//
// It returns the deliveries in all and the number of keys delivered
// more than once, which at-least-once delivery allows.
func (c *chaosCluster) auditAlarms(as *chaosAlarms, tEnd time.Time, records map[string]string) (deliveries, dupKeys, maxCalls int) {
	t := c.t
	t.Helper()
	woken, calls, bad := c.wake.snapshot()
	require.Empty(t, bad, "wakes the receiver refused (signature, body or key)")
	for key := range woken {
		require.Contains(t, records, key, "the receiver took a wake for %s, which has no run record", key)
	}
	for _, n := range calls {
		deliveries += n
		maxCalls = max(maxCalls, n)
		if n > 1 {
			dupKeys++
		}
	}
	require.NotEmpty(t, c.heldWake, "no wake was held while a launcher was killed")
	require.Contains(t, records, c.heldWake, "the held wake has no run record")
	require.GreaterOrEqual(t, calls[c.heldWake], 2, "the wake %s, cut by its launcher's death, was not delivered again", c.heldWake)

	wokeAt := func(a chaosAlarm, at time.Time) {
		t.Helper()
		key := model.IdempotencyKey(a.id, at)
		w, ok := woken[key]
		require.True(t, ok, "alarm %s's wake for %s never reached WAKE_URL", a.id, at)
		require.Equal(t, a.id, w.AlarmID, key)
		require.True(t, at.Equal(w.ScheduledFor), "wake %s: scheduled_for %s, run at %s", key, w.ScheduledFor, at)
		require.Equal(t, a.owner, w.OwnerDID, key)
		require.Equal(t, a.label, w.Label, key)
		require.Equal(t, a.payload, string(w.Payload), "wake %s's payload, byte for byte", key)
		info := queuetest.RequireTask(t, c.rdb, chaosQueue, key)
		p, err := queue.DecodeTaskPayload(info.Payload)
		require.NoError(t, err)
		require.Equal(t, a.id, p.ScheduleID, key)
		require.True(t, at.Equal(p.RunAt), "task %s run_at %s, want %s", key, p.RunAt, at)
		require.Equal(t, model.TargetWake, p.Target, key)
	}
	runs := 0
	for _, a := range as.once {
		require.False(t, a.fireAt.After(tEnd), "once alarm %s is due at %s, after T_end %s: the chaos was cut short", a.id, a.fireAt, tEnd)
		got := c.alarmRuns(a, records)
		require.Equal(t, []time.Time{a.fireAt}, got, "once alarm %s's runs", a.id)
		wokeAt(a, a.fireAt)
		runs++
	}
	for _, a := range as.cron {
		got := c.alarmRuns(a, records)
		cut := len(got)
		for cut > 0 && got[cut-1].After(tEnd) {
			cut--
		}
		upTo, after := got[:cut], got[cut:]
		if want := a.plannedUpTo(tEnd); !slices.Equal(want, upTo) {
			t.Fatalf("cron alarm %s (created %s): runs up to T_end differ from the planned seconds:\nmissing: %v\nextra: %v",
				a.id, a.created.Format(time.RFC3339Nano), timeDiff(want, upTo), timeDiff(upTo, want))
		}
		nextMS, err := c.rdb.HGet(c.ctx, shardKey(a.shard, "sched:"+a.id), "next").Int64()
		require.NoError(t, err, "next of %s", a.id)
		var wantAfter []time.Time
		for at := tEnd.Truncate(time.Second).Add(time.Second); at.Before(time.UnixMilli(nextMS)); at = at.Add(time.Second) {
			wantAfter = append(wantAfter, at.UTC())
		}
		if !slices.Equal(wantAfter, after) {
			t.Fatalf("cron alarm %s: runs after T_end up to its next fire time %s are not consecutive:\nmissing: %v\nextra: %v",
				a.id, time.UnixMilli(nextMS).UTC(), timeDiff(wantAfter, after), timeDiff(after, wantAfter))
		}
		for _, at := range got {
			wokeAt(a, at)
		}
		runs += len(got)
	}
	require.Equal(t, runs, len(records), "the alarms' run records vs their runs indexed")
	require.Equal(t, runs, len(woken), "wakes taken by the receiver vs the alarms' runs")

	// The API's word on each alarm, owner by owner.
	want, ownerOf := map[string]string{}, map[string]string{}
	for _, a := range as.once {
		want[a.id], ownerOf[a.id] = "fired", a.owner
	}
	for _, a := range as.cron {
		want[a.id], ownerOf[a.id] = "active", a.owner
	}
	seen := 0
	for owner, token := range as.tokens {
		req, err := http.NewRequest(http.MethodGet, c.api+"/v1/alarms", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.client.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		var list struct {
			Alarms []struct {
				ID           string     `json:"id"`
				Status       string     `json:"status"`
				FailureCount int        `json:"failure_count"`
				LastError    string     `json:"last_error"`
				LastFiredAt  *time.Time `json:"last_fired_at"`
			} `json:"alarms"`
		}
		require.NoError(t, json.Unmarshal(b, &list), string(b))
		for _, v := range list.Alarms {
			require.Equal(t, owner, ownerOf[v.ID], "%s lists %s, no alarm of its own", owner, v.ID)
			st := want[v.ID]
			require.Equal(t, st, v.Status, "alarm %s", v.ID)
			require.Zero(t, v.FailureCount, "alarm %s counted failed deliveries (%s)", v.ID, v.LastError)
			require.NotNil(t, v.LastFiredAt, "alarm %s has no last_fired_at", v.ID)
			seen++
		}
	}
	require.Equal(t, len(want), seen, "alarms listed by their owners")
	return deliveries, dupKeys, maxCalls
}
