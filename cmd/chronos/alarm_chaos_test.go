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

	"github.com/stretchr/testify/require"

	"github.com/chronos-sched/chronos/api/auth"
	"github.com/chronos-sched/chronos/model"
	"github.com/chronos-sched/chronos/queue"
)

// The chaos test for alarms: the cluster of chaos_test.go (1 api, 3
// schedulers, 2 launchers, one real Redis) with agents' alarms instead of
// the registrar's schedules: a few hundred once alarms due during the
// chaos, and per-second cron alarms, while schedulers are killed and
// frozen and a launcher is killed with wakes in hand. It audits, from
// Redis and the wake receiver (never from logs): every fire time due by
// the end has exactly one run record, SUCCESS, and its wake reached
// WAKE_URL (at least once, signed); every once alarm ends fired.

const (
	chaosOnceAlarms = 200
	chaosCronAlarms = 40
	// chaosOwners spreads the alarms over shards: an owner's alarms all
	// live in its shard.
	chaosOwners     = 8
	chaosWakeSecret = "chaos-wake-secret-chaos-wake-secret!"
)

// wakeRecorder is the WAKE_URL of the chaos launchers: it checks each
// wake's signature and body, counts deliveries per Idempotency-Key, and
// answers 200 after chaosExecutorDelay.
type wakeRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	bad   []string
}

func newWakeRecorder(t *testing.T) *wakeRecorder {
	t.Helper()
	w := &wakeRecorder{calls: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *wakeRecorder) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	var ts, sig string
	for _, kv := range strings.Split(r.Header.Get("Chronos-Signature"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	mac := hmac.New(sha256.New, []byte(chaosWakeSecret))
	mac.Write([]byte(ts + "." + string(body)))
	sec, err := strconv.ParseInt(ts, 10, 64)
	var wake struct {
		AlarmID        string    `json:"alarm_id"`
		ScheduledFor   time.Time `json:"scheduled_for"`
		IdempotencyKey string    `json:"idempotency_key"`
	}
	jerr := json.Unmarshal(body, &wake)
	w.mu.Lock()
	switch {
	case err != nil || !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute:
		w.bad = append(w.bad, fmt.Sprintf("%s: bad signature %q", key, r.Header.Get("Chronos-Signature")))
	case jerr != nil || key == "" || wake.IdempotencyKey != key || model.IdempotencyKey(wake.AlarmID, wake.ScheduledFor) != key:
		w.bad = append(w.bad, fmt.Sprintf("%s: body %s", key, body))
	}
	w.calls[key]++
	w.mu.Unlock()
	// Real time must pass: the receiver's latency keeps wakes in flight
	// while the chaos goes on.
	<-time.After(chaosExecutorDelay)
}

func (w *wakeRecorder) snapshot() (map[string]int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := make(map[string]int, len(w.calls))
	for k, v := range w.calls {
		calls[k] = v
	}
	return calls, slices.Clone(w.bad)
}

// chaosAlarm is an alarm the test created.
type chaosAlarm struct {
	chaosSchedule
	owner  string
	fireAt time.Time // a once alarm's; zero for a cron alarm
}

// createAlarms creates the once alarms, due over the first dur-2s of the
// chaos, and the per-second cron alarms, through /v1/alarms with each
// owner's token.
func (c *chaosCluster) createAlarms(dur time.Duration) (once, cron []chaosAlarm) {
	t := c.t
	tokens := make([]string, chaosOwners)
	for i := range tokens {
		tokens[i] = mintToken(t, testSecret, fmt.Sprintf("did:matrix:chaos-user-%d:key", i), auth.ScopeSchedulesRead) // scopes grant alarms nothing
	}
	create := func(i int, body string) chaosAlarm {
		req, err := http.NewRequest(http.MethodPost, c.api+"/v1/alarms", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokens[i%chaosOwners])
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
		a := chaosAlarm{chaosSchedule: chaosSchedule{id: v.ID, shard: queue.ShardOf(v.ID, chaosShards), created: v.CreatedAt},
			owner: fmt.Sprintf("did:matrix:chaos-user-%d:key", i%chaosOwners)}
		if v.FireAt != nil {
			a.fireAt = v.FireAt.UTC()
		}
		return a
	}
	spread := max(int(dur/time.Second)-4, 1)
	for i := range chaosOnceAlarms {
		once = append(once, create(i, fmt.Sprintf(`{"kind":"once","delay_seconds":%d,"label":"once-%d","payload":{"i":%d}}`, 2+i%spread, i, i)))
	}
	for i := range chaosCronAlarms {
		cron = append(cron, create(i, `{"kind":"cron","cron_expr":"* * * * * *","label":"every second"}`))
	}
	return once, cron
}

// onceProgress counts the once alarms due by end whose run is not SUCCESS
// yet; a run that ended otherwise fails the test at once.
func (c *chaosCluster) onceProgress(once []chaosAlarm, end time.Time) (unfinished int) {
	for _, a := range once {
		if a.fireAt.After(end) {
			continue
		}
		key := model.IdempotencyKey(a.id, a.fireAt)
		all, err := c.rdb.HGetAll(c.ctx, shardKey(a.shard, "run:"+key)).Result()
		require.NoError(c.t, err)
		switch st := model.RunStatus(all["st"]); {
		case st == model.RunSuccess:
		case st.Terminal():
			c.t.Fatalf("once alarm %s's run %s ended %s, not SUCCESS: %v", a.id, key, st, all)
		default:
			unfinished++
		}
	}
	return unfinished
}

func TestChaosAlarmsWakeOncePerFireTime(t *testing.T) {
	if testing.Short() {
		t.Skip("the multi-process chaos test takes minutes; it runs without -short")
	}
	dur := chaosDuration(t)
	began := time.Now()
	c := newChaosCluster(t)
	api := c.start("api", "api", map[string]string{"AUTH_JWT_SECRET": testSecret})
	launchers := make([]*chaosSlot, chaosLaunchers)
	for i := range launchers {
		launchers[i] = &chaosSlot{name: fmt.Sprintf("launcher-%d", i)}
		launchers[i].p = c.start(launchers[i].name+".0", "launcher", c.launcherEnv())
	}
	scheds := make([]*chaosSlot, chaosSchedulers)
	for i := range scheds {
		scheds[i] = &chaosSlot{name: fmt.Sprintf("scheduler-%d", i)}
		scheds[i].p = c.start(scheds[i].name+".0", "scheduler", schedulerEnv)
	}
	c.api = "http://" + api.addr
	once, cron := c.createAlarms(dur)
	t.Logf("%d once and %d cron alarms created after %s", len(once), len(cron), time.Since(began).Round(time.Millisecond))

	kills, pauses := c.chaos(scheds, launchers[0], dur)
	tEnd := time.Now()
	t.Logf("chaos over after %s: %d kills, %d pauses", dur, kills, pauses)

	crons := make([]chaosSchedule, len(cron))
	for i, a := range cron {
		crons[i] = a.chaosSchedule
	}
	c.waitFor(chaosSettle, "every fire time up to T_end recorded and SUCCESS", func() (bool, string) {
		missing, unfinished := c.progress(crons, tEnd)
		onceLeft := c.onceProgress(once, tEnd)
		return missing == 0 && unfinished == 0 && onceLeft == 0,
			fmt.Sprintf("cron: %d fire times without a record, %d not SUCCESS; once: %d not SUCCESS", missing, unfinished, onceLeft)
	})
	for _, s := range scheds {
		c.stop(s.p)
	}
	var records map[string]string
	c.waitFor(chaosSettle, "every run record SUCCESS", func() (bool, string) {
		records = c.scanRunRecords()
		notDone := c.notSucceeded(records)
		return len(notDone) == 0, fmt.Sprintf("%d of %d run records not SUCCESS (e.g. %v)", len(notDone), len(records), notDone[:min(3, len(notDone))])
	})

	calls, bad := c.wake.snapshot()
	require.Empty(t, bad, "wakes the receiver could not verify")
	// Every once alarm due by T_end: one record, delivered, fired.
	for _, a := range once {
		if a.fireAt.After(tEnd) {
			continue
		}
		key := model.IdempotencyKey(a.id, a.fireAt)
		require.Contains(t, records, key, "once alarm %s has no run record", a.id)
		require.GreaterOrEqual(t, calls[key], 1, "once alarm %s's wake never reached WAKE_URL", a.id)
		h, err := c.rdb.HMGet(c.ctx, shardKey(a.shard, "sched:"+a.id), "as", "fc", "lf").Result()
		require.NoError(t, err)
		require.Equal(t, "fired", h[0], "once alarm %s", a.id)
		require.Nil(t, h[1], "once alarm %s counted failed deliveries", a.id)
		require.NotNil(t, h[2], "once alarm %s has no last_fired_at", a.id)
	}
	// Every cron fire time up to T_end was delivered; the alarms stay active.
	for _, a := range cron {
		for _, at := range a.plannedUpTo(tEnd) {
			key := model.IdempotencyKey(a.id, at)
			require.GreaterOrEqual(t, calls[key], 1, "cron alarm %s's wake at %s never reached WAKE_URL", a.id, at)
		}
		st, err := c.rdb.HGet(c.ctx, shardKey(a.shard, "sched:"+a.id), "as").Result()
		require.NoError(t, err)
		require.Equal(t, "active", st, "cron alarm %s", a.id)
	}
	// Nothing else: each delivered key has its record, each record is one
	// of the alarms' fire times, and each has exactly one asynq task.
	ids := map[string]bool{}
	for _, a := range append(slices.Clone(once), cron...) {
		ids[a.id] = true
	}
	for key := range calls {
		require.Contains(t, records, key, "a wake was delivered for %s, which has no run record", key)
	}
	tasks := map[string]bool{}
	for _, k := range c.scanKeys("asynq:{" + chaosQueue + "}:t:*") {
		tasks[taskKeyRE.FindStringSubmatch(k)[1]] = true
	}
	for key, rk := range records {
		sid, err := c.rdb.HGet(c.ctx, rk, "sid").Result()
		require.NoError(t, err)
		require.True(t, ids[sid], "run %s belongs to %q, no alarm of the test", key, sid)
		require.True(t, tasks[key], "run %s has no asynq task", key)
	}
	require.Len(t, tasks, len(records), "one asynq task per run record, and no other")
	dup := 0
	for _, n := range calls {
		if n > 1 {
			dup++
		}
	}
	t.Logf("%d run records, %d wakes delivered more than once (a launcher killed mid-delivery); took %s",
		len(records), dup, time.Since(began).Round(time.Second))
}
