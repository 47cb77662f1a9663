package launcher

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
	"github.com/chronos-sched/chronos/queue/queuetest"
	"github.com/chronos-sched/chronos/scheduler"
)

// Alarms end to end: a scheduler plans an alarm's run, a launcher
// delivers its wake to a receiver written here, which checks the
// signature with its own code (as a receiver in another language would),
// and the alarm's state follows.

const wakeOwner = "did:matrix:u1:fp"

var wakeSecret = []byte("0123456789abcdef0123456789abcdef-test")

// wakeReceiver is an independent WAKE_URL: it verifies each delivery's
// HMAC and timestamp itself, records the ones that pass, and answers 503
// to those fail says to fail.
type wakeReceiver struct {
	secret []byte
	// fail, when set, says whether to fail the n-th verified delivery
	// (from 1) of body.
	fail func(n int, body []byte) bool

	mu       sync.Mutex
	got      []delivery
	rejected []string
}

type delivery struct {
	header http.Header
	body   []byte
}

func (r *wakeReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var ts, sig string
	for _, kv := range strings.Split(req.Header.Get("Chronos-Signature"), ",") {
		if v, ok := strings.CutPrefix(kv, "t="); ok {
			ts = v
		} else if v, ok := strings.CutPrefix(kv, "v1="); ok {
			sig = v
		}
	}
	mac := hmac.New(sha256.New, r.secret)
	mac.Write([]byte(ts + "." + string(body)))
	sec, err := strconv.ParseInt(ts, 10, 64)
	reject := ""
	switch {
	case err != nil || !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))):
		reject = "bad signature"
	case time.Since(time.Unix(sec, 0)) > 5*time.Minute || time.Until(time.Unix(sec, 0)) > 5*time.Minute:
		reject = "stale timestamp"
	}
	r.mu.Lock()
	if reject != "" {
		r.rejected = append(r.rejected, reject)
		r.mu.Unlock()
		http.Error(w, reject, http.StatusUnauthorized)
		return
	}
	r.got = append(r.got, delivery{header: req.Header.Clone(), body: body})
	n := len(r.got)
	r.mu.Unlock()
	if r.fail != nil && r.fail(n, body) {
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
	}
}

func (r *wakeReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// start serves r and returns an HTTPWaker delivering to it.
func (r *wakeReceiver) start(t *testing.T) *HTTPWaker {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return NewHTTPWaker(srv.URL, wakeSecret, 5*time.Second, 4)
}

type wakeBundle struct {
	rdb   redis.UniversalClient
	store *queue.Store
	clock *queue.SimClock
	sched *scheduler.Scheduler
	waker Waker
}

// setupWake is a store and a scheduler on a real Redis; start starts the
// launcher. The simulated clock is in the past, as in setup.
func setupWake(t *testing.T, waker Waker) *wakeBundle {
	t.Helper()
	rdb := queuetest.StartRedis(t).Universal(t)
	clock := queue.NewSimClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	store, err := queue.NewStore(context.Background(), rdb, clock, nil)
	require.NoError(t, err)
	sched, err := scheduler.New(store, nil, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	return &wakeBundle{rdb: rdb, store: store, clock: clock, sched: sched, waker: waker}
}

func (b *wakeBundle) start(t *testing.T) *Launcher {
	t.Helper()
	return b.startWith(t, &Config{})
}

// startWith starts a launcher with cfg, its Executor, Waker and
// ShutdownTimeout set here.
func (b *wakeBundle) startWith(t *testing.T, cfg *Config) *Launcher {
	t.Helper()
	cfg.Executor, cfg.Waker, cfg.ShutdownTimeout = &recordingExecutor{}, b.waker, time.Second
	l, err := New(b.store, cfg, nil, prometheus.NewRegistry())
	require.NoError(t, err)
	require.NoError(t, l.Start(context.Background()))
	stopAtCleanup(t, l)
	return l
}

// alarmSpec is what a test's alarm differs in.
type alarmSpec struct {
	kind        model.Kind // once (a minute from now) or cron (every minute)
	maxFailures int
	payload     string
	message     string
}

func (b *wakeBundle) createAlarm(t *testing.T, s alarmSpec) *model.ScheduleRecord {
	t.Helper()
	rec := &model.ScheduleRecord{ID: b.store.NewAlarmID(wakeOwner), Owner: wakeOwner, UserID: "u1", Kind: s.kind,
		Target: model.TargetWake, OverlapPolicy: model.OverlapAllow, CatchupPolicy: model.CatchupLatest,
		Alarm: &model.Alarm{Label: "standup", ConversationID: "conv-1", WakeMessage: s.message,
			Payload: json.RawMessage(cmpOr(s.payload, "{}")), MaxFailures: s.maxFailures}}
	if s.kind == model.KindOnce {
		at := b.clock.Now().Add(time.Minute)
		rec.FireAt = &at
	} else {
		rec.CronExpr = "* * * * *"
	}
	require.NoError(t, rec.Validate())
	got, _, err := b.store.CreateAlarm(context.Background(), rec)
	require.NoError(t, err)
	return got
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// tick ticks every shard once.
func (b *wakeBundle) tick(t *testing.T) {
	t.Helper()
	for sh := range b.store.Config().Shards {
		require.NoError(t, b.sched.TickShard(context.Background(), sh))
	}
}

func (b *wakeBundle) alarm(t *testing.T, id string) *model.Alarm {
	t.Helper()
	rec, err := b.store.GetAlarm(context.Background(), wakeOwner, id)
	require.NoError(t, err)
	return rec.Alarm
}

func (b *wakeBundle) waitRun(t *testing.T, key string, want model.RunStatus) *model.Run {
	t.Helper()
	return (&testBundle{store: b.store}).waitStatus(t, key, want)
}

// A once alarm's wake reaches the receiver signed, with every field, the
// payload and the wake message byte for byte; the alarm is then fired.
func TestWakeIsDeliveredSignedAndByteForByte(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	b.start(t)
	payload := "{ \"big\": 12345678901234567890, \"f\": 1.50, \"s\": \"héllo ✓ <&> \\u00e9\",\n  \"nested\": {\"a\": [1, {\"b\": null}], \"e\": {}} }"
	message := "Résumé the <portfolio> & \"summarise\" ✓\nline two"
	rec := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3, payload: payload, message: message})
	at := *rec.FireAt
	b.clock.Set(at)
	b.tick(t)
	key := model.IdempotencyKey(rec.ID, at)
	b.waitRun(t, key, model.RunSuccess)

	got := recv.deliveries()
	require.Len(t, got, 1)
	require.Equal(t, key, got[0].header.Get("Idempotency-Key"))
	require.Equal(t, "application/json", got[0].header.Get("Content-Type"))
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got[0].body, &fields))
	require.Equal(t, payload, string(fields["payload"]), "payload byte for byte")
	var body struct {
		AlarmID        string    `json:"alarm_id"`
		OwnerDID       string    `json:"owner_did"`
		UserID         string    `json:"user_id"`
		Label          string    `json:"label"`
		ConversationID string    `json:"conversation_id"`
		WakeMessage    string    `json:"wake_message"`
		IdempotencyKey string    `json:"idempotency_key"`
		ScheduledFor   time.Time `json:"scheduled_for"`
		FiredAt        time.Time `json:"fired_at"`
	}
	require.NoError(t, json.Unmarshal(got[0].body, &body))
	require.Equal(t, rec.ID, body.AlarmID)
	require.Equal(t, wakeOwner, body.OwnerDID)
	require.Equal(t, "u1", body.UserID)
	require.Equal(t, "standup", body.Label)
	require.Equal(t, "conv-1", body.ConversationID)
	require.Equal(t, message, body.WakeMessage, "wake message byte for byte")
	require.Equal(t, key, body.IdempotencyKey)
	require.True(t, body.ScheduledFor.Equal(at))
	require.True(t, body.FiredAt.Equal(at), "fired at the shared clock's reading when delivered")
	require.Len(t, fields, 10, "exactly the documented fields")

	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmFired, a.Status)
	require.NotNil(t, a.LastFiredAt)
	require.Zero(t, a.FailureCount)
}

// A receiver that fails twice and then answers: delivered on the third
// attempt, fired, both failures counted.
func TestWakeRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret, fail: func(n int, _ []byte) bool { return n <= 2 }}
	b := setupWake(t, recv.start(t))
	b.start(t)
	rec := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 5})
	b.clock.Set(*rec.FireAt)
	b.tick(t)
	key := model.IdempotencyKey(rec.ID, *rec.FireAt)
	run := b.waitRun(t, key, model.RunSuccess)
	require.Equal(t, 2, run.Attempts)
	require.Len(t, recv.deliveries(), 3)
	for _, d := range recv.deliveries() {
		require.Equal(t, key, d.header.Get("Idempotency-Key"), "every attempt carries the same key")
	}
	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmFired, a.Status)
	require.Equal(t, 2, a.FailureCount)
	require.Contains(t, a.LastError, "503")
}

// A receiver that always fails: max_failures deliveries, then the run is
// FAILED, its task archived (never tried again) and the alarm failed.
func TestWakeFailsAtMaxFailures(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret, fail: func(int, []byte) bool { return true }}
	b := setupWake(t, recv.start(t))
	b.start(t)
	rec := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3})
	b.clock.Set(*rec.FireAt)
	b.tick(t)
	key := model.IdempotencyKey(rec.ID, *rec.FireAt)
	run := b.waitRun(t, key, model.RunFailed)
	require.Contains(t, run.Error, "wake delivery failed after 3 attempts")
	require.Contains(t, run.Error, "503")
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	require.Eventually(t, func() bool {
		info, err := insp.GetTaskInfo(queuetest.TaskQueue(b.rdb, queue.QueueNameDefault, key), key)
		return err == nil && info.State == asynq.TaskStateArchived
	}, 10*time.Second, 20*time.Millisecond, "the task is archived: asynq retries it no more")
	require.Len(t, recv.deliveries(), 3)
	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Equal(t, 3, a.FailureCount)
	require.Equal(t, run.Error, a.LastError)
}

// A cron alarm whose wake fails past max_failures stays active, and its
// next fire time is delivered: skip-and-advance.
func TestCronWakeSkipsAndAdvances(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	rec := b.createAlarm(t, alarmSpec{kind: model.KindCron, maxFailures: 2})
	first, second := b.clock.Now().Add(time.Minute), b.clock.Now().Add(2*time.Minute)
	recv.fail = func(_ int, body []byte) bool {
		var w Wake
		return json.Unmarshal(body, &w) == nil && w.ScheduledFor.Equal(first)
	}
	b.start(t)
	b.clock.Set(first)
	b.tick(t)
	run := b.waitRun(t, model.IdempotencyKey(rec.ID, first), model.RunFailed)
	require.Contains(t, run.Error, "after 2 attempts")
	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmActive, a.Status)
	require.Equal(t, 2, a.FailureCount)
	require.Equal(t, run.Error, a.LastError)

	b.clock.Set(second)
	b.tick(t)
	b.waitRun(t, model.IdempotencyKey(rec.ID, second), model.RunSuccess)
	a = b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmActive, a.Status)
	require.NotNil(t, a.LastFiredAt)
	require.True(t, a.LastFiredAt.Equal(second))
	require.Equal(t, 2, a.FailureCount, "the count of failed deliveries stands")
}

// An alarm cancelled after its run was queued is never delivered: the
// run is SKIPPED and the alarm stays cancelled.
func TestCancelledAlarmIsNeverDelivered(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	rec := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3})
	b.clock.Set(*rec.FireAt)
	b.tick(t) // no launcher runs yet
	key := model.IdempotencyKey(rec.ID, *rec.FireAt)
	_, err := b.store.GetScheduleRun(context.Background(), rec.ID, key)
	require.NoError(t, err, "the run is queued before the cancel")
	_, err = b.store.CancelAlarm(context.Background(), wakeOwner, rec.ID)
	require.NoError(t, err)
	b.start(t)
	run := b.waitRun(t, key, model.RunSkipped)
	require.Equal(t, "alarm cancelled before its wake was delivered", run.Error)
	require.Empty(t, recv.deliveries())
	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmCancelled, a.Status)
	require.Empty(t, a.LastError)
}

// A launcher with no WAKE_URL fails an alarm's run at once, saying to set
// it; the once alarm is failed with that error.
func TestWakeWithoutWakeURLFails(t *testing.T) {
	t.Parallel()
	b := setupWake(t, nil)
	b.start(t)
	rec := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3})
	b.clock.Set(*rec.FireAt)
	b.tick(t)
	run := b.waitRun(t, model.IdempotencyKey(rec.ID, *rec.FireAt), model.RunFailed)
	require.Contains(t, run.Error, "set WAKE_URL")
	a := b.alarm(t, rec.ID)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Equal(t, run.Error, a.LastError)
	require.Zero(t, a.FailureCount, "nothing was delivered, so nothing failed to be")
}

// How HTTPWaker reads its receiver's answers, and the stale signature an
// independent receiver rejects.
func TestHTTPWakerAnswers(t *testing.T) {
	t.Parallel()
	w := Wake{AlarmID: "a1", IdempotencyKey: "k1", Payload: json.RawMessage(`{"x":1}`)}
	ctx := context.Background()

	recv := &wakeReceiver{secret: wakeSecret}
	waker := recv.start(t)
	require.NoError(t, waker.Wake(ctx, w))
	waker.Now = func() time.Time { return time.Now().Add(-6 * time.Minute) } // a replay of an old delivery
	err := waker.Wake(ctx, w)
	require.True(t, isPermanent(err), "a 401 is not retried: %v", err)
	require.ErrorContains(t, err, "stale timestamp")
	wrong := NewHTTPWaker(waker.URL, []byte("another-secret-of-32-bytes-or-more!!"), time.Second, 1)
	require.ErrorContains(t, wrong.Wake(ctx, w), "bad signature")
	require.Equal(t, []string{"stale timestamp", "bad signature"}, recv.rejected)

	answer := func(status int, header ...string) error {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(header); i += 2 {
				rw.Header().Set(header[i], header[i+1])
			}
			rw.WriteHeader(status)
		}))
		defer srv.Close()
		return NewHTTPWaker(srv.URL, wakeSecret, time.Second, 1).Wake(ctx, w)
	}
	require.NoError(t, answer(http.StatusAccepted))
	err = answer(http.StatusFound, "Location", "http://elsewhere/")
	require.True(t, isPermanent(err))
	require.ErrorContains(t, err, "set WAKE_URL to the URL that answers")
	require.True(t, isPermanent(answer(http.StatusBadRequest)))
	for _, c := range []int{http.StatusRequestTimeout, http.StatusConflict, http.StatusInternalServerError} {
		err := answer(c)
		require.Error(t, err)
		require.False(t, isPermanent(err), "%d is retried", c)
	}
	var ra *RetryAfterError
	require.True(t, errors.As(answer(http.StatusTooManyRequests, "Retry-After", "30"), &ra))
	require.Equal(t, 30*time.Second, ra.After)

	bad := w
	bad.Payload = json.RawMessage(`{not json`)
	require.True(t, isPermanent(waker.Wake(ctx, bad)))
}

// The package's own verifier accepts what SignWake signs, within the
// replay window, and nothing else.
func TestVerifyWakeSignature(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"alarm_id":"a1"}`)
	h := SignWake(wakeSecret, now, body)
	require.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, h)
	require.NoError(t, VerifyWakeSignature(wakeSecret, h, body, now.Add(4*time.Minute)))
	require.NoError(t, VerifyWakeSignature(wakeSecret, "t=1800000000,v1=00,"+h[len("t=1800000000,"):], body, now), "any v1 may match")
	require.ErrorContains(t, VerifyWakeSignature(wakeSecret, h, body, now.Add(6*time.Minute)), "more than 5m0s")
	require.ErrorContains(t, VerifyWakeSignature(wakeSecret, h, []byte(`{"alarm_id":"a2"}`), now), "no v1 signature matches")
	require.ErrorContains(t, VerifyWakeSignature([]byte("other"), h, body, now), "no v1 signature matches")
	require.ErrorContains(t, VerifyWakeSignature(wakeSecret, "v1=abc", body, now), "want t=")
}

// The body keeps the payload as stored; an empty payload is {}.
func TestWakeBody(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	w := Wake{AlarmID: "a1", OwnerDID: "did:matrix:u:k", UserID: "u", WakeMessage: "<b> & \u2028", ScheduledFor: at, FiredAt: at,
		IdempotencyKey: "k"}
	b, err := w.Body()
	require.NoError(t, err)
	require.Equal(t, `{"alarm_id":"a1","owner_did":"did:matrix:u:k","user_id":"u","label":"","conversation_id":"",`+
		`"wake_message":"<b> & \u2028","payload":{},"scheduled_for":"2026-03-01T08:00:00Z","fired_at":"2026-03-01T08:00:00Z","idempotency_key":"k"}`,
		string(b))
}

// A paused alarm's queued wake is skipped, not delivered. A recurring
// alarm stays active for its later times; a once alarm has no other time
// (its run's key stays taken), so it is failed, saying why.
func TestPausedAlarmsQueuedWakeIsSkipped(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	once := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3})
	cron := b.createAlarm(t, alarmSpec{kind: model.KindCron, maxFailures: 3})
	at := *once.FireAt
	b.clock.Set(at)
	b.tick(t) // no launcher runs yet
	ctx := context.Background()
	for _, id := range []string{once.ID, cron.ID} {
		_, err := b.store.PauseAlarm(ctx, wakeOwner, id, true)
		require.NoError(t, err)
	}
	b.start(t)
	for _, id := range []string{once.ID, cron.ID} {
		run := b.waitRun(t, model.IdempotencyKey(id, at), model.RunSkipped)
		require.Equal(t, "alarm paused before its wake was delivered", run.Error)
	}
	require.Empty(t, recv.deliveries())
	a := b.alarm(t, once.ID)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Equal(t, "alarm paused before its wake was delivered", a.LastError)
	a = b.alarm(t, cron.ID)
	require.Equal(t, model.AlarmActive, a.Status)
	require.Empty(t, a.LastError)
}

// After every scheduler and launcher was down for two hours, a once
// alarm's wake is delivered late rather than never, and a recurring
// alarm delivers one wake, for the latest time it missed (catch-up
// latest), then goes on.
func TestAlarmsAfterDowntime(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	once := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 3})
	cron := b.createAlarm(t, alarmSpec{kind: model.KindCron, maxFailures: 3})
	at := *once.FireAt
	back := at.Add(2*time.Hour + 30*time.Second) // between two minutes: the earlier one is missed
	b.clock.Set(back)
	b.tick(t)
	b.start(t)
	b.waitRun(t, model.IdempotencyKey(once.ID, at), model.RunSuccess)
	latest := back.Truncate(time.Minute)
	b.waitRun(t, model.IdempotencyKey(cron.ID, latest), model.RunSuccess)

	var wakes []Wake
	for _, d := range recv.deliveries() {
		var w Wake
		require.NoError(t, json.Unmarshal(d.body, &w))
		// The next minute's run, enqueued ahead, starts at once here: asynq
		// reads the real clock, two years past the simulated one.
		if !w.ScheduledFor.After(back) {
			wakes = append(wakes, w)
		}
	}
	require.Len(t, wakes, 2, "one wake each: the cron alarm's earlier missed times are not delivered")
	for _, w := range wakes {
		require.True(t, w.FiredAt.Equal(back), "fired late, at the clock when delivered")
		if w.AlarmID == once.ID {
			require.True(t, w.ScheduledFor.Equal(at))
		} else {
			require.True(t, w.ScheduledFor.Equal(latest))
		}
	}
	require.Equal(t, model.AlarmFired, b.alarm(t, once.ID).Status)
	require.Equal(t, model.AlarmActive, b.alarm(t, cron.ID).Status)
}

// With LAUNCHER_CONCURRENCY=1 the lane's one slot carries the runs out
// (there was an asynq server's worker there before): a wake is retried and
// counted the same way, its task's retries following max_failures.
func TestWakeWithConcurrencyOne(t *testing.T) {
	t.Parallel()
	recv := &wakeReceiver{secret: wakeSecret}
	b := setupWake(t, recv.start(t))
	flaky := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 2})
	down := b.createAlarm(t, alarmSpec{kind: model.KindOnce, maxFailures: 2})
	at := *flaky.FireAt
	var mu sync.Mutex
	seen := map[string]int{}
	recv.fail = func(_ int, body []byte) bool {
		var w Wake
		require.NoError(t, json.Unmarshal(body, &w))
		mu.Lock()
		defer mu.Unlock()
		seen[w.AlarmID]++
		return w.AlarmID == down.ID || seen[w.AlarmID] == 1
	}
	b.clock.Set(at)
	b.tick(t)
	b.startWith(t, &Config{Concurrency: 1})
	b.waitRun(t, model.IdempotencyKey(flaky.ID, at), model.RunSuccess)
	run := b.waitRun(t, model.IdempotencyKey(down.ID, at), model.RunFailed)
	require.Contains(t, run.Error, "wake delivery failed after 2 attempts")
	a := b.alarm(t, flaky.ID)
	require.Equal(t, model.AlarmFired, a.Status)
	require.Equal(t, 1, a.FailureCount)
	a = b.alarm(t, down.ID)
	require.Equal(t, model.AlarmFailed, a.Status)
	require.Equal(t, 2, a.FailureCount)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, seen[down.ID], "max_failures deliveries, no more")
}
