package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WAKE_URL needs a WAKE_SECRET long enough, an http(s) URL, and a
// WAKE_TIMEOUT inside TASK_TIMEOUT.
func TestWakeSettingsAreChecked(t *testing.T) {
	t.Parallel()
	secret := strings.Repeat("s", 32)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launcher", "--wake-url", "http://agents.internal/wake"}, "WAKE_SECRET must be at least 32 bytes when WAKE_URL is set, got 0"},
		{[]string{"all", "--wake-url", "http://agents.internal/wake", "--wake-secret", "short"}, "WAKE_SECRET must be at least 32 bytes when WAKE_URL is set, got 5"},
		{[]string{"launcher", "--wake-url", "agents.internal/wake", "--wake-secret", secret}, `WAKE_URL must be http(s)://host/path, got "agents.internal/wake"`},
		{[]string{"launcher", "--wake-timeout", "0s"}, "WAKE_TIMEOUT must be greater than 0, got 0s"},
		{[]string{"launcher", "--wake-timeout", "10m"}, "WAKE_TIMEOUT (10m0s) must be shorter than TASK_TIMEOUT (5m0s)"},
	} {
		err := execute(context.Background(), append(tc.args, "--redis-url", "redis://127.0.0.1:1", "--http-addr", "127.0.0.1:0"),
			&Env{Stdout: io.Discard, Stderr: io.Discard})
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// startDev starts chronos dev with args and returns its address, the
// demo agent's token it printed, and its log.
func startDev(t *testing.T, args ...string) (addr, token string, log *syncBuffer) {
	t.Helper()
	var out syncBuffer
	log = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, append([]string{"dev", "--http-addr", "127.0.0.1:0"}, args...), &Env{Stdout: &out, Stderr: log, Ready: ready})
	}()
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("dev exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not start")
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	m := regexp.MustCompile(`export CHRONOS_TOKEN=(\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	return addr, m[1], log
}

// createAlarm posts body to /v1/alarms and returns the alarm's id.
func createAlarm(t *testing.T, addr, token, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/alarms", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var v struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &v))
	return v.ID
}

// An agent's alarm through the API of chronos dev reaches WAKE_URL,
// signed: the receiver here checks the HMAC and its timestamp with its own
// code, and gets the payload as posted.
func TestDevDeliversAlarmWakesToWakeURL(t *testing.T) {
	t.Parallel()
	secret := "a-wake-secret-of-at-least-32-bytes!!"
	var mu sync.Mutex
	var bodies [][]byte
	got := make(chan struct{}, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
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
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || !hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil)))) ||
			time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		got <- struct{}{}
	}))
	t.Cleanup(recv.Close)
	addr, token, _ := startDev(t, "--log-level", "error", "--wake-url", recv.URL, "--wake-secret", secret)
	payload := `{"cursor": 12345678901234567890, "note": "naïve <ok>"}`
	id := createAlarm(t, addr, token, `{"kind":"once","delay_seconds":1,"label":"l","wake_message":"wake up","payload":`+payload+`}`)
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake reached WAKE_URL")
	}
	mu.Lock()
	defer mu.Unlock()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(bodies[0], &fields))
	require.Equal(t, payload, string(fields["payload"]))
	require.JSONEq(t, strconv.Quote(id), string(fields["alarm_id"]))
	require.JSONEq(t, `"wake up"`, string(fields["wake_message"]))
}

// Without WAKE_URL, chronos dev logs each wake, so a newcomer sees an
// alarm fire.
func TestDevLogsAlarmWakesWithoutWakeURL(t *testing.T) {
	t.Parallel()
	addr, token, log := startDev(t, "--log-level", "info")
	id := createAlarm(t, addr, token, `{"kind":"once","delay_seconds":1,"wake_message":"hello from the past"}`)
	require.Eventually(t, func() bool {
		return strings.Contains(log.String(), "alarm wake (log waker") && strings.Contains(log.String(), id)
	}, 30*time.Second, 50*time.Millisecond, "the wake is logged")
	require.Contains(t, log.String(), "hello from the past")
}
